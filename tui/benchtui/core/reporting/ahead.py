"""A big session's GPU samples read beside its load, in a second process: what the html's telemetry charts
and a watch's facts take of them (``SamplesDigest``) comes back, not the samples.

The html export reads events.jsonl twice: the load folds every event but the GPU samples (it keeps the
newest few), and ``read_digest`` reads every sample again. Neither needs the other, so on a machine with
a core to spare the second pass runs in a child forked before the load and is done before the load is: a
million-event session's 0.7 s of samples and lines cost the export the 0.03 s of reading them back.

Only where it is safe and worth it: Linux (``os.fork``), one thread in the process (a fork copies only
the calling thread: a command-line export has one, the app never calls this), and an events file of at
least ``AHEAD_MIN_BYTES``. Whatever goes wrong in the child (an error, a kill, a file that is not its
digest) gives None, and the caller reads the samples itself, as before: the report is the same either way.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import tempfile
import threading
from pathlib import Path

from benchtui.core.reporting.model.telemetry import SamplesDigest, read_digest
from benchtui.core.store.session import SessionFolder

#: Below this, reading the samples takes less than forking and reading their digest back.
AHEAD_MIN_BYTES = 8 << 20


class Ahead:
    """``read_digest`` of a session folder, computed in a forked child (``start``); ``result`` waits for it."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid = pid
        self.out = out
        self._done = False

    @classmethod
    def start(cls, path: Path, min_bytes: int | None = None) -> Ahead | None:
        """The child started on ``path``'s session; None where it is not worth it or not safe (see above)."""
        if sys.platform != "linux" or not hasattr(os, "fork") or threading.active_count() != 1:
            return None
        folder = SessionFolder(path)
        stamp = folder.events_stamp()
        if stamp is None or stamp[0] < (AHEAD_MIN_BYTES if min_bytes is None else min_bytes):
            return None
        try:
            fd, name = tempfile.mkstemp(prefix="benchtui-ahead-", suffix=".pickle")
        except OSError:
            return None
        os.close(fd)
        try:
            pid = os.fork()
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name)
            return None
        if pid == 0:  # the child: never returns
            _child(folder, name, os.getppid())
        return cls(pid, Path(name))

    def result(self) -> SamplesDigest | None:
        """The child's digest once it is done; None when it failed (the caller reads the samples)."""
        if self._done:
            return None
        self._done = True
        try:
            _, status = os.waitpid(self.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                return None
            with open(self.out, "rb") as fh:
                digest = pickle.load(fh)  # written by this process's own child, into a file only it can read
            return digest if isinstance(digest, SamplesDigest) else None
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
            return None
        finally:
            self._remove()

    def close(self) -> None:
        """Stop the child if it is still going (the load failed, the user interrupted) and clean up."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        self._remove()

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            self.out.unlink()


def _child(folder: SessionFolder, out: str, parent: int) -> None:
    """Write ``read_digest`` of ``folder`` to ``out`` and exit 0; exit 1 on anything else, and leave no file
    when the parent is gone. Nothing the parent holds (buffered output, atexit handlers, open files) is
    flushed or run: ``os._exit``."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides: close() stops the child
        digest = read_digest(folder, folder.read_plan())
        if os.getppid() != parent:  # killed before it could wait: no one reads or removes the file
            os.unlink(out)
            os._exit(1)
        with open(out, "wb") as fh:
            pickle.dump(digest, fh, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    except BaseException:
        code = 1
    finally:
        os._exit(code)
