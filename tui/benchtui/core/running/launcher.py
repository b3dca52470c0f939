"""Starting runner processes: ``<python> -m benchtui_runners --config JSON`` with an event pipe.

A launcher only builds the command line; the local one runs the runner directly.
Another launcher (torchrun, say) can wrap the same command for multi-GPU runs.

A runner may run in another Python environment (``--python``, ``benchtui envs``), so nothing
of the parent's environment travels with it: its ``PYTHONPATH`` is one folder that holds the
runner package and nothing else, and it starts in the session's folder, not in the user's
working directory (where a folder named like the package would shadow it).

``benchtui watch`` starts the user's own command the same way (``start_command``), except that it
runs in the user's folder with their environment, the runner package's folder put first on their
``PYTHONPATH`` so that the timing hooks (``benchtui_runners.hooks``) import in any environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from benchtui.core.fmt import clean
from benchtui.core.provenance import RUNNER_PACKAGE, runner_code_hash
from benchtui.core.wire.events import MAX_LINE_BYTES, Malformed, parse_line
from benchtui_runners.config import RunConfig
from benchtui_runners.protocol import FD_ENV, FIFO_ENV

#: Extra folders for a runner's ``sys.path``, after the runner package's (site hooks, say: the
#: tests' fake GPU). The parent's own ``PYTHONPATH`` never reaches a runner.
EXTRA_PATH_ENV = "BENCHTUI_RUNNER_PYTHONPATH"
STREAM_LIMIT = MAX_LINE_BYTES  # longest event line read; a longer one is dropped whole (one malformed line)
#: A runner's log (its stdout and stderr) keeps its first LOG_CAP_BYTES and its last LOG_TAIL_BYTES.
LOG_CAP_BYTES = 64 * 2**20
LOG_TAIL_BYTES = 256 * 2**10
#: benchtui's own variables a watched command must not inherit from benchtui's environment (benchtui
#: run inside a watched script, say): the hooks' owner pid (``benchtui_runners.hooks.OWNER_ENV``, not
#: imported: that module imports the frameworks in its functions) and torchrun's relay FIFO.
INHERITED_HOOK_ENV = ("BENCHTUI_HOOKS_PID", FIFO_ENV)
#: After a runner exits, how long its event pipe may stay open (a child of its own holds it) before
#: the reading stops and the rest of its process group is killed.
EXIT_GRACE_S = 2.0
#: Each started process's environment holds a token of its own (``_spawn``). Every descendant inherits
#: it, one that left the process group (``setsid``) or whose parent is gone too, so the end of a run
#: finds them all in /proc (``run_processes``) and ends them: nothing a run started outlives it.
RUN_TOKEN_ENV = "BENCHTUI_RUN_TOKEN"
#: The most of a process's environment read when looking for a run's token (Linux caps a process's
#: arguments and environment together at a quarter of its stack limit: 2 MiB by default).
ENVIRON_READ_BYTES = 4 << 20


class LocalLauncher:
    """Runs ``python -m benchtui_runners`` as a plain child process."""

    def command(self, python: str, args: list[str]) -> list[str]:
        return [python, "-m", RUNNER_PACKAGE.name, *args]


@dataclass(frozen=True)
class TorchrunLauncher(LocalLauncher):
    """PyTorch data parallel: the same runner command, started ``nproc`` times by torchrun.

    ``python -m benchtui_runners.torchrun`` runs torchrun's own launcher (``torch.distributed.run``,
    what the ``torchrun`` command is) with ``--standalone`` on one machine, or across machines the c10d
    rendezvous at ``rendezvous`` (node 0 hosts its store) under ``rendezvous_id`` (unique per run), and
    relays its node's lead's events (local rank 0; and any rank's error) to the event pipe: torchrun
    starts its workers with none of its own file descriptors, so they write to a FIFO it reads.
    """

    nproc: int
    nodes: int = 1
    node_rank: int = 0
    rendezvous: str = ""
    rendezvous_id: str = ""

    def command(self, python: str, args: list[str]) -> list[str]:
        node = (
            [
                "--nnodes",
                str(self.nodes),
                "--node-rank",
                str(self.node_rank),
                "--rdzv-endpoint",
                self.rendezvous,
                *(["--rdzv-id", self.rendezvous_id] if self.rendezvous_id else []),
            ]
            if self.nodes > 1
            else []
        )
        return [
            python,
            "-m",
            f"{RUNNER_PACKAGE.name}.torchrun",
            "--nproc-per-node",
            str(self.nproc),
            *node,
            "--",
            *args,
        ]


def launcher_for(config: RunConfig) -> LocalLauncher:
    """How a run's runner starts: directly, or through torchrun for PyTorch data parallel."""
    from benchtui_runners import catalog

    if catalog.family(config.framework) == "torch" and config.world > 1:
        return TorchrunLauncher(
            config.replicas, config.nodes, config.node_rank, config.rendezvous, config.rendezvous_id
        )
    return LocalLauncher()


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


def command_env(fd: int) -> dict[str, str]:
    """A watched command's environment (``benchtui watch``): the user's own, as it is (their PYTHONPATH,
    KERAS_BACKEND, CUDA_VISIBLE_DEVICES ...), with the event pipe's number, and the runner package's
    folder put first on PYTHONPATH so that ``benchtui_runners.hooks`` imports in any environment."""
    env = dict(os.environ)
    for name in INHERITED_HOOK_ENV:
        env.pop(name, None)
    env[FD_ENV] = str(fd)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(runner_root(RUNNER_PACKAGE)), env.get("PYTHONPATH", "")) if p
    )
    return env


