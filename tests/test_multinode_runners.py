"""Each framework's own multi-node engine, driven by the runners alone (issue 33): two "nodes" on this
machine, each a runner started as node k's benchtui starts it (its own event pipe; torch through
``python -m benchtui_runners.torchrun`` as ``TorchrunLauncher`` builds the command; tf.keras with the
``TF_CONFIG`` the parent writes), meeting on 127.0.0.1.

PyTorch: torchrun's c10d rendezvous (node 0 hosts its store) and DDP over Gloo; tf.keras:
MultiWorkerMirroredStrategy; Keras on JAX: jax.distributed and keras.distribution.DataParallel. Each
node's lead sends the whole stream: hello with the wiring (nodes, node rank, its ranks, the link),
the same steps per epoch, global batches of batch x 2, every epoch, done. A node whose peer never comes
fails within the rendezvous timeout with one line naming the address; Keras on torch is refused.
A tiny MLP on one thread: the whole file takes about two minutes on two cores.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.running.launcher import collect_events, config_args, launcher_for, start_runner
from benchtui_runners import catalog
from benchtui_runners.config import RENDEZVOUS_TIMEOUT_ENV, ClusterError, RunConfig, tf_config
from benchtui_runners.protocol import FIFO_ENV, EventWriter
from support import ROOT

MLP = """
def build_torch(config):
    from torch import nn

    (width,) = config["input_shape"]
    return nn.Sequential(nn.Linear(width, 16), nn.ReLU(), nn.Linear(16, config["num_classes"]))


def build_keras(config):
    import keras

    return keras.Sequential(
        [
            keras.Input(config["input_shape"]),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(config["num_classes"]),
        ]
    )
"""

ENGINES = {
    "torch": "torchrun c10d + DDP",
    "tensorflow": "tf.distribute.MultiWorkerMirroredStrategy",
    "keras-jax": "jax.distributed + keras.distribution.DataParallel",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A user's tiny MLP on 8-wide tensors: the smallest model every framework builds."""
    root = tmp_path_factory.mktemp("models")
    (root / "tinynets").mkdir()
    (root / "tinynets" / "__init__.py").write_text("")
    (root / "tinynets" / "mlp.py").write_text(textwrap.dedent(MLP))
    return catalog.check_definition(
        {
            "name": "mlp",
            "input": "tensor",
            "shape": [8],
            "builders": {"torch": "tinynets.mlp:build_torch", "keras": "tinynets.mlp:build_keras"},
            "paths": [str(root)],
        }
    )


def configs(framework: str, mlp: dict[str, Any], nodes: int = 2) -> list[RunConfig]:
    """Each node's RunConfig of one run, as node 0's benchtui and node k's would make them."""
    rendezvous, workers = f"127.0.0.1:{free_port()}", [f"127.0.0.1:{free_port()}" for _ in range(nodes)]
    return [
        RunConfig(
            framework=framework,
            model="mlp",
            model_def=mlp,
            samples=16,
            batch_size=4,
            epochs=2,
            device="cpu",
            threads=1,
            num_classes=10,
            run_id=f"001-{framework}-mlp-n{nodes}x1-1",
            nodes=nodes,
            node_rank=rank,
            rendezvous=rendezvous,
            cluster=workers,
            rendezvous_id=f"benchtui-test-{os.getpid()}-{rendezvous.rsplit(':', 1)[1]}",
        )
        for rank in range(nodes)
    ]


async def _node(config: RunConfig, env: dict[str, str], timeout: float) -> tuple[list[dict[str, Any]], str]:
    """One node's runner, started as the engine starts it: its events and the end of its log."""
    extra = dict(env)
    if config.framework == "tensorflow":
        extra["TF_CONFIG"] = tf_config(config)
    with tempfile.TemporaryFile() as log:
        proc = await start_runner(
            sys.executable, config_args(config.to_dict()), log, launcher_for(config), env_extra=extra
        )
        try:
            events = await asyncio.wait_for(collect_events(proc), timeout)
        finally:
            proc.close()  # the whole process group: nothing outlives the test
        log.seek(0)
        return events, log.read().decode(errors="replace")[-3000:]


