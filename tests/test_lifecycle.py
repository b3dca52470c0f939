"""One lifecycle for every runner (issue 31 §2): the order of a run's events and its waits for the
device are ``benchtui_runners.lifecycle``'s, whatever the backend.

A recording backend stands in for a framework here (no framework is imported): each step queues
work on its "device", and only the device layer's ``sync`` drains it. The real backends run the
same lifecycle in the slow tests (test_integration, test_keras_cpu, test_gpu_path, test_timing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from benchtui_runners import lifecycle
from benchtui_runners.config import RunConfig
from benchtui_runners.protocol import EventWriter
from benchtui_runners.timing import StepClock
from support import Recorder


class FakeDevice:
    """A device whose work is a queue: steps add to it, ``sync`` empties it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.queued = 0
        self.syncs = 0

    def sync(self) -> None:
        self.syncs += 1
        self.queued = 0

    def peak_memory(self) -> dict[str, Any]:
        return {"peak_bytes": 1 << 20, "source": "fake"}

    def versions(self) -> dict[str, Any]:
        return {"python": "3", "fake": "1.0"}

    def info(self) -> dict[str, Any]:
        return {"type": "cpu", "name": "fake"}


class FakeBackend:
    """Every lifecycle call recorded in ``log``; ``fail_at``: the call that raises."""

    lead = True
    gather: Callable[[float], list[float]] | None = None
    profiler_version = "fake 1.0"

    def __init__(self, config: RunConfig, fail_at: str = "") -> None:
        self.config = config
        self.log: list[str] = []
        self.fail_at = fail_at
        self.device = FakeDevice(self.log)
        self.step_samples = config.global_batch
        self.flops_batch = config.batch_size
        self.steps = 0
        self.losses: list[dict[str, float]] = []  # each epoch's loss fields, when the backend reads them

    def _call(self, name: str) -> None:
        self.log.append(name)
        if name == self.fail_at:
            raise MemoryError(f"out of memory in {name}")

    def load(self) -> None:
        self._call("load")

    def start(self, writer: EventWriter) -> dict[str, Any]:
        self._call("start")
        return {"precision": self.config.precision}

    @contextlib.contextmanager
    def _entered(self, name: str) -> Iterator[None]:
        self._call(f"{name} enter")
        yield
        self.log.append(f"{name} exit")

    def scope(self) -> AbstractContextManager[Any]:
        return self._entered("scope")

    def data(self) -> None:
        self._call("data")

    def build(self, writer: EventWriter) -> dict[str, Any] | None:
        self._call("build")
        writer.emit("model", params=1)
        return {"compile": "resolved after the build"}

    def stepping(self) -> AbstractContextManager[Any]:
        return self._entered("stepping")

    def step(self) -> None:
        self.steps += 1
        self.device.queued += 1

    def epochs(self, clock: StepClock, epochs: int, epoch_done: lifecycle.EpochDone) -> None:
        self._call("epochs")
        for epoch in range(1, epochs + 1):
            clock.epoch_begin(epoch)
            for step in range(1, self.config.steps_per_epoch + 1):
                clock.step_begin()
                self.step()
                clock.step_end(step)
            epoch_done(epoch, self.reading(epoch) if self.losses else None)
            assert self.device.queued == 0  # the epoch's end waited for its last step

    def reading(self, epoch: int) -> lifecycle.LossReading:
        """The epoch's loss, read on the "device": what was still queued when it was read is logged."""

        def read() -> dict[str, float]:
            self.log.append(f"loss read, {self.device.queued} queued, {self.device.syncs} syncs")
            return self.losses[epoch - 1]

        return read

    def profile_steps(self, window: lifecycle.Window, warmup: int, count: int) -> None:
        self._call("profile_steps")

    def capture(self, folder: str) -> Any:
        raise AssertionError("the profile is stubbed")

    def release(self) -> None:
        self._call("release")

    def count_flops(self) -> dict[str, Any]:
        self._call("count_flops")
        return {"per_step": 1000.0, "method": "fake"}


def _config(**overrides: Any) -> RunConfig:
    base: dict[str, Any] = {"framework": "torch", "model": "resnet50", "batch_size": 2, "samples": 64}
    return RunConfig(**{**base, **overrides})


