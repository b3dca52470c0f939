"""benchtui.core.running.replay: recorded pace, capped gaps, pause and cancel, and the same fold as load_session."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.plan.plan import Plan
from benchtui.core.running import replay as replay_mod
from benchtui.core.running.replay import Replayer, replay_all, schedule
from benchtui.core.store.session import SessionError, load_session

REAL_SLEEP = asyncio.sleep
DATA = Path(__file__).parent / "data"
TINY = DATA / "tiny-cpu-session"


def write_session(root: Path, events: list[dict[str, Any]], status: str = "complete") -> Path:
    """A minimal session folder: one torch run of resnet50, the given events."""
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        runs=1,
        epochs=1,
        samples=16,
        batch_sizes={"resnet50": 8},
        image_size=32,
    )
    path = root / "s"
    (path / "logs").mkdir(parents=True)
    meta = {"schema": 1, "kind": "benchtui-session", "plan": plan.to_dict(), "status": status}
    (path / "session.json").write_text(json.dumps(meta))
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


class FakeTime:
    """A clock that only moves when the replayer sleeps: pacing without waiting."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay
        await REAL_SLEEP(0)


def test_schedule_caps_gaps_and_never_steps_back() -> None:
    events = [{"t": 10.0}, {"t": 10.5}, {"t": 10.4}, {"type": "x"}, {"t": 60.0}, {"t": "bad"}, {"t": 61.0}]
    offsets = [offset for offset, _ in schedule(events, max_gap=2.0)]
    # 0.5 s gap; a step back counts as 0; no t keeps the offset; 49.6 s is cut to 2; bad t ignored.
    assert offsets == pytest.approx([0.0, 0.5, 0.5, 0.5, 2.5, 2.5, 3.5])


def test_schedule_of_nothing_is_nothing() -> None:
    assert list(schedule([])) == []


def test_replay_sleeps_the_recorded_gaps_divided_by_speed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = [
        {
            "type": "run_start",
            "t": 0.0,
            "run": "001-torch-resnet50-1",
            "framework": "torch",
            "model": "resnet50",
            "index": 1,
        },
        {"type": "gpu", "t": 1.0, "run": "001-torch-resnet50-1", "host": {"cpu_percent": 50.0, "rss": 1}},
        {"type": "gpu", "t": 11.0, "run": "001-torch-resnet50-1", "host": {"cpu_percent": 50.0, "rss": 1}},
        {"type": "run_end", "t": 12.0, "run": "001-torch-resnet50-1", "status": "ok"},
    ]
    path = write_session(tmp_path, events)
    fake = FakeTime()
    monkeypatch.setattr(replay_mod.asyncio, "sleep", fake.sleep)
    seen: list[str] = []
    replayer = Replayer(path, speed=2.0, clock=fake.clock, listener=lambda e: seen.append(e["type"]))
    status = asyncio.run(replayer.run())
    assert status == "complete"
    assert seen == ["run_start", "gpu", "gpu", "run_end"]
    # Gaps 1, 10 -> 2 (capped), 1; at speed 2 the replay takes (1 + 2 + 1) / 2 = 2 s.
    assert fake.now - 100.0 == pytest.approx(2.0)
    assert sum(fake.sleeps) == pytest.approx(2.0)
    assert max(fake.sleeps) <= 0.25  # short sleeps: pause and cancel act at once
    assert replayer.model.runs["001-torch-resnet50-1"].status == "ok"
    assert len(replayer.model.gpu_samples) == 2


def test_pause_holds_playback_and_cancel_ends_it(tmp_path: Path) -> None:
    events = [{"type": "gpu", "t": float(i) * 0.01, "run": None, "host": {}} for i in range(50)]
    path = write_session(tmp_path, events)

    async def scenario() -> tuple[int, int, str]:
        replayer = Replayer(path, speed=1.0)
        replayer.pause()
        task = asyncio.create_task(replayer.run())
        await asyncio.sleep(0.05)
        held = replayer.model.events
        replayer.resume()
        await asyncio.sleep(0.1)
        replayer.cancel()
        status = await task
        return held, replayer.model.events, status

    held, played, status = asyncio.run(scenario())
    assert held == 0
    assert 0 < played < 50
    assert status == "interrupted"


def test_infinite_speed_plays_everything_without_sleeping(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTime()
    monkeypatch.setattr(replay_mod.asyncio, "sleep", fake.sleep)
    replayer = Replayer(TINY, speed=math.inf, clock=fake.clock)
    assert asyncio.run(replayer.run()) == "complete"
    assert all(s == 0 for s in fake.sleeps)  # only the yields between bursts


def test_replay_folds_to_the_same_model_as_load_session() -> None:
    replayed = replay_all(TINY).model
    loaded = load_session(TINY).model
    assert replayed.events == loaded.events
    assert [(r.framework, r.status, r.mean_epoch_s) for r in replayed.rows()] == [
        (r.framework, r.status, r.mean_epoch_s) for r in loaded.rows()
    ]
    assert [r.status for r in replayed.rows()] == ["ok", "ok"]


def test_a_cut_off_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = write_session(tmp_path, [{"type": "gpu", "t": 1.0, "run": None, "host": {}}])
    with open(path / "events.jsonl", "a") as fh:
        fh.write('{"type":"gpu","t":2.')
    replayer = replay_all(path)
    assert replayer.model.events == 1
    assert any("cut off" in w for w in replayer.warnings)


def test_not_a_session_is_a_session_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError):
        Replayer(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SessionError):
        Replayer(tmp_path / "empty")
    with pytest.raises(ValueError):
        Replayer(TINY, speed=0)


def test_the_engine_and_the_replayer_are_both_session_sources(tmp_path: Path) -> None:
    """The live screen drives either through SessionSource alone: both have every member, and say what differs."""
    from benchtui.core.running.engine import Engine
    from benchtui.core.running.source import SessionSource
    from benchtui.core.store.session import SessionWriter

    replayer = Replayer(TINY)
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        runs=1,
        epochs=1,
        samples=16,
        batch_sizes={"resnet50": 8},
        image_size=32,
        device="cpu",
    )
    writer = SessionWriter.create(plan, tmp_path)
    engine = Engine(plan, writer)
    try:
        assert isinstance(replayer, SessionSource)
        assert isinstance(engine, SessionSource)
        assert replayer.is_replay and not engine.is_replay
        assert not replayer.runner_active and not engine.runner_active  # nothing started yet
        assert engine.path == writer.path and engine.meta is writer.meta
        assert engine.log_path("r1") == writer.path / "logs" / "r1.log"
        assert replayer.log_path("r1") == TINY / "logs" / "r1.log"
        replayer.stop_current()  # nothing to stop in a recording: no error, nothing changes
        replayer.skip_model()
        assert replayer.status == "pending" and not replayer.cancelled
    finally:
        writer.close()
