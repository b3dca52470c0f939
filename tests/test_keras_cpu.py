"""Epoch starts on a CPU: every runner reports each epoch's time to its first batch, and tf.keras on
host arrays keeps one tf.data iterator for the whole run (issue 30).

A default ``model.fit(x, y)`` makes a new tf.data iterator at every epoch's start and drops the
last one there; TensorFlow 2.21 then waits, idle, for the dropped iterator's autotuning thread to
wake from its timed sleep: 0 to 5 s at the start of some epochs of about 5 s (gdb: the main thread
in ``RootDataset::Iterator::~Iterator`` waiting on the ``tf_data_model`` thread, itself in
``model::Model::OptimizeLoop``'s timed wait). Real runners and real frameworks, tiny inputs; no
timed assertion (benchmarks/overhead.py prints the figures).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchtui.core.wire.events import check_event
from support import run_runner

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "data"),
    [("torch", "host"), ("tensorflow", "host"), ("tensorflow", "device"), ("keras-jax", "host")],
)
def test_every_epoch_event_says_its_time_to_first_batch(framework: str, data: str) -> None:
    steps = 4
    events = run_runner(
        {
            "framework": framework,
            "model": "resnet50",
            "image_size": 32,
            "samples": 2 * steps,
            "batch_size": 2,
            "epochs": 3,
            "device": "cpu",
            "data": data,
            "threads": 1,
            "loader_workers": 1,  # PyTorch host data: a DataLoader worker started at every epoch
        }
    )
    assert any(e["type"] == "done" for e in events), [e for e in events if e["type"] == "error"]
    epochs = [check_event(e) for e in events if e["type"] == "epoch"]  # what the parent accepts
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    for epoch in epochs:
        first = epoch["to_first_batch_s"]
        assert isinstance(first, float) and 0.0 <= first <= epoch["seconds"], epoch
        # The epoch's first window began at the epoch's start: it holds the time to first batch.
        window = next(e for e in events if e["type"] == "batch" and e["epoch"] == epoch["epoch"])
        assert first <= window["seconds"] * window["steps"] + 1e-6, (epoch, window)


@pytest.mark.slow
def test_tf_keras_host_arrays_train_on_one_tf_data_iterator_where_a_default_fit_makes_one_per_epoch() -> None:
    # The runner's own feeding (keras_runner._fit_on) and a default model.fit(x, y), in one fresh
    # process with a real TensorFlow: the iterators each creates over 3 epochs.
    script = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["KERAS_BACKEND"] = "tensorflow"
import keras, numpy as np, tensorflow as tf
from tensorflow.python.data.ops import iterator_ops
made = []
init = iterator_ops.OwnedIterator.__init__
def counted(self, dataset=None, *a, **k):
    if dataset is not None:  # a real iterator over a dataset (tracing makes placeholders from components)
        made.append(1)
    init(self, dataset, *a, **k)
iterator_ops.OwnedIterator.__init__ = counted
from benchtui_runners.config import RunConfig
from benchtui_runners.keras_runner import _fit_on, input_record, unlike_default
config = RunConfig(framework="tensorflow", model="resnet50", samples=32, batch_size=8, epochs=3, data="host", device="cpu")
rng = np.random.default_rng(0)
with tf.device("/CPU:0"):
    x = tf.constant(rng.standard_normal((32, 4), dtype=np.float32))
    y = tf.constant(rng.integers(0, 3, 32).astype(np.int32))
def model():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    m.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m
seen = []
class Steps(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        seen.append(0)
    def on_train_batch_begin(self, batch, logs=None):
        seen[-1] += 1
_fit_on(model(), config, [], x, y, "tensorflow", False, 3, None, [Steps()])
runner, runner_steps = len(made), list(seen)
made.clear()
model().fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
print(json.dumps({"runner": runner, "steps": runner_steps, "default": len(made),
                  "input": input_record(config, "tensorflow"), "unlike": unlike_default(config, "tensorflow", True)}))
"""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "runners")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["runner"] == 1, got  # one iterator, made before the first epoch, serves all three
    assert got["steps"] == [4, 4, 4], got  # every epoch still its 32 samples, in 4 batches of 8
    assert got["default"] >= 3, got  # a default fit makes one at every epoch's start (the stall's cause)
    assert "one iterator for every epoch" in got["input"]
    assert got["unlike"].startswith("unlike a default TensorFlow: one tf.data iterator for all epochs")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_the_overhead_benchmarks_plain_fit_trains_in_fp32_as_the_runner_does(backend: str) -> None:
    """benchmarks/overhead.py's plain ``model.fit`` left TF32 to the framework: on an H200 (2026-11-26) it ran
    3.4x faster than the runner at --precision fp32 (TF32 off), a difference of precision, not of harness.
    Run here on the CPU, tiny: it must say TF32 is off, as the runner's fp32 sets it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import overhead

    spec = {
        "device": "cpu",
        "model": "resnet50",
        "batch_size": 2,
        "image_size": 32,
        "steps": 2,
        "epochs": 2,
        "threads": 1,
        "feed": "arrays",
        "backend": backend,
    }
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [sys.executable, "-c", overhead.BARE_KERAS, json.dumps(spec), str(ROOT / "runners")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert "tf32 False" in lines
    assert len(json.loads(lines[-1])) == 2  # its epochs, as the benchmark reads them