async def read_event_line(reader: asyncio.StreamReader) -> bytes | None:
    """The next line with its newline (the last may lack it; ``b""`` at the end), or None for a line
    longer than the reader's limit, which is dropped whole: one overlong line is one bad line."""
    overlong = False
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # the end: the rest, without a newline
            return None if overlong else exc.partial
        except asyncio.LimitOverrunError as exc:
            overlong = True
            await reader.readexactly(exc.consumed)  # drop what the limit holds, then look again
            continue
        return None if overlong else line


#: How much of a command's last output is kept for its last line (``LogCopy.last_line``), and how long
#: that line may be when a reason quotes it.
LAST_BYTES = 4096
LAST_LINE_CHARS = 240


@dataclass
class LogCopy:
    """How the copying of a runner's output to its log went (``copy_log`` keeps it up to date)."""

    read: int = 0  # bytes of output read from the runner's pipe
    kept: int = 0  # bytes of that output the log surely took
    meant: int = 0  # bytes of it the log should hold: its first ``cap``, and the last ``tail`` past the cap
    error: str = ""  # why the log took no more (its first failed write); "" while it takes them
    #: The last bytes of output read (``LAST_BYTES`` at most), whether or not the log took them: the
    #: last line a command that crashed printed (``last_line``), its error as it said it.
    recent: bytes = b""

    @property
    def last_line(self) -> str:
        """The output's last line that holds any text ('' for none), decoded as the terminal would have
        shown it (undecodable bytes replaced), without control characters, at most ``LAST_LINE_CHARS``."""
        for raw in reversed(self.recent.replace(b"\r", b"\n").split(b"\n")):
            text = " ".join(clean(raw.decode("utf-8", "replace")).split())
            if text:
                return text if len(text) <= LAST_LINE_CHARS else text[: LAST_LINE_CHARS - 1] + "…"
        return ""

    @property
    def problem(self) -> str | None:
        """What the log lost, in words (None when it holds all it should)."""
        if not self.error:
            return None
        return (
            f"the log could not be written after {self.kept} bytes ({self.error}): "
            f"up to {self.meant - self.kept} bytes of output after them are missing from it"
        )


