"""Real runs under a stand-in load (issue 30): busy processes started by the test keep the cores busy while
real PyTorch and TensorFlow runners train on the CPU, and the verdict says "unreliable: …" with the load,
claiming no winner. The same runs' events with the load taken out give a verdict again: the mark goes away
on an idle machine, through the same fold, without needing this (shared, 2-worker) machine to be idle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model.session_model import CONTENTION_SLACK_CORES, SessionModel
from benchtui.core.store.session import load_session
from support import benchtui, only_session, read_events

pytestmark = pytest.mark.slow

#: How many busy processes per core the stand-in load starts: twice the cores, so that the runner's
#: threads get well under the cores they asked for whatever else the machine runs.
LOAD_PER_CORE = 2


def _fold(plan: Any, host: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict as the session model folds these events (as the engine and the loader do)."""
    model = SessionModel(plan, host=host)
    for event in events:
        model.apply(event)
    (verdict,) = model.summary()["ratios"]
    return verdict


def _over_the_rule(events: list[dict[str, Any]], cores: int) -> dict[str, bool]:
    """Per framework, whether its recorded load breaks the rule: others > cores - threads + slack."""
    framework = {e["run"]: e["framework"] for e in events if e.get("type") == "hello"}
    threads = {e["run"]: e["settings"]["intra_op_threads"] for e in events if e.get("type") == "hello"}
    out: dict[str, bool] = {}
    for e in events:
        if e.get("type") == "run_end" and e["run"] in framework and e.get("status") == "ok":
            need = min(threads[e["run"]], cores)
            over = e["other_cpu_cores"] > cores - need + CONTENTION_SLACK_CORES
            out[framework[e["run"]]] = out.get(framework[e["run"]], False) or over
    return out


def _idle(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same events as if nothing else had run: each run_end's load and the samples' at 0.05 cores."""
    out = []
    for e in events:
        e = json.loads(json.dumps(e))
        if e.get("type") == "run_end" and "other_cpu_cores" in e:
            e["other_cpu_cores"] = 0.05
        host = e.get("host") if e.get("type") == "gpu" else None
        if isinstance(host, dict) and isinstance(host.get("cpu_percent"), (int, float)):
            host["system_busy_cores"] = host["cpu_percent"] / 100 + 0.05
        out.append(e)
    return out


def test_a_stand_in_load_marks_the_verdict_and_the_mark_goes_away_without_it(sessions_root: Path) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(LOAD_PER_CORE * cores)
    ]
    try:
        result = benchtui(
            "run",
            "--headless",
            "--frameworks",
            "torch,tensorflow",
            *"--models resnet50 --image-size 32 --samples 16 --batch-size 8 --epochs 2 --runs 1".split(),
            *f"--device cpu --threads {cores} --no-nvml --name loaded".split(),
            "--sessions-dir",
            str(sessions_root),
        )
    finally:
        for process in load:
            process.kill()
            process.wait()
    assert result.returncode == 0, result.stderr[-3000:]
    session = only_session(sessions_root)
    meta = json.loads((session / "session.json").read_text())
    host_cores = meta["host"]["cpu_count"]
    events = read_events(session)
    plan = load_session(session).plan

    # The load was seen, and it breaks the rule for a framework (the runs asked for every core).
    over = _over_the_rule(events, host_cores)
    assert set(over) == {"torch", "tensorflow"} and any(over.values()), over
    verdict = _fold(plan, meta["host"], events)
    assert verdict["unreliable"] is not None and verdict["faster_framework"] is None
    assert verdict["text"].startswith("unreliable: other processes kept ")
    assert f" of {host_cores} cores busy during " in verdict["text"]
    for fw, label in (("torch", "PyTorch"), ("tensorflow", "tf.keras")):
        assert (f"during {label}'s runs" in verdict["unreliable"]) is over[fw]

    # What the engine wrote and printed at the end of the run, and what show prints, say the same.
    (written,) = json.loads((session / "summary.json").read_text())["ratios"]
    assert written["unreliable"] == verdict["unreliable"] and written["text"] == verdict["text"]
    answer = " ".join(result.stdout[: result.stdout.index("Per model and framework")].split())
    assert f": {' '.join(verdict['text'].split())}" in answer  # the answer line: 'ResNet50 …: unreliable: …'
    shown = benchtui("show", str(session))
    assert shown.returncode == 0, shown.stderr
    assert " ".join(verdict["text"].split()) in " ".join(shown.stdout.split())

    # The same runs, nothing else on the cores: a verdict again, through the same fold.
    calm = _idle(events)
    assert not any(_over_the_rule(calm, host_cores).values())
    verdict = _fold(plan, meta["host"], calm)
    assert verdict["unreliable"] is None and not verdict["text"].startswith("unreliable")
    assert verdict["faster_framework"] is not None or verdict["about_same"]
