"""Starting runner processes: ``<python> -m benchtui_runners --config JSON`` with an event pipe.

A launcher only builds the command line; the local one runs the runner directly.
Another launcher (torchrun, say) can wrap the same command for multi-GPU runs.

A runner may run in another Python environment (``--python``, ``benchtui envs``), so nothing
of the parent's environment travels with it: its ``PYTHONPATH`` is one folder that holds the
runner package and nothing else, and it starts in the session's folder, not in the user's
working directory (where a folder named like the package would shadow it).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from benchtui.core.provenance import RUNNER_PACKAGE, runner_code_hash
from benchtui.core.wire.events import Malformed, parse_line
from benchtui_runners.protocol import FD_ENV

#: Extra folders for a runner's ``sys.path``, after the runner package's (site hooks, say: the
#: tests' fake GPU). The parent's own ``PYTHONPATH`` never reaches a runner.
EXTRA_PATH_ENV = "BENCHTUI_RUNNER_PYTHONPATH"
STREAM_LIMIT = 16 * 1024 * 1024  # longest event line accepted (tracebacks can be long)


class LocalLauncher:
    """Runs ``python -m benchtui_runners`` as a plain child process."""

    def command(self, python: str, args: list[str]) -> list[str]:
        return [python, "-m", RUNNER_PACKAGE.name, *args]


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "benchtui"


@functools.cache
def runner_root(package: Path) -> Path:
    """A folder holding the runner package and nothing else: the whole of a runner's ``PYTHONPATH``.

    In a source checkout the package's own parent is such a folder. Installed, the package
    sits in site-packages beside the parent's torch and TensorFlow, and putting that on the
    path would let a runner in another environment import them; so a copy, keyed by the
    code's hash, is made once in the user's cache (or a temporary folder when that is not
    writable).
    """
    if all(p == package or p.name == "__pycache__" for p in package.parent.iterdir()):
        return package.parent
    key = f"runner-{runner_code_hash(package)[:16]}"
    for base in (_cache_root(), Path(tempfile.gettempdir()) / f"benchtui-{os.getuid()}"):
        staged = base / key
        if (staged / package.name / "__main__.py").is_file():
            return staged
        try:
            base.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=base))
            shutil.copytree(package, scratch / package.name, ignore=shutil.ignore_patterns("__pycache__"))
            try:
                scratch.rename(staged)  # atomic: a concurrent parent either wins or finds it made
            except OSError:
                shutil.rmtree(scratch, ignore_errors=True)
            if (staged / package.name / "__main__.py").is_file():
                return staged
        except OSError:
            continue
    raise OSError(
        f"cannot stage the runner package from {package} in {_cache_root()} or the temporary folder"
    )


def runner_env(fd: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env[FD_ENV] = str(fd)
    extra_path = env.pop(EXTRA_PATH_ENV, "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(runner_root(RUNNER_PACKAGE)), extra_path) if p)
    env["PYTHONSAFEPATH"] = "1"  # Python 3.11+: the working directory is not put on sys.path either
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
    cwd: Path | None = None,
) -> RunnerProcess:
    """Start a runner with its stdout/stderr going to ``log`` and events to a pipe.

    ``cwd`` is the session's folder; without one (doctor, tests), the runner package's own folder.
    """
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
            cwd=cwd or runner_root(RUNNER_PACKAGE),
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
