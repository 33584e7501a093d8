"""What every verb shares: the invocation, its service, and how output looks.

Terminal rules (as age states its own): data goes to stdout (`--json` is
the whole of stdout); progress, notices and errors go to stderr when stdout
carries data; an error is one line, `error: MESSAGE`, never interpreted as
markup and never wrapped. rich is imported only by verbs that draw.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import gc
import json
import os
import signal
import sys
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from hbtui import boxtext
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL

if TYPE_CHECKING:
    from rich.console import Console, OverflowMethod, RenderableType
    from rich.table import Table
    from rich.text import Text

    from hbtui.checks import Check
    from hbtui.cli.progress import ConsoleReporter, LineReporter
    from hbtui.core.foundation import BoxView
    from hbtui.core.service import Service
    from hbtui.events import Event

T = TypeVar("T")
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(HbtuiError):
    """A signal ended the operation; what it made was rolled back as for Ctrl-C."""

    def __init__(self, signum: int, cause: BaseException) -> None:
        told = str(cause) if isinstance(cause, HbtuiError) else "cancelled"
        super().__init__(f"{signal.Signals(signum).name}: {told}")
        self.exit_code = 128 + signum


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _styled(text: str, sgr: str, stream: Any) -> str:
    return f"\x1b[{sgr}m{text}\x1b[0m" if stream.isatty() else text


def print_error(exc: HbtuiError) -> None:
    """`error: MESSAGE` on one line (and the hint, dim, on the next), plain: a message may
    quote a box (its stderr, a file name in its archive)."""
    sys.stderr.write(f"{_styled('error:', '31', sys.stderr)} {boxtext.line(exc.message)}\n")
    if exc.hint:
        sys.stderr.write(_styled(boxtext.line(exc.hint), "2", sys.stderr) + "\n")


def console(*, stderr: bool = False) -> Console:
    """A rich console; a file or pipe gets no wrapping (a line stays one line)."""
    from rich.console import Console

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            """Its reader left: write nothing more, and let the error reach `main`, which
            ends quietly (rich's own handler exits at once, even in an operation's midst)."""
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 10_000
    return QuietConsole(file=stream, highlight=False, width=width, soft_wrap=not stream.isatty())


class Invocation:
    """One run of a verb: its arguments and, made on first use, the Service."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._service: Service | None = None
        self._out: Console | None = None
        _settled()  # the verb's module is in: collect from here on

    @property
    def service(self) -> Service:
        if self._service is None:
            gc.disable()  # the core's imports, as the verb's (see _settled)
            from hbtui.wiring import build_service

            try:
                self._service = build_service()
            finally:
                _settled()
        return self._service

    def file_service(self) -> Service:
        """The Service for the verbs that act on config.toml itself (config path, set,
        edit, show --template), made without reading it: they must work when the file
        does not load, since they are how it gets put right."""
        if self._service is None:
            from hbtui.config import Config
            from hbtui.wiring import build_service

            self._service = build_service(config=Config())
        return self._service

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one async service call, then let go of remote connections.

        SIGTERM and SIGHUP are Ctrl-C here: the call is cancelled, so the core rolls
        back (or resumes) what it was doing, and the exit status is 128 + the signal.
        """

        async def once() -> T:
            loop = asyncio.get_running_loop()
            task = asyncio.current_task()
            caught: list[int] = []

            def on_signal(signum: int) -> None:
                if not caught and task is not None:
                    caught.append(signum)
                    task.cancel()

            for signum in TERMINATING:
                loop.add_signal_handler(signum, on_signal, signum)
            try:
                result = await coro
            except (asyncio.CancelledError, HbtuiError) as exc:
                if not caught:
                    raise
                raise Terminated(caught[0], exc) from None
            finally:
                for signum in TERMINATING:
                    loop.remove_signal_handler(signum)
                await self._close()
            return result

        return run(once())

    async def _close(self) -> None:
        """Let go of remote connections to the end; a Ctrl-C meanwhile, once the work is
        done, must not turn its result into "interrupted"."""
        if self._service is None:
            return
        closing = asyncio.ensure_future(self._service.close())
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await closing
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()

    @property
    def host(self) -> str:
        return getattr(self.args, "host", None) or LOCAL

    @property
    def json(self) -> bool:
        return bool(getattr(self.args, "json", False))

    @property
    def out(self) -> Console:
        if self._out is None:
            self._out = console()
        return self._out

    def show(
        self,
        data: object,
        human: str | Callable[[], RenderableType | None],
        *,
        empty: str | None = None,
    ) -> None:
        """A verb's result, the one way: with --json, `data` as JSON (the whole of stdout);
        else `empty` (what to do next) when `data` is empty; else `human` (a line, or what
        makes the table or prints the prose: built only when shown, rich loads late)."""
        if self.json:
            print_json(data)
        elif empty is not None and not data:
            self.out.print(empty, markup=False)
        else:
            shown = human() if callable(human) else human
            if shown is not None:
                self.out.print(shown, markup=False)

    def done(self, text: str) -> int:
        """A verb that changed something says what, plain, after a tick; its exit code."""
        self.out.print(f"✓ {text}", markup=False)
        return 0

    def reporter(self) -> DeferredReporter | LineReporter:
        """Progress on stdout, or on stderr when stdout carries JSON: drawn by rich on a
        terminal, plain lines to a pipe or a file."""
        from hbtui.cli.progress import LineReporter

        quiet = bool(getattr(self.args, "quiet", False))
        stream = sys.stderr if self.json else sys.stdout
        if not stream.isatty():
            return LineReporter(stream, show_logs=not quiet)

        def make() -> ConsoleReporter:
            from hbtui.cli.progress import ConsoleReporter

            target = console(stderr=True) if self.json else self.out
            return ConsoleReporter(target, show_logs=not quiet)

        return DeferredReporter(make)


def _settled() -> None:
    """Collection on again after a start-up's imports, which it left alone: what they made
    (modules, classes, the Service) lives until the exit, so it is kept out of every later
    collection too."""
    gc.freeze()
    gc.enable()


class DeferredReporter:
    """The progress renderer, made on the first event: loading rich costs ~50 ms,
    which an operation's first work (a KDF in its thread) then overlaps."""

    def __init__(self, make: Callable[[], ConsoleReporter]) -> None:
        self._make = make
        self._real: ConsoleReporter | None = None

    def __call__(self, event: Event) -> None:
        if self._real is None:
            self._real = self._make()
        self._real(event)

    def __enter__(self) -> DeferredReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._real is not None:
            self._real.__exit__(*exc)

    def finish_steps(self) -> None:
        if self._real is not None:
            self._real.finish_steps()


