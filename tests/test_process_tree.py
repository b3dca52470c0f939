"""Nothing a runner or a watched command starts outlives its run, not even a process that left its
process group with ``setsid`` (issue 29, item 15).

Stand-ins built by the tests, started by the real CLI in a fresh process: a watched command, and a
runner started through ``--python`` (it forks, then becomes tests/data/hostile_runner.py). Each forks a
child that calls ``os.setsid()`` (so the group's signals miss it), writes its pid and sleeps. After
benchtui has finished, that pid must be gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support import benchtui, only_session

HOSTILE = Path(__file__).parent / "data" / "hostile_runner.py"

#: Forks a child that leaves the process group (``setsid``) and sleeps, then goes on as MODE says:
#:   exit    the parent exits at once        linger  the parent sleeps too (stopped from outside)
#:   daemon  the child forks again and exits (a daemon's double fork: the sleeper's parent is gone)
#:   hold    the escaped child keeps the event pipe and the output open
#: The sleeper's pid and its start time go to the file ESCAPED_PID_FILE names.
ESCAPE = textwrap.dedent(
    """
    import os, sys, time

    mode, pid_file = os.environ["ESCAPE_MODE"], os.environ["ESCAPED_PID_FILE"]
    child = os.fork()
    if child == 0:
        os.setsid()
        if mode == "daemon" and os.fork():
            os._exit(0)
        if mode != "hold":
            fd = os.environ.get("BENCHTUI_EVENT_FD")
            if fd:
                os.close(int(fd))
            null = os.open(os.devnull, os.O_RDWR)
            for std in (0, 1, 2):
                os.dup2(null, std)
        with open(f"/proc/{os.getpid()}/stat") as fh:
            started = fh.read().rsplit(")", 1)[1].split()[19]
        with open(pid_file + ".tmp", "w") as fh:
            fh.write(f"{os.getpid()} {started}")
        os.replace(pid_file + ".tmp", pid_file)
        time.sleep(300)
        os._exit(0)
    while not os.path.exists(pid_file):
        time.sleep(0.01)
    if mode == "daemon":
        os.waitpid(child, 0)
    print("escaped", flush=True)
    if mode == "linger":
        time.sleep(300)
    """
)


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _escaped(pid_file: Path) -> tuple[int, str]:
    pid, started = pid_file.read_text().split()
    return int(pid), started


def _alive(escaped: tuple[int, str]) -> bool:
    return _started(escaped[0]) == escaped[1]


def _gone_soon(escaped: tuple[int, str], timeout: float = 5.0) -> bool:
    """Whether the process is gone within ``timeout`` (a SIGKILL is delivered at once, its reaping soon)."""
    deadline = time.monotonic() + timeout
    while _alive(escaped):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def escaper(tmp_path: Path):  # a generator fixture
    """(the script, the pid file); whatever it left running is killed after the test."""
    script = tmp_path / "escape.py"
    script.write_text(ESCAPE)
    pid_file = tmp_path / "escaped.pid"
    yield script, pid_file
    if pid_file.exists():
        escaped = _escaped(pid_file)
        if _alive(escaped):
            with contextlib.suppress(ProcessLookupError):
                os.kill(escaped[0], signal.SIGKILL)


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _watch_args(root: Path) -> list[str]:
    return ["watch", "--headless", "--no-nvml", "--sessions-dir", str(root), "--interval", "0.2"]


@pytest.mark.parametrize("mode", ["exit", "daemon", "hold"])
def test_a_watched_commands_escaped_child_ends_with_the_watch(
    tmp_path: Path, escaper: tuple[Path, Path], mode: str
) -> None:
    script, pid_file = escaper
    root = tmp_path / "sessions"
    env = {"ESCAPE_MODE": mode, "ESCAPED_PID_FILE": str(pid_file)}
    out = benchtui(*_watch_args(root), "--", sys.executable, str(script), env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert _gone_soon(_escaped(pid_file)), (
        f"the escaped child of a watched command ({mode}) outlived the watch"
    )
    assert only_session(root).is_dir()


def test_stopping_a_watch_ends_the_escaped_child_too(tmp_path: Path, escaper: tuple[Path, Path]) -> None:
    script, pid_file = escaper
    root = tmp_path / "sessions"
    env = {**os.environ, "ESCAPE_MODE": "linger", "ESCAPED_PID_FILE": str(pid_file)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtui", *_watch_args(root), "--", sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(pid_file, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err, err[-2000:]
    assert _gone_soon(_escaped(pid_file)), "the escaped child outlived the stopped watch"


@pytest.fixture
def escaping_runner(tmp_path: Path, escaper: tuple[Path, Path]) -> tuple[Path, Path]:
    """An interpreter for --python: forks the escaping child, then runs the hostile stand-in runner."""
    script, pid_file = escaper
    runner = tmp_path / "escaping_runner.py"
    body = script.read_text().replace('print("escaped", flush=True)', "")
    runner.write_text(
        body + f"\nos.execv(sys.executable, [sys.executable, {str(HOSTILE)!r}, *sys.argv[1:]])\n"
    )
    python = tmp_path / "escaping-python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {runner} "$@"\n')
    python.chmod(0o755)
    return python, pid_file


@pytest.mark.parametrize("mode", ["exit", "hold"])
def test_a_runners_escaped_child_ends_with_its_run(
    tmp_path: Path, escaping_runner: tuple[Path, Path], mode: str
) -> None:
    python, pid_file = escaping_runner
    root = tmp_path / "sessions"
    args = ["run", "--headless", "--frameworks", "torch", "--models", "resnet50", "--image-size", "32"]
    args += ["--samples", "16", "--batch-size", "8", "--epochs", "1", "--runs", "1", "--device", "cpu"]
    args += ["--no-nvml", "--sessions-dir", str(root), f"--python=torch={python}"]
    out = benchtui(*args, env={"ESCAPE_MODE": mode, "ESCAPED_PID_FILE": str(pid_file)}, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert _gone_soon(_escaped(pid_file)), f"a runner's escaped child ({mode}) outlived its run"
    assert only_session(root).is_dir()


def test_a_runs_processes_are_found_by_token_and_by_descent(tmp_path: Path) -> None:
    """The runner, its child (both carry the run's token) and that child's child, started with an empty
    environment: the token finds the first two wherever they are; descent from the runner finds the
    third while its parents live."""
    from benchtui.core.running.launcher import RUN_TOKEN_ENV, run_processes

    token = f"test-{os.getpid()}-{time.monotonic_ns()}"
    pid_file = tmp_path / "pids"
    inner = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env={{}})
        with open({str(pid_file)!r} + ".tmp", "w") as fh:
            fh.write(f"{{os.getpid()}} {{child.pid}}")
        os.replace({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
        time.sleep(300)
        """
    )
    outer = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {inner!r}])"
    runner = subprocess.Popen(
        [sys.executable, "-c", outer], env={**os.environ, RUN_TOKEN_ENV: token}, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists():
            assert runner.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        child, grandchild = map(int, pid_file.read_text().split())
        assert run_processes(token) == sorted([runner.pid, child])  # the grandchild has no token
        assert run_processes(token, runner.pid) == sorted([runner.pid, child, grandchild])
        assert run_processes("") == [] and run_processes(token + "x", None) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
