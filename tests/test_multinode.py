"""Two nodes on this machine, with the frameworks' own multi-node engines (issue 33): two real benchtui
processes, node 0 and node 1, meeting on 127.0.0.1, each starting its real runner (torchrun's c10d rendezvous
over Gloo, MultiWorkerMirroredStrategy from TF_CONFIG, jax.distributed + keras.distribution.DataParallel).
One session, at 1 node and at 2 (``--scaling --devices 1``), on node 0: both nodes' processes named, and the
scaling efficiency at 2 workers is throughput(2) / (2 x throughput(1)), as the events give them. A small
model on one thread each: the three take about a minute and a half each on two cores."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support import ROOT, read_events

SMALL = (
    "--models resnet50 --image-size 32 --samples 16 --batch-size 4 --epochs 2 --runs 1 --device cpu"
    " --no-nvml --threads 1 --scaling --devices 1 --nodes 2 --node-timeout 120"
).split()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _node(framework: str, rank: int, port: int, root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchtui", "run", "--headless", "--frameworks", framework, *SMALL]
        + ["--node-rank", str(rank), "--rendezvous", f"127.0.0.1:{port}", "--sessions-dir", str(root)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BENCHTUI_RENDEZVOUS_TIMEOUT_S": "60"},
        start_new_session=True,
    )


def _throughput(events: list[dict[str, Any]], run: str) -> float:
    """Node 0's images/s in ``run``: its samples over its time, epochs after the first (the study's figure)."""
    epochs = [e for e in events if e["type"] == "epoch" and e.get("run") == run and "node" not in e]
    later = [e for e in epochs if e["epoch"] > 1]
    return sum(e["samples"] for e in later) / sum(e["seconds"] for e in later)


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tensorflow", "keras-jax"])
def test_two_nodes_train_one_session_and_its_efficiency_over_nodes(tmp_path: Path, framework: str) -> None:
    port = _free_port()
    procs = [_node(framework, rank, port, tmp_path / f"node{rank}") for rank in (0, 1)]
    try:
        outs = [proc.communicate(timeout=600) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-3000:] + outs[1][1][-3000:]
    (session,) = [p for p in (tmp_path / "node0").iterdir()]
    meta = json.loads((session / "session.json").read_text())
    events = read_events(session)
    starts = [e for e in events if e["type"] == "run_start"]
    one = f"001-{framework}-resnet50-n1x1-1"
    two = f"002-{framework}-resnet50-n2x1-1"
    assert sorted((e["run"], e.get("node", 0)) for e in starts) == [(one, 0), (two, 0), (two, 1)]
    # Both nodes' processes named: each runner's pid and host, each benchtui's in session.json.
    (own,) = [e for e in starts if e["run"] == two and "node" not in e]
    (theirs,) = [e for e in starts if e["run"] == two and e.get("node") == 1]
    assert own["nodes"] == theirs["nodes"] == 2 and own["pid"] != theirs["pid"]
    assert own["host"] == theirs["host"] == socket.gethostname()
    assert [(n["node"], n["pid"]) for n in meta["nodes"]] == [(0, procs[0].pid), (1, procs[1].pid)]
    hellos = {e.get("node", 0): e for e in events if e["type"] == "hello" and e["run"] == two}
    for node in (0, 1):
        distributed = hellos[node]["settings"]["distributed"]
        assert (distributed["nodes"], distributed["node_rank"]) == (2, node)
        assert distributed["link"]
    # Each node trained the run to its end: its epochs and its run_end arrived, relayed.
    ends = {e.get("node", 0): e for e in events if e["type"] == "run_end" and e["run"] == two}
    assert ends[0]["status"] == ends[1]["status"] == "ok"
    assert [
        e["epoch"] for e in events if e["type"] == "epoch" and e["run"] == two and e.get("node") == 1
    ] == [1, 2]
    # The efficiency at 2 workers, from the events, and as the summary gives it.
    efficiency = _throughput(events, two) / (2 * _throughput(events, one))
    summary = json.loads((session / "summary.json").read_text())
    (curve,) = [c for c in summary["scaling"] if c["framework"] == framework]
    points = {(p.get("nodes", 1), p["devices"]): p for p in curve["points"]}
    assert set(points) == {(1, 1), (2, 1)}
    assert points[(1, 1)]["images_per_s"] == pytest.approx(_throughput(events, one))
    assert points[(2, 1)]["images_per_s"] == pytest.approx(_throughput(events, two))
    assert points[(2, 1)]["efficiency"] == pytest.approx(efficiency)
    assert 0 < efficiency < 2


@pytest.mark.slow
def test_node_1_killed_mid_run_fails_the_run_on_node_0_and_leaves_no_process(tmp_path: Path) -> None:
    """PyTorch across two nodes: node 1's runner (torchrun and its worker) killed while it trains; node 0's
    run fails with node 1's reason, not with the Gloo error its own worker meets, and nothing is left."""
    import psutil

    port = _free_port()
    long = [a for a in SMALL if a != "--scaling"] + ["--epochs", "100"]
    procs = []
    for rank in (0, 1):
        argv = [sys.executable, "-m", "benchtui", "run", "--headless", "--frameworks", "torch", *long]
        argv += ["--node-rank", str(rank), "--rendezvous", f"127.0.0.1:{port}"]
        argv += ["--sessions-dir", str(tmp_path / f"node{rank}")]
        procs.append(
            subprocess.Popen(
                argv,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )  # fmt: skip
        )
    family: set[int] = set()
    try:
        deadline = time.monotonic() + 300
        while True:  # node 1's first epoch relayed to node 0: both train
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            sessions = list((tmp_path / "node0").glob("*/events.jsonl"))
            events = read_events(sessions[0].parent) if sessions else []
            if any(e["type"] == "epoch" and e.get("node") == 1 for e in events):
                break
            time.sleep(0.5)
        for proc in procs:
            family |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        (theirs,) = [e["pid"] for e in events if e["type"] == "run_start" and e.get("node") == 1]
        os.kill(theirs, signal.SIGKILL)
        outs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert [p.returncode for p in procs] == [1, 1], outs[0][1][-3000:]
    events = read_events(sessions[0].parent)
    (end,) = [e for e in events if e["type"] == "run_end" and "node" not in e]
    assert end["status"] == "failed"
    assert end["reason"].startswith(f"node 1 ({socket.gethostname()}): ") and "SIGKILL" in end["reason"]
    assert not [pid for pid in family if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