def print_checks(out: Console, checks: list[Check]) -> None:
    """The one rendering of checks, for `doctor` and `hosts check`."""
    from rich.text import Text

    for c in checks:
        word, style = (
            ("ok", "green") if c.ok else (("FAIL", "red") if c.needed else ("warn", "yellow"))
        )
        detail = boxtext.line(c.detail)  # what a host's engine or SSH server said
        out.print(Text.assemble((f"{word:>4}", style), "  ", (c.name, "bold"), f": {detail}"))
        if not c.ok and c.fix:
            out.print(Text(f"{'':>6}fix: {boxtext.line(c.fix)}"))


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str | Text]] = (),
    *,
    wrap: Collection[str] = (),
    whole: bool = False,
    overflow: OverflowMethod = "ellipsis",
) -> Table:
    """The one table style: no lines, bold headers, flush left; each cell plain text (a
    box's [brackets] are no markup) on one line, but in the columns named in `wrap`.
    `whole`: a one-line column is never narrower than its widest cell (rich shrinks only
    the wrapping ones). Add more rows with `add_row`."""
    from rich.table import Table
    from rich.text import Text

    cells = [[Text(c) if isinstance(c, str) else c for c in row] for row in rows]
    made = Table(box=None, header_style="bold", pad_edge=False)
    for i, header in enumerate(headers):
        wraps = header in wrap
        widest = max([len(header)] + [row[i].cell_len for row in cells])
        made.add_column(
            header,
            no_wrap=not wraps,
            overflow=overflow,
            min_width=widest if whole and not wraps else None,
        )
    for row in cells:
        made.add_row(*row)
    return made


def work_cell(b: BoxView) -> str:
    """Where a box's work is, in a cell: its repository's folder, its branch, and the
    commits its last pull found past the seed (`proj hb/b1 ↑3`); "" without one."""
    if not b.repo:
        return ""
    ahead = f" ↑{b.ahead}" if b.ahead else ""
    return f"{PurePosixPath(b.repo).name} {b.branch}{ahead}"


def box_table(
    boxes: list[BoxView], *, show_host: bool, fit: bool, width: int | None = None
) -> Table:
    """`hbtui ls`: with `fit` (a terminal) the image column gives way when
    narrow; otherwise every column is whole. WORK (where a box's work is) is last, or,
    on a terminal narrower than the whole table (`width`), second: the columns at the
    end are the ones a narrow terminal cuts."""
    from rich.text import Text

    from hbtui.core.foundation import BOX, MISSING
    from hbtui.present import PROVISION_STYLE, STATE_STYLE, age

    work = any(b.repo for b in boxes)
    headers = (
        ["BOX"]
        + (["HOST"] if show_host else [])
        + ["STATE", "PORT", "URL", "IMAGE", "CPUS", "MEM", "AGE", "PROVISIONING"]
        + (["WORK"] if work else [])
    )
    rows: list[list[Text]] = []
    for b in boxes:
        name = Text(b.name)
        if b.kind not in (BOX, MISSING):
            name.append(f" ({b.kind})", style="dim")
        rows.append(
            [name]
            + ([Text(b.host)] if show_host else [])
            + [
                Text(b.state, style=STATE_STYLE.get(b.state, "")),
                Text(str(b.port or "")),
                Text(b.url or ""),
                Text(b.image or "", no_wrap=True, overflow="ellipsis"),
                Text(str(b.cpus or "")),
                Text(f"{b.memory_mib} MiB" if b.memory_mib else ""),
                Text(age(b.created)),
                Text(b.provisioning, style=PROVISION_STYLE.get(b.provisioning, ""))
                + (Text(f" · {b.busy}", style="yellow") if b.busy else Text()),
            ]
            + ([Text(work_cell(b))] if work else [])
        )
    if work and fit and width is not None:
        widest = [max([len(h)] + [r[i].cell_len for r in rows]) for i, h in enumerate(headers)]
        if sum(widest) + 2 * (len(headers) - 1) > width:
            headers.insert(1, headers.pop())
            for r in rows:
                r.insert(1, r.pop())
    # Rich shrinks only wrappable columns: a long image in a no_wrap one took the room
    # of every other column (they were dropped whole); its cells stay one line.
    return table(headers, rows, wrap=("IMAGE",) if fit else (), whole=True)
