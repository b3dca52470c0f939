"""One clock for every framework (benchtui_runners.timing): windows of steps, one sync per window.

The unit tests drive the clock against a simulated device that runs behind the host, as a
GPU does: a step handed over at host time h finishes at max(h, previous end) + its work.
The slow tests run the real runners of every framework on the CPU and check the same rules
in their event streams.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from benchtui_runners.timing import StepClock, next_window
from support import run_runner


class Writer:
    """Records what the clock emits, as the runner's EventWriter would send it."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def batch(self, epoch: int, step: int, seconds: float, samples: int, steps: int = 1) -> None:
        self.events.append(
            {
                "type": "batch",
                "epoch": epoch,
                "step": step,
                "seconds": seconds,
                "samples": samples,
                "steps": steps,
            }
        )

    def phase(self, name: str, edge: str) -> None:
        self.events.append({"type": "phase", "name": name, "edge": edge})

    def batches(self, epoch: int | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == "batch" and epoch in (None, e["epoch"])]


class Device:
    """A device that runs queued steps one after the other while the host runs ahead."""

    def __init__(self, dispatch_s: float = 0.001) -> None:
        self.now = 0.0  # host clock
        self.done = 0.0  # when the device finishes what is queued
        self.dispatch = dispatch_s
        self.syncs = 0

    def step(self, work_s: float) -> None:
        self.now += self.dispatch  # the host hands the step over and goes on
        self.done = max(self.done, self.now) + work_s

    def sync(self) -> None:
        self.syncs += 1
        self.now = max(self.now, self.done)

    def clock(self) -> float:
        return self.now


def train(clock: StepClock, device: Device, works: list[list[float]]) -> list[float]:
    """Epochs of steps with the given work each; the epochs' seconds."""
    seconds = []
    for epoch, steps in enumerate(works, start=1):
        clock.epoch_begin(epoch)
        for step, work in enumerate(steps, start=1):
            device.step(work)
            clock.step_end(step)
        seconds.append(clock.epoch_end())
    return seconds


def test_windows_measure_the_device_not_the_host_and_sync_once_per_window() -> None:
    device, writer = Device(), Writer()
    clock = StepClock(writer, device.sync, 16, clock=device.clock)
    epochs = train(clock, device, [[0.5] + [0.01] * 199, [0.01] * 200])
    # The host hands a step over in 1 ms; the device needs 10 ms: every window says 10 ms, plus
    # the 1 ms in which the emptied device waits for the window's first step (a bubble once per
    # window, the price of a sync: 0.1 ms a step in a window of 10, 0.03 ms in one of 30).
    steady = [e for e in writer.batches() if e["step"] > 1 or e["epoch"] > 1]
    assert all(e["seconds"] == pytest.approx(0.01 + 0.001 / e["steps"]) for e in steady)
    # The first step is a window of its own (time to first batch), then windows grow at most
    # x2 up to about 0.3 s of work: 1, 1, 2, 4, 8, 16, 30, 30, ...
    sizes = [e["steps"] for e in writer.batches(1)]
    assert sizes == [1, 1, 2, 4, 8, 16, 30, 30, 30, 30, 30, 18]
    assert writer.events[0] == {"type": "phase", "name": "first_batch", "edge": "start"}
    assert writer.events[2] == {"type": "phase", "name": "first_batch", "edge": "end"}
    assert writer.batches()[0]["seconds"] == pytest.approx(0.5 + 0.001)
    # Every step is in exactly one window, and the windows add up to the epoch, exactly.
    for epoch, seconds in enumerate(epochs, start=1):
        windows = writer.batches(epoch)
        assert sum(e["steps"] for e in windows) == 200
        assert sum(e["seconds"] * e["steps"] for e in windows) == pytest.approx(seconds, rel=1e-12)
    # One wait for the device per window and per epoch boundary, never one per step: 400 steps in
    # 19 windows (12 in the first epoch: 32 steps growing, then 30s and a last 18; 7 in the second).
    assert [len(writer.batches(1)), len(writer.batches(2))] == [12, 7]
    assert device.syncs == len(writer.batches()) + 2  # and one at each epoch's start


def test_step_timing_syncs_after_every_step_on_request() -> None:
    device, writer = Device(), Writer()
    clock = StepClock(writer, device.sync, 4, mode="step", clock=device.clock)
    train(clock, device, [[0.02] * 10, [0.02] * 10])
    assert [e["steps"] for e in writer.batches()] == [1] * 20
    assert device.syncs == 20 + 2  # every step (the last closes its epoch) and each epoch's start
    assert all(e["seconds"] == pytest.approx(0.02 + 0.001) for e in writer.batches())  # a bubble each


