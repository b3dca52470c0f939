"""Several nodes on this machine (issue 33): two real benchtui processes, node 0 and node 1, meeting on
127.0.0.1 at a free port, each starting a stand-in runner (no framework) exactly as it starts a real one
(``--python tensorflow=<a script>``): one session on node 0 holding node 1's runs; and the faults (plans that
differ, a node that never comes, a node or its runner killed mid-run, node 0 killed, the port in use)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchtui.core.running.launcher import LocalLauncher
from support import ROOT, benchtui, read_events

#: A runner that needs no framework: a clean run of its --config (steps of STANDIN_STEP_S), its hello's
#: settings naming where it was told to meet the other nodes (and TF_CONFIG); with STANDIN_MODE=hang it
#: waits after its first epoch until it is stopped, with STANDIN_MODE=fail it exits with code 3 there. Each
#: writes its pid to STANDIN_PIDS.
STANDIN = """#!{python}
import json, os, sys, time
fd = int(os.environ["BENCHTUI_EVENT_FD"])
config = json.loads(sys.argv[sys.argv.index("--config") + 1])
open(os.path.join(os.environ["STANDIN_PIDS"], str(os.getpid())), "w").close()
def event(type_, **fields):
    os.write(fd, (json.dumps({{"v": 1, "type": type_, "t": time.monotonic(), **fields}}) + "\\n").encode())
