"""Timing hooks for a user's own training script, so that ``benchtui watch -- python train.py`` streams it.

The parent starts the script as it starts a runner, with the event pipe's file descriptor in
``BENCHTUI_EVENT_FD``; the hooks then time the script's steps and epochs by the clock every runner
uses (``benchtui_runners.timing``: no wait for the device after a step, one per window of steps and
at each epoch's start and end) and send ``hello``, ``batch``, ``epoch``, ``memory`` and the
``first_batch`` phase, as a runner does. They never send ``done``: the parent judges the run by the
script's exit code. Without that variable (the script run alone) every hook does nothing at all.

PyTorch, in a plain loop::

    from benchtui_runners.hooks import StepTimer

    timer = StepTimer(batch_size=64)
    for epoch in range(3):
        with timer.epoch():
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
                timer.step()  # timer.step(samples=len(x)) for a short last batch

Keras 3, any backend::

    from benchtui_runners.hooks import KerasTimer

    model.fit(x, y, batch_size=64, epochs=3, callbacks=[KerasTimer(batch_size=64)])

A hook never breaks the training it watches: when the parent has gone, or the hook's own
bookkeeping fails, it switches itself off (the latter with one line on stderr) and training goes on.
Standard library only at import: the framework is imported when a hook first needs it, and
``KerasTimer`` (a ``keras.callbacks.Callback``) is made on first access, so importing this module
costs nothing in a script of either framework.
"""

from __future__ import annotations

import contextlib
import operator
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from benchtui_runners.protocol import FD_ENV, FIFO_ENV, EventWriter, ParentGone
from benchtui_runners.timing import TIMINGS, StepClock, describe

# KerasTimer is public too, but not in __all__: ``import *`` would import keras for it.
__all__ = ["StepTimer", "active"]

if TYPE_CHECKING:  # for type checkers; at run time the module's __getattr__ makes it, with keras
    KerasTimer: Any

#: The pid of the process whose hooks talk to the parent, set by the first process that looks. A
#: child the script starts inherits the environment (and, when it is forked, the pipe): seeing another
#: pid here, its hooks stay silent, so they can never write into the pipe, or into whatever file
#: happens to have the pipe's number in a process that did not inherit it.
OWNER_ENV = "BENCHTUI_HOOKS_PID"


class _Process:
    """What every hook in one process shares: the pipe, whether the hello went, the epoch count."""

    def __init__(self, pid: int, writer: EventWriter | None) -> None:
        self.pid = pid
        self.writer = writer
        self.live = writer is not None
        self.hello_sent = False
        self.epochs = 0  # epochs begun in this process, whichever hook began them
        self.first_batch: set[str] = set()  # the first_batch phase's edges sent (once per process)

    @classmethod
    def start(cls, pid: int) -> _Process:
        if not (os.environ.get(FD_ENV) or os.environ.get(FIFO_ENV)):
            return cls(pid, None)
        owner = os.environ.get(OWNER_ENV)
        if owner and owner != str(pid):
            return cls(pid, None)
        os.environ[OWNER_ENV] = str(pid)
        try:
            writer = EventWriter.from_env()
        except ValueError:  # a BENCHTUI_EVENT_FD that is not a number: nobody we know is listening
            return cls(pid, None)
        if not os.environ.get(FIFO_ENV) and not _is_pipe(int(os.environ[FD_ENV])):
            return cls(pid, None)  # not the parent's pipe: a number this process never inherited
        # Under torchrun, ranks other than their node's lead send only errors, which hooks never send.
        return cls(pid, None if writer.closed or not writer.lead else writer)

    def stop(self, who: str, exc: BaseException | None) -> None:
        """Switch every hook in this process off: silently when the parent has gone, else with one line."""
        if self.live and exc is not None:
            print(
                f"benchtui hooks: {who} switched off ({type(exc).__name__}: {exc}); "
                "training goes on, untimed",
                file=sys.stderr,
            )
        self.live = False


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