def test_an_epoch_flushes_its_last_window_and_slow_steps_shrink_the_next() -> None:
    device, writer = Device(), Writer()
    clock = StepClock(writer, device.sync, 8, clock=device.clock)
    train(clock, device, [[0.01] * 13])
    # 1, 2, 4 (at most doubling), then the 6 left over: the epoch's end closes a short window.
    assert [e["steps"] for e in writer.batches()] == [1, 2, 4, 6]
    assert next_window(32, 0.1) == 3  # 0.3 s at 0.1 s a step
    assert next_window(1, 0.0001) == 2  # at most twice the last window
    assert next_window(4, 10.0) == 1


def test_each_epoch_reports_its_time_to_first_batch_and_a_stall_before_it_shows_there() -> None:
    device, writer = Device(), Writer()
    clock = StepClock(writer, device.sync, 4, clock=device.clock)
    stalls = [0.0, 4.7, 0.25]  # host seconds between an epoch's start and its first step
    firsts, seconds = [], []
    for epoch, stall in enumerate(stalls, start=1):
        clock.epoch_begin(epoch)
        assert clock.to_first_batch is None and clock.epoch_fields() == {}  # no step begun yet
        device.now += stall  # the framework builds (or waits to tear down) the epoch's iterator
        for step in range(1, 6):
            clock.step_begin()  # only the epoch's first call counts
            device.step(0.01)
            clock.step_end(step)
        seconds.append(clock.epoch_end())
        firsts.append(clock.epoch_fields()["to_first_batch_s"])
    assert firsts == pytest.approx(stalls)
    # The stall is in the epoch's seconds (and its first window), as it is in the user's wait.
    assert seconds[1] - seconds[0] == pytest.approx(4.7, abs=0.01)
    assert device.syncs == len(writer.batches()) + 3  # marking the first batch waits for nothing


def test_an_unknown_timing_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="timing must be one of window, step"):
        StepClock(Writer(), lambda: None, 1, mode="event")


# -- the real runners ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "data"),
    [("torch", "host"), ("tensorflow", "device"), ("tensorflow", "host"), ("keras-jax", "device")],
)
def test_every_runner_times_by_windows_that_add_up_to_its_epochs(framework: str, data: str) -> None:
    steps = 24
    events = run_runner(
        {
            "framework": framework,
            "model": "resnet50",
            "image_size": 32,
            "samples": 2 * steps,
            "batch_size": 2,
            "epochs": 2,
            "device": "cpu",
            "data": data,
            "threads": 1,
            "window_s": 60.0,  # windows of 1, 2, 4, ... steps, however busy this machine is
        }
    )
    assert any(e["type"] == "done" for e in events), [e for e in events if e["type"] == "error"]
    epochs = {e["epoch"]: e["seconds"] for e in events if e["type"] == "epoch"}
    assert sorted(epochs) == [1, 2]
    for epoch, seconds in epochs.items():
        windows = [e for e in events if e["type"] == "batch" and e["epoch"] == epoch]
        assert sum(e["steps"] for e in windows) == steps and windows[-1]["step"] == steps
        # The clock's windows cover the epoch exactly: nothing is timed twice or left out.
        assert sum(e["seconds"] * e["steps"] for e in windows) == pytest.approx(seconds, rel=1e-9)
    steady = [e for e in events if e["type"] == "batch" and e["epoch"] == 2]
    # No per-step wait: steps share windows.
    assert max(e["steps"] for e in steady) > 1
    # Each window waited for its own steps: the last holds no work queued by the ones before it (a
    # sync that waits for nothing shows as fast windows, then one slow window at the epoch's end).
    # An epoch's first window may be slower: it pays for what each epoch starts (a new iterator).
    means = [e["seconds"] for e in steady]
    assert means[-1] < 3 * statistics.median(means), means
    settings = next(e for e in events if e["type"] == "hello")["settings"]
    assert settings["timing"].startswith("window:")
    if framework != "torch":  # Keras resolves jit_compile="auto" only at model.compile
        resolved = next(e for e in events if e["type"] == "settings")["settings"]
        # Keras's own default: no XLA for TensorFlow on a CPU-only machine, jit for JAX.
        assert resolved["jit_compile"] is (framework == "keras-jax")
        assert resolved["compile"].endswith("(Keras's default, jit_compile='auto')")
