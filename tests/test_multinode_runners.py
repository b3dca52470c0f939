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
import os
import socket
import sys
import tempfile
import textwrap
import time
from typing import Any

import pytest

from benchtui.core.running.launcher import collect_events, config_args, launcher_for, start_runner
from benchtui_runners import catalog
from benchtui_runners.config import RENDEZVOUS_TIMEOUT_ENV, RunConfig, tf_config

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
        assert hellos[1]["settings"]["distributed"]["cluster"] == nodes[0].cluster
    if framework == "keras-jax":
        assert "gloo" in hellos[0]["settings"]["distributed"]["link"]
        assert len(hellos[0]["settings"]["distributed"]["devices"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "alone"), [("torch", 1), ("tensorflow", 0), ("keras-jax", 1)])
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
