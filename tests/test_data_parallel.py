"""Data parallel through the frameworks' own engines, on the CPU, with real processes.

PyTorch: torchrun + DistributedDataParallel over Gloo (two ranks, each a process); TensorFlow:
MirroredStrategy over two logical CPU devices; Keras on JAX: DataParallel over two forced host
devices. Each trains a small model at 1 and 2 devices in one session (``--scaling``), and the
session has its per-device figures and a scaling efficiency. A rank that is killed fails the run
with that rank's reason; a rank stopped inside a collective is caught by the watchdog; neither
leaves a process behind. Bad input is one line and exit 2, with nothing started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from support import ROOT, benchtui, only_session, read_events

SMALL = "--models resnet50 --image-size 32 --batch-size 4 --device cpu --no-nvml --threads 1".split()


def _summary(root: Path) -> dict[str, Any]:
    return json.loads((only_session(root) / "summary.json").read_text())


@pytest.mark.slow
def test_each_framework_trains_data_parallel_and_the_session_has_its_scaling(tmp_path: Path) -> None:
    proc = benchtui(
        "run",
        "--headless",
        "--frameworks",
        "torch,tensorflow,keras-jax",
        *SMALL,
        "--samples",
        "32",
        "--epochs",
        "2",
        "--runs",
        "1",
        "--devices",
        "2",
        "--scaling",
        "--sessions-dir",
        str(tmp_path),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    session = only_session(tmp_path)
    summary = _summary(tmp_path)
    events = list(read_events(session))
    starts = {e["run"]: e for e in events if e["type"] == "run_start"}
    assert sorted(e.get("devices", 1) for e in starts.values()) == [1, 1, 1, 2, 2, 2]
    for framework in ("torch", "tensorflow", "keras-jax"):
        runs = {r for r, e in starts.items() if e["framework"] == framework and e.get("devices") == 2}
        (run,) = runs
        hello = next(e for e in events if e["type"] == "hello" and e["run"] == run)
        # Each framework's own engine, over two devices, with a global batch of 2 x 4.
        assert hello["config"]["replicas"] == 2 and hello["samples_per_epoch"] == 32
        batch = next(e for e in events if e["type"] == "batch" and e["run"] == run)
        assert batch["samples"] == 8
        row = next(r for r in summary["rows"] if r["framework"] == framework)
        assert row["devices"] == 2 and row["global_batch"] == 8 and len(row["per_device"]) == 2
        curve = next(c for c in summary["scaling"] if c["framework"] == framework)
        assert [p["devices"] for p in curve["points"]] == [1, 2]
        two = curve["points"][1]
        assert two["efficiency"] == pytest.approx(
            two["images_per_s"] / (2 * curve["points"][0]["images_per_s"])
        )
        assert 0 < two["efficiency"] < 2
    wiring = summary["distributed"]
    assert "DistributedDataParallel" in wiring["torch"]["engine"] and wiring["torch"]["backend"] == "gloo"
    assert "overlap" in wiring["torch"] and "bucket" in wiring["torch"]
    assert "MirroredStrategy" in wiring["tensorflow"]["engine"]
    assert wiring["tensorflow"]["devices"] == ["/cpu:0", "/cpu:1"]
    assert "DataParallel" in wiring["keras-jax"]["engine"] and len(wiring["keras-jax"]["devices"]) == 2
    # PyTorch's ranks are separate processes: each one's step times, gathered per window.
    ranks = [e for e in events if e["type"] == "ranks"]
    assert ranks and all(len(e["seconds"]) == 2 for e in ranks)
    torch_row = next(r for r in summary["rows"] if r["framework"] == "torch")
    assert all(d["step_s"] > 0 for d in torch_row["per_device"])
    assert torch_row["straggler"] >= 1.0
    shown = benchtui("show", str(session))
    assert shown.returncode == 0 and "efficien" in shown.stdout.lower()


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchtui",
            "run",
            "--headless",
            "--frameworks",
            "torch",
            *SMALL,
            "--samples",
            "64",
            "--epochs",
            "50",
            "--runs",
            "1",
            "--devices",
            "2",
            "--sessions-dir",
            str(tmp_path),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _ranks_once_training(tmp_path: Path, timeout: float = 240) -> dict[int, psutil.Process]:
    """The torchrun workers by rank, once rank 0 has reported a window of epoch 2."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        sessions = (
            [p for p in tmp_path.iterdir() if (p / "events.jsonl").is_file()] if tmp_path.exists() else []
        )
        if not sessions:
            continue
        events = list(read_events(sessions[0]))
        start = next((e for e in events if e["type"] == "run_start"), None)
        if start is None or not any(e["type"] == "ranks" and e["epoch"] >= 2 for e in events):
            continue
        workers: dict[int, psutil.Process] = {}
        for child in psutil.Process(start["pid"]).children(recursive=True):
            rank = child.environ().get("RANK")
            if rank is not None and "benchtui_runners" in " ".join(child.cmdline()):
                workers[int(rank)] = child
        if len(workers) == 2:
            return workers
    raise AssertionError("the two ranks never started training")


