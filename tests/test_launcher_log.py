"""A runner's log on a full disk: the copying says what the log lost, and the pipe is still drained
(issue 29, item 17).

The fake is the narrowest layer that touches the disk: a file object that takes writes up to a limit,
then raises ENOSPC on every write and flush, as a buffered file on a full disk does. Everything else is
real: ``copy_log`` itself, and for the process case a real child whose output floods its pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sys
from pathlib import Path

from benchtui.core.running.launcher import LogCopy, copy_log, start_command


class FullDisk:
    """A log file on a disk with ``room`` bytes left: what fits is kept, then every write and flush
    raises ENOSPC (the bytes of a write that did not fit up to the limit are kept, as a buffered
    writer's are)."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.data = bytearray()
        self.full = False
        self.writes_refused = 0

    def _refuse(self) -> OSError:
        self.writes_refused += 1
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, data: bytes) -> int:
        if self.full:
            raise self._refuse()
        take = min(len(data), self.room - len(self.data))
        self.data += bytes(data[:take])
        if take < len(data):
            self.full = True
            raise self._refuse()
        return len(data)

    def flush(self) -> None:
        if self.full:
            raise self._refuse()


def _stream(data: bytes, chunk: int = 4096) -> asyncio.StreamReader:
    stream = asyncio.StreamReader()
    for i in range(0, len(data), chunk):
        stream.feed_data(data[i : i + chunk])
    stream.feed_eof()
    return stream


OUTPUT = b"".join(b"line %06d of the runner's chatter\n" % i for i in range(30_000))  # about 1 MB


def test_a_full_disk_stops_the_log_and_says_how_much_was_lost() -> None:
    log = FullDisk(room=100_000)

    async def go() -> tuple[LogCopy, asyncio.StreamReader]:
        stream = _stream(OUTPUT)
        return await copy_log(stream, log), stream

    copied, stream = asyncio.run(go())
    assert stream.at_eof()  # the pipe was drained to its end: a runner never blocks on a full pipe
    kept = copied.kept
    assert 0 < kept <= 100_000 and bytes(log.data[:kept]) == OUTPUT[:kept]
    assert log.writes_refused == 1  # after the first refusal the log is left alone
    assert copied.problem == (
        f"the log could not be written after {kept} bytes (No space left on device): "
        f"up to {len(OUTPUT) - kept} bytes of output after them are missing from it"
    )


def test_a_log_that_takes_everything_has_no_problem() -> None:
    log = FullDisk(room=len(OUTPUT))

    async def go() -> LogCopy:
        return await copy_log(_stream(OUTPUT), log)

    copied = asyncio.run(go())
    assert copied.problem is None and copied.kept == len(OUTPUT)
    assert bytes(log.data) == OUTPUT


def test_the_cap_note_that_does_not_fit_is_said() -> None:
    """The head fits exactly; the cap's note and the kept tail do not: the tail is what was lost."""
    cap, tail = 10_000, 1_000
    log = FullDisk(room=cap)

    async def go() -> LogCopy:
        return await copy_log(_stream(OUTPUT), log, cap=cap, tail=tail)

    copied = asyncio.run(go())
    assert bytes(log.data) == OUTPUT[:cap]
    assert copied.problem == (
        f"the log could not be written after {cap} bytes (No space left on device): "
        f"up to {tail} bytes of output after them are missing from it"
    )


def test_a_runner_process_says_what_its_log_lost(tmp_path: Path) -> None:
    """A real child floods its output; its log is on a full disk: the process still ends, its pipe is
    drained, and after finish_log() the RunnerProcess says what the log lost."""
    flood = "import sys\nfor i in range(20000):\n    sys.stdout.write('x' * 99 + '\\n')\n"
    log = FullDisk(room=50_000)

    async def go() -> tuple[int, str | None]:
        proc = await start_command([sys.executable, "-c", flood], log, tmp_path)
        try:
            code = await asyncio.wait_for(proc.process.wait(), 60)
            await proc.finish_log()
            return code, proc.log_problem
        finally:
            proc.close()

    code, problem = asyncio.run(go())
    assert code == 0
    assert problem is not None and problem.startswith("the log could not be written after ")
    assert "(No space left on device): up to " in problem
    assert problem.endswith(" bytes of output after them are missing from it")
    kept = int(problem.split(" after ")[1].split(" bytes")[0])
    lost = int(problem.split(": up to ")[1].split(" bytes")[0])
    assert kept + lost == 20000 * 100 and kept <= 50_000


def test_the_kernels_own_full_disk() -> None:
    """/dev/full: every write of a real buffered file fails with ENOSPC from the kernel."""

    async def go() -> LogCopy:
        with open("/dev/full", "ab") as log:  # a character device: no blocking
            copied = await copy_log(_stream(OUTPUT), log)
            with contextlib.suppress(OSError):  # what the buffer still holds cannot be written either
                log.close()
        return copied

    copied = asyncio.run(go())
    assert copied.problem == (
        f"the log could not be written after 0 bytes (No space left on device): "
        f"up to {len(OUTPUT)} bytes of output after them are missing from it"
    )
