"""The wire format on the parent side: the events, typed, and reading one JSON object per line, never trusted.

A runner sends the runner events (``python -m benchtui_runners``, see its protocol.py); the
parent adds its own (``run_start``, ``run_end``, GPU samples, batch search) to events.jsonl.
Every event has ``type`` and ``t`` (monotonic seconds); the parent tags runner events with
``run``. The TypedDicts say what each carries; unknown types and fields pass through.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypedDict

WIRE_VERSION = 1


class _Event(TypedDict, total=False):
    type: str
    t: float
    v: int  # wire version (runner events)
    run: str  # the run it belongs to (added by the parent)


# -- runner events ------------------------------------------------------------------------------
class HelloEvent(_Event, total=False):
    """Versions, the device the runner really uses, settings that change the answer."""

    pid: int
    framework: str
    versions: dict[str, str]
    device: dict[str, Any]
    settings: dict[str, Any]
    samples_per_epoch: int
    steps_per_epoch: int


class PhaseEvent(_Event, total=False):
    name: str  # import, build, compile, first_batch, ...
    edge: Literal["start", "end"]
    at: float  # when it really happened, if earlier than ``t``


class BatchEvent(_Event, total=False):
    """A window of ``steps`` steps ending with ``step``, timed between device synchronizations."""

    epoch: int
    step: int
    seconds: float  # the window's mean time per step
    samples: int  # per step
    steps: int  # steps in the window (1 when absent: sessions before benchtui 0.3)


class SettingsEvent(_Event, total=False):
    """Settings known only after the build (what Keras's ``jit_compile="auto"`` became): added to the hello's."""

    settings: dict[str, Any]


class EpochEvent(_Event, total=False):
    epoch: int
    seconds: float
    samples: int


class MemoryEvent(_Event, total=False):
    peak_bytes: int | None
    source: str


class FlopsEvent(_Event, total=False):
    per_step: float
    per_image: float
    batch_size: int
    method: str
    counted: bool
    convention: str
    reason: str
    seconds: float


class ErrorEvent(_Event, total=False):
    kind: str  # unavailable, device, oom, exception
    message: str
    traceback: str


class DoneEvent(MemoryEvent, total=False):
    pass


# -- parent events ------------------------------------------------------------------------------
class RunStartEvent(_Event, total=False):
    framework: str
    model: str
    index: int
    python: str


class RunEndEvent(_Event, total=False):
    status: str  # a RunStatus word
    reason: str
    returncode: int | None
    malformed: int
    other_cpu_cores: float
    other_gpu_processes: int
    other_gpu_memory: int


class EnergyEvent(_Event, total=False):
    epoch: int  # 0: at the first batch; N: at the end of epoch N
    mj: float


class GpuEvent(_Event, total=False):
    """One telemetry sample: every GPU, the runner's host figures, which GPU the run uses."""

    gpus: list[dict[str, Any]]
    host: dict[str, Any]
    watched: int


RUNNER_EVENTS: dict[str, type] = {
    "hello": HelloEvent,
    "phase": PhaseEvent,
    "batch": BatchEvent,
    "settings": SettingsEvent,
    "epoch": EpochEvent,
    "memory": MemoryEvent,
    "flops": FlopsEvent,
    "error": ErrorEvent,
    "done": DoneEvent,
}
PARENT_EVENTS: dict[str, type] = {
    "run_start": RunStartEvent,
    "run_end": RunEndEvent,
    "energy": EnergyEvent,
    "gpu": GpuEvent,
}


class Malformed(ValueError):
    """A line that is not a wire event."""


def parse_line(line: bytes | str) -> dict[str, Any]:
    """Parse one line from a runner. Unknown types and fields pass through untouched.

    Raises Malformed for anything that is not a JSON object with a string ``type``.
    """
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Malformed(f"not UTF-8: {exc}") from exc
    line = line.strip()
    if not line:
        raise Malformed("empty line")
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise Malformed(f"not JSON: {exc.msg}") from exc
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise Malformed("not an event object with a 'type'")
    return event