_process: _Process | None = None


def _current() -> _Process:
    """This process's shared state; a forked child gets its own, silent one (its pid is not the owner)."""
    global _process
    pid = os.getpid()
    if _process is None or _process.pid != pid:
        _process = _Process.start(pid)
    return _process


def active() -> bool:
    """Whether benchtui is listening to this process (the hooks time and send), for scripts that branch."""
    return _current().live


# The process claims the pipe as soon as it imports the hooks, before it can start any child.
_current()


class _Feed:
    """Between a hook's StepClock and the pipe: each window's real steps and samples, the
    ``first_batch`` phase once per process.

    The clock counts the calls it gets; a hook may end several steps in one call (Keras with
    ``steps_per_execution``) or a short batch, so the steps and samples of each window are
    counted here and the clock's figures rescaled to them.
    """

    def __init__(self, proc: _Process) -> None:
        self.proc = proc
        self.step = 0  # steps ended in the epoch
        self.steps = 0  # steps ended in the open window
        self.samples = 0  # samples in the open window

    def phase(self, name: str, edge: str, **fields: Any) -> None:
        if name == "first_batch":
            if edge in self.proc.first_batch:
                return
            self.proc.first_batch.add(edge)
        assert self.proc.writer is not None
        self.proc.writer.phase(name, edge, **fields)

    def batch(self, epoch: int, step: int, seconds: float, samples: int, steps: int = 1) -> None:
        n, total = self.steps, self.samples
        self.steps = self.samples = 0
        if n != steps:
            seconds = seconds * steps / n
        assert self.proc.writer is not None
        self.proc.writer.batch(epoch, self.step, seconds, round(total / n), steps=n)


class _Core:
    """One hook's clock and bookkeeping; StepTimer and KerasTimer are its two faces."""

    def __init__(self, who: str, batch_size: Any, timing: Any, name: Any) -> None:
        self.who = who
        self.batch_size = _positive(f"{who}: batch_size", batch_size)
        if timing not in TIMINGS:
            raise ValueError(f"{who}: timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{who}: name must be a string, got {type(name).__name__}")
        self.timing: str = timing
        self.name: str = name or ""
        self.proc = _current()
        self.clock: StepClock | None = None
        self.feed = _Feed(self.proc)
        self.epoch = 0  # the open epoch's number; 0: none open
        self.samples = 0  # samples stepped in the open epoch

    @property
    def live(self) -> bool:
        """Cheap when off: one attribute. The pid check keeps a forked copy of a live hook silent."""
        return self.proc.live and self.proc.pid == os.getpid()

    def fail(self, exc: BaseException) -> None:
        self.proc.stop(self.who, None if isinstance(exc, ParentGone) else exc)

    def settings(self) -> dict[str, Any]:
        return {
            "timing": describe(self.timing),
            "source": f"benchtui hooks: {self.who} in the user's own script",
            "batch_size": self.batch_size,
            "name": self.name,
        }

    def start(self, sync: Callable[[], None], hello: Callable[[], dict[str, Any]]) -> None:
        """Send the process's hello if no hook has, and make this hook's clock if it has none."""
        writer = self.proc.writer
        assert writer is not None
        if not self.proc.hello_sent:
            self.proc.hello_sent = True
            writer.hello(**hello())
        if self.clock is None:
            self.clock = StepClock(self.feed, sync, self.batch_size, self.timing)

    def begin(self) -> None:
        assert self.clock is not None
        if self.epoch:
            raise RuntimeError("an epoch began before the one before it ended")
        self.proc.epochs += 1
        self.epoch = self.proc.epochs
        self.samples = self.feed.step = self.feed.steps = self.feed.samples = 0
        self.clock.epoch_begin(self.epoch)

    def ended(self, steps: int, samples: int) -> None:
        """``steps`` steps, ``samples`` samples in all, have been handed to the framework."""
        if not self.epoch or self.clock is None:
            raise RuntimeError("a step outside an epoch: begin the epoch first")
        self.feed.step += steps
        self.feed.steps += steps
        self.feed.samples += samples
        self.samples += samples
        self.clock.step_end(self.feed.step)

    def end(self, memory: Callable[[], dict[str, Any]], loss: dict[str, float] | None = None) -> float:
        """Close the open epoch: its seconds, synchronised; its epoch and memory events if it had steps
        (``loss``: the epoch's loss fields, where the hook has them)."""
        assert self.clock is not None and self.proc.writer is not None
        epoch, self.epoch = self.epoch, 0
        seconds = self.clock.epoch_end()
        if not self.feed.step:
            # No step, nothing to time (the parent refuses a zero-second epoch): the number is
            # given back, so the next epoch leaves no gap the parent would call a lost line.
            if self.proc.epochs == epoch:
                self.proc.epochs -= 1
            return seconds
        # KerasTimer marks when each epoch's first step begins; StepTimer, called after a step, cannot.
        self.proc.writer.epoch(epoch, seconds, self.samples, **self.clock.epoch_fields(), **(loss or {}))
        self.proc.writer.memory(epoch=epoch, **memory())
        return seconds