@dataclass
class RunnerProcess:
    """A started runner: its process, the read end of its event pipe, and the copying of its log."""

    process: asyncio.subprocess.Process
    events: asyncio.StreamReader
    transport: asyncio.BaseTransport
    log_task: asyncio.Future[Any] | None = None
    output: asyncio.BaseTransport | None = None  # the read end of its stdout/stderr pipe
    #: Why ``lines`` stopped: "eof" (the pipe closed), "stalled" (the watchdog stopped the runner),
    #: "pipe held" (the runner exited, something else kept the pipe open past the grace).
    ending: str = ""
    stalled_after: float = 0.0
    #: How the copying of its output to the log went (complete once ``finish_log`` returned).
    log_copy: LogCopy = field(default_factory=LogCopy)
    #: Its environment's ``RUN_TOKEN_ENV``, which every process it starts inherits.
    token: str = ""

    @property
    def log_problem(self) -> str | None:
        """What the log lost because it could not be written (a full disk), in words; None when it holds
        what it should. Read it after ``finish_log``."""
        return self.log_copy.problem

    @property
    def last_line(self) -> str:
        """The last line of text it printed (stdout and stderr share the log): read after ``finish_log``."""
        return self.log_copy.last_line

    @property
    def pid(self) -> int:
        return self.process.pid

    async def lines(
        self, stall_limit: Callable[[], float | None] = lambda: None, grace: float = EXIT_GRACE_S
    ) -> AsyncIterator[bytes | None]:
        """The runner's event lines (None: an overlong line dropped) until its run is over.

        A run is over when the pipe closes, or ``grace`` seconds after the runner process exits
        whoever else holds the pipe (its group is then killed), or when no line came for
        ``stall_limit()`` seconds (asked again after every line; None: no limit): then the watchdog
        stops the runner's process group and ``ending`` is "stalled".
        """
        exited: asyncio.Future[Any] = asyncio.ensure_future(self.process.wait())
        read: asyncio.Future[Any] | None = None
        deadline: float | None = None  # set when the runner has exited
        loop = asyncio.get_running_loop()
        try:
            while True:
                if read is None:
                    read = asyncio.ensure_future(read_event_line(self.events))
                if deadline is None:
                    limit = stall_limit()
                    await asyncio.wait([read, exited], timeout=limit, return_when=asyncio.FIRST_COMPLETED)
                    if not read.done() and exited.done():
                        deadline = loop.time() + grace
                        continue
                else:
                    limit = None
                    await asyncio.wait({read}, timeout=max(0.0, deadline - loop.time()))
                if read.done():
                    line, read = read.result(), None
                    if line == b"":
                        self.ending = "eof"
                        return
                    yield line
                elif deadline is not None:
                    self.ending = "pipe held"
                    self.kill_now(force=True)  # what is left of its group: nothing may outlive its run
                    return
                else:
                    self.ending, self.stalled_after = "stalled", float(limit or 0.0)
                    await self.terminate()
                    return
        finally:
            if read is not None and not read.done():
                read.cancel()
            if not exited.done():
                exited.cancel()

    async def terminate(self, grace: float = 3.0) -> None:
        """Stop the runner's whole process group and every process of its run that left the group:
        SIGTERM, then SIGKILL after ``grace``."""
        if self.process.returncode is not None:
            return
        # SIGCONT: a stopped process handles SIGTERM only once woken.
        self._signal_run(signal.SIGTERM, signal.SIGCONT)
        try:
            await asyncio.wait_for(self.process.wait(), grace)
        except asyncio.TimeoutError:
            self._signal_run(signal.SIGKILL)
            await self.process.wait()

    def kill_now(self, force: bool = False) -> None:
        """SIGKILL the group and the rest of its run at once (the parent is going away; ``force``: even
        after the runner exited)."""
        if force or self.process.returncode is None:
            self._signal_run(signal.SIGKILL)

    def _signal_run(self, *signals: int) -> None:
        """Each of ``signals`` to the runner's process group, then to every other process of its run:
        those that carry its token, and its descendants (while it is not reaped, its pid is its own)."""
        for sig in signals:
            _signal_group(self.process.pid, sig)
        root = self.process.pid if self.process.returncode is None else None
        for pid in run_processes(self.token, root):
            for sig in signals:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    break

    async def finish_log(self, grace: float = EXIT_GRACE_S) -> None:
        """Wait for the runner's output to be copied to its log (at most ``grace`` after it exited)."""
        if self.log_task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.log_task), grace)
        except asyncio.TimeoutError:
            self.log_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.log_task

    def close(self) -> None:
        """The run is over: whatever of it is still running (a child that left the group, a daemon that
        closed its pipes) is killed, and the pipes are closed."""
        self._signal_run(signal.SIGKILL)
        self.transport.close()
        if self.log_task is not None and not self.log_task.done():
            self.log_task.cancel()
        if self.output is not None:
            self.output.close()


def _write_all(log: IO[bytes], data: bytes) -> tuple[int, OSError | None]:
    """Write and flush ``data`` whole (a raw file may take part of it per call): how many bytes the log
    surely took, and the error that stopped it (None: it took them all). Bytes a buffered file accepted
    but could not flush are not counted: whether they reached the disk is not known."""
    view, taken = memoryview(data), 0
    try:
        while taken < len(data):
            n = log.write(view[taken:])  # a memoryview is bytes-like
            if not n:  # a raw file that took nothing: it will take nothing more
                return taken, OSError(errno.ENOSPC, "the log took no more bytes")
            taken += n
    except OSError as exc:
        return taken, exc
    try:
        log.flush()
    except OSError as exc:
        return 0, exc
    return taken, None