def run_nodes(
    nodes: list[RunConfig], timeout: float = 150, env: dict[str, str] | None = None
) -> list[tuple[list[dict[str, Any]], str]]:
    async def go() -> list[tuple[list[dict[str, Any]], str]]:
        return list(await asyncio.gather(*(_node(c, env or {}, timeout) for c in nodes)))

    return asyncio.run(go())


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tensorflow", "keras-jax"])
def test_two_nodes_train_one_run_through_the_frameworks_own_engine(
    framework: str, mlp: dict[str, Any]
) -> None:
    nodes = configs(framework, mlp)
    results = run_nodes(nodes)
    hellos, firsts = [], []
    for rank, (events, log) in enumerate(results):
        types = [e["type"] for e in events]
        assert "error" not in types and types[-1] == "done", f"node {rank}: {events[-3:]}\n{log}"
        (hello,) = [e for e in events if e["type"] == "hello"]
        hellos.append(hello)
        wiring = hello["settings"]["distributed"]
        assert wiring["engine"] == ENGINES[framework]
        assert (wiring["nodes"], wiring["node_rank"]) == (2, rank)
        assert wiring["link"] and isinstance(wiring["link"], str)
        first, count = wiring["ranks"]
        assert count == 1 and 0 <= first < 2
        firsts.append(first)
        # The global batch is batch x 2 nodes: 16 samples make 2 steps per epoch on each node.
        assert hello["steps_per_epoch"] == 2 and hello["samples_per_epoch"] == 16
        batches = [e for e in events if e["type"] == "batch"]
        assert batches and all(b["samples"] == 8 for b in batches)
        assert sum(b["steps"] for b in batches) == 4  # every step of both epochs, on each node
        assert [e["epoch"] for e in events if e["type"] == "epoch"] == [1, 2]
        # Each lead counts a step's FLOPs after its timed epochs (tf.keras: on a copy of the network made
        # outside MultiWorkerMirroredStrategy, whose variables are unreadable outside a replica).
        (flops,) = [e for e in events if e["type"] == "flops"]
        assert (flops.get("per_step") or 0) > 0 and not flops.get("reason"), json.dumps(flops)
    assert sorted(firsts) == [0, 1]  # each node's processes hold their own global ranks
    if framework == "torch":
        assert "Gloo over TCP" in hellos[0]["settings"]["distributed"]["link"]
        for events, _ in results:  # every lead gathers every global rank's pace
            assert all(len(e["seconds"]) == 2 for e in events if e["type"] == "ranks")
    else:
        # One model trained over both nodes: the loss Keras reports is the global batch's, the same on both.
        losses = [[e["loss"] for e in events if e["type"] == "epoch"] for events, _ in results]
        assert losses[0] == pytest.approx(losses[1])
    if framework == "tensorflow":
        assert "collectives over gRPC" in hellos[0]["settings"]["distributed"]["link"]
        assert "keras-team/keras#20585" in hellos[0]["settings"]["distributed"]["keras_patch"]
        assert hellos[1]["settings"]["distributed"]["cluster"] == nodes[0].cluster
    if framework == "keras-jax":
        assert "gloo" in hellos[0]["settings"]["distributed"]["link"]
        assert len(hellos[0]["settings"]["distributed"]["devices"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "alone"), [("torch", 0), ("torch", 1), ("tensorflow", 0), ("keras-jax", 1)]
)
def test_a_node_whose_peer_never_comes_fails_in_one_line_naming_the_address(
    framework: str, alone: int, mlp: dict[str, Any]
) -> None:
    """Node ``alone`` starts, the other never does: within the rendezvous timeout (here 4 s, plus the
    framework's start-up) the run fails with one error line that names where it waited."""
    node = configs(framework, mlp)[alone]
    started = time.monotonic()
    ((events, log),) = run_nodes([node], timeout=90, env={RENDEZVOUS_TIMEOUT_ENV: "4"})
    took = time.monotonic() - started
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1, f"{events[-3:]}\n{log}"
    message = errors[0]["message"]
    address = node.cluster[1 - alone] if framework == "tensorflow" else node.rendezvous
    assert address in message and "\n" not in message and "within 4 s" in message, message
    assert "done" not in [e["type"] for e in events]
    assert took < 60, took


@pytest.mark.slow
def test_keras_on_torch_is_refused_on_several_nodes(mlp: dict[str, Any]) -> None:
    node = configs("keras-torch", mlp)[0]
    ((events, log),) = run_nodes([node], timeout=60)
    errors = [e for e in events if e["type"] == "error"]
    assert [e["kind"] for e in errors] == ["unavailable"], log
    assert "several nodes" in errors[0]["message"] and "JAX only" in errors[0]["message"]
    assert "hello" not in [e["type"] for e in events]


# -- the pieces, without a framework ---------------------------------------------------------------
def test_tf_config_is_every_nodes_worker_by_rank_and_this_nodes_index() -> None:
    config = RunConfig(framework="tensorflow", model="resnet50", nodes=2, node_rank=1, cluster=["a:1", "b:2"])
    assert json.loads(tf_config(config)) == {
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1},
    }
    assert check_tf_config_with(config, tf_config(config))["task"]["index"] == 1


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (None, "TF_CONFIG in the runner's environment"),
        ("{not json", "TF_CONFIG is not JSON"),
        (
            '{"cluster": {"worker": ["a:1", "c:3"]}, "task": {"type": "worker", "index": 1}}',
            "not the run's nodes",
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}',
            "not this node's",
        ),
    ],
)
def test_a_tf_config_missing_or_other_than_the_runs_is_one_line(raw: str | None, says: str) -> None:
    config = RunConfig(framework="tensorflow", model="resnet50", nodes=2, node_rank=1, cluster=["a:1", "b:2"])
    with pytest.raises(ClusterError, match=re.escape(says)) as caught:
        check_tf_config_with(config, raw)
    assert "\n" not in str(caught.value)