def _positive(what: str, value: Any, unit: str = "samples per step") -> int:
    """A whole number above 0 (NumPy's included), or TypeError / ValueError that says which argument."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a whole number ({unit}), got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be a whole number ({unit}), got {value!r}") from None
    if number <= 0:
        raise ValueError(f"{what} must be above 0 ({unit}), got {number}")
    return number


# -- PyTorch -----------------------------------------------------------------------------------------
class StepTimer:
    """Times a plain PyTorch training loop: call ``step()`` after each step, inside an epoch.

    Args:
        batch_size: samples per step (``step(samples=N)`` says otherwise for one step).
        device: the device the model trains on (a ``torch.device``, ``"cuda:1"``, ...); None: the
            current CUDA device when CUDA has been initialised, else the CPU. Read at the first epoch.
        steps_per_epoch: when known, for the parent's progress (sent in the hello).
        timing: ``"window"`` (one device sync per window of steps) or ``"step"`` (a sync per step).
        name: a label for the run.

    The device is synchronised (``torch.cuda.synchronize``; nothing on the CPU) when an epoch begins,
    once per window of steps and when it ends, never after each step. Epochs are numbered from 1 in
    the process, on across several loops and timers.
    """

    def __init__(
        self,
        batch_size: int,
        *,
        device: Any = None,
        steps_per_epoch: int | None = None,
        timing: str = "window",
        name: str | None = None,
    ) -> None:
        self._core = _Core("StepTimer", batch_size, timing, name)
        if device is not None and not isinstance(device, (str, int)) and not hasattr(device, "type"):
            raise TypeError(f"StepTimer: device must be a torch.device, a string or None, got {device!r}")
        self._device_spec = device
        self._steps_per_epoch = (
            None
            if steps_per_epoch is None
            else _positive("StepTimer: steps_per_epoch", steps_per_epoch, "steps")
        )
        self._device: Any = None

    def epoch_begin(self) -> None:
        """Before the epoch's first batch is fetched: waits for the device, then starts the epoch's clock."""
        core = self._core
        if not core.live:
            return
        try:
            if core.clock is None:
                from benchtui_runners.torch_runner import TorchDevice  # torch's device layer, as the runner's

                self._device = TorchDevice(_torch_device(self._device_spec), detail=False)
                core.start(self._sync, self._hello)
            elif core.epoch:  # the last epoch was never ended: end it now, as it stands
                core.end(self._memory)
            core.begin()
        except (Exception, ParentGone) as exc:
            core.fail(exc)

    def step(self, samples: int | None = None) -> None:
        """After a step has been handed to PyTorch; ``samples``: the step's samples, when not batch_size."""
        core = self._core
        if not core.live:
            return
        try:
            core.ended(
                1,
                core.batch_size
                if samples is None
                else _positive("StepTimer.step: samples", samples, "samples"),
            )
        except (Exception, ParentGone) as exc:
            core.fail(exc)

    def epoch_end(self) -> float | None:
        """After the epoch's last step: waits for the device; the epoch's seconds (None when not timing)."""
        core = self._core
        if not core.live or not core.epoch:
            return None
        try:
            return core.end(self._memory)
        except (Exception, ParentGone) as exc:
            core.fail(exc)
            return None

    @contextlib.contextmanager
    def epoch(self) -> Iterator[None]:
        """``epoch_begin()`` and ``epoch_end()`` around a block. An exception leaves the epoch untimed."""
        self.epoch_begin()
        try:
            yield
        except BaseException:
            self._core.epoch = 0  # an epoch cut short is no epoch: nothing is sent for it
            raise
        self.epoch_end()

    def _sync(self) -> None:
        self._device.sync()

    def _memory(self) -> dict[str, Any]:
        return dict(self._device.peak_memory())

    def _hello(self) -> dict[str, Any]:
        return _hello_fields(
            "torch",
            self._device.versions(),
            _best_effort(self._device.info),
            self._core.settings(),
            self._steps_per_epoch,
        )


