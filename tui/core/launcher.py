"""Starting runner processes: ``<python> -m runners --config JSON`` with an event pipe.

A launcher only builds the command line; the local one runs the runner directly.
Another launcher (torchrun, say) can wrap the same command for multi-GPU runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import runners
from runners.protocol import FD_ENV
from tui.core.events import Malformed, parse_line

RUNNERS_ROOT = str(Path(runners.__file__).resolve().parent.parent)
STREAM_LIMIT = 16 * 1024 * 1024  # longest event line accepted (tracebacks can be long)


class LocalLauncher:
    """Runs ``python -m runners`` as a plain child process."""

    def command(self, python: str, args: list[str]) -> list[str]:
        return [python, "-m", "runners", *args]


def runner_env(fd: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env[FD_ENV] = str(fd)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (RUNNERS_ROOT, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("KERAS_BACKEND", None)  # the runner sets its own
    if extra:
        env.update(extra)
    return env


@dataclass
class RunnerProcess:
    """A started runner: its process and the read end of its event pipe."""

    process: asyncio.subprocess.Process
    events: asyncio.StreamReader
    transport: asyncio.BaseTransport

    @property
    def pid(self) -> int:
        return self.process.pid

    async def terminate(self, grace: float = 3.0) -> None:
        """Stop the runner's whole process group: SIGTERM, then SIGKILL after ``grace``."""
        if self.process.returncode is not None:
            return
        _signal_group(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), grace)
        except asyncio.TimeoutError:
            _signal_group(self.process.pid, signal.SIGKILL)
            await self.process.wait()

    def kill_now(self) -> None:
        """SIGKILL the group at once (used when the parent itself is going away)."""
        if self.process.returncode is None:
            _signal_group(self.process.pid, signal.SIGKILL)

    def close(self) -> None:
        self.transport.close()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the runner leads its own process group
    except (ProcessLookupError, PermissionError):
        pass


async def start_runner(
    python: str,
    args: list[str],
    log: IO[bytes],
    launcher: LocalLauncher | None = None,
    env_extra: dict[str, str] | None = None,
) -> RunnerProcess:
    """Start a runner with its stdout/stderr going to ``log`` and events to a pipe."""
    launcher = launcher or LocalLauncher()
    read_fd, write_fd = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *launcher.command(python, args),
            stdin=subprocess.DEVNULL,  # a child sharing the terminal would race the TUI for keys
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            start_new_session=True,  # own process group: stop and kill reach its children too
            env=runner_env(write_fd, env_extra),
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the child holds the only write end: EOF means it is gone
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    return RunnerProcess(process, reader, transport)


async def collect_events(proc: RunnerProcess) -> list[dict[str, Any]]:
    """Every well-formed event until the runner closes its pipe, then its exit (malformed lines skipped)."""
    events: list[dict[str, Any]] = []
    while line := await proc.events.readline():
        try:
            events.append(parse_line(line))
        except Malformed:
            pass
    await proc.process.wait()
    return events


def config_args(config: dict) -> list[str]:
    return ["--config", json.dumps(config, separators=(",", ":"))]