def check_tf_config_with(config: RunConfig, raw: str | None) -> dict[str, Any]:
    from benchtui_runners.keras_runner import check_tf_config

    saved = os.environ.pop("TF_CONFIG", None)
    try:
        if raw is not None:
            os.environ["TF_CONFIG"] = raw
        return check_tf_config(config)
    finally:
        os.environ.pop("TF_CONFIG", None)
        if saved is not None:
            os.environ["TF_CONFIG"] = saved


def test_torchrun_meets_at_the_runs_rendezvous_with_node_0_hosting_its_store() -> None:
    from benchtui_runners.torchrun import torchrun_args

    for rank in (0, 1):
        config = RunConfig(
            framework="torch",
            model="resnet50",
            nodes=2,
            node_rank=rank,
            rendezvous="h0:29500",
            rendezvous_id="r-7",
        )
        command = launcher_for(config).command("python", ["--config", "{}"])
        assert command[:3] == ["python", "-m", "benchtui_runners.torchrun"]
        wrapper = command[3 : command.index("--")]
        assert wrapper[wrapper.index("--rdzv-endpoint") + 1] == "h0:29500"
        assert wrapper[wrapper.index("--rdzv-id") + 1] == "r-7"
        import argparse

        args = argparse.Namespace(
            nnodes=2, node_rank=rank, rdzv_endpoint="h0:29500", rdzv_id="r-7", nproc_per_node=1
        )
        torchrun = torchrun_args(args, ["--config", "{}"], timeout=45)
        conf = torchrun[torchrun.index("--rdzv-conf") + 1]
        assert conf == f"is_host={1 if rank == 0 else 0},join_timeout=45"
        assert torchrun[torchrun.index("--rdzv-backend") + 1] == "c10d"
    one = launcher_for(RunConfig(framework="torch", model="resnet50", replicas=2)).command("python", [])
    assert "--rdzv-id" not in one and "--nnodes" not in one  # one node: --standalone, as before


@pytest.mark.parametrize(
    ("rank", "local_rank", "leads"), [(0, 0, True), (1, 1, False), (2, 0, True), (3, 1, False)]
)
def test_each_nodes_local_rank_0_sends_the_stream_and_the_others_only_their_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank: int, local_rank: int, leads: bool
) -> None:
    fifo = tmp_path / "events"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    monkeypatch.setenv(FIFO_ENV, str(fifo))
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    writer = EventWriter.from_env()
    try:
        assert writer.lead is leads
        writer.phase("import", "start")
        writer.error("exception", "boom")
        lines = [json.loads(line) for line in os.read(reader, 1 << 16).splitlines()]
    finally:
        writer.close()
        os.close(reader)
    assert [e["type"] for e in lines] == (["phase", "error"] if leads else ["error"])
    error = lines[-1]
    if rank:  # another node's lead or a worker: its error names its rank
        assert error["message"] == f"rank {rank}: boom" and error["rank"] == rank
    else:
        assert error["message"] == "boom" and "rank" not in error


def test_a_deadline_says_why_in_one_line_and_kills_a_process_stuck_past_it(tmp_path: Path) -> None:
    """The watch is a forked child: it acts even while the runner's main thread holds the GIL in native
    code (TensorFlow's cluster start), where no thread of the runner could."""
    script = tmp_path / "stuck.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, sys, time
            from benchtui_runners.protocol import EventWriter, deadline

            writer = EventWriter(int(sys.argv[1]))
            with deadline(writer, 0.5, "the rendezvous at h0:1 did not complete within 0.5 s"):
                pass  # in time: nothing happens
            with deadline(writer, 0.5, "the rendezvous at h0:2 did not complete within 0.5 s"):
                time.sleep(30)
            """
        )
    )
    read_end, write_end = os.pipe()
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(script), str(write_end)],
        pass_fds=(write_end,),
        env={**os.environ, "PYTHONPATH": str(ROOT / "runners")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        lines = [json.loads(line) for line in pipe.read().splitlines()]
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - started < 20
    assert [(e["type"], e["message"]) for e in lines] == [
        ("error", "the rendezvous at h0:2 did not complete within 0.5 s")
    ]
    assert "h0:2" in proc.stderr