def _torch_device(spec: Any) -> Any:
    """The device to synchronise, always with an index on CUDA (the memory counters need one)."""
    import torch

    if spec is None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    device = torch.device(spec)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


# -- Keras 3 -------------------------------------------------------------------------------------------
#: Keras backend -> benchtui's framework id.
KERAS_FRAMEWORKS = {"tensorflow": "tensorflow", "jax": "keras-jax", "torch": "keras-torch"}


def _keras_timer_class() -> type:
    """KerasTimer, made when first asked for: a Callback subclass needs keras to exist."""
    import keras

    class KerasTimer(keras.callbacks.Callback):
        """Times ``model.fit``: ``model.fit(..., callbacks=[KerasTimer(batch_size=64)])``.

        Args:
            batch_size: samples per step (fit's ``batch_size``; a short last batch counts as a full one).
            timing: ``"window"`` (one device sync per window of steps) or ``"step"`` (a sync per step).
            name: a label for the run.

        A step has ended when the next one begins, so this callback never overrides
        ``on_train_batch_end``: a callback that does makes Keras 3 convert every step's logs on the
        main thread (a wait for the device each step) instead of dispatching them asynchronously.
        An epoch's last step ends at ``on_epoch_end``, or at ``on_test_begin`` when fit validates:
        the epoch's time is its training steps', validation left out. The device is synchronised as
        the Keras runner does it on each backend.
        """

        def __init__(self, batch_size: int, *, timing: str = "window", name: str | None = None) -> None:
            super().__init__()
            self._core = _Core("KerasTimer", batch_size, timing, name)
            self._begun: int | None = None  # the step the running execution began at
            self._device: Any = None  # the Keras runner's device layer, made at the first fit

        def on_train_begin(self, logs: Any = None) -> None:
            core = self._core
            if not core.live:
                return
            try:
                if self._device is None:
                    self._device = _keras_device(keras.backend.backend(), lambda: self.model)
                core.start(self._sync, self._hello)
            except (Exception, ParentGone) as exc:
                core.fail(exc)

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            core = self._core
            if not core.live or core.clock is None:
                return
            try:
                core.epoch = 0  # one left open by a fit that raised
                self._begun = None
                core.begin()
            except (Exception, ParentGone) as exc:
                core.fail(exc)

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            core = self._core
            if not core.live or not core.epoch:
                return
            try:
                if self._begun is not None and batch > self._begun:  # the execution before has ended
                    steps = batch - self._begun
                    core.ended(steps, steps * core.batch_size)
                if core.clock is not None:
                    core.clock.step_begin()  # the epoch's first: its time to first batch
                self._begun = batch
            except (Exception, ParentGone) as exc:
                core.fail(exc)

        def on_test_begin(self, logs: Any = None) -> None:
            self._close()  # fit validates: the epoch's training is over

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self._close(logs)

        def _close(self, logs: Any = None) -> None:
            core = self._core
            if not core.live or not core.epoch:
                return
            try:
                if self._begun is not None:
                    steps = self._last_steps(self._begun)
                    core.ended(steps, steps * core.batch_size)
                    self._begun = None
                core.end(self._memory, _epoch_loss(logs))
            except (Exception, ParentGone) as exc:
                core.fail(exc)

        def _last_steps(self, begun: int) -> int:
            """Steps in the epoch's last execution: what is left of the epoch, else steps_per_execution."""
            total = self.params.get("steps") if isinstance(self.params, dict) else None
            if isinstance(total, int) and total > begun:
                return total - begun
            per = getattr(self.model, "steps_per_execution", 1)
            return per if isinstance(per, int) and per > 0 else 1

        def _sync(self) -> None:
            self._device.sync()

        def _memory(self) -> dict[str, Any]:
            memory = dict(self._device.peak_memory())
            memory["source"] = str(memory["source"])[:200]
            return memory

        def _hello(self) -> dict[str, Any]:
            device = self._device
            steps = self.params.get("steps") if isinstance(self.params, dict) else None
            return _hello_fields(
                KERAS_FRAMEWORKS.get(device.backend, f"keras-{device.backend}"),
                device.versions(),
                device.info(),
                self._core.settings(),
                steps if isinstance(steps, int) and steps > 0 else None,
            )

    KerasTimer.__module__ = __name__
    KerasTimer.__qualname__ = "KerasTimer"
    return KerasTimer


