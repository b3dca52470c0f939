"""One run's lifecycle, the same for every framework: the order of its events, written once.

``run(config, writer, backend)`` sends, in this order::

    phase import end -> hello -> phase data (start, end) -> phase build (start, end) -> settings
    -> per epoch: batch windows, epoch (with its loss, training), memory -> profile -> flops -> done

and what happens between them is the backend's: one :class:`Backend` per framework family
(``torch_runner.TorchBackend`` for PyTorch, ``keras_runner.KerasBackend`` for Keras 3 and tf.keras
on TensorFlow, JAX or torch). A backend imports its framework itself (in :meth:`Backend.load`, or
its module only when its family runs): this module imports none. Errors are not caught here: what
a run raises (an out-of-memory error, a refused device, a user's model that fails) reaches
``benchtui_runners.__main__`` once, which turns it into the one ``error`` event.

The device layer (:class:`Device`: wait for the device, peak memory, versions, the device's record)
is one object per backend, used by the run's clock, its epochs, its profile and by the hooks of a
user's own script (``benchtui_runners.hooks``).

Adding a framework is one module with a class that satisfies :class:`Backend` (and its
:class:`Device`), and a ``run(config, writer, import_started)`` that calls :func:`run` with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from benchtui_runners.config import RunConfig
from benchtui_runners.protocol import EventWriter
from benchtui_runners.timing import StepClock


class Device(Protocol):
    """A framework's device layer, on the run's device: what every measurement goes through."""

    def sync(self) -> None:
        """Block until the device has finished all work queued so far (nothing on the CPU)."""

    def peak_memory(self) -> dict[str, Any]:
        """The peak memory so far: ``peak_bytes`` and the counter's ``source`` (the memory events' fields)."""

    def versions(self) -> dict[str, Any]:
        """The versions of Python, the framework and its libraries (the hello's ``versions``)."""

    def info(self) -> dict[str, Any]:
        """The device's record (the hello's ``device``): type, name, index and what is known of it."""


#: A reading of the epoch's training loss, called once the epoch's end has waited for the device: the
#: epoch event's ``loss`` and, where the backend has them, ``loss_min`` / ``loss_max`` (floats; NaN as it is).
LossReading = Callable[[], dict[str, float]]


class EpochDone(Protocol):
    """What a backend calls when an epoch's last step has ended: ``losses`` reads the epoch's loss (None:
    none, as inference has), after the clock's wait at the epoch's end, so reading it waits for nothing."""

    def __call__(self, epoch: int, losses: LossReading | None = None) -> None: ...


class Window(Protocol):
    """The profiled window (``benchtui_runners.profiling.Window``)."""

    steps: int

    def open(self) -> None: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """What one framework family does at each point of the lifecycle.

    The attributes are read after :meth:`start`, which places the run (it sets ``device``).
    """

    @property
    def device(self) -> Device:
        """The run's device layer, once :meth:`start` has placed the run."""

    #: Whether this process leads its node: the one process per node that sends the run's events and
    #: does what one process does alone (the losses, the profile, the FLOP count). Under torchrun each
    #: node's local rank 0; Keras: its one process on each node.
    lead: bool
    #: Samples per step over every replica: what the clock counts a step as.
    step_samples: int
    #: The batch the FLOP count is of (one step's, as the framework is handed it).
    flops_batch: int
    #: Every rank's value of one float (torchrun's all_gather), for the ``ranks`` events; None alone.
    gather: Callable[[float], list[float]] | None

    @property
    def profiler_version(self) -> str:
        """The profiler's version, for the ``profile`` event's label."""

    def load(self) -> None:
        """Import the framework, under the environment it reads at import (the import phase)."""

    def start(self, writer: EventWriter) -> dict[str, Any]:
        """Place the run on its device (refusing what it cannot run there), apply the settings that
        change the answer, seed, and return the settings in force (the hello's ``settings``)."""

    def scope(self) -> AbstractContextManager[Any]:
        """Where data, build, steps and counting happen (a device or distribution scope)."""

    def data(self) -> None:
        """Make the run's data (the data phase; not run when the run only counts)."""

    def build(self, writer: EventWriter) -> dict[str, Any] | None:
        """Build the model, its loss and optimizer (the build phase), and send the model event and the
        settings known once built; return settings known only after the phase has ended, or None."""

    def stepping(self) -> AbstractContextManager[Any]:
        """Around the timed epochs and the profiled steps (no gradients, for inference)."""

    def epochs(self, clock: StepClock, epochs: int, epoch_done: EpochDone) -> None:
        """Run ``epochs`` epochs timed by ``clock`` (``epoch_begin``, ``step_begin``, ``step_end``),
        calling ``epoch_done(epoch, losses)`` when each epoch's last step has ended (``losses``: how to read
        the epoch's training loss, or None)."""

    def profile_steps(self, window: Window, warmup: int, count: int) -> None:
        """``warmup`` steps, ``window.open()``, ``count`` steps (in ``window.steps``), ``window.close()``."""

    def capture(self, folder: str) -> Any:
        """The framework's profiler, writing its trace under ``folder`` (a ``profiling.Capture``)."""

    def release(self) -> None:
        """Let go of what only the steps needed (a process group), before counting."""

    def count_flops(self) -> dict[str, Any]:
        """The FLOPs of one step (``flops.count_torch`` / ``count_keras``)."""


def run(config: RunConfig, writer: EventWriter, backend: Backend) -> None:
    """One run, start to end, in the order every runner sends its events."""
    backend.load()
    writer.phase("import", "end")
    settings = backend.start(writer)
    device = backend.device
    writer.hello(
        framework=config.framework,
        versions=device.versions(),
        device={**device.info(), **({"assigned": config.gpu} if config.gpu else {})},
        config=config.to_dict(),
        settings=settings,
        steps_per_epoch=config.steps_per_epoch,
        samples_per_epoch=config.samples_per_epoch,
    )
    inference = config.task == "inference"
    with backend.scope():
        if config.mode != "count":
            writer.phase("data", "start")
            backend.data()
            writer.phase("data", "end")

        writer.phase("build", "start")
        after_build = backend.build(writer)
        writer.phase("build", "end")
        if after_build:
            writer.emit("settings", settings=after_build)

        # One clock for every framework (benchtui_runners.timing): no wait for the device after a
        # step, one per window of steps and at each epoch's end.
        # Generation: every step (a generate call, which ends with its ids on the host) is a window of its
        # own, so each step's tokens event follows its batch event; the wait at its end waits for nothing.
        generating = config.task == "generate"
        window_s = 0.0 if generating else config.window_s
        clock = StepClock(
            writer, device.sync, backend.step_samples, config.timing, window_s, gather=backend.gather
        )

        def epoch_done(epoch: int, losses: LossReading | None = None) -> None:
            seconds = clock.epoch_end()
            # The loss is read after the clock's wait: the device has finished the epoch's steps.
            loss = losses() if losses is not None and not inference else {}
            writer.epoch(epoch, seconds, config.samples_per_epoch, **clock.epoch_fields(), **loss)
            writer.memory(epoch=epoch, **device.peak_memory())

        epochs = 0 if config.mode == "count" else config.epochs_to_run
        with backend.stepping():
            if epochs:
                backend.epochs(clock, epochs, epoch_done)
            final_memory = device.peak_memory()  # before counting: its extra step is no part of the run
            if config.profile and config.mode == "train" and epochs and not generating:
                # Where step time goes: a few more steps under the framework's profiler, after the
                # timed epochs. Every rank runs them (their collectives must meet); each node's lead
                # profiles.
                from benchtui_runners.profiling import profile_run

                profile_run(
                    writer,
                    config,
                    backend.capture,
                    device.sync,
                    backend.profile_steps,
                    versions=backend.profiler_version,
                    active=backend.lead,
                )
        backend.release()
        if config.mode != "probe" and backend.lead and not generating:
            # (Generation: no FLOP count of a generate call; its figures are tokens per second.)
            # FLOPs of one step, counted after the timed epochs so it warms up nothing timed.
            from benchtui_runners.flops import COUNTED_FORWARD, COUNTED_TRAIN, emit_flops

            emit_flops(
                writer,
                backend.count_flops,
                backend.flops_batch,
                counted=COUNTED_FORWARD if inference else COUNTED_TRAIN,
            )
    writer.done(**final_memory)


def nothing() -> AbstractContextManager[Any]:
    """No scope: what a backend returns where it needs none."""
    return contextlib.nullcontext()