@pytest.fixture
def profiled(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``profiling.profile_run`` replaced by one that records its call and sends its event."""
    from benchtui_runners import profiling

    calls: list[dict[str, Any]] = []

    def profile_run(
        writer: Any, config: Any, capture: Any, sync: Any, run: Any, versions: str, active: bool
    ) -> None:
        calls.append({"sync": sync, "versions": versions, "active": active})
        run(None, 0, 0)
        writer.emit("profile", ok=True)

    monkeypatch.setattr(profiling, "profile_run", profile_run)
    return calls


def test_a_run_sends_its_events_in_the_one_order(profiled: list[dict[str, Any]]) -> None:
    config = _config(epochs=2, profile=True)
    backend, recorder = FakeBackend(config), Recorder()
    lifecycle.run(config, recorder.writer, backend)

    names = [n for n in recorder.names() if n != "batch"]
    assert names == [
        "phase:import:end",
        "hello",
        "phase:data:start",
        "phase:data:end",
        "phase:build:start",
        "model",
        "phase:build:end",
        "settings",
        "phase:first_batch:start",
        "phase:first_batch:end",
        "epoch",
        "memory",
        "epoch",
        "memory",
        "profile",
        "phase:flops:start",
        "flops",
        "phase:flops:end",
        "done",
    ]
    assert backend.log == [
        "load",
        "start",
        "scope enter",
        "data",
        "build",
        "stepping enter",
        "epochs",
        "profile_steps",
        "stepping exit",
        "release",
        "count_flops",
        "scope exit",
    ]
    events = dict(recorder.events[1:2])
    hello = events["hello"]
    assert hello["versions"] == backend.device.versions() and hello["device"] == backend.device.info()
    assert hello["settings"] == {"precision": config.precision}
    assert hello["steps_per_epoch"] == config.steps_per_epoch
    # The profile waits through the device layer, and the FLOPs are of the backend's batch.
    assert profiled == [{"sync": backend.device.sync, "versions": "fake 1.0", "active": True}]
    flops = next(f for t, f in recorder.events if t == "flops")
    assert flops["batch_size"] == config.batch_size and flops["counted"] == "forward+backward"
    done = recorder.events[-1][1]
    assert done == backend.device.peak_memory()


def test_a_count_only_run_makes_no_data_and_trains_no_epoch() -> None:
    config = _config(mode="count")
    backend, recorder = FakeBackend(config), Recorder()
    lifecycle.run(config, recorder.writer, backend)
    assert "data" not in backend.log and "epochs" not in backend.log
    assert "phase:data:start" not in recorder.names() and "epoch" not in recorder.names()
    assert recorder.names()[-4:] == ["phase:flops:start", "flops", "phase:flops:end", "done"]


def test_a_probe_counts_no_flops_and_inference_counts_the_forward_pass() -> None:
    backend, recorder = FakeBackend(_config(mode="probe")), Recorder()
    lifecycle.run(backend.config, recorder.writer, backend)
    assert "count_flops" not in backend.log and "flops" not in recorder.names()

    backend, recorder = FakeBackend(_config(task="inference")), Recorder()
    lifecycle.run(backend.config, recorder.writer, backend)
    assert next(f for t, f in recorder.events if t == "flops")["counted"] == "forward"


def test_only_a_nodes_lead_counts_flops_and_profiles(profiled: list[dict[str, Any]]) -> None:
    config = _config(profile=True)
    backend, recorder = FakeBackend(config), Recorder()
    backend.lead = False  # a torchrun worker, not its node's lead: it runs the profiled steps (collectives)
    lifecycle.run(config, recorder.writer, backend)
    assert profiled[0]["active"] is False and "count_flops" not in backend.log


@pytest.mark.parametrize("fail_at", ["start", "data", "build", "epochs", "release"])
def test_an_error_reaches_the_caller_once_and_no_done_is_sent(fail_at: str) -> None:
    """The lifecycle catches nothing: ``benchtui_runners.__main__`` turns what a run raises (here an
    out-of-memory error) into the one ``error`` event."""
    config = _config()
    backend, recorder = FakeBackend(config, fail_at=fail_at), Recorder()
    with pytest.raises(MemoryError, match=f"in {fail_at}$"):
        lifecycle.run(config, recorder.writer, backend)
    assert "done" not in recorder.names()
    assert backend.log[-1] == fail_at or backend.log[-1].endswith("exit")


@pytest.mark.parametrize("timing", ["window", "step"])
def test_the_clock_waits_once_per_window_and_at_each_epoch_start(timing: str) -> None:
    """Whatever the backend: one wait for the device as each epoch begins and one per window of steps
    (``timing="step"``: one per step); each window holds the steps queued since the last."""
    config = _config(epochs=3, samples=128, timing=timing, window_s=60.0)
    backend, recorder = FakeBackend(config), Recorder()
    lifecycle.run(config, recorder.writer, backend)
    windows = [f for t, f in recorder.events if t == "batch"]
    steps = config.epochs_to_run * config.steps_per_epoch
    assert backend.steps == steps == sum(w["steps"] for w in windows)
    assert backend.device.syncs == config.epochs_to_run + len(windows)
    if timing == "window":
        assert len(windows) < steps / 4, len(windows)
    else:
        assert len(windows) == steps


def test_each_epochs_loss_is_read_after_its_wait_and_sent_in_its_epoch_event() -> None:
    """Issue 36: the backend hands the lifecycle a way to read the epoch's loss; it is read once per epoch,
    after the clock's wait at the epoch's end (nothing queued) and with no wait of its own, and sent in the
    epoch event, a non-finite loss as its word."""
    config = _config(epochs=2, samples=64, window_s=60.0)
    backend, recorder = FakeBackend(config), Recorder()
    backend.losses = [{"loss": 2.5, "loss_min": 2.0, "loss_max": 3.0}, {"loss": float("nan")}]
    lifecycle.run(config, recorder.writer, backend)
    epochs = [f for t, f in recorder.events if t == "epoch"]
    assert [{k: e[k] for k in ("loss", "loss_min", "loss_max") if k in e} for e in epochs] == [
        {"loss": 2.5, "loss_min": 2.0, "loss_max": 3.0},
        {"loss": "nan"},
    ]
    reads = [line for line in backend.log if line.startswith("loss read")]
    windows = [f for t, f in recorder.events if t == "batch"]
    syncs_at = [int(line.split(", ")[2].split()[0]) for line in reads]
    assert reads and all(", 0 queued," in line for line in reads), reads
    # Each read comes right after its epoch's last wait; the run's waits are the clock's, none added.
    assert syncs_at[-1] == backend.device.syncs == config.epochs_to_run + len(windows)


def test_inference_sends_no_loss_whatever_the_backend_hands() -> None:
    config = _config(task="inference")
    backend, recorder = FakeBackend(config), Recorder()
    backend.losses = [{"loss": 1.0}] * config.epochs_to_run
    lifecycle.run(config, recorder.writer, backend)
    epochs = [f for t, f in recorder.events if t == "epoch"]
    assert epochs and not any("loss" in e for e in epochs)
    assert not any(line.startswith("loss read") for line in backend.log)