bs = int(config["batch_size"]); steps = max(1, int(config["samples"]) // bs)
step_s = float(os.environ.get("STANDIN_STEP_S", "0.01"))
meeting = {{k: config.get(k) for k in ("nodes", "node_rank", "rendezvous", "cluster", "rendezvous_id")}}
meeting["tf_config"] = os.environ.get("TF_CONFIG")
event("hello", pid=os.getpid(), framework=config["framework"], versions={{"python": "3"}},
      device={{"type": "cpu", "name": "stand-in"}}, settings={{"meeting": meeting}},
      steps_per_epoch=steps, samples_per_epoch=steps * bs)
for epoch in range(1, int(config["epochs"]) + 1):
    for step in range(1, steps + 1):
        time.sleep(step_s)
        event("batch", epoch=epoch, step=step, seconds=step_s, samples=bs)
    event("epoch", epoch=epoch, seconds=step_s * steps, samples=steps * bs)
    if os.environ.get("STANDIN_MODE") == "hang":
        time.sleep(600)
    if os.environ.get("STANDIN_MODE") == "fail":
        sys.exit(3)
event("done", peak_bytes=1 << 20, source="stand-in")
"""

PLAN = (
    "run --headless --frameworks tensorflow --models resnet50 --image-size 32 --samples 16 --batch-size 8"
    " --epochs 2 --device cpu --threads 1 --no-nvml --interval 0.2"
).split()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (its parent, killed here, never waited for it) has ended
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def joined(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a connection to node 0's ``port``."""
    import psutil

    try:
        connections = psutil.Process(pid).net_connections("tcp")
    except psutil.Error:
        return False
    return any(c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED for c in connections)


class Nodes:
    """Node processes started by a test, all stopped (with every stand-in runner) when it ends."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.pids = tmp / "pids"
        self.pids.mkdir()
        self.python = tmp / "standin-python"
        self.python.write_text(STANDIN.format(python=sys.executable))
        self.python.chmod(0o755)
        self.procs: list[subprocess.Popen[str]] = []

    def start(
        self,
        rank: int,
        *extra: str,
        timeout: float = 20,
        env: dict[str, str] | None = None,
        nodes: int = 2,
        folder: str = "",
    ) -> subprocess.Popen[str]:
        args = [
            *PLAN,
            "--python",
            f"tensorflow={self.python}",
            "--nodes",
            str(nodes),
            "--node-rank",
            str(rank),
        ]
        args += ["--rendezvous", f"127.0.0.1:{self.port}", "--node-timeout", f"{timeout:g}"]
        args += ["--sessions-dir", str(self.tmp / (folder or f"node{rank}")), *extra]
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchtui", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "STANDIN_PIDS": str(self.pids), "COLUMNS": "200", **(env or {})},
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def runners(self) -> list[int]:
        return [int(p.name) for p in self.pids.iterdir()]

    def wait_runners(self, n: int, within: float = 30) -> list[int]:
        deadline = time.monotonic() + within
        while len(self.runners()) < n:
            assert time.monotonic() < deadline, f"{len(self.runners())} runner(s) started, {n} expected"
            time.sleep(0.05)
        return self.runners()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        for pid in self.runners():
            if alive(pid):
                os.killpg(os.getpgid(pid), signal.SIGKILL)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    started = Nodes(tmp_path)
    try:
        yield started
    finally:
        started.stop()


def finish(proc: subprocess.Popen[str], within: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=within)
    return proc.returncode, out, err


def session_of(root: Path) -> Path:
    (path,) = [p for p in root.iterdir() if p.is_dir()]
    return path


def errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("benchtui: error:")]


def test_node_1s_run_is_recorded_on_node_0_tagged_with_its_node(nodes: Nodes) -> None:
    head = nodes.start(0, "--runs", "2")
    other = nodes.start(1, "--runs", "2")
    code0, out0, err0 = finish(head)
    code1, _, err1 = finish(other)
    assert (code0, code1) == (0, 0), err0 + err1
    # Node 0 says where the plan trains, beside the nodes that joined.
    (line,) = [x for x in err0.splitlines() if x.startswith("nodes · ")]
    assert line.startswith("nodes · 2: node 0 at 127.0.0.1:") and line.endswith(
        " · runs on 2 nodes × 1 device"
    )
    session = session_of(nodes.tmp / "node0")
    meta = json.loads((session / "session.json").read_text())
    assert meta["status"] == "complete"
    events = read_events(session)
    runs = [e["run"] for e in events if e["type"] == "run_start" and "node" not in e]
    assert runs == ["001-tensorflow-resnet50-n2x1-1", "002-tensorflow-resnet50-n2x1-2"]
    for run in runs:
        own = [e for e in events if e.get("run") == run and "node" not in e]
        theirs = [e for e in events if e.get("run") == run and e.get("node") == 1]
        # Node 1's runner: its pid and host from node 1's run_start, its every event relayed.
        (start1,) = [e for e in theirs if e["type"] == "run_start"]
        (start0,) = [e for e in own if e["type"] == "run_start"]
        assert start1["pid"] != start0["pid"] and start1["pid"] in nodes.runners()
        assert start0["pid"] in nodes.runners()
        assert start1["host"] == start0["host"] == socket.gethostname()
        assert start0["nodes"] == start1["nodes"] == 2
        assert [e["type"] for e in theirs].count("batch") == 4
        assert [e["type"] for e in theirs].count("epoch") == 2
        (end1,) = [e for e in theirs if e["type"] == "run_end"]
        (end0,) = [e for e in own if e["type"] == "run_end"]
        assert end1["status"] == end0["status"] == "ok"
        assert events.index(end1) < events.index(end0)  # node 0's run ends once node 1's has
        # Where each node's framework was told to meet: the same rendezvous, TF_CONFIG by node rank.
        meet = {
            n: e["settings"]["meeting"]
            for e in events
            if e.get("run") == run and e["type"] == "hello"
            for n in [e.get("node", 0)]
        }
        assert meet[0]["rendezvous"] == meet[1]["rendezvous"] and meet[0]["rendezvous"].startswith(
            "127.0.0.1:"
        )
        assert meet[0]["rendezvous_id"] == meet[1]["rendezvous_id"] != ""
        assert [meet[0]["node_rank"], meet[1]["node_rank"]] == [0, 1]
        assert meet[0]["cluster"] == meet[1]["cluster"] and len(meet[0]["cluster"]) == 2
        for n in (0, 1):
            tf = json.loads(meet[n]["tf_config"])
            assert tf == {"cluster": {"worker": meet[0]["cluster"]}, "task": {"type": "worker", "index": n}}
    # Node 1's sampler's samples, relayed: with no NVML, its CPU view.
    assert any(e["type"] == "gpu" and e.get("node") == 1 for e in events)
    assert [n["node"] for n in meta["nodes"]] == [0, 1]
    assert meta["nodes"][1]["pid"] == other.pid and meta["nodes"][0]["pid"] == head.pid
    logs = Path(meta["nodes"][1]["logs"])
    assert logs == (nodes.tmp / "node1" / f"{session.name}-node1").absolute()
    assert sorted(p.name for p in logs.iterdir()) == [f"{run}.log" for run in runs]
    # Node 1 keeps no session of its own: only its runners' logs.
    assert [p.name for p in (nodes.tmp / "node1").iterdir()] == [logs.name]
    assert "001-tensorflow-resnet50-n2x1-1 on node 1" in err1 and "node 0's session complete" in err1
    assert "ResNet50" in out0
    assert not [pid for pid in nodes.runners() if alive(pid)]


def test_plans_that_differ_are_refused_on_both_nodes_naming_the_difference(nodes: Nodes) -> None:
    head = nodes.start(0, "--runs", "1")
    other = nodes.start(1, "--runs", "1", "--epochs", "3")
    code0, _, err0 = finish(head)
    code1, _, err1 = finish(other)
    line = "node 1's plan differs from node 0's: epochs 3 on node 1, 2 on node 0"
    assert (code0, code1) == (2, 2)
    assert errors(err0) == errors(err1) == [f"benchtui: error: {line}"]
    assert "Traceback" not in err0 + err1
    assert not (nodes.tmp / "node0").exists() or not list((nodes.tmp / "node0").iterdir())
    assert not nodes.runners()


def test_a_rank_that_joins_twice_is_refused_on_every_node(nodes: Nodes) -> None:
    three = ("--runs", "1", "--samples", "24")  # a global batch of 3 x 8
    head = nodes.start(0, *three, nodes=3)
    first = nodes.start(1, *three, nodes=3)
    deadline = time.monotonic() + 20
    while not joined(first.pid, nodes.port):  # the first node 1 is in (node 0 waits for node 2)
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    again = nodes.start(1, *three, nodes=3, folder="again")
    results = [finish(proc) for proc in (head, first, again)]
    line = "benchtui: error: node 1 joined twice (from 127.0.0.1 and another)"
    assert [code for code, _, _ in results] == [2, 2, 2]
    assert [errors(err) for _, _, err in results] == [[line]] * 3
    assert not list((nodes.tmp / "node0").iterdir()) and not nodes.runners()


def test_a_node_that_never_comes_fails_node_0_within_the_timeout(nodes: Nodes) -> None:
    started = time.monotonic()
    code, _, err = finish(nodes.start(0, "--runs", "1", timeout=3))
    took = time.monotonic() - started
    assert code == 2
    assert errors(err) == [
        f"benchtui: error: node 1 did not join the rendezvous at 127.0.0.1:{nodes.port} within 3 s"
    ]
    assert 3 <= took < 15
    assert not list((nodes.tmp / "node0").iterdir())  # no session written
    with socket.socket() as sock:  # nothing left listening
        sock.bind(("", nodes.port))


def test_a_node_that_cannot_reach_node_0_says_where_it_looked(nodes: Nodes) -> None:
    code, _, err = finish(nodes.start(1, "--runs", "1", timeout=2))
    assert code == 2
    assert errors(err) == [
        f"benchtui: error: cannot reach node 0 at 127.0.0.1:{nodes.port} within 2 s: connection refused"
    ]


def test_the_rendezvous_port_in_use_is_one_line(nodes: Nodes) -> None:
    with socket.socket() as sock:
        sock.bind(("", nodes.port))
        sock.listen()
        code, _, err = finish(nodes.start(0, "--runs", "1"))
    assert code == 2
    assert errors(err) == [
        f"benchtui: error: cannot listen on 127.0.0.1:{nodes.port}: address already in use"
    ]


def test_node_1s_runner_killed_fails_the_run_on_node_0_with_its_reason(nodes: Nodes) -> None:
    hang = {"STANDIN_MODE": "hang"}
    head = nodes.start(0, "--runs", "1", env=hang)
    other = nodes.start(1, "--runs", "1", env=hang)
    pids = nodes.wait_runners(2)
    session = session_of(nodes.tmp / "node0")
    deadline = time.monotonic() + 30
    while True:  # both runners in their first epoch's wait
        events = read_events(session)
        if sum(e["type"] == "epoch" for e in events) == 2:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    (theirs,) = [e["pid"] for e in events if e["type"] == "run_start" and e.get("node") == 1]
    assert theirs in pids
    os.kill(theirs, signal.SIGKILL)
    code0, _, err0 = finish(head, within=30)
    code1, _, _ = finish(other, within=30)
    assert (code0, code1) == (1, 1), err0
    events = read_events(session)
    host = socket.gethostname()
    (end0,) = [e for e in events if e["type"] == "run_end" and "node" not in e]
    assert (end0["status"], end0["reason"]) == (
        "failed",
        f"node 1 ({host}): runner was killed by SIGKILL before finishing",
    )
    assert json.loads((session / "session.json").read_text())["status"] == "failed"
    assert not [pid for pid in pids if alive(pid)]  # node 0's waiting runner was stopped


def test_node_0s_runner_failing_stops_node_1s_run(nodes: Nodes) -> None:
    head = nodes.start(0, "--runs", "1", env={"STANDIN_MODE": "fail"})
    other = nodes.start(1, "--runs", "1", env={"STANDIN_MODE": "hang"})
    code0, _, err0 = finish(head, within=30)
    code1, _, err1 = finish(other, within=30)
    assert (code0, code1) == (1, 1), err0 + err1
    session = session_of(nodes.tmp / "node0")
    ends = {e.get("node", 0): e for e in read_events(session) if e["type"] == "run_end"}
    why = "runner exited with code 3 before finishing"
    assert (ends[0]["status"], ends[0]["reason"]) == ("failed", why)
    assert (ends[1]["status"], ends[1]["reason"]) == ("stopped", f"stopped by node 0: node 0: {why}")
    assert not [pid for pid in nodes.runners() if alive(pid)]


def test_a_run_across_nodes_is_headless(nodes: Nodes) -> None:
    proc = benchtui(
        *[a for a in PLAN if a != "--headless"],
        *("--nodes", "2", "--node-rank", "0", "--rendezvous", f"127.0.0.1:{nodes.port}"),
        "--sessions-dir",
        str(nodes.tmp / "node0"),
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "benchtui: error: a run across nodes is headless: add --headless; replay the session in the app afterwards"
    ]
    assert not (nodes.tmp / "node0").exists()


def test_node_1_interrupted_fails_the_run_on_node_0_with_its_reason(nodes: Nodes) -> None:
    head = nodes.start(0, "--runs", "2", env={"STANDIN_MODE": "hang"})
    other = nodes.start(1, "--runs", "2", env={"STANDIN_MODE": "hang"})
    pids = nodes.wait_runners(2)
    other.send_signal(signal.SIGINT)
    code1, _, err1 = finish(other, within=30)
    code0, _, err0 = finish(head, within=30)
    assert (code0, code1) == (1, 130), err0 + err1
    host = socket.gethostname()
    events = read_events(session_of(nodes.tmp / "node0"))
    ends = [
        (e["run"], e["status"], e["reason"]) for e in events if e["type"] == "run_end" and "node" not in e
    ]
    first, later = "001-tensorflow-resnet50-n2x1-1", "002-tensorflow-resnet50-n2x1-2"
    assert ends == [
        (first, "failed", f"node 1 ({host}): session interrupted"),
        (later, "failed", f"node 1 ({host}) was lost: its connection closed"),
    ]
    assert not [pid for pid in pids if alive(pid)]


def test_node_1_lost_fails_this_run_and_every_later_one(nodes: Nodes) -> None:
    head = nodes.start(0, "--runs", "2", env={"STANDIN_MODE": "hang"})
    other = nodes.start(1, "--runs", "2", env={"STANDIN_MODE": "hang"})
    pids = nodes.wait_runners(2)
    session = session_of(nodes.tmp / "node0")
    # Node 1's machine goes away: its benchtui and its runner, at once.
    (theirs,) = [p for p in pids if p not in _children(head.pid)]
    os.killpg(other.pid, signal.SIGKILL)
    os.killpg(os.getpgid(theirs), signal.SIGKILL)
    code0, _, err0 = finish(head, within=30)
    assert code0 == 1, err0
    lost = f"node 1 ({socket.gethostname()}) was lost: its connection closed"
    ends = {e["run"]: e for e in read_events(session) if e["type"] == "run_end" and "node" not in e}
    assert [(e["status"], e["reason"]) for e in ends.values()] == [("failed", lost)] * 2
    assert not [pid for pid in pids if alive(pid)]


def test_node_0_lost_stops_node_1s_runner_and_says_where_it_was(nodes: Nodes) -> None:
    head = nodes.start(0, "--runs", "1", env={"STANDIN_MODE": "hang"})
    other = nodes.start(1, "--runs", "1", env={"STANDIN_MODE": "hang"})
    pids = nodes.wait_runners(2)
    ours = [p for p in pids if p in _children(head.pid)]
    os.killpg(head.pid, signal.SIGKILL)  # node 0's benchtui (its runner has a group of its own)
    code1, _, err1 = finish(other, within=30)
    assert code1 == 1
    assert errors(err1) == [
        f"benchtui: error: node 0 at 127.0.0.1:{nodes.port} was lost: its connection closed"
    ]
    assert not [pid for pid in pids if pid not in ours and alive(pid)]  # node 1's runner is gone


def _children(pid: int) -> set[int]:
    """Every process below ``pid`` (by /proc's parent links)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - out
        out |= frontier
    return out


class FakeNode:
    """Node 1 spoken by the test itself, line by line, to send node 0 what a real node never would."""

    def __init__(self, port: int) -> None:
        deadline = time.monotonic() + 20
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "node 0 never listened"
                time.sleep(0.05)
        self.lines = self.sock.makefile("rb")

    def send(self, message: dict[str, object] | bytes) -> None:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.sock.sendall(raw + b"\n")

    def receive(self) -> dict[str, object]:
        line = self.lines.readline()
        assert line, "node 0 closed the connection"
        answer = json.loads(line)
        assert isinstance(answer, dict)
        return answer


def test_what_another_node_sends_is_checked_again_and_tagged_on_node_0(nodes: Nodes) -> None:
    from benchtui.cli import build_parser
    from benchtui.commands.run import plan_from_args

    head = nodes.start(0, "--runs", "1")
    args = [*PLAN, "--python", f"tensorflow={nodes.python}", "--nodes", "2", "--runs", "1"]
    plan = plan_from_args(build_parser().parse_args(args)).to_dict()
    node = FakeNode(nodes.port)
    skew = 1000.0  # node 1's clock runs 1000 s behind node 0's: its events are moved onto node 0's
    node.send(
        {"op": "hello", "node": 1, "host": "fake", "pid": 4242, "plan": plan, "t": time.monotonic() - skew}
    )
    assert node.receive()["op"] == "welcome"
    prepare = node.receive()
    assert prepare["op"] == "prepare"
    run = str(prepare["run"])
    node.send({"op": "ready", "run": run, "port": 1})
    assert node.receive()["op"] == "go"
    sent = time.monotonic()
    at = sent - skew
    common = {"run": run, "t": at}
    node.send({"op": "event", "event": {"type": "run_start", **common, "framework": "tensorflow",
                                          "model": "resnet50", "index": 1, "pid": 4243, "python": "x",
                                          "nodes": 2, "host": "fake", "node": 7}})  # fmt: skip
    node.send({"op": "event", "event": {"v": 1, "type": "batch", **common, "epoch": 1, "step": 1,
                                          "seconds": "slow", "samples": 8}})  # fmt: skip
    node.send({"op": "event", "event": {"v": 1, "type": "epoch", "run": "999-not-a-run", "t": at, "epoch": 1,
                                          "seconds": 0.1, "samples": 8}})  # fmt: skip
    node.send(b"this is no message")
    node.send({"op": "event", "event": {"v": 1, "type": "epoch", **common, "epoch": 1, "seconds": 0.1,
                                          "samples": 8}})  # fmt: skip
    node.send({"op": "event", "event": {"type": "run_end", **common, "status": "ok", "reason": "",
                                          "returncode": 0, "malformed": 0}})  # fmt: skip
    assert node.receive() == {"op": "end", "status": "complete"}
    code, _, err = finish(head)
    assert code == 0, err
    events = read_events(session_of(nodes.tmp / "node0"))
    theirs = [e for e in events if e.get("node") is not None and e["type"] != "gpu"]
    assert [e["type"] for e in theirs] == ["run_start", "epoch", "run_end"]
    assert all(e["node"] == 1 for e in theirs) and theirs[0]["pid"] == 4243
    assert all(abs(e["t"] - sent) < 10 for e in theirs)
    (end0,) = [e for e in events if e["type"] == "run_end" and "node" not in e]
    assert end0["status"] == "ok" and end0["malformed"] == 3  # the batch, the other run's epoch, the line
    node.sock.close()


class StandIn(LocalLauncher):
    """The stand-in runner (``STANDIN``, written to ``python``) for runs started in this process."""

    def __init__(self, python: Path) -> None:
        self.python = python

    def command(self, python: str, args: list[str]) -> list[str]:
        return [str(self.python), *args]


def test_each_nodes_gpus_are_summed_in_its_own_run_end(nodes: Nodes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both nodes in this process (node 0's channel in its thread, node 1 on the same loop), each with a
    fake GPU: a run on several nodes names its one GPU in every sample, so each node's run_end carries that
    GPU's sums (node 0's loading reads node k's GPUs from its run_end: its samples may be cut)."""
    from benchtui.core.plan.nodes import Cluster
    from benchtui.core.running.cluster import Follower, Head, HeadEngine
    from benchtui.core.running.sampler import Sampler
    from benchtui.core.store.session import SessionWriter
    from support import small_plan
    from test_sampler import FakeNVML

    monkeypatch.setenv("STANDIN_PIDS", str(nodes.pids))
    monkeypatch.setenv("STANDIN_STEP_S", "0.1")
    plan = small_plan(frameworks=["tensorflow"], runs=1, epochs=2, nodes=2).validate()
    place = {"host": "127.0.0.1", "port": nodes.port, "timeout_s": 20.0}

    async def both() -> tuple[str, str, Path]:
        head = Head(Cluster(2, 0, **place), plan)  # type: ignore[arg-type]
        try:
            head.listen()
            follower = Follower(
                plan,
                Cluster(2, 1, **place),  # type: ignore[arg-type]
                nodes.tmp / "node1",
                sampler=Sampler(0.05, lambda sample: None, nvml=FakeNVML()),
                launcher=StandIn(nodes.python),
            )
            joining = asyncio.ensure_future(follower.join())
            await asyncio.to_thread(head.gather)
            writer = SessionWriter.create(plan, nodes.tmp / "node0")
            head.welcome(writer.path.name)
            await joining
            sampler = Sampler(0.05, lambda sample: None, nvml=FakeNVML())
            engine = HeadEngine(plan, writer, head, sampler=sampler, launcher=StandIn(nodes.python))
            status0, status1 = await asyncio.gather(engine.run(), follower.run())
            return status0, status1, writer.path
        finally:
            head.close()

    status0, status1, session = asyncio.run(both())
    assert (status0, status1) == ("complete", "complete")
    events = read_events(session)
    ends = {e.get("node", 0): e for e in events if e["type"] == "run_end"}
    for node in (0, 1):
        (gpu,) = ends[node]["per_gpu"]
        assert gpu["index"] == 0 and gpu["samples"] >= 1 and gpu["util"] == 97
    assert any(e["type"] == "gpu" and e.get("node") == 1 and e.get("devices") == [0] for e in events)


def test_node_k_relays_a_sample_as_a_session_writes_it(tmp_path: Path) -> None:
    """A reading NVML gives as NaN is null on the wire to node 0, as in a session: it never stops node k."""
    from benchtui.core.running.cluster import Channel, RelayWriter
    from support import small_plan

    sent: list[str] = []

    class Wire(Channel):
        def __init__(self) -> None:  # no connection: what would be sent is kept
            pass

        def send_raw(self, text: str) -> None:
            sent.append(text)

    writer = RelayWriter(tmp_path, small_plan(), Wire())
    writer.append({"type": "gpu", "t": 1.0, "run": None, "gpus": [{"index": 0, "power_w": float("nan")}]})
    writer.append_raw('{"run":"r","v":1,"type":"batch"}')
    assert json.loads(sent[0]) == {
        "op": "event",
        "event": {"type": "gpu", "t": 1.0, "run": None, "gpus": [{"index": 0, "power_w": None}]},
    }
    assert json.loads(sent[1]) == {"op": "event", "event": {"run": "r", "v": 1, "type": "batch"}}
    writer.finish("complete", {})
    writer.append({"type": "gpu", "t": 2.0, "run": None})
    assert len(sent) == 2 and list(tmp_path.iterdir()) == []  # nothing after the end, no session written
