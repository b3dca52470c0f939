"""Every runner sends each training epoch's loss (issue 36), on every framework, read where the runner
already waits for the device at the epoch's end.

A learning rate of 1e6 (the plan refuses it: the runner is driven directly, with its RunConfig, as the
other runner tests do) makes the loss non-finite, which the wire carries as "nan" / "inf" / "-inf"; a
normal one gives finite losses that change. The network is a small MLP on float tensors (a user's own
model, the same on every side), so a test's time is the framework's start. The stand-in runner's losses
(tests/fake_runner.py) are read by the real engine.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.running.launcher import EXTRA_PATH_ENV
from benchtui_runners import catalog, wire
from support import run_runner, stand_in_session
from test_fakegpu_faithful import FAKEGPU, read_waits
from test_gpu_path import H100, calls

FRAMEWORKS = ["torch", "tensorflow", "keras-jax", "keras-torch"]

MLP = '''
"""A small MLP on float tensors, the same in PyTorch and Keras."""


def build_torch(input_shape, num_classes):
    from torch import nn

    (width,) = input_shape
    return nn.Sequential(
        nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, num_classes)
    )


def build_keras(input_shape, num_classes):
    import keras

    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(num_classes),
        ]
    )
'''


@pytest.fixture
def mlp(tmp_path: Path) -> dict[str, Any]:
    """The MLP's definition (a user's own model, as ``--model-def`` gives it)."""
    package = tmp_path / "lossnets"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mlp.py").write_text(textwrap.dedent(MLP))
    return catalog.check_definition(
        {
            "paths": [str(tmp_path)],
            "name": "lossmlp",
            "input": "tensor",
            "shape": [16],
            "builders": {"torch": "lossnets.mlp:build_torch", "keras": "lossnets.mlp:build_keras"},
        }
    )


def train(
    definition: dict[str, Any], framework: str, learning_rate: float, **extra: Any
) -> list[dict[str, Any]]:
    """Two epochs of 16 steps (batch 4) on the CPU; the events the parent's reader passed."""
    config = {
        "framework": framework,
        "model": "lossmlp",
        "model_def": definition,
        "num_classes": 10,
        "samples": 64,
        "batch_size": 4,
        "epochs": 2,
        "threads": 1,
        "device": "cpu",
        "learning_rate": learning_rate,
        **extra,
    }
    events = run_runner(config)
    assert events and events[-1]["type"] == "done", [e for e in events if e["type"] == "error"]
    return events


