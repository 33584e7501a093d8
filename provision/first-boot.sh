#!/usr/bin/env bash
# The per-box step of the hbtui recipe: run as root, instead of provision.sh, in a box made
# from a base (`hbtui base build`) or branched from another box. hbtui unpacks the recipe
# at /root/.hbtui-recipe/ and sets HB_BOX and HB_PORT, as for provision.sh. It gives the
# box its own name and port, makes /data's skeleton where it is missing and marks the box
# provisioned, which lets its workload start the services. Same step markers and
# HB_DRY_RUN=1 as provision.sh.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HB_RECIPE_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
. "$HB_RECIPE_DIR/provision/lib.sh"
trap 'printf "first-boot: failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

hb_first_boot
