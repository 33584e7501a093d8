#!/usr/bin/env bash
# Turns a freshly provisioned box into a base: run as root by `hbtui base build` with the
# box's services quiesced, just before it is stopped and packed. Removes what is per box
# (HB_PER_BOX_PATHS in lib.sh: executor state, logins, history, logs, the box's name and
# port) and the provisioned marker; provision/first-boot.sh puts back what a new box needs.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HB_RECIPE_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
. "$HB_RECIPE_DIR/provision/lib.sh"
trap 'printf "generalize: failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

hb_run_steps forget-identity
