"""The git steps inside a box for work in and out, and reading what the box answers.

Each step is one `bash -c SCRIPT` exec as the box's agent, in its clone, with the values
as argv (never spliced into the script). Its output is untrusted: the lines hbtui acts on
start with TAG, everything is size-capped while it streams, and a bundle travels as
base64 lines that are decoded and counted against the cap as they arrive (and handed on
at once: hbtui.core.work.intake indexes it while it streams), so a box cannot make the host
hold or store more than the cap. A step that reads the box's work (diff, pull) is given
up when the box goes silent: less than IDLE_BYTES in the idle bound.
"""

from __future__ import annotations

import binascii
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from hbtui import boxtext
from hbtui.core.boxes.guest import idle_bound, progressing
from hbtui.core.foundation.git import CHECK_REF, SEED_REF, WIP_REF
from hbtui.core.foundation.hosts import Host
from hbtui.engine import EngineError, EngineLineTooLong
from hbtui.errors import HbtuiError

AGENT = "agent"
WORK_DIR = "/data/home/agent/work"
TAG = "::hbtui-work::"
STEP_TIMEOUT = 600.0
IDLE_BYTES = 1024  # what the box must send in each idle bound: a drip is silence too
B64_WIDTH = 65536  # characters of base64 a line (the engine's line limit is 1 MiB)

# $1 bundle (readable by agent)  $2 clone folder  $3 branch  $4 seed commit  $5 box name
SEED_SCRIPT = f"""set -eu
[ ! -e "$2" ] || {{ echo "{TAG} exists"; exit 3; }}
mkdir -p "$(dirname "$2")"
git init -q -b "$3" "$2"
cd "$2"
git fetch -q --no-tags "$1" "+{SEED_REF}:{SEED_REF}"
git reset -q --hard "$4"
git config credential.helper ""  # no helper of the image's: the box holds no git login
git config user.name >/dev/null || git config user.name "agent in $5"
git config user.email >/dev/null || git config user.email "agent@$5.hbtui.invalid"
echo "{TAG} head $(git rev-parse HEAD)"
"""

# $1 clone  $2 seed  $3 "patch" or "stat"
DIFF_SCRIPT = f"""set -u
cd "$1" 2>/dev/null || {{ echo "{TAG} noclone"; exit 3; }}
t=$(mktemp -d) || exit 3
trap 'rm -rf "$t"' EXIT
echo "{TAG} head $(git rev-parse -q --verify HEAD)"
echo "{TAG} branch $(git symbolic-ref -q --short HEAD)"
echo "{TAG} dirty $(git status --porcelain --untracked-files=all | wc -l)"
git log -n 1000 --format='{TAG} commit %H %s' "$2..HEAD" --
cp .git/index "$t/index" 2>/dev/null || :
export GIT_INDEX_FILE="$t/index"
git add -A
git -c core.quotepath=off diff --cached --no-renames --numstat "$2" -- | sed 's/^/{TAG} num /'
if [ "$3" = patch ]; then
    echo "{TAG} patch"
    git -c core.quotepath=off diff --cached --no-color --no-ext-diff --no-textconv "$2" --
fi
echo "{TAG} end"
"""

