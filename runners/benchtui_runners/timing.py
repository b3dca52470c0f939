"""One clock for every framework: how a runner times its steps and epochs.

Device work is asynchronous, and the ratio between frameworks is the product, so every
runner times the same way, whatever its framework:

- it trains on its framework's ordinary path (a PyTorch loop, Keras ``model.fit``) and
  never waits for the device after a step just to read a clock;
- instead it synchronises once per *window* of steps (about ``WINDOW_TARGET_S`` of work)
  and reports the window's mean time per step, so the live view still streams;
- a step's time is the time between consecutive step ends, so whatever the input path
  costs (a loader, a copy to the device) is in it, on every side;
- the run's first step is a window of its own (time to first batch: tracing, compiling,
  autotuning), and windows then grow, at most doubling, towards the target;
- every epoch starts and ends with a synchronisation, so epoch times are exact;
- each epoch's time to its first batch (from its start, before the framework builds or resets
  the epoch's data iterator, to the moment its first step begins) is reported with the epoch,
  so a stall there (tf.data tearing down an iterator, DataLoader workers starting) shows as such.

``timing="step"`` synchronises after every step instead, on every side at once: slower
training, per-step resolution. Standard library only: runners of every framework share it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The timing modes a plan may ask for (``--timing``).
TIMINGS = ("window", "step")
#: Seconds of work per window: long enough that one synchronisation per window costs
#: under a percent of it, short enough that the live view moves a few times a second.
WINDOW_TARGET_S = 0.3
#: A window is at most this many times the one before, so a fast step early on
#: cannot make one window swallow an epoch.
MAX_GROWTH = 2


class StepClock:
    """Times one run's steps by windows, and its epochs, with one ``sync`` rule for all frameworks.

    Call ``epoch_begin(e)`` before an epoch's first step is fetched, ``step_begin()`` when a step
    begins (its batch in hand; only the epoch's first call counts), ``step_end(s)`` after each
    step has been handed to the framework (1-based ``s``), and ``epoch_end()`` when the epoch's
    last step has been; ``sync`` blocks until the device has finished everything queued so far.
    The clock emits ``batch`` events (``steps``: how many steps the window held; ``seconds``:
    their mean) and the ``first_batch`` phase; ``epoch_end`` returns the epoch's seconds, which
    are exactly the sum of its windows.
    """

    def __init__(
        self,
        writer: Any,
        sync: Callable[[], None],
        samples_per_step: int,
        mode: str = "window",
        target_s: float = WINDOW_TARGET_S,
        clock: Callable[[], float] = time.perf_counter,
        gather: Callable[[float], list[float]] | None = None,
    ) -> None:
        if mode not in TIMINGS:
            raise ValueError(f"timing must be one of {', '.join(TIMINGS)}, got {mode!r}")
        self.writer = writer
        self.sync = sync
        self.samples = samples_per_step
        self.mode = mode
        self.target = target_s
        self.clock = clock
        # Data parallel with a process per rank: every rank's mean step time of the window (a
        # collective, after the window's clock is read), sent as a ``ranks`` event; the next window
        # is sized from the slowest rank, so every rank closes its windows at the same steps.
        self.gather = gather
        self.window = 1  # steps in the window being filled
        self.first = True  # the run's first step has not ended yet
        self.epoch = 0
        self.step = 0
        self.pending = 0  # steps ended since the last mark
        self.t_epoch = 0.0
        self.t_mark = 0.0
        self.first_step_at: float | None = None  # when the epoch's first step began (no sync)

    def _sync(self) -> float:
        self.sync()
        return self.clock()

    def epoch_begin(self, epoch: int) -> None:
        """Wait for anything queued (building, the epoch before), then start the epoch's clock."""
        self.t_epoch = self.t_mark = self._sync()
        self.epoch, self.step, self.pending = epoch, 0, 0
        self.first_step_at = None
        if self.first:
            self.writer.phase("first_batch", "start")

    def step_begin(self) -> None:
        """A step begins, its batch in hand: the epoch's first call marks its time to first batch.

        No wait for the device: the moment is the host's (the work queued before it was waited
        for when the epoch began), so this costs one clock read per epoch.
        """
        if self.first_step_at is None:
            self.first_step_at = self.clock()

    @property
    def to_first_batch(self) -> float | None:
        """Seconds from the epoch's start to its first step's beginning; None before a step began
        (or when the runner never marks it)."""
        if self.first_step_at is None:
            return None
        return max(0.0, self.first_step_at - self.t_epoch)

    def epoch_fields(self) -> dict[str, float]:
        """The epoch event's optional fields this clock knows: ``to_first_batch_s`` once a step began."""
        first = self.to_first_batch
        return {} if first is None else {"to_first_batch_s": first}

    def step_end(self, step: int) -> None:
        """Step ``step`` (1-based within the epoch) has been handed to the framework."""
        self.step = step
        self.pending += 1
        if self.pending >= self.window:
            self._close()

    def epoch_end(self) -> float:
        """Close the epoch's last window; the epoch's seconds, synchronised."""
        if self.pending:
            self._close()  # otherwise the last window closed on the last step, synchronised
        return self.t_mark - self.t_epoch

    def _close(self) -> None:
        now = self._sync()
        steps, seconds = self.pending, now - self.t_mark
        self.writer.batch(self.epoch, self.step, seconds / steps, self.samples, steps=steps)
        pace = seconds / steps
        if self.gather is not None:
            ranks = self.gather(pace)
            self.writer.emit("ranks", epoch=self.epoch, step=self.step, steps=steps, seconds=ranks)
            pace = max(ranks)
        if self.first:
            self.writer.phase("first_batch", "end")
            self.first = False
        self.t_mark, self.pending = now, 0
        if self.mode == "window":
            self.window = next_window(self.window, pace, self.target)


def next_window(current: int, step_seconds: float, target_s: float = WINDOW_TARGET_S) -> int:
    """Steps in the next window: about ``target_s`` of work at the last window's pace, growing at most ×2."""
    if step_seconds <= 0:
        return current * MAX_GROWTH
    return max(1, min(round(target_s / step_seconds), current * MAX_GROWTH))


def describe(mode: str, target_s: float = WINDOW_TARGET_S, generating: bool = False) -> str:
    """The timing rule in words, for the run's recorded settings (``generating``: task generate, where each
    step is a generate call that ends with its token ids on the host)."""
    if generating:
        if mode == "step":
            return (
                "step: the device is synchronised after every token (on every framework); each generate call is "
                "a window of its own"
            )
        return (
            "window: each generate call is a window of its own, ended by its token ids on the host; no wait "
            "for the device per token added by benchtui (the first token timed by a call of its own)"
        )
    if mode == "step":
        return "step: the device is synchronised after every step (on every framework)"
    return (
        f"window: the device is synchronised once per window of steps (about {target_s:g} s of work; "
        "the first step alone), never per step; a step's time is its window's mean"
    )
