"""The event writer: the only place on the runner side that writes the wire format.

What each event carries is stated once, in ``benchtui_runners.wire`` (the parent's checks are derived
from it; tests/test_wire_schema.py proves every field this writer and the runners send is declared there).
Events are JSON Lines on a dedicated pipe whose file descriptor number is in the
environment variable ``BENCHTUI_EVENT_FD``. Nothing is ever written to stdout:
frameworks print there, and the parent sends that output to the run's log file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchtui_runners.wire import LOSS_FIELDS, WIRE_VERSION, loss_wire

__all__ = ["FD_ENV", "FIFO_ENV", "WIRE_VERSION", "EventWriter", "ParentGone", "deadline", "die_with_parent"]

FD_ENV = "BENCHTUI_EVENT_FD"
#: Data parallel under torchrun, whose workers inherit no file descriptor: the path of a FIFO that
#: ``benchtui_runners.torchrun`` reads and relays to the event pipe. Each node's lead (its local rank 0:
#: rank 0 on one node) sends its events there; every other rank sends only its ``error`` (with its
#: rank), so a rank that fails says why.
FIFO_ENV = "BENCHTUI_EVENT_FIFO"
#: The longest error line a rank other than 0 writes: below PIPE_BUF, so it never interleaves.
RANK_ERROR_BYTES = 3500


def _clean(value: Any) -> Any:
    """Make a value JSON-safe: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def die_with_parent(sig: int = 15) -> None:
    """Ask Linux to send ``sig`` (SIGTERM) to this process when the process that started it dies.

    A runner leads its own process group (so the parent can stop it and its children
    together), and torchrun's workers lead their own sessions; without this, a parent killed
    outright would leave them training alone.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.Signals(sig))
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        sys.exit(3)


@contextlib.contextmanager
def deadline(writer: EventWriter, seconds: float, message: str) -> Iterator[None]:
    """Fail the process if the block has not ended within ``seconds``: ``message`` as its one ``error``
    line, then SIGKILL.

    For a rendezvous with other nodes, where the framework waits in native code that holds the GIL and
    ignores SIGTERM (TensorFlow's cluster start, ``ensure_initialized``) or aborts the process without a
    word when its own timeout expires (jax.distributed: SIGABRT). No thread of this process can run
    then, so the watch is a forked child that only waits on a pipe: the block's end closes it; else the
    child writes the error line to the event pipe, says it on stderr, and kills this process.
    """
    parent = os.getpid()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the watch: nothing but a wait, a line and a signal
        code = 0
        try:
            os.close(write_end)
            _die_with(parent)
            ready, _, _ = select.select([read_end], [], [], seconds)
            if not ready and os.getppid() == parent:
                with contextlib.suppress(Exception):
                    writer.error("exception", message)
                with contextlib.suppress(OSError):
                    os.write(2, f"benchtui runner: {message}\n".encode())
                os.kill(parent, signal.SIGKILL)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(read_end)
    try:
        yield
    finally:
        os.close(write_end)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)


def _die_with(parent: int) -> None:
    """The watch of ``deadline`` ends with the process it watches, however that ends."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


class ParentGone(SystemExit):
    """The parent closed its end of the pipe: nobody is listening, so the run ends."""


class EventWriter:
    """Writes one JSON object per line to the event pipe.

    Each event is sent with a single ``os.write`` call so a crash can at worst
    lose the event being written, never corrupt an earlier one. ``sink``: each line goes to it instead
    of a file descriptor (a test's recorder, a made session); ``clock``: what ``t`` reads (monotonic time).
    """

    def __init__(
        self,
        fd: int | None,
        rank: int = 0,
        *,
        sink: Callable[[bytes], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        lead: bool | None = None,
    ) -> None:
        self._fd = fd
        self._sink = sink
        self.clock = clock
        self.closed = fd is None and sink is None
        self.rank = rank  # data parallel: this process's global rank (named in its error)
        # Data parallel: only each node's lead (its local rank 0; rank 0 on one node) sends anything but
        # errors. None: rank 0 leads.
        self.lead = rank == 0 if lead is None else lead
        self.phases: dict[str, str] = {}  # each phase's last edge sent: what was going on at an error

    @classmethod
    def from_env(cls) -> EventWriter:
        fifo = os.environ.get(FIFO_ENV)
        if fifo:  # a torchrun worker: its node's lead's events, any rank's error, through the relay's FIFO
            rank = int(os.environ.get("RANK", "0") or 0)
            lead = int(os.environ.get("LOCAL_RANK", str(rank)) or 0) == 0
            try:
                return cls(os.open(fifo, os.O_WRONLY), rank, lead=lead)
            except OSError:
                return cls(None, rank, lead=lead)
        raw = os.environ.get(FD_ENV)
        return cls(int(raw) if raw else None)

    def emit(self, type_: str, **fields: Any) -> None:
        if self.closed or (not self.lead and type_ != "error"):
            return
        event = {"v": WIRE_VERSION, "type": type_, "t": self.clock()}
        event.update(fields)
        line = json.dumps(_clean(event), separators=(",", ":"), allow_nan=False) + "\n"
        self.send(line.encode("utf-8"))

    def send(self, data: bytes) -> None:
        """One whole line, as it is (the torchrun relay copies its workers' lines with this)."""
        if self.closed:
            return
        if self._sink is not None:
            self._sink(data)
            return
        try:
            while data:
                written = os.write(self._fd, data)  # type: ignore[arg-type]
                data = data[written:]
        except OSError as exc:
            # The parent went away (killed, or its terminal closed): a run nobody records is
            # wasted device time, and an orphan. Stop at the next event, within one batch.
            self.closed = True
            raise ParentGone(3) from exc

    # Convenience wrappers, one per event type of the wire format.
    def hello(self, **fields: Any) -> None:
        """The runner's hello: its ``pid`` first (this process's unless given), then ``fields``."""
        self.emit("hello", **{"pid": os.getpid(), **fields})

    def phase(self, name: str, edge: str, **fields: Any) -> None:
        self.phases[name] = edge
        self.emit("phase", name=name, edge=edge, **fields)

    def batch(self, epoch: int, step: int, seconds: float, samples: int, steps: int = 1) -> None:
        """``steps`` steps ending with ``step`` took ``seconds`` each on average; ``samples`` per step."""
        self.emit("batch", epoch=epoch, step=step, seconds=seconds, samples=samples, steps=steps)

    def epoch(self, epoch: int, seconds: float, samples: int, **fields: Any) -> None:
        """``loss``, ``loss_min``, ``loss_max`` among ``fields`` go as the wire carries a loss (NaN as "nan")."""
        for name in LOSS_FIELDS:
            if name in fields:
                fields[name] = loss_wire(fields[name])
        self.emit("epoch", epoch=epoch, seconds=seconds, samples=samples, **fields)

    def memory(self, **fields: Any) -> None:
        self.emit("memory", **fields)

    def tokens(
        self,
        epoch: int,
        step: int,
        sequences: int,
        prompt_len: int,
        new_tokens: int,
        first_token_s: float,
        decode_s: float,
        **fields: Any,
    ) -> None:
        """One generate step (``wire.TokensEvent``): ``token_s``, ``tokens``, ``decode_steps`` among ``fields``."""
        self.emit(
            "tokens",
            epoch=epoch,
            step=step,
            sequences=sequences,
            prompt_len=prompt_len,
            new_tokens=new_tokens,
            first_token_s=first_token_s,
            decode_s=decode_s,
            **fields,
        )

    def error(self, kind: str, message: str, traceback: str = "") -> None:
        if not self.lead:  # one short line, written whole, naming the rank
            message = f"rank {self.rank}: {message}"[:1000]
            self.emit(
                "error",
                kind=kind,
                message=message,
                traceback=traceback[-(RANK_ERROR_BYTES - 2000) :],
                rank=self.rank,
            )
            return
        if self.rank:  # another node's lead: its error in full, naming its rank
            self.emit(
                "error",
                kind=kind,
                message=f"rank {self.rank}: {message}",
                traceback=traceback,
                rank=self.rank,
            )
            return
        self.emit("error", kind=kind, message=message, traceback=traceback)

    def done(self, **fields: Any) -> None:
        self.emit("done", **fields)

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        self.closed = True