# $1 clone  $2 seed  $3 "1" to commit uncommitted changes first (as a commit no ref names)
# $4... the commits the host already has from this box (an earlier pull's; the host's word)
# The bundle is written here, not by `git bundle create`: that walks the history twice
# more (a count to see whether there is anything, a --boundary walk for its
# prerequisites) and makes a thin pack. Its prerequisites are the seed and those of the
# host's commits the clone has, which every object left out is reachable from (`^seed`,
# `^commit`): a second pull sends only what the host lacks. It streams out as it is made,
# after its `data` line; `fail` instead of `end` when making it failed (git's words follow). A file
# over 64 MiB goes whole, not as a delta: the host streams it through its index, where
# a delta's result and base would be held (gitops.BOX_GIT_MEMORY).
PULL_SCRIPT = f"""set -u -o pipefail
cd "$1" 2>/dev/null || {{ echo "{TAG} noclone"; exit 3; }}
mapfile -t changed < <(git status --porcelain --untracked-files=all)
echo "{TAG} dirty ${{#changed[@]}}"
listed=$(git for-each-ref --format='%(objectname) %(refname)' refs/heads/ {WIP_REF}) || exit 5
heads=()
while IFS= read -r line; do
    case $line in
        "") ;;
        *" {WIP_REF}") git update-ref -d {WIP_REF} 2>/dev/null ;;  # an earlier hbtui's killed pull's
        *) heads+=("$line") ;;
    esac
done <<< "$listed"
if [ "$3" = 1 ] && [ ${{#changed[@]}} -gt 0 ]; then
    t=$(mktemp -d) || exit 4
    trap 'rm -rf "$t"' EXIT
    cp .git/index "$t/index" 2>/dev/null || :
    tree=$(GIT_INDEX_FILE="$t/index" sh -c 'git add -A && git write-tree') || exit 4
    c=$(GIT_AUTHOR_NAME=hbtui GIT_AUTHOR_EMAIL=hbtui@localhost.invalid \\
        GIT_COMMITTER_NAME=hbtui GIT_COMMITTER_EMAIL=hbtui@localhost.invalid \\
        git commit-tree "$tree" -p HEAD -m "uncommitted changes (hbtui pull --wip)") || exit 4
    echo "{TAG} wip $c"
    heads+=("$c {WIP_REF}")
fi
[ ${{#heads[@]}} -gt 0 ] || {{ echo "{TAG} nothing"; exit 0; }}  # no branch (a detached HEAD)
have=()
if [ $# -gt 3 ]; then
    kinds=$(printf '%s\\n' "${{@:4}}" | git cat-file --batch-check='%(objecttype) %(objectname)') \\
        || exit 5
    while read -r kind sha; do [ "$kind" != commit ] || have+=("$sha"); done <<< "$kinds"
fi
if [ ${{#2}} = 64 ]; then f='# v3 git bundle\\n@object-format=sha256\\n'; else f='# v2 git bundle\\n'; fi
revs() {{ for h in "${{heads[@]}}"; do echo "${{h%% *}}"; done; printf '^%s\\n' "$2" "${{have[@]}}"; }}
echo "{TAG} data"
# The bundle goes out through base64 on fd 3; what git says on failing is kept in `err`.
exec 3>&1
if err=$({{ {{ printf "$f" && printf -- '-%s\\n' "$2" "${{have[@]}}" && printf '%s\\n' "${{heads[@]}}" &&
        echo && revs "$@" | git -c core.bigFileThreshold=64m pack-objects -q --revs --stdout \\
        --delta-base-offset; }} 2>&4 | base64 -w {B64_WIDTH} >&3 2>/dev/null; }} 4>&1); then
    echo "{TAG} end"
else
    echo "{TAG} fail"
    printf '%s\\n' "${{err:0:4096}}"
    exit 5
fi
"""

# $1 a try's check command, run in the clone (the step's folder) as today: its output and
# exit status are the check's. What it writes is taken out again, so that it never counts
# as the agent's work (in diff, try ls, a pull): every file git sees (tracked, or untracked
# and not ignored) is kept as a tree through a temporary index before the check runs (the
# agent's index is left as it is); after it, each file it added is removed, with the
# folders that leaves empty, and each it changed or removed is put back. The tree as the
# check left it is kept as CHECK_REF, so nothing undone is lost (the agent's own work, had
# it written meanwhile). Files git ignores stay as the check left them.
CHECK_SCRIPT = f"""set -u
t=$(mktemp -d 2>/dev/null) && trap 'rm -rf "$t"' EXIT || t=""
snap() {{
    cp .git/index "$t/$1" 2>/dev/null
    GIT_INDEX_FILE="$t/$1" git add -A >/dev/null 2>&1 && GIT_INDEX_FILE="$t/$1" git write-tree
}}
before=""
[ -z "$t" ] || before=$(snap before 2>/dev/null) || before=""
bash -lc "$1"
status=$?
if [ -n "$before" ] && after=$(snap after 2>/dev/null) && [ "$after" != "$before" ]; then
    changed() {{ git diff-tree -r -z --no-renames --name-only --diff-filter="$1" "$before" "$after"; }}
    changed A | while IFS= read -r -d '' f; do
        rm -f -- "$f" && rmdir -p --ignore-fail-on-non-empty -- "$(dirname -- "$f")" 2>/dev/null
    done
    changed DMT | GIT_INDEX_FILE="$t/before" git checkout-index -f -z --stdin
    git update-ref {CHECK_REF} "$after"
fi 2>/dev/null
exit $status
"""

# $1 clone  $2 the source box's branch  $3 this box's  $4 source box  $5 this box
BRANCH_SCRIPT = f"""set -u
cd "$1" 2>/dev/null || {{ echo "{TAG} noclone"; exit 3; }}
if git show-ref -q --verify "refs/heads/$2"; then git branch -m "$2" "$3" || exit 4; fi
if [ "$(git config user.name)" = "agent in $4" ]; then git config user.name "agent in $5"; fi
if [ "$(git config user.email)" = "agent@$4.hbtui.invalid" ]; then
    git config user.email "agent@$5.hbtui.invalid"
fi
echo "{TAG} branch $(git symbolic-ref -q --short HEAD)"
"""