async def copy_log(
    stream: asyncio.StreamReader,
    log: IO[bytes],
    cap: int = LOG_CAP_BYTES,
    tail: int = LOG_TAIL_BYTES,
    copied: LogCopy | None = None,
) -> LogCopy:
    """Copy a runner's output to its log: the first ``cap`` bytes, then only the last ``tail`` bytes.

    The pipe is always drained (a runner blocked on a full pipe would stop training), even when
    the log cannot be written (a full disk): after the first failed write the log is left alone,
    and ``copied`` (returned) says how much it took and how much it lost (``LogCopy.problem``).
    """
    copied = copied if copied is not None else LogCopy()
    last = bytearray()
    recent = bytearray()

    def put(data: bytes, output: int) -> None:
        """Write ``data``, of which the last ``output`` bytes are the runner's (the rest: our note)."""
        if copied.error:
            return
        taken, error = _write_all(log, data)
        copied.kept += max(0, taken - (len(data) - output))
        if error is not None:
            copied.error = error.strerror or str(error)

    while chunk := await stream.read(1 << 16):
        copied.read += len(chunk)
        recent += chunk
        del recent[:-LAST_BYTES]
        copied.recent = bytes(recent)
        if copied.meant < cap:
            head, chunk = chunk[: cap - copied.meant], chunk[cap - copied.meant :]
            copied.meant += len(head)
            put(head, len(head))
        if chunk:
            last += chunk
            del last[:-tail]
    if copied.read > cap:
        copied.meant += len(last)
        note = (
            f"\n[benchtui] this log reached its cap of {cap} bytes: {copied.read - cap - len(last)} bytes "
            f"were dropped; the last {len(last)} bytes follow\n"
        )
        put(note.encode() + bytes(last), len(last))
    return copied


def run_processes(token: str, root: int | None = None) -> list[int]:
    """The processes of a run, read from /proc: each whose environment holds ``token``, and each
    descendant of ``root`` (which finds one started with an environment of its own while its parent
    lives). Never this process; only this user's (all, for root); [] where there is no /proc."""
    if not token:
        return []
    me, uid = os.getpid(), os.getuid()
    needle = f"\0{RUN_TOKEN_ENV}={token}\0".encode()
    found: set[int] = set()
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            if uid and os.stat(f"/proc/{name}").st_uid != uid:
                continue
            if root is not None:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(pid)
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in b"\0" + fh.read(ENVIRON_READ_BYTES):
                    found.add(pid)
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue
    stack, seen = ([root], {root}) if root is not None else ([], set())
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return sorted(found | (seen - {root}))


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
    """Start a runner with its stdout/stderr copied to ``log`` (``copy_log``) and events to a pipe.

    ``cwd`` is the session's folder; without one (doctor, tests), the runner package's own folder.
    """
    launcher = launcher or LocalLauncher()
    return await _spawn(
        launcher.command(python, args),
        log,
        lambda fd: runner_env(fd, env_extra),
        cwd or runner_root(RUNNER_PACKAGE),
    )


async def start_command(argv: list[str], log: IO[bytes], cwd: str | os.PathLike[str]) -> RunnerProcess:
    """``benchtui watch``: start the user's own command as a runner is started (its own process group,
    stdin from /dev/null, output copied to ``log``, the event pipe passed), but in the user's folder
    and with their environment (``command_env``). OSError when it cannot be started."""
    return await _spawn(argv, log, command_env, cwd)


async def _spawn(
    argv: list[str],
    log: IO[bytes],
    env_for: Callable[[int], dict[str, str]],
    cwd: str | os.PathLike[str],
) -> RunnerProcess:
    """A child with an event pipe (its write end's number given to ``env_for``) and its output copied to ``log``."""
    read_fd, write_fd = os.pipe()
    # The runner's output goes through a pipe of our own, not asyncio's: asyncio's process.wait()
    # waits for its pipes to close too, and a grandchild holding stdout would then hold the run.
    out_read, out_write = os.pipe()
    token = f"{os.getpid()}-{secrets.token_hex(8)}"
    try:
        env = env_for(write_fd)
        env.pop(RUN_TOKEN_ENV, None)  # a benchtui inside a watched command: its runs get tokens of their own
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.DEVNULL,  # a child sharing the terminal would race the TUI for keys
            stdout=out_write,  # copied to ``log`` with a cap (copy_log)
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            start_new_session=True,  # own process group: stop and kill reach its children too
            env={RUN_TOKEN_ENV: token, **env},  # first: found at the start of every descendant's environment
            cwd=cwd,
        )
    except BaseException:
        os.close(read_fd)
        os.close(out_read)
        raise
    finally:
        os.close(write_fd)  # the child holds the only write ends: EOF means it (and its children) are gone
        os.close(out_write)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    output = asyncio.StreamReader()
    out_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(output), os.fdopen(out_read, "rb", buffering=0)
    )
    copied = LogCopy()
    log_task = asyncio.ensure_future(copy_log(output, log, copied=copied))
    return RunnerProcess(process, reader, transport, log_task, out_transport, log_copy=copied, token=token)


async def collect_events(proc: RunnerProcess) -> list[dict[str, Any]]:
    """Every well-formed event until the run is over (``RunnerProcess.lines``), then its exit."""
    events: list[dict[str, Any]] = []
    async for line in proc.lines():
        try:
            events.append(parse_line(line or b""))
        except Malformed:
            pass
    await proc.process.wait()
    await proc.finish_log()
    return events


def config_args(config: dict[str, Any]) -> list[str]:
    return ["--config", json.dumps(config, separators=(",", ":"))]