def _epoch_loss(logs: Any) -> dict[str, float] | None:
    """The epoch's mean training loss from ``model.fit``'s epoch logs, which Keras has already made Python
    numbers when ``on_epoch_end`` is called (no wait of the hook's); None without one (an epoch that fit
    validates is closed at ``on_test_begin``, before its logs exist: it sends no loss)."""
    value = logs.get("loss") if isinstance(logs, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return {"loss": float(value)}


def __getattr__(name: str) -> Any:
    """``KerasTimer`` on first access (PEP 562): keras is imported then, and only then."""
    if name == "KerasTimer":
        cls = _keras_timer_class()
        globals()["KerasTimer"] = cls  # later accesses find it without coming here
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _keras_device(backend: str, model: Callable[[], Any]) -> Any:
    """The Keras runner's device layer (``keras_runner.KerasDevice``) on the device the script trains
    on by default, waiting as the runner does on each backend (JAX: for what the last step wrote)."""
    from benchtui_runners.keras_runner import KerasDevice, default_device, step_state

    try:
        name, info = default_device(backend)
    except Exception as exc:  # a device we cannot name is no reason to stop
        name, info = "cpu", {"type": "unknown", "name": f"unknown ({type(exc).__name__})"}
    return KerasDevice(backend, name, info, state=lambda: step_state(backend, model()), detail=False)


# -- shared --------------------------------------------------------------------------------------------
def _best_effort(describe_device: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The device in the hello: what can be read of it; a device we cannot name is no reason to stop."""
    try:
        return describe_device()
    except Exception as exc:  # best effort
        return {"type": "unknown", "name": f"unknown ({type(exc).__name__})"}


def _hello_fields(
    framework: str,
    versions: dict[str, Any],
    device: dict[str, Any],
    settings: dict[str, Any],
    steps_per_epoch: int | None,
) -> dict[str, Any]:
    # No samples_per_epoch: the parent would take it over the epochs' own counts, which StepTimer
    # makes exact (a short last batch included), while batch size x steps is not.
    fields: dict[str, Any] = {
        "framework": framework,
        "versions": versions,
        "device": device,
        "config": {},
        "settings": settings,
    }
    if steps_per_epoch:
        fields["steps_per_epoch"] = steps_per_epoch
    return fields