# $1 clone  $2 launcher file
START_SCRIPT = """set -eu
if tmux has-session -t main 2>/dev/null; then
    tmux new-window -t main -c "$1" "bash -l $2"
else
    tmux new-session -d -s main -x 200 -y 50 -c "$1" "bash -l $2"
fi
"""

# $1 the folder of the launcher's files (the clone's .git)  $2 agent  $3 milliseconds
# $4 "up" when the agent's start itself is enough (no task: a resume, a start at its prompt)
# Waits for the first of: the launcher's `hbtui-ended` (the agent exited: its status, and
# the pane's last lines), a hook status file of the agent in the launcher's pane written
# since it started, for an event past the start (`took` EVENT: the agent has the task; with
# "up", its SessionStart too), the
# pane gone, or the bound (`running` and the pane's last lines, or `nopane`: the launcher
# never said its pane). Each
# answer ends with the milliseconds waited. Polls every 0.2 s without starting a process
# (bash builtins only) but for tmux once a second; the files are the box's (untrusted):
# read up to 64 KiB each, and only matched, never run.
WAIT_SCRIPT = f"""set -u
cd "$1" 2>/dev/null || {{ echo "{TAG} noclone"; exit 3; }}
state="${{XDG_STATE_HOME:-$HOME/.local/state}}/hermes-box/agents"
now() {{ t=${{EPOCHREALTIME//[!0-9]/}}; }}
now; began=$t; end=$(( t + $3 * 1000 )); pane="" n=0 event='"event":"([A-Za-z_]{{1,40}})"'
while :; do
    [ -n "$pane" ] || {{ [ -f hbtui-pane ] && read -r pane < hbtui-pane; }}
    now; ms=$(( (t - began) / 1000 ))
    if [ -f hbtui-ended ]; then
        status=""; read -r status < hbtui-ended
        echo "{TAG} ended ${{status:-?}} $ms"
        [ -z "$pane" ] || tmux capture-pane -p -J -t "$pane" -S -40 2>/dev/null | tail -c 16384
        exit 0
    fi
    if [ -n "$pane" ]; then
        for f in "$state"/*.json; do
            [ -f "$f" ] && [ "$f" -nt hbtui-pane ] || continue
            s=""; read -r -N 65536 s < "$f"
            case $s in *'"pane":"'"$pane"'"'*) ;; *) continue ;; esac
            case $s in *'"agent":"'"$2"'"'*) ;; *) continue ;; esac
            [[ $s =~ $event ]] || continue
            case ${{BASH_REMATCH[1]}} in
                SessionEnd|on_session_finalize) continue ;;
                SessionStart) [ "${{4:-}}" = up ] || continue ;;
            esac
            echo "{TAG} took ${{BASH_REMATCH[1]}} $ms"
            exit 0
        done
        if [ $(( n++ % 5 )) = 4 ] || [ "$t" -ge "$end" ]; then
            dead=$(tmux display-message -p -t "$pane" '#{{pane_dead}}' 2>/dev/null) || dead=gone
            [ "$dead" = 0 ] || {{ echo "{TAG} gone $ms"; exit 0; }}
        fi
    fi
    if [ "$t" -ge "$end" ]; then
        [ -n "$pane" ] || {{ echo "{TAG} nopane $ms"; exit 0; }}
        echo "{TAG} running $ms"
        tmux capture-pane -p -J -t "$pane" -S -40 2>/dev/null | tail -c 16384
        exit 0
    fi
    sleep 0.2
done
"""


class BoxAnswerRefused(HbtuiError):
    """What the box answered breaks the protocol or the cap; nothing of it was used."""


@dataclass
class Answer:
    """The tagged lines of a step's output, and the other lines (the box's own words)."""

    tagged: list[tuple[str, str]] = field(default_factory=list)  # (word, rest)
    said: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)  # after a "patch" line
    size: int = 0  # characters read, all told
    returncode: int | None = None

    def first(self, word: str) -> str | None:
        return next((rest for w, rest in self.tagged if w == word), None)

    def why(self) -> str:
        """The box's last words, safe to print (for an error line)."""
        words = [boxtext.line(s) for s in self.said if s.strip()]
        return words[-1][:200] if words else f"exit status {self.returncode}"


