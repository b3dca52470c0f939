"""A CPU plan's threads when the user names none: the cores other processes leave idle, measured once.

Left to themselves the frameworks size their pools by the machine's cores (TensorFlow per logical
core, PyTorch per physical one); on a machine whose cores other processes keep busy, such a pool
oversubscribes them and its steps stall waiting for a thread that is not running (issue 30: 2 threads
on 2 busy cores gave PyTorch steps of 1–6 s, 1 thread 0.35–0.5 s, and the verdict flipped). So every
framework gets the same pool: the cores that were idle over ``IDLE_WINDOW_S`` seconds just before the
plan's first run, rounded to the nearest whole core, at least one, at most the cores benchtui may use.
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchtui_runners.config import usable_cores

#: How long the idle cores are measured for before a CPU plan starts (seconds): long enough to
#: average over a busy process's scheduling (a few time slices), short enough to go unnoticed.
IDLE_WINDOW_S = 1.0


def _cpu_times() -> list[Any]:
    import psutil

    return list(psutil.cpu_times(percpu=True))


def _idle_seconds(times: Any) -> float:
    return float(times.idle) + float(getattr(times, "iowait", 0.0))


def measure_idle(window_s: float = IDLE_WINDOW_S) -> dict[str, Any]:
    """The cores that sat idle over ``window_s`` seconds (blocking), of the cores this process may use.

    Returns ``{"idle_cores", "cores", "window_s", "threads"}``; ``idle_cores`` is None where the
    machine's CPU times cannot be read (then ``threads`` is every usable core, as before issue 30).
    """
    cores = usable_cores()
    record: dict[str, Any] = {"idle_cores": None, "cores": cores, "window_s": window_s, "threads": cores}
    try:
        before = _cpu_times()
        time.sleep(window_s)
        after = _cpu_times()
    except Exception:  # no psutil, or no /proc/stat: every core, as before
        return record
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        mine = list(range(len(after)))
    if not mine or max(mine) >= min(len(before), len(after)):  # CPUs went off or on line: all of them
        mine = list(range(min(len(before), len(after))))
    idle = 0.0
    for cpu in mine:
        total = sum(after[cpu]) - sum(before[cpu])
        if total <= 0:
            idle += 1.0  # no tick counted: nothing ran there
            continue
        idle += min(1.0, max(0.0, (_idle_seconds(after[cpu]) - _idle_seconds(before[cpu])) / total))
    idle *= cores / len(mine)  # the usable cores' share where the affinity mask could not be matched
    record["idle_cores"] = round(idle, 2)
    record["threads"] = default_threads(idle, cores)
    return record


def default_threads(idle_cores: float, cores: int) -> int:
    """The threads a CPU plan's runs get from the idle cores: the nearest whole core, 1 to ``cores``."""
    return max(1, min(cores, int(idle_cores + 0.5)))


def threads_words(record: dict[str, Any] | None) -> str:
    """The plan line's account of its threads: 'threads: 1 (the idle cores of 2, measured over 1 s
    before the plan: 0.4 idle)'; '' for no record (the user named --threads, a GPU, an old session)."""
    if not isinstance(record, dict) or not isinstance(record.get("threads"), int):
        return ""
    threads, cores, idle = record["threads"], record.get("cores"), record.get("idle_cores")
    window = record.get("window_s")
    if not isinstance(idle, (int, float)):
        return f"threads: {threads} (every core: the idle cores could not be measured)"
    seconds = f"{window:g} s" if isinstance(window, (int, float)) else "a moment"
    return (
        f"threads: {threads} (the idle cores of {cores}, measured over {seconds} before the plan: "
        f"{idle:.1f} idle), the same for every framework; --threads N sets them"
    )
