"""A signal at any moment of a headless run or watch ends it cleanly: no session folder yet, or a session
that says "interrupted", and exit 130; never a session left "running" by a process killed outright
(issue 29, item 13).

The real CLI in a fresh process, with the hostile stand-in runner (tests/data/hostile_runner.py). The
moment between the session folder's creation and the start of the engine's event loop is held open by
the test: the process's stderr is a pipe the test filled beforehand, so its first line on stderr (said
after the folder is made, before the loop starts) blocks until the test reads it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchtui.core.store.session import list_sessions, load_session
from support import benchtui
from test_faults import hostile_python

__all__ = ["hostile_python"]  # the fixture, imported for pytest


def _run_args(root: Path, python: Path) -> list[str]:
    args = ["run", "--headless", "--frameworks", "torch,tensorflow", "--models", "resnet50"]
    args += ["--image-size", "32", "--samples", "16", "--batch-size", "8", "--epochs", "1", "--runs", "1"]
    args += ["--device", "cpu", "--no-nvml", "--sessions-dir", str(root)]
    return args + [f"--python={fw}={python}" for fw in ("torch", "tensorflow")]


def _watch_args(root: Path) -> list[str]:
    return ["watch", "--headless", "--no-nvml", "--sessions-dir", str(root), "--", "sleep", "300"]


def _full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full: the first write to its write end blocks until the read end is read."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        while True:
            os.write(write, b"\0" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(write, True)  # shared with the child: its writes must block, not fail
    return read, write


def _drain(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _session_folders(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.is_dir()] if root.exists() else []


def _assert_interrupted_before_any_run(session: Path) -> None:
    meta = json.loads((session / "session.json").read_text())
    assert meta["status"] == "interrupted" and meta["finished"], meta
    events = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "session_end" and events[-1]["status"] == "interrupted"
    assert events[-1]["lines"] == len(events)
    loaded = load_session(session)
    assert loaded.warnings == [], loaded.warnings
    assert loaded.model.runs and {r.status for r in loaded.model.runs.values()} == {"skipped"}
    assert [s["status"] for s in list_sessions(session.parent)] == ["interrupted"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("command", ["run", "watch"])
def test_a_signal_between_the_folder_and_the_event_loop_ends_the_session_interrupted(
    tmp_path: Path, hostile_python: Path, command: str, sig: signal.Signals
) -> None:
    root = tmp_path / "sessions"
    args = _run_args(root, hostile_python) if command == "run" else _watch_args(root)
    read, write = _full_pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtui", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=write,
        cwd=tmp_path,
    )
    os.close(write)
    try:
        deadline = time.monotonic() + 60
        # The folder made: its first line on stderr, before the loop, blocks on the full pipe.
        while not any((p / "session.json").exists() for p in _session_folders(root)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
            time.sleep(0.02)
        proc.send_signal(sig)
        err = _drain(read).lstrip(b"\0").decode(errors="replace")
        code = proc.wait(timeout=60)
    finally:
        os.close(read)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 130 and "Traceback" not in err, (code, err[-2000:])
    (session,) = _session_folders(root)
    _assert_interrupted_before_any_run(session)
    assert f"benchtui: session interrupted before it started: {session}" in err.splitlines()


def test_a_signal_at_once_leaves_no_folder_or_an_interrupted_session(
    tmp_path: Path, hostile_python: Path
) -> None:
    """Sent as soon as the process exists: it lands while Python starts or the plan is read."""
    root = tmp_path / "sessions"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtui", *_run_args(root, hostile_python)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[-2000:]
    folders = _session_folders(root)
    if folders:
        (session,) = folders
        assert proc.returncode == 130
        _assert_interrupted_before_any_run(session)
    else:  # killed before Python ran benchtui's code (-SIGTERM), or stopped by its handler (130)
        assert proc.returncode in (-signal.SIGTERM, 130), (proc.returncode, err)


def test_a_signal_while_a_runner_runs_interrupts_the_session(tmp_path: Path, hostile_python: Path) -> None:
    root = tmp_path / "sessions"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtui", *_run_args(root, hostile_python)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BENCHTUI_HOSTILE": "stall"},  # stops itself (SIGSTOP) after its first step
    )
    try:
        deadline = time.monotonic() + 60
        while b'"first_batch"' not in b"".join(p.read_bytes() for p in root.glob("*/events.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    (session,) = _session_folders(root)
    loaded = load_session(session)
    assert loaded.meta["status"] == "interrupted" and loaded.warnings == []
    statuses = [r.status for r in loaded.model.runs.values()]
    assert statuses == ["interrupted", "skipped"], statuses
    shown = benchtui("sessions", "--sessions-dir", str(root))
    assert shown.returncode == 0 and "interrupted" in shown.stdout


def test_a_command_run_in_this_process_puts_the_handlers_it_found_back(tmp_path: Path) -> None:
    from benchtui.cli import main

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.getsignal(sig) for sig in stops}
    assert main(["run", "--headless", "--runs", "0", "--no-nvml", "--sessions-dir", str(tmp_path)]) == 2
    assert main(["watch", "--headless", "--interval", "0", "--sessions-dir", str(tmp_path)]) == 2
    assert {sig: signal.getsignal(sig) for sig in stops} == before
    assert list(tmp_path.iterdir()) == []