def epochs_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    epochs = [e for e in events if e["type"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    return epochs


def sent(epoch: dict[str, Any]) -> dict[str, float]:
    """The epoch's loss fields, read back as numbers."""
    return {k: wire.loss_float(epoch[k]) for k in wire.LOSS_FIELDS if k in epoch}


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_learning_rate_of_1e6_sends_a_non_finite_loss(mlp: dict[str, Any], framework: str) -> None:
    epochs = epochs_of(train(mlp, framework, 1e6))
    losses = [sent(e) for e in epochs]
    # Every epoch says its loss; the wire's words for what JSON cannot hold, and nothing else.
    assert all("loss" in e for e in losses), epochs
    assert all(isinstance(e["loss"], float) or e["loss"] in wire.NON_FINITE for e in epochs), epochs
    assert not math.isfinite(losses[-1]["loss"]), epochs
    if framework == "torch":  # the smallest and largest step loss too (a NaN step makes both NaN)
        assert all({"loss_min", "loss_max"} <= e.keys() for e in losses)
        assert not math.isfinite(losses[-1]["loss_max"])
    else:  # Keras: fit's epoch mean only (a step's logs hold the running mean)
        assert not any({"loss_min", "loss_max"} & e.keys() for e in losses)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_normal_learning_rate_sends_finite_losses_that_change(mlp: dict[str, Any], framework: str) -> None:
    epochs = epochs_of(train(mlp, framework, 0.05))
    losses = [sent(e) for e in epochs]
    assert all(isinstance(e["loss"], float) and math.isfinite(e["loss"]) and e["loss"] > 0 for e in epochs)
    # It trains: 64 samples seen twice at lr 0.05, the second epoch's mean loss is below the first's.
    assert losses[1]["loss"] < losses[0]["loss"], losses
    if framework == "torch":
        for e in losses:
            assert e["loss_min"] < e["loss"] < e["loss_max"], e  # 16 steps whose losses differ


@pytest.mark.slow
def test_inference_sends_no_loss(mlp: dict[str, Any]) -> None:
    epochs = epochs_of(train(mlp, "torch", 0.05, task="inference"))
    assert not any(set(wire.LOSS_FIELDS) & e.keys() for e in epochs), epochs


# -- PyTorch on a (faked) GPU: the loss is read after the epoch's wait, which is not one more --------------
@pytest.mark.slow
@pytest.mark.parametrize(("precision", "data"), [("fp32", "device"), ("amp-bf16", "host")])
def test_pytorch_reads_its_losses_between_epochs_and_adds_no_wait(
    mlp: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, precision: str, data: str
) -> None:
    """Under the faithful GPU fake (tests/fakegpu), which records every host wait with where the run's
    clock was: the device is synchronised as before (once per window, once as each epoch begins, once
    after the build), nothing in a step waits, and the losses cost one copy to the host per epoch, once
    the epoch's end has waited for its last step."""
    log, waits_file = tmp_path / "fakegpu.log", tmp_path / "waits.jsonl"
    monkeypatch.setenv(EXTRA_PATH_ENV, str(FAKEGPU))
    monkeypatch.setenv("BENCHTUI_FAKE_GPU", "torch")
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_NAMES", H100)
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_LOG", str(log))
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_WAITS", str(waits_file))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    events = train(mlp, "torch", 0.05, device="cuda", data=data, precision=precision, window_s=60.0)
    hello = next(e for e in events if e["type"] == "hello")
    assert hello["device"]["type"] == "cuda"
    epochs = epochs_of(events)
    assert all(math.isfinite(sent(e)["loss"]) for e in epochs)
    windows = [e for e in events if e["type"] == "batch"]
    syncs = [c for c in calls(log) if c.startswith("torch.cuda.synchronize")]
    # One after the build, one as each epoch begins, one per window: the clock's, and no more.
    assert len(syncs) == 1 + len(epochs) + len(windows), (len(syncs), len(epochs), len(windows))
    waits = read_waits(waits_file)
    inside = [w for w in waits if w["where"] == "step"]
    assert not inside, inside
    # Before the first epoch: the build's copies to the device. From then on, the one host read of each
    # epoch's [sum, min, max], after the epoch's wait, and nothing else.
    reads = [w for w in waits if w["where"] != "outside" and w["kind"] != "synchronize"]
    assert [(w["where"], w["epoch"], w["what"]) for w in reads] == [
        ("between", 1, "Tensor.tolist"),
        ("between", 2, "Tensor.tolist"),
    ], reads


# -- the stand-in runner: the parent reads its "nan" as a loss that is not finite ----------------------
def test_the_parent_reads_a_stand_ins_nan_as_a_loss_that_is_not_finite(tmp_path: Path) -> None:
    _, path, engine = stand_in_session(tmp_path, [[2.3, 2.1, 2.5], "nan"])
    (run,) = engine.model.runs.values()
    assert run.malformed == 0  # every epoch line passed the parent's reader
    epochs = [json.loads(line) for line in path.joinpath("events.jsonl").read_text().splitlines()]
    sent_losses = [e.get("loss") for e in epochs if e["type"] == "epoch"]
    assert sent_losses == [2.3, "nan", "nan"]  # recorded as the wire sent them
    assert run.losses[1] == 2.3 and run.loss_mins[1] == 2.1 and run.loss_maxs[1] == 2.5
    assert math.isnan(run.losses[2]) and math.isnan(run.losses[3])


@pytest.mark.slow
def test_the_tally_folds_its_steps_and_keeps_the_mean_min_and_max(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch's LossTally holds at most FOLD step losses (the rest folded on the device): the epoch's
    figures are the same however its steps were folded, and one NaN step makes all three NaN."""
    import torch

    from benchtui_runners.torch_runner import LossTally

    monkeypatch.setattr(LossTally, "FOLD", 3)
    values = [4.0, 1.5, 2.0, 8.0, 0.25, 3.0, 5.0, 2.5, 1.0, 6.0]
    tally = LossTally()
    for v in values:
        tally.add(torch.tensor(v, requires_grad=True) * 1)  # a loss with a graph: kept detached
        assert len(tally.pending) < 3
    assert all(not t.requires_grad for t in tally.pending)
    read = tally.read()
    assert read == pytest.approx({"loss": sum(values) / len(values), "loss_min": 0.25, "loss_max": 8.0})
    assert LossTally().read() == {}  # no step: no loss
    nan = LossTally()
    for v in (1.0, float("nan"), 2.0, 3.0, 4.0):
        nan.add(torch.tensor(v))
    assert all(math.isnan(x) for x in nan.read().values())
