"""The timing hooks in a user's own script: real scripts, real frameworks, the parent's pipe and its checks.

Each script runs in a fresh process as ``benchtui watch`` starts one: the write end of a pipe passed
to it, its number in ``BENCHTUI_EVENT_FD``, a PYTHONPATH holding only the runner package. Every line
it writes goes through the parent's own ``parse_line``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.wire.events import parse_line
from benchtui_runners.hooks import OWNER_ENV, StepTimer
from benchtui_runners.protocol import FD_ENV, FIFO_ENV
from benchtui_runners.timing import describe

RUNNERS = Path(__file__).resolve().parents[1] / "runners"
STEPS, BATCH, EPOCHS = 8, 4, 2
#: What fit's validation sleeps (a callback after the timer's): validation is no part of an epoch.
VALIDATION_SLEEP_S = 1.5


@dataclass
class Script:
    returncode: int
    pid: int
    stdout: str
    stderr: str
    raw: bytes
    events: list[dict[str, Any]]

    def printed(self, key: str) -> list[str]:
        """The words after ``key`` on the lines the script printed starting with it."""
        return [line.split(" ", 1)[1] for line in self.stdout.splitlines() if line.startswith(key + " ")]


def run_script(
    tmp_path: Path, source: str, *, listen: bool = True, parent_gone: bool = False, **env: str
) -> Script:
    """Run ``source`` as train.py; ``listen``: with the event pipe, read to its end; ``parent_gone``:
    the pipe's read end closed before the script starts, as when the parent has died."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    child_env = {k: v for k, v in os.environ.items() if k not in (FD_ENV, FIFO_ENV, OWNER_ENV)}
    child_env.update(PYTHONPATH=str(RUNNERS), TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1", **env)
    read_fd = write_fd = -1
    if listen:
        read_fd, write_fd = os.pipe()
        child_env[FD_ENV] = str(write_fd)
        if parent_gone:
            os.close(read_fd)
            read_fd = -1
    chunks: list[bytes] = []

    def drain() -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            chunks.extend(iter(lambda: pipe.read(65536), b""))

    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            pass_fds=(write_fd,) if listen else (),
            env=child_env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    if listen:
        os.close(write_fd)
    reader = threading.Thread(target=drain, daemon=True) if read_fd >= 0 else None
    if reader is not None:
        reader.start()
    try:
        proc.wait(timeout=180)
    finally:
        proc.kill()
    if reader is not None:
        reader.join(timeout=30)
    raw = b"".join(chunks)
    lines = raw.split(b"\n")
    assert lines[-1] == b"", "the last event is a whole line"
    return Script(
        proc.returncode,
        proc.pid,
        out.read_text(errors="replace"),
        err.read_text(errors="replace"),
        raw,
        [parse_line(line) for line in lines[:-1]],  # the parent's own checks, every line
    )


def check_stream(
    run: Script,
    framework: str,
    source: str,
    timing: str = "window",
    epoch_samples: int = STEPS * BATCH,
    epochs: int = EPOCHS,
    steps: int = 1,
) -> dict[str, Any]:
    """What every hook's stream must be: one hello first, windows that add up to their epochs, the
    first_batch phase once, a memory event per epoch, never a ``done``. Returns the hello."""
    assert run.returncode == 0, run.stderr[-3000:]
    assert "benchtui hooks" not in run.stderr  # no hook switched itself off
    events = run.events
    kinds = [e["type"] for e in events]
    assert set(kinds) <= {"hello", "phase", "batch", "epoch", "memory"}, kinds
    assert kinds.count("hello") == 1 and kinds[0] == "hello"
    hello = events[0]
    assert hello["pid"] == run.pid and hello["framework"] == framework
    assert hello["versions"]["python"] and hello["config"] == {}
    assert hello["settings"] == {**hello["settings"], "timing": describe(timing), "batch_size": BATCH}
    assert hello["settings"]["source"] == f"benchtui hooks: {source} in the user's own script"
    assert hello["steps_per_epoch"] == STEPS and "samples_per_epoch" not in hello
    assert hello["device"]["type"] in ("cpu", "cuda")

    phases = [(i, e["name"], e["edge"]) for i, e in enumerate(events) if e["type"] == "phase"]
    first = kinds.index("batch")
    assert [p[1:] for p in phases] == [("first_batch", "start"), ("first_batch", "end")]
    assert phases[0][0] < first < phases[1][0], "the first batch lies between the first_batch edges"

    epoch_events = [e for e in events if e["type"] == "epoch"]
    assert [e["epoch"] for e in epoch_events] == list(range(1, epochs + 1))
    for number, epoch in enumerate(epoch_events, start=1):
        at = events.index(epoch)
        windows = [e for e in events if e["type"] == "batch" and e["epoch"] == number]
        assert all(events.index(w) < at for w in windows), "an epoch's windows come before its event"
        assert sum(w["steps"] for w in windows) == STEPS
        assert [w["step"] for w in windows] == sorted(w["step"] for w in windows)
        assert windows[-1]["step"] == STEPS
        if timing == "step":  # a sync each time the framework hands back (each ``steps`` steps)
            assert all(w["steps"] == steps for w in windows)
        assert epoch["samples"] == epoch_samples
        # The epoch is synchronised at its start and end, and its windows tile it exactly.
        assert epoch["seconds"] == pytest.approx(sum(w["seconds"] * w["steps"] for w in windows), rel=1e-9)
        memory = events[at + 1]
        assert memory["type"] == "memory" and memory["epoch"] == number
        assert isinstance(memory["peak_bytes"], int) and memory["peak_bytes"] > 0
    return hello


# -- PyTorch -----------------------------------------------------------------------------------------
TORCH_SCRIPT = """
import json, os, subprocess, sys

import torch

from benchtui_runners.hooks import StepTimer, active

{setup}
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
loss_fn = torch.nn.CrossEntropyLoss()


def sgd_step():  # torch.optim's first use imports torch._dynamo: seconds a test need not wait
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
            p.grad = None


# The last batch is short (2 samples): step(samples=2) says so.
data = [(torch.randn(4 if i < {steps} - 1 else 2, 8), torch.randint(0, 2, (4 if i < {steps} - 1 else 2,)))
        for i in range({steps})]
timer = StepTimer(batch_size={batch}, steps_per_epoch={steps}, {kwargs})
print("active", active(), flush=True)


def train_one_epoch(timer):
    for x, y in data:
        loss_fn(model(x), y).backward()
        sgd_step()
        timer.step() if len(x) == {batch} else timer.step(samples=len(x))


with timer.epoch():  # the context manager
    train_one_epoch(timer)
with timer.epoch():  # an epoch without a step: nothing is sent, and its number is given back
    pass
timer.epoch_begin()  # the two calls, whose end returns the epoch's seconds
train_one_epoch(timer)
print("seconds", json.dumps(timer.epoch_end()), flush=True)
# A second loop with a timer of its own: the epochs go on counting; no second hello or first_batch.
again = StepTimer(batch_size={batch}, steps_per_epoch={steps}, {kwargs})
with again.epoch():
    train_one_epoch(again)

# A forked child (a DataLoader worker) holds a copy of the timer: it must never write.
pid = os.fork()
if pid == 0:
    with timer.epoch():
        timer.step()
    os._exit(3 if active() else 0)
print("forked", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
# A child started afresh that inherits the pipe (and the environment) stays silent too.
if active():
    fd = int(os.environ["BENCHTUI_EVENT_FD"])
    code = "from benchtui_runners.hooks import active; print(active())"
    out = subprocess.run([sys.executable, "-c", code], pass_fds=(fd,), capture_output=True, text=True)
    print("spawned", out.stdout.strip(), flush=True)
"""

#: torch.cuda faked at its narrowest point, with the real calls' argument rules: the timer believes it
#: trains on cuda:0, and every synchronisation is recorded (the model itself stays on the CPU).
FAKE_CUDA = """
syncs = []


def _indexed(device):
    if not (isinstance(device, torch.device) and device.type == "cuda" and device.index is not None):
        raise ValueError(f"Expected a cuda device with an index, got {device!r}")
    return device


torch.cuda.is_available = lambda: True
torch.cuda.is_initialized = lambda: True
torch.cuda.current_device = lambda: 0
torch.cuda.synchronize = lambda device=None: syncs.append(str(_indexed(device)))
torch.cuda.max_memory_allocated = lambda device=None: 12345 if _indexed(device) else 0
torch.cuda.get_device_name = lambda device=None: "Fake GPU" if _indexed(device) else ""
import atexit
atexit.register(lambda: print("syncs", json.dumps(syncs), flush=True))
"""


def torch_script(kwargs: str = "", setup: str = "") -> str:
    return TORCH_SCRIPT.format(setup=setup, kwargs=kwargs, steps=STEPS, batch=BATCH)


TORCH_SAMPLES = (STEPS - 1) * BATCH + 2
TORCH_EPOCHS = 3  # two by the first timer (and an empty one between them), one by a second timer


@pytest.mark.slow
def test_step_timer_streams_a_torch_loop(tmp_path: Path) -> None:
    run = run_script(tmp_path, torch_script('name="tiny mlp"'))
    hello = check_stream(run, "torch", "StepTimer", epoch_samples=TORCH_SAMPLES, epochs=TORCH_EPOCHS)
    assert run.printed("active") == ["True"]
    assert hello["settings"]["name"] == "tiny mlp" and hello["versions"]["torch"]
    assert hello["device"]["type"] == "cpu"
    windows = [e for e in run.events if e["type"] == "batch"]
    assert windows[0]["steps"] == 1, "the run's first step is a window of its own"
    assert all(w["samples"] == BATCH for w in windows if w["step"] < STEPS)  # full batches only
    # epoch_end() returned what the epoch event says.
    second = next(e for e in run.events if e["type"] == "epoch" and e["epoch"] == 2)
    assert float(run.printed("seconds")[0]) == second["seconds"]
    # Neither a forked copy nor a fresh child wrote a line (check_stream saw epochs 1 and 2 only).
    assert run.printed("forked") == ["0"] and run.printed("spawned") == ["False"]


@pytest.mark.slow
def test_step_timer_syncs_cuda_once_per_window_and_at_each_epoch_edge(tmp_path: Path) -> None:
    run = run_script(tmp_path, torch_script(setup=FAKE_CUDA))
    hello = check_stream(run, "torch", "StepTimer", epoch_samples=TORCH_SAMPLES, epochs=TORCH_EPOCHS)
    assert hello["device"] == {**hello["device"], "type": "cuda", "index": 0, "name": "Fake GPU"}
    memory = [e for e in run.events if e["type"] == "memory"]
    assert {(m["peak_bytes"], m["source"]) for m in memory} == {(12345, "torch.cuda.max_memory_allocated")}
    syncs = json.loads(run.printed("syncs")[0])
    windows = [e for e in run.events if e["type"] == "batch"]
    # One sync as each epoch begins (the empty one's too) and one per window (the last one closes the
    # epoch); none per step.
    assert syncs == ["cuda:0"] * (TORCH_EPOCHS + 1 + len(windows))
    assert len(windows) < TORCH_EPOCHS * STEPS


@pytest.mark.slow
def test_step_timing_syncs_and_reports_every_step(tmp_path: Path) -> None:
    run = run_script(tmp_path, torch_script('timing="step"'))
    check_stream(run, "torch", "StepTimer", timing="step", epoch_samples=TORCH_SAMPLES, epochs=TORCH_EPOCHS)


@pytest.mark.slow
def test_step_timer_alone_does_nothing(tmp_path: Path) -> None:
    """Run alone, on a (fake) GPU: no sync at all, nothing printed, the same training."""
    run = run_script(tmp_path, torch_script(setup=FAKE_CUDA), listen=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.printed("active") == ["False"] and run.printed("seconds") == ["null"]
    assert run.printed("syncs") == ["[]"]
    assert run.printed("forked") == ["0"] and "benchtui hooks" not in run.stderr


@pytest.mark.slow
def test_step_timer_outlives_its_parent(tmp_path: Path) -> None:
    """The parent is gone before the first event: training goes on to the end, silently, exit 0."""
    run = run_script(tmp_path, torch_script(), parent_gone=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.printed("active") == ["True"]  # it was, until the first write failed
    assert run.printed("seconds") == ["null"] and run.printed("forked") == ["0"]
    assert "benchtui hooks" not in run.stderr and "Traceback" not in run.stderr


@pytest.mark.slow
def test_a_misused_hook_switches_off_with_one_line_and_training_goes_on(tmp_path: Path) -> None:
    source = """
    import torch
    from benchtui_runners.hooks import StepTimer, active
    timer = StepTimer(batch_size=4)
    model = torch.nn.Linear(4, 1)
    for step in range(3):
        model(torch.randn(4, 4)).sum().backward()
        timer.step()  # no epoch begun
    with timer.epoch():
        timer.step()
    print("active", active(), "steps", step + 1)
    """
    run = run_script(tmp_path, source)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.printed("active") == ["False steps 3"]
    warnings = [line for line in run.stderr.splitlines() if line.startswith("benchtui hooks:")]
    assert warnings == [
        "benchtui hooks: StepTimer switched off (RuntimeError: a step outside an epoch: begin the epoch "
        "first); training goes on, untimed"
    ]
    assert run.events == []


# -- Keras 3 -------------------------------------------------------------------------------------------
KERAS_SCRIPT = """
import json, time

import numpy as np
import keras

from benchtui_runners.hooks import KerasTimer, active

for bad in ({{"batch_size": 0}}, {{"batch_size": 4, "timing": "sometimes"}}, {{"batch_size": None}}):
    try:
        KerasTimer(**bad)
    except (TypeError, ValueError) as exc:
        print("refused", type(exc).__name__, exc, flush=True)

# Every device synchronisation the timer asks for, counted.
syncs = []
if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

    real = tf.test.experimental.sync_devices
    tf.test.experimental.sync_devices = lambda: (syncs.append(1), real())[1]
else:
    import jax

    real = jax.block_until_ready
    jax.block_until_ready = lambda x: (syncs.append(1), real(x))[1]


class SlowValidation(keras.callbacks.Callback):
    def on_test_begin(self, logs=None):
        time.sleep({sleep})


keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal(({steps} * {batch}, 8)).astype("float32")
y = rng.integers(0, 2, {steps} * {batch}).astype("int32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
)
model.compile(
    optimizer="sgd",
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    steps_per_execution={per_execution},
)
timer = KerasTimer({batch}, timing="{timing}")
print("active", active(), flush=True)
# Keras 3 dispatches step ends asynchronously only while no callback overrides on_train_batch_end.
print("batch_end", type(timer).on_train_batch_end is keras.callbacks.Callback.on_train_batch_end, flush=True)
history = model.fit(
    x, y, batch_size={batch}, epochs={epochs}, verbose=0, shuffle=False,
    {validation}callbacks=[timer, SlowValidation()],
)
print("syncs", len(syncs), flush=True)
print("losses", json.dumps(history.history["loss"]), flush=True)
"""


def keras_script(timing: str = "window", per_execution: int = 1, validation: bool = True) -> str:
    return KERAS_SCRIPT.format(
        steps=STEPS,
        batch=BATCH,
        epochs=EPOCHS,
        timing=timing,
        sleep=VALIDATION_SLEEP_S,
        per_execution=per_execution,
        validation="validation_data=(x[:8], y[:8]), " if validation else "",
    )


REFUSED = [
    "ValueError KerasTimer: batch_size must be above 0 (samples per step), got 0",
    "ValueError KerasTimer: timing must be one of window, step, got 'sometimes'",
    "TypeError KerasTimer: batch_size must be a whole number (samples per step), got None",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "framework", "timing", "per_execution"),
    [("tensorflow", "tensorflow", "window", 2), ("jax", "keras-jax", "step", 1)],
)
def test_keras_timer_streams_model_fit(
    tmp_path: Path, backend: str, framework: str, timing: str, per_execution: int
) -> None:
    """TensorFlow with two steps per execution (a callback call each two steps), JAX a sync per step."""
    source = keras_script(timing, per_execution)
    run = run_script(tmp_path, source, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu")
    hello = check_stream(run, framework, "KerasTimer", timing=timing, steps=per_execution)
    assert run.printed("active") == ["True"] and run.printed("refused") == REFUSED
    assert run.printed("batch_end") == ["True"]
    assert hello["versions"]["keras"] and hello["versions"][backend]
    windows = [e for e in run.events if e["type"] == "batch"]
    assert all(w["samples"] == BATCH for w in windows)
    # One sync as each epoch begins and one per window; none per step.
    assert run.printed("syncs") == [str(EPOCHS + len(windows))]
    # Validation (which sleeps) is no part of the epoch's last window, nor of the epoch.
    for number in range(1, EPOCHS + 1):
        last = [w for w in windows if w["epoch"] == number][-1]
        assert last["seconds"] * last["steps"] < VALIDATION_SLEEP_S
    second = next(e for e in run.events if e["type"] == "epoch" and e["epoch"] == 2)
    assert second["seconds"] < VALIDATION_SLEEP_S
    # fit validates: each epoch is closed at on_test_begin, before its logs exist, so it sends no loss.
    assert not any("loss" in e for e in run.events if e["type"] == "epoch")
    # Each epoch's time to its first batch (fit building or resetting its iterator), within the epoch.
    for epoch in (e for e in run.events if e["type"] == "epoch"):
        assert (
            isinstance(epoch["to_first_batch_s"], float)
            and 0.0 <= epoch["to_first_batch_s"] <= epoch["seconds"]
        )


@pytest.mark.slow
def test_keras_timer_sends_each_epochs_loss_from_fits_logs(tmp_path: Path) -> None:
    """Issue 36: without validation an epoch ends at on_epoch_end, whose logs Keras has already read: the
    epoch event carries fit's own epoch loss (what History records), and the syncs are the clock's."""
    source = keras_script(validation=False)
    run = run_script(tmp_path, source, KERAS_BACKEND="tensorflow")
    check_stream(run, "tensorflow", "KerasTimer")
    epochs = [e for e in run.events if e["type"] == "epoch"]
    (history,) = run.printed("losses")
    assert [e["loss"] for e in epochs] == pytest.approx(json.loads(history), rel=1e-6)
    assert not any({"loss_min", "loss_max"} & e.keys() for e in epochs)
    windows = [e for e in run.events if e["type"] == "batch"]
    assert run.printed("syncs") == [str(EPOCHS + len(windows))]


@pytest.mark.slow
def test_keras_timer_alone_does_nothing(tmp_path: Path) -> None:
    run = run_script(tmp_path, keras_script(), listen=False, KERAS_BACKEND="tensorflow")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.printed("active") == ["False"] and run.printed("refused") == REFUSED
    assert run.printed("syncs") == ["0"] and "benchtui hooks" not in run.stderr


@pytest.mark.slow
def test_keras_timer_outlives_its_parent(tmp_path: Path) -> None:
    run = run_script(tmp_path, keras_script(), parent_gone=True, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.printed("active") == ["True"] and run.printed("syncs") == ["0"]
    assert "benchtui hooks" not in run.stderr and "Traceback" not in run.stderr


# -- in this process: nothing but the standard library ---------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, "batch_size must be above 0"),
        ({"batch_size": -3}, ValueError, "batch_size must be above 0"),
        ({"batch_size": 2.5}, TypeError, "batch_size must be a whole number"),
        ({"batch_size": True}, TypeError, "batch_size must be a whole number"),
        ({"batch_size": 4, "timing": "sometimes"}, ValueError, "timing must be one of window, step"),
        ({"batch_size": 4, "steps_per_epoch": 0}, ValueError, r"steps_per_epoch must be above 0 \(steps\)"),
        ({"batch_size": 4, "name": 3}, TypeError, "name must be a string"),
        ({"batch_size": 4, "device": 1.5}, TypeError, "device must be a torch.device"),
    ],
)
def test_bad_arguments_are_refused_at_construction(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        StepTimer(**kwargs)


def test_importing_the_hooks_loads_no_framework_and_not_the_parent() -> None:
    code = (
        "import sys, benchtui_runners.hooks as h; "
        "print(h.active(), ' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {k: v for k, v in os.environ.items() if k not in (FD_ENV, FIFO_ENV, OWNER_ENV)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**env, "PYTHONPATH": str(RUNNERS)},
    )
    active, loaded = result.stdout.split(" ", 1)
    assert active == "False"
    assert not set(loaded.split()) & {"numpy", "torch", "keras", "tensorflow", "jax", "benchtui"}, loaded