def _sent_enough() -> Callable[[str], bool]:
    """Progress, for a step: another IDLE_BYTES of the box's answer (a drip is silence)."""
    got = 0

    def moved(line: str) -> bool:
        nonlocal got
        got += len(line) + 1
        if got < IDLE_BYTES:
            return False
        got = 0
        return True

    return moved


def _silent(box: str, doing: str, idle: float) -> BoxAnswerRefused:
    return BoxAnswerRefused(
        f"box {box} went silent while {doing} (less than {IDLE_BYTES} bytes in {idle:g} s): "
        "given up"
    )


def _split(line: str) -> tuple[str, str]:
    word, _, rest = line[len(TAG) :].strip().partition(" ")
    return word, rest


@contextlib.asynccontextmanager
async def _lines(
    host: Host, box: str, script: str, args: list[str], timeout: float = STEP_TIMEOUT,
    doing: str = "",
) -> AsyncIterator[tuple[AsyncIterator[str], list[int | None]]]:  # fmt: skip
    """A step's output lines, and (once they end) its exit status; the step is killed
    when the block is left early. `doing`: what the step does, for a step given up
    when the box goes silent (none is, without)."""
    idle = idle_bound() if doing else 0.0  # a bad one stops the step before it starts
    stream = host.engine.exec_stream(
        box, ["bash", "-c", script, "hbtui", *args], user=AGENT, timeout=timeout
    )
    inner = aiter(stream)
    lines = inner
    if doing:
        lines = progressing(inner, idle, _sent_enough(), lambda: _silent(box, doing, idle))
    status: list[int | None] = [None]
    try:
        yield lines, status
        status[0] = stream.returncode
    except EngineLineTooLong:
        raise BoxAnswerRefused("the box answered a line longer than 1 MiB: refused") from None
    finally:
        for each in (lines, inner):
            with contextlib.suppress(EngineError, RuntimeError, ValueError):
                await each.aclose()  # type: ignore[attr-defined]


async def run_step(
    host: Host, box: str, script: str, args: list[str], cap: int, timeout: float = STEP_TIMEOUT,
    doing: str = "",
) -> Answer:  # fmt: skip
    """Run a step and keep its output, at most `cap` characters of it (`doing`: see
    _lines)."""
    answer = Answer()
    in_body = False
    async with _lines(host, box, script, args, timeout, doing) as (lines, status):
        async for line in lines:
            answer.size += len(line) + 1
            if answer.size > cap:
                raise BoxAnswerRefused(
                    f"the box's answer is larger than {cap} bytes: refused (try --stat)"
                )
            if line.startswith(TAG):
                word, rest = _split(line)
                if word == "end":
                    in_body = False
                    continue
                answer.tagged.append((word, rest))
                in_body = word == "patch"
            elif in_body:
                answer.body.append(line)
            else:
                answer.said.append(line)
    answer.returncode = status[0]
    return answer


async def fetch_bundle(
    host: Host, box: str, args: list[str], sink: Callable[[bytes], Awaitable[None]], cap: int
) -> tuple[Answer, int]:
    """Run the pull step; the bundle it sends goes to `sink` as it arrives, and is
    refused the moment it is larger than `cap` bytes. Returns the step's answer (a
    `fail` tag: making the bundle failed, git's words in it) and the bundle's size."""
    answer = Answer()
    written = 0
    state = "head"  # then "data", then "done"
    lines_of = _lines(host, box, PULL_SCRIPT, args, doing="bundling its work for pull")
    async with lines_of as (lines, status):
        async for line in lines:
            if state == "data":
                if line in (f"{TAG} end", f"{TAG} fail"):
                    answer.tagged.append(_split(line))
                    state = "done"
                    continue
                try:
                    chunk = binascii.a2b_base64(line, strict_mode=True)
                except (binascii.Error, ValueError):
                    raise BoxAnswerRefused(
                        "the box's bundle arrived garbled (not base64): refused"
                    ) from None
                written += len(chunk)
                if written > cap:
                    raise BoxAnswerRefused(
                        f"the box's bundle is larger than the cap of {cap} bytes: "
                        "refused, nothing fetched"
                    )
                await sink(chunk)
                continue
            if state == "head" and line.startswith(TAG):
                word, rest = _split(line)
                answer.tagged.append((word, rest))
                if word == "data":
                    state = "data"
                continue
            answer.size += len(line)
            if answer.size <= 64 * 1024:
                answer.said.append(line)
    answer.returncode = status[0]
    if state == "data":
        raise BoxAnswerRefused("the box's bundle ended before its end mark: refused")
    return answer, written
