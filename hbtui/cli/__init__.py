"""`hbtui VERB`: the scriptable front end. `hbtui` alone opens the dashboard.

The verbs are one declarative table; each names the function that runs it
as "module:function" inside this package, imported only when that verb
runs, so `hbtui --version` loads neither rich nor the core. Every verb calls
the core through `Invocation.service` only (one Service, from hbtui.wiring).
User errors print one line and exit non-zero; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import select
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from hbtui import __version__

if TYPE_CHECKING:
    from hbtui.cli.output import Invocation


class Arg(NamedTuple):
    """One argparse argument: its flags (or name) and add_argument's keywords."""

    flags: tuple[str, ...]
    options: dict[str, Any]


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


class Verb(NamedTuple):
    # NamedTuple, not a dataclass: importing dataclasses would double `--version`'s own cost.
    name: str
    run: str  # "module:function" in hbtui.cli; "" for a group of sub-verbs
    help: str
    args: tuple[Arg, ...] = ()
    host: bool = True  # takes --host NAME
    json: bool = False  # takes --json
    sub: tuple[Verb, ...] = ()


def given(text: str) -> str:
    """An option's value that may not be empty (an empty one is a slip, not "the default")."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, not {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"0 or more, not {n}")
    return n


NAME = arg("name")
QUIET = arg("-q", "--quiet", action="store_true", help="hide the provisioning output")
COPY = arg("--copy", type=given, action="append", metavar="PATH",
           help="a file or folder of the work tree that git ignores (.env), copied into the "
                "clone as it is; repeatable")  # fmt: skip
NO_SETUP = arg("--no-setup", action="store_true",
               help="do not run the repository's .hbtui/setup.sh in the clone")  # fmt: skip
PICK_REPO = arg(
    "--repo",
    type=given,
    metavar="NAME|PATH",
    help="which of the box's repositories (its clone's folder name, or the host "
    "repository's path; also where the repository is now, if it moved)",
)
RECIPE = arg("--recipe", type=given, metavar="DIR", help="a recipe folder (provision/ + guest/)")
FILE = arg("file")
YES = arg("--yes", action="store_true",
          help="go on even if it ends agents that are working or waiting for you "
               "(otherwise asked at a terminal, refused without one)")  # fmt: skip
BRANCHABLE = arg(
    "--branchable",
    action="store_true",
    default=None,
    help="start it so that it can be branched at once, memory included",
)
SESSION = arg(
    "--session",
    type=given,
    metavar="ID",
    help="the agent session (an id or its first characters) when there are several",
)
# What a decision is for, as `hbtui agents --json` showed it: refused if the box asks
# anything else now (docs/agents.md, Answering).
PINS = (
    arg("--request", type=given, metavar="ID",
        help="decide only this request (its id, as hbtui agents --json shows it)"),
    arg("--waiting-for", metavar="TEXT",
        help="decide only while the agent asks for exactly TEXT (as hbtui agents shows it)"),
)  # fmt: skip

VERBS: tuple[Verb, ...] = (
    Verb("doctor", "config:cmd_doctor", "check that this host can run boxes", host=False,
         json=True, args=(arg("--probe", action="store_true",
                   help="also boot a throwaway machine: create, start, exec, stop, delete"),)),
    Verb("ls", "boxes:cmd_ls", "list boxes", json=True,
         args=(arg("--all", action="store_true", help="also machines hbtui did not make"),)),
    Verb("new", "boxes:cmd_new", "create and provision a box", json=True, args=(
        NAME,
        arg("--image", type=given, help="OCI image (default from config: ubuntu:24.04)"),
        arg("--cpus", type=int),
        arg("--mem", type=int, metavar="MIB", help="memory in MiB"),
        arg("--port", type=int, help="host port (default: a free one in the range)"),
        RECIPE,
        arg("--no-start", action="store_true", help="leave the box stopped when ready"),
        arg("--no-base", action="store_true",
            help="run the whole recipe even if a base of it exists"),
        BRANCHABLE,
        arg("--credential", action="append", metavar="PRESET", dest="credentials",
            help="a key the box may use without holding it (anthropic, openai, github, ...); "
                 "repeatable"),
        arg("--egress", choices=["open", "private-blocked", "allow-list"],
            help="what the box may reach (default from config: private-blocked)"),
        arg("--allow", action="append", metavar="HOST", help="a host of its allow list; repeatable"),
        arg("--agent-permissions", choices=["ask", "skip"],
            help="ask (default): agents ask before running commands; skip: they ask nothing "
                 "(needs --egress allow-list and a --credential)"),
        arg("--repo", type=given, action="append", metavar="PATH[@REF]",
            help="clone this repository's REF (default: its current branch) in the box, "
                 "on branch hb/NAME; repeatable (the agent works in the first)"),
        arg("--task", type=given, metavar="TEXT", help="the agent's first prompt (with --repo)"),
        arg("--task-file", type=given, metavar="FILE", help="the first prompt, from a file"),
        arg("--agent", choices=["claude", "codex", "hermes"],
            help="start this agent in tmux main, in the clone, on the task"),
        COPY, NO_SETUP, QUIET)),
    Verb("branch", "bases:cmd_branch",
         "a new box with another box's /data and installed state; with --count N, N of "
         "them (NAME-1..NAME-N) as a try: see try ls/keep",
         json=True, args=(
             arg("source", metavar="SRC"),
             arg("name", nargs="?", metavar="NAME",
                 help="the new box (with --count: the boxes' prefix, "
                 "default SRC)"),
             arg("--port", type=int, help="host port (default: a free one in the range)"),
             arg("--count", type=int, metavar="N",
                 help="branch a box made with --repo N ways, each with its own branch hb/NAME-K"),
             arg("--check", type=given, metavar="CMD",
                 help="with --count: run in each box once its agent is idle (see try ls)"),
             BRANCHABLE, NO_SETUP, YES, QUIET)),
    Verb("secrets", "", "credential values, kept in the OS keyring or an encrypted file",
         host=False, sub=(
        Verb("set", "keys:cmd_secrets_set",
             "store a credential's value (typed without echo, or read from stdin)", host=False,
             args=(NAME,)),
        Verb("ls", "keys:cmd_secrets_ls",
             "the stored secrets: names, where kept, boxes using them (never values)",
             host=False, json=True),
        Verb("rm", "keys:cmd_secrets_rm", "forget a stored secret", host=False, args=(NAME,)),
    )),
    Verb("credentials", "keys:cmd_credentials",
         "a box's credentials; add or rm presets (the box is made again from its own disk)",
         json=True, args=(
             NAME, arg("action", nargs="?", choices=["add", "rm"]),
             arg("presets", nargs="*", metavar="PRESET"), YES, QUIET)),
    Verb("egress", "keys:cmd_egress", "a box's network policy and the connections it refused",
         json=True, args=(NAME,)),
    Verb("base", "", "bases: prepared boxes that new boxes are made from in seconds", sub=(
        Verb("build", "bases:cmd_base_build",
             "provision a box with the recipe, generalize and pack it as a base", json=True,
             args=(arg("--image", type=given, help="OCI image (default from config)"),
                   RECIPE, QUIET)),
        Verb("ls", "bases:cmd_base_ls", "list the bases", json=True),
        Verb("rm", "bases:cmd_base_rm", "delete a base (boxes made from it stay)",
             args=(arg("id"),)),
        Verb("verify", "bases:cmd_base_verify",
             "check that each base's pack is there and matches its manifest", json=True,
             args=(arg("id", nargs="?"),)),
    )),
    Verb("recipe", "", "the recipe new boxes are provisioned with", host=False, sub=(
        Verb("check", "recipe:cmd_recipe_check",
             "each pin of provision/versions.env beside the newest release on its registry "
             "(changes nothing)", host=False, json=True, args=(RECIPE,)),
    )),
    Verb("start", "boxes:cmd_start", "start a box", json=True, args=(NAME,)),
    Verb("stop", "boxes:cmd_stop", "quiesce and stop a box", json=True, args=(NAME, YES)),
    Verb("pause", "boxes:cmd_pause",
         "pause boxes: the engine saves RAM and disks, processes and agents go on at resume",
         json=True, args=(arg("names", nargs="+", metavar="NAME"),)),
    Verb("resume", "boxes:cmd_resume", "go on with paused boxes where they were", json=True,
         args=(arg("names", nargs="+", metavar="NAME"),)),
    Verb("rm", "boxes:cmd_rm", "delete a box and free its port", args=(
        NAME, arg("-f", "--force", action="store_true",
                  help="do not ask to type the name, nor before ending its agents"), YES)),
    Verb("enter", "boxes:cmd_enter", "a shell as agent in the box's tmux session main",
         args=(NAME,)),
    Verb("exec", "boxes:cmd_exec", "run a command in a box as agent: hbtui exec NAME -- CMD...",
         args=(NAME, arg("command", nargs=argparse.REMAINDER))),
    Verb("open", "boxes:cmd_open",
         "open the box's executor web UI, or with BOX:PORT a running forward of that port",
         args=(arg("name", metavar="NAME|BOX:PORT"),
               arg("--print", action="store_true", help="print the URL instead"))),
    Verb("forward", "forward:cmd_forward",
         "reach ports on the box's own loopback (its dev servers) from 127.0.0.1 here, "
         "until Ctrl-C", json=True, args=(
             NAME,
             arg("ports", nargs="+", type=int, metavar="PORT", help="a port in the box"),
             arg("--port", type=int, metavar="HOSTPORT",
                 help="the port here, for a single PORT (default: PORT itself when free, "
                      "else a free one)"))),
    Verb("logs", "boxes:cmd_logs", "the box's workload output", args=(
        NAME,
        arg("-f", "--follow", action="store_true"),
        arg("--tail", type=count, metavar="N"),
        arg("--provision", action="store_true", help="the last provisioning log instead"))),
    Verb("repair", "boxes:cmd_repair", "run the recipe again in a box",
         args=(NAME, RECIPE, YES, QUIET)),
    Verb("adopt", "boxes:cmd_adopt", "take an orphaned hbtui machine back into the registry",
         args=(NAME,)),
    Verb("inspect", "boxes:cmd_inspect", "everything known about a box, and its CPU and memory",
         json=True, args=(NAME,)),
    Verb("ports", "boxes:cmd_ports", "the port range: used, busy, free", json=True),
    Verb("config", "", "config.toml: where it is, what it says, and changing it", host=False, sub=(
        Verb("path", "config:cmd_config_path", "print where config.toml is", host=False),
        Verb("show", "config:cmd_config_show",
             "the settings in force, each marked default, file or environment", host=False,
             args=(arg("--template", action="store_true",
                       help="every setting with its default and what it is for"),)),
        Verb("set", "config:cmd_config_set", "set one setting, checked before it is written",
             host=False, args=(
                 arg("key", metavar="KEY", help="like defaults.cpus, engine.path, keymap.new"),
                 arg("value", metavar="VALUE"))),
        Verb("edit", "config:cmd_config_edit",
             "edit config.toml in $VISUAL or $EDITOR (else vi); saved once it loads",
             host=False),
    )),
    Verb("save", "archives:cmd_save", "save a box's /data as an encrypted archive", json=True,
         args=(
             NAME,
             arg("-o", "--output", metavar="FILE", help="default: <backups>/NAME-<UTC time>.hbx"),
             arg("--no-verify", action="store_true", help="skip the authentication pass"))),
    Verb("load", "archives:cmd_load", "a new box from an archive (.hbx or old .tar.gz.gpg)",
         json=True, args=(
             FILE, NAME, RECIPE, QUIET,
             arg("--repo", type=given, metavar="PATH",
                 help="the host repository a --repo box's archive links to (default: the "
                      "one it was made from)"))),
    Verb("extract", "archives:cmd_extract", "unpack an archive's files into a folder (no VM)",
         host=False, args=(
             FILE, arg("dir", nargs="?", type=given,
                       help="a new folder (default: beside the archive)"))),
    Verb("verify", "archives:cmd_verify", "authenticate every chunk of an archive", host=False,
         args=(FILE,)),
    Verb("archive", "", "archive tools", host=False, sub=(
        Verb("info", "archives:cmd_archive_info",
             "show an archive's header (no passphrase needed)", host=False, json=True,
             args=(FILE,)),)),
    Verb("hosts", "", "remote hosts over SSH: add, ls, rm, check, trust", host=False, sub=(
        Verb("add", "hosts:cmd_hosts_add", "remember a remote host", host=False, args=(
            NAME,
            arg("--ssh", required=True, metavar="USER@HOST[:PORT]"),
            arg("--identity", metavar="FILE", help="the private key to log in with"),
            arg("--smolvm", metavar="PATH",
                help="the engine there (default: found on PATH or in its python's smolmachines)"),
            arg("--state-dir", metavar="DIR", help="the engine's --state-dir there"),
            arg("--ports", metavar="LO-HI", help="host ports for its boxes"))),
        Verb("ls", "hosts:cmd_hosts_ls", "list remote hosts", host=False, json=True),
        Verb("rm", "hosts:cmd_hosts_rm", "forget a remote host", host=False, args=(
            NAME, arg("-f", "--force", action="store_true",
                      help="also forget its boxes' rows (the machines stay on the host)"))),
        Verb("check", "hosts:cmd_hosts_check",
             "connect, find the engine and its version, say what is missing", host=False,
             json=True, args=(NAME,)),
        Verb("trust", "hosts:cmd_hosts_trust",
             "show the host key's SHA256 fingerprint and add it to known_hosts once confirmed",
             host=False, args=(
                 NAME, arg("--fingerprint", metavar="SHA256:...",
                           help="trust without asking, only if the key has this fingerprint"))),
    )),
    Verb("agents", "agents:cmd_agents",
         "the coding agents in running boxes (working, needs you, idle, ended), and their "
         "sessions' life: agents [ls] [BOX...]; agents start BOX --agent A [--task TEXT] "
         "[--setup]; "
         "agents resume|stop|forget BOX [--session ID]. A first word start, resume, stop or "
         "forget is that action: list a box of that name with agents ls NAME", json=True,
         args=(arg("words", nargs="*", metavar="[ls|start|resume|stop|forget] BOX"),
               arg("--watch", action="store_true",
                   help="show each change as the boxes report it, until Ctrl-C (listing)"),
               arg("--agent", choices=["claude", "codex", "hermes"],
                   help="the agent to start (start)"),
               arg("--task", type=given, metavar="TEXT", help="its first prompt (start)"),
               arg("--task-file", type=given, metavar="FILE",
                   help="its first prompt, from a file (start)"),
               arg("--keyless", action="store_true",
                   help="start it though the box binds no credential for its key: it logs "
                        "in inside the box (start)"),
               arg("--setup", action="store_true",
                   help="run the repository's .hbtui/setup.sh in each clone first (start)"),
               arg("--session", type=given, metavar="ID",
                   help="the session (an id or its first characters): resume, stop, forget"),
               arg("--yes", action="store_true",
                   help="stop a session that is working or waits for you without asking"))),
    Verb("approve", "agents:cmd_approve", "allow what a box's agent asks permission for",
         args=(NAME, SESSION, *PINS)),
    Verb("deny", "agents:cmd_deny", "refuse what a box's agent asks permission for",
         args=(NAME, SESSION, *PINS)),
    Verb("send", "agents:cmd_send", "type a line (and Enter) into a box's agent",
         args=(NAME, arg("text", metavar="TEXT"), SESSION)),
    Verb("diff", "work:cmd_diff",
         "what the box's agent did since the seed: commits, and every change as a patch",
         json=True, args=(NAME, arg("--stat", action="store_true", help="files and counts only"),
                          PICK_REPO)),
    Verb("pull", "work:cmd_pull",
         "fetch the box's branches into the host repository as refs/remotes/box/NAME/*",
         json=True, args=(
             NAME,
             arg("--wip", action="store_true",
                 help="also its uncommitted changes, committed on a throwaway ref"),
             PICK_REPO)),
    Verb("pr", "work:cmd_pr",
         "pull the box's work, push its branch to the repository's remote with your own git "
         "and credentials (never forced), and open a pull request with gh when logged in",
         json=True, args=(
             NAME,
             arg("--remote", type=given, default="origin", metavar="NAME",
                 help="the host repository's remote to push to (default: origin)"),
             arg("--branch", type=given, metavar="NAME",
                 help="the branch's name on the remote (default: the box's own, hb/BOX)"),
             arg("--title", type=given, metavar="TEXT",
                 help="the pull request's title (default: the task's first line)"),
             arg("--draft", action="store_true", help="open it as a draft"),
             PICK_REPO)),
    Verb("try", "work:cmd_try",
         "best of N: try N NAME --repo PATH --task TEXT [--check CMD]; try ls NAME; "
         "try keep NAME-K [--yes]",
         json=True, args=(
             arg("words", nargs="+", metavar="N NAME | ls NAME | keep NAME-K"),
             arg("--repo", type=given, action="append", metavar="PATH[@REF]",
                 help="the repository (try N: one)"),
             arg("--task", type=given, metavar="TEXT", help="every agent's first prompt"),
             arg("--task-file", type=given, metavar="FILE", help="the first prompt, from a file"),
             arg("--agent", choices=["claude", "codex", "hermes"], default="claude",
                 help="the agent in each box (default: claude)"),
             arg("--check", type=given, metavar="CMD",
                 help="run in each box once its agent is idle (e.g. 'pytest -q')"),
             arg("--yes", action="store_true", help="keep: remove the others without asking"),
             COPY, NO_SETUP, QUIET)),
    Verb("version", "config:cmd_version", "print the version", host=False),
)  # fmt: skip


def _add_verbs(sub: Any, verbs: tuple[Verb, ...], dest: str) -> None:
    for verb in verbs:
        sp = sub.add_parser(verb.name, help=verb.help, description=verb.help)
        sp.__class__ = Parser  # sub-parsers report their errors the same way
        if verb.sub:
            sp.set_defaults(run="", group=sp)
            _add_verbs(
                sp.add_subparsers(dest=f"{dest}_{verb.name}", metavar="ACTION"), verb.sub, verb.name
            )
            continue
        sp.set_defaults(run=verb.run)
        if verb.host:
            sp.add_argument("--host", metavar="NAME", help="a remote host (see hbtui hosts)")
        if verb.json:
            sp.add_argument("--json", action="store_true", help="print JSON")
        for a in verb.args:
            sp.add_argument(*a.flags, **a.options)


def _verbs_for(argv: list[str]) -> tuple[Verb, ...]:
    """Only the verbs this command line can need: building all of argparse's
    sub-parsers costs more than the rest of `hbtui --version`."""
    words = [w for w in argv if not w.startswith("-")]
    if not words:
        return VERBS if any(w in ("-h", "--help") for w in argv) else ()
    chosen = tuple(v for v in VERBS if v.name == words[0])
    return chosen or VERBS  # an unknown verb: argparse names the choices


class Parser(argparse.ArgumentParser):
    """argparse, with its errors in hbtui's own form: one `error:` line, status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {' '.join(message.split())} (see: {self.prog} --help)\n")
        raise SystemExit(2)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv`, with only the sub-parsers that command line needs."""
    p = Parser(
        prog="hbtui",
        description="Boxes for AI coding agents (smolvm microVMs). "
        "Run without a verb for the dashboard.",
    )
    p.add_argument("--version", action="version", version=f"hbtui {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    verbs = VERBS if argv is None else _verbs_for(argv)
    _add_verbs(p.add_subparsers(dest="verb", metavar="VERB"), verbs, "verb")
    return p


def handler(run: str) -> Callable[[Invocation], int]:
    module, function = run.split(":")
    fn: Callable[[Invocation], int] = getattr(
        importlib.import_module(f"hbtui.cli.{module}"), function
    )
    return fn


def describe_os_error(exc: OSError) -> str:
    """`PATH: No space left on device`, one line, whatever raised it."""
    what = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {what}" if paths else what


def _usable_streams() -> None:
    """A closed stdout or stderr (`hbtui ls >&-`) is the null device, not a crash; and
    Ctrl-C interrupts even when the shell that started hbtui ignored it (`cmd &`)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _output_gone() -> bool:
    """Whether the reader of stdout or stderr has gone (`hbtui ls | head -1`): poll
    reports an error on a pipe's write end once nobody can read it. A broken pipe
    of some other kind (a child's stdin) is an ordinary error."""
    poller = select.poll()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            poller.register(stream.fileno(), select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _end_quietly() -> int:
    """End as a Unix tool whose reader left does: no message, status 128 + SIGPIPE.
    What is still buffered goes to the null device, so the exit's flush is quiet too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def program() -> NoReturn:
    """The `hbtui` command. What its verb made is freed by the exit itself: collecting it
    first only delayed the exit (~20 ms after a pull, a third of what is left once the
    output is written)."""
    status = main()
    gc.freeze()
    sys.exit(status)


def main(argv: list[str] | None = None) -> int:
    _usable_streams()
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe is a warning
    except BrokenPipeError:
        if not _output_gone():
            raise
        return _end_quietly()
    return status


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if extra:  # the help that lists what the verb takes, not the list of verbs
        verb = " ".join(v for v in (args.verb, getattr(args, f"verb_{args.verb}", None)) if v)
        parser.prog = f"hbtui {verb}".strip()
        parser.error(f"unrecognized arguments: {' '.join(extra)}")

    from hbtui.core.keys import scrub_environment
    from hbtui.errors import HbtuiError

    scrub_environment()  # before anything can start a child process
    try:
        if args.verb is None:
            # The dashboard's start-up makes a great many objects that all live on;
            # collecting while they are made only delays the first frame (~15 ms
            # here). run_dashboard turns collection back on once the frame is up.
            gc.disable()
            from hbtui.tui.dashboard import run_dashboard

            return run_dashboard()
        if not args.run:  # a group without its action: `hbtui hosts`
            args.group.print_help()
            return 2
        # As for the dashboard: what the verb's imports make all lives on, and
        # collecting meanwhile only delays its start (Invocation turns it back on).
        gc.disable()
        from hbtui.cli.output import Invocation

        return handler(args.run)(Invocation(args))
    except HbtuiError as exc:
        if args.debug:
            raise
        from hbtui.cli.output import print_error

        print_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except OSError as exc:  # a path the user named or hbtui keeps: full, read-only, missing
        if args.debug or (isinstance(exc, BrokenPipeError) and _output_gone()):
            raise
        from hbtui.cli.output import print_error

        print_error(HbtuiError(describe_os_error(exc)))
        return 1