def _gone(processes: list[psutil.Process], timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes):
            return True
        time.sleep(0.2)
    return False


def _run_end(tmp_path: Path) -> dict[str, Any]:
    events = read_events(only_session(tmp_path))
    return next(e for e in events if e["type"] == "run_end")


@pytest.mark.slow
def test_a_rank_killed_mid_run_fails_the_run_with_its_reason_and_leaves_no_process(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    try:
        workers = _ranks_once_training(tmp_path)
        relay = workers[0].parent()
        os.kill(workers[1].pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, out[-2000:]
    end = _run_end(tmp_path)
    assert end["status"] == "failed"
    assert "rank 1 was killed by SIGKILL" in end["reason"]
    assert _gone([*workers.values(), relay])


@pytest.mark.slow
def test_a_rank_stuck_in_a_collective_is_stopped_by_the_watchdog_with_the_whole_group(tmp_path: Path) -> None:
    proc = _start(tmp_path, "--stall-timeout", "45")  # room for start-up on a loaded machine
    try:
        workers = _ranks_once_training(tmp_path)
        relay = workers[0].parent()
        os.kill(workers[1].pid, signal.SIGSTOP)  # rank 0 then waits in its next all-reduce
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, out[-2000:]
    end = _run_end(tmp_path)
    assert end["status"] == "failed" and end["reason"].startswith("stalled")
    assert _gone([*workers.values(), relay])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--devices", "4096"], "--devices must be at most 1,024"),
        (["--devices", "64", "--samples", "4096"], "on the CPU each replica needs a core of its own"),
        (["--devices", "0,1,1"], "--devices names GPU 1 twice"),
        (["--devices", "2", "--global-batch", "9"], "--global-batch 9 does not divide among 2 devices"),
        (["--devices", "4", "--scaling", "--global-batch", "6"], "does not divide among 4 devices"),
        (["--devices", "2", "--frameworks", "keras-torch"], "keras-torch cannot train data parallel"),
        (["--devices", "2", "--task", "inference"], "data-parallel training"),
        (["--devices", "2", "--batch-size", "auto"], "--batch-size auto searches one device"),
        (["--scaling"], "--scaling measures 1, 2, 4 ... N devices"),
        (["--devices", "two"], "a count or a list of GPU indices"),
        (["--devices", "2", "--python", "torch=/usr/bin/python3"], "no torchrun beside /usr/bin/python3"),
    ],
)
def test_bad_data_parallel_input_is_one_line_and_exit_2_with_nothing_started(
    tmp_path: Path, args: list[str], said: str
) -> None:
    base = ["--frameworks", "torch", "--models", "resnet50", "--image-size", "32", "--samples", "64"]
    base += ["--batch-size", "4", "--device", "cpu", "--no-nvml"]
    if "--frameworks" in args:
        base = base[2:]
    if "--batch-size" in args:
        base.remove("--batch-size")
        base.remove("4")
    proc = benchtui("run", "--headless", *base, *args, "--sessions-dir", str(tmp_path / "s"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "s").exists()  # nothing started, nothing written
