"""The dashboard's output once its terminal has hung up: writes are dropped, never waited on."""

from __future__ import annotations

import errno
import io
import threading

from textual.drivers._writer_thread import MAX_QUEUED_WRITES, WriterThread

from hbtui.tui.terminal import TerminalOutput


class HungUp(io.StringIO):
    """A terminal after its hang-up: every write fails as the kernel fails it."""

    def write(self, text: str) -> int:
        raise OSError(errno.EIO, "Input/output error")


def test_a_hung_up_terminal_never_blocks_the_writes_after_it():
    lost = []
    output = TerminalOutput(HungUp(), lambda: lost.append(True))
    writer = WriterThread(output)  # type: ignore[arg-type]
    writer.start()
    # Textual's writer thread died at the first failed write; its queue then held
    # MAX_QUEUED_WRITES and the write after that waited for good, event loop and all.
    done = threading.Event()

    def write_then_stop() -> None:
        for n in range(MAX_QUEUED_WRITES * 4):
            writer.write(f"frame {n}")
        writer.stop()
        done.set()

    threading.Thread(target=write_then_stop, daemon=True).start()
    assert done.wait(10), "a write to the hung-up terminal blocked"
    assert output.gone
    assert lost, "the loss was not reported"
