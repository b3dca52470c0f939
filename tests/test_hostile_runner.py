"""A hostile runner and faults of benchtui's own: a failed session is never "complete", and no line from the
pipe can crash the parent, pose as the parent, exhaust its memory or replace what was already recorded.

The runner is tests/data/hostile_runner.py, started by the real CLI through ``--python`` as a real
runner is (test_faults.py's ``run_hostile``); the engine's own faults are injected in-process into
a real engine running real runner processes over real pipes.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.plan.plan import Plan
from benchtui.core.running import engine as engine_module
from benchtui.core.running.session_run import start_session
from benchtui.core.store.session import list_sessions, load_session
from benchtui.core.wire.events import Malformed, parse_line
from support import ROOT, benchtui, only_session
from test_faults import assert_readable, figures, hostile_python, run_hostile, strict_json

__all__ = ["hostile_python"]  # the fixture, imported for pytest


def hostile_plan(python: Path, runs: int) -> Plan:
    """PyTorch's ResNet50 at 32 px, 4 steps an epoch, 2 epochs, run by the hostile runner."""
    return Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=32,
        batch_sizes={"resnet50": 8},
        epochs=2,
        runs=runs,
        device="cpu",
        python={"torch": str(python)},
    ).validate()


def events_of(session: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]


def run_end_of(session: Path) -> dict[str, Any]:
    ends = [e for e in events_of(session) if e["type"] == "run_end"]
    assert len(ends) == 1, ends
    return ends[0]


def test_any_parser_error_is_one_malformed_line() -> None:
    """json.loads raises a plain ValueError past Python's int-size limit, RecursionError when nested deep."""
    for line in (
        '{"type":"batch","epoch":1,"step":1,"seconds":0.1,"samples":' + "9" * 5000 + "}",
        "[" * 100_000 + "]" * 100_000,
        '{"type":"hello","a":' * 50_000 + "1" + "}" * 50_000,
        '{"type":"x","a":' + "[" * 600 + "]" * 600 + "}",  # the parser takes it; the walk after must too
        b"\xff\xfe",
    ):
        with pytest.raises(Malformed):
            parse_line(line)
    event = parse_line('{"type":"error","kind":"exception","message":"in /home/\\udce9t\\u00e9/m.py"}')
    assert event["message"] == "in /home/\ufffdt\u00e9/m.py"  # a lone surrogate no writer can encode
    event["message"].encode("utf-8")


HUGE_INT_SCRIPT = """
import json, os, time
fd = int(os.environ["BENCHTUI_EVENT_FD"])
os.write(fd, b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"samples":' + b"9" * 5000 + b"}\\n")
os.write(fd, (json.dumps({"type": "hello", "t": time.monotonic(), "framework": "torch"}) + "\\n").encode())
print("after the line")
"""


def test_a_huge_integer_is_one_bad_line_for_watch_and_for_every_collector(tmp_path: Path) -> None:
    """``benchtui watch`` and ``collect_events`` (doctor, parity) read the same pipe through parse_line."""
    from benchtui.core.running.launcher import collect_events, start_command

    script = tmp_path / "huge.py"
    script.write_text(HUGE_INT_SCRIPT)
    root = tmp_path / "sessions"
    proc = benchtui("watch", "--headless", "--sessions-dir", str(root), "--", sys.executable, str(script))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    session = only_session(root)
    assert json.loads((session / "session.json").read_text())["status"] == "complete"
    assert run_end_of(session)["malformed"] == 1

    async def collect() -> list[dict[str, Any]]:
        with open(tmp_path / "log", "wb") as log:
            started = await start_command([sys.executable, str(script)], log, tmp_path)
            try:
                return await collect_events(started)
            finally:
                started.close()

    assert [e["type"] for e in asyncio.run(collect())] == ["hello"]


def test_an_integer_past_pythons_limit_is_one_malformed_line(tmp_path: Path, hostile_python: Path) -> None:
    good, good_session, _ = run_hostile(tmp_path / "good", hostile_python, "")
    proc, session, _ = run_hostile(tmp_path / "bad", hostile_python, "huge-int")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert json.loads((session / "session.json").read_text())["status"] == "complete"
    assert run_end_of(session)["malformed"] == 1 and run_end_of(session)["status"] == "ok"
    assert figures(session) == figures(good_session)


def test_a_huge_integer_in_a_batch_size_probe_is_one_bad_line(tmp_path: Path, hostile_python: Path) -> None:
    proc, session, _ = run_hostile(tmp_path, hostile_python, "huge-int", "--batch-size", "auto")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    probes = [e for e in events_of(session) if e["type"] == "probe"]
    assert probes and all(p["result"] == "ok" for p in probes)


def test_a_runner_cannot_send_the_parents_events(tmp_path: Path, hostile_python: Path) -> None:
    good, good_session, _ = run_hostile(tmp_path / "good", hostile_python, "")
    proc, session, _ = run_hostile(tmp_path / "bad", hostile_python, "parent-types")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    end = run_end_of(session)  # the parent's only: the runner's "ok" run_end was refused
    assert end["status"] == "ok" and end["malformed"] == 8
    events = events_of(session)
    types = [e["type"] for e in events]
    for kind in ("energy", "probe_start", "probe", "batch_choice"):
        assert kind not in types, kind
    assert types.count("session_end") == 1 and types[-1] == "session_end"
    assert types.count("counters") == 1 and types.count("run_end") == 1  # the parent's own
    assert not [e for e in events if e["type"] == "gpu" and e.get("host") == {}]  # the runner's fake sample
    log = (session / "logs" / "001-torch-resnet50-1.log").read_text()
    assert "a 'run_end' event is the parent's to write, not a runner's" in log
    loaded = load_session(session)
    assert loaded.model.counters and loaded.model.counters["source"] != "hostile"
    assert not loaded.model.probes and not loaded.model.batch_choices
    row = strict_json(session / "summary.json")["rows"][0]  # type: ignore[index]
    assert row["joules_per_image"] is None  # no energy on a --no-nvml CPU session
    assert figures(session) == figures(good_session)


def test_a_window_beyond_the_plan_is_refused_and_never_expanded(tmp_path: Path, hostile_python: Path) -> None:
    """A schema-valid batch line standing for 10**7 steps (10**9 took 8 GB and the OOM killer took the parent)."""
    good, good_session, _ = run_hostile(tmp_path / "good", hostile_python, "")
    proc, session, _ = run_hostile(tmp_path / "bad", hostile_python, "huge-window")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert figures(session) == figures(good_session)
    summary = strict_json(session / "summary.json")
    assert isinstance(summary, dict) and summary["malformed_lines"] == 1
    loaded = load_session(session)  # the line is in events.jsonl: loading refuses it the same way
    assert len(loaded.model.runs["001-torch-resnet50-1"].batch_seconds) == 8
    assert_readable(session)


def test_a_second_hello_and_a_late_epoch_do_not_replace_the_first(
    tmp_path: Path, hostile_python: Path
) -> None:
    good, good_session, _ = run_hostile(tmp_path / "good", hostile_python, "")
    for mode in ("second-hello", "dup-epoch"):
        proc, session, _ = run_hostile(tmp_path / mode, hostile_python, mode)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert figures(session) == figures(good_session), mode
        summary = strict_json(session / "summary.json")
        assert isinstance(summary, dict) and summary["malformed_lines"] == 1, mode
        run = load_session(session).model.runs["001-torch-resnet50-1"]
        assert run.hello["samples_per_epoch"] == 32


def test_a_hello_that_disagrees_with_the_plan_is_refused() -> None:
    from benchtui.core.model.session_model import SessionModel

    plan = Plan(frameworks=["torch"], models=["resnet50"], samples=32, batch_sizes={"resnet50": 8}, runs=1)
    model = SessionModel(plan.validate())
    run_id = next(iter(model.runs))
    model.apply({"type": "hello", "t": 1.0, "run": run_id, "steps_per_epoch": 4, "samples_per_epoch": 10**12})
    assert model.malformed == 1 and not model.runs[run_id].hello
    model.apply({"type": "hello", "t": 1.0, "run": run_id, "steps_per_epoch": 4, "samples_per_epoch": 32})
    assert model.malformed == 1 and model.runs[run_id].hello["samples_per_epoch"] == 32


def test_a_flop_count_above_the_devices_peak_is_refused(tmp_path: Path, hostile_python: Path) -> None:
    proc, session, _ = run_hostile(tmp_path, hostile_python, "huge-flops")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    row = strict_json(session / "summary.json")["rows"][0]  # type: ignore[index]
    assert row["achieved_tflops"] is None and row["flops_per_step"] is None
    assert row["flops_reason"].startswith("FLOP count refused")
    assert any(w["kind"] == "flops-refused" and "more than any CPU" in w["message"] for w in row["warnings"])
    shown = benchtui("show", str(session))
    assert "FLOP count refused" in shown.stdout
    assert not [line for line in shown.stdout.splitlines() if "e+20" in line and "refused" not in line]


def test_an_interrupted_runs_completed_epochs_are_shown(tmp_path: Path, hostile_python: Path) -> None:
    """Epoch 1 done, then Ctrl+C: its epoch and its build are in show, md and json, said as partial."""
    root = tmp_path / "sessions"
    args = ["run", "--headless", "--frameworks", "torch", "--models", "resnet50", "--image-size", "32"]
    args += ["--samples", "32", "--batch-size", "8", "--epochs", "3", "--runs", "1", "--device", "cpu"]
    args += ["--no-nvml", "--sessions-dir", str(root), f"--python=torch={hostile_python}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtui", *args],
        cwd=ROOT,
        env={**__import__("os").environ, "BENCHTUI_HOSTILE": "hang-after-1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        sessions = [p for p in root.glob("*") if (p / "events.jsonl").exists()] if root.exists() else []
        if sessions and '"type":"epoch"' in (sessions[0] / "events.jsonl").read_text().replace(" ", ""):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    session = only_session(root)
    row = strict_json(session / "summary.json")["rows"][0]  # type: ignore[index]
    assert row["status"] == "incomplete" and row["runs"] == 0 and row["partial_runs"] == 1
    assert row["first_epoch_s"] == pytest.approx(0.04) and row["build_s"] is not None
    assert row["warnings"][0]["kind"] == "partial" and "1 of 3 epoch(s)" in row["warnings"][0]["message"]
    shown = benchtui("show", str(session)).stdout
    assert "0.04" in shown and "1 of 3 epoch(s)" in shown
    md = benchtui("export", str(session), "--format", "md").stdout
    assert "1 of 3 epoch(s)" in md
    exported = json.loads(benchtui("export", str(session), "--format", "json").stdout)
    assert json.dumps(exported).count("partial_runs") >= 1


def test_a_log_the_disk_refuses_is_said_in_the_session(
    tmp_path: Path, hostile_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's log on /dev/full (ENOSPC from the kernel): the run itself is fine, its row says what the
    log lost, and nothing raises at the log's close."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    plan = hostile_plan(hostile_python, runs=1)
    monkeypatch.setenv("BENCHTUI_HOSTILE", "chatter")
    session = start_session(plan, tmp_path / "sessions", use_nvml=False)
    monkeypatch.setattr(session.writer, "log_path", lambda run_id: Path("/dev/full"))
    assert asyncio.run(session.engine.run()) == "complete"
    end = run_end_of(session.path)
    assert end["status"] == "ok" and "No space left on device" in end["log_problem"]
    row = strict_json(session.path / "summary.json")["rows"][0]  # type: ignore[index]
    assert [w["kind"] for w in row["warnings"]] == ["log-cut"]
    assert "log is incomplete" in benchtui("show", str(session.path)).stdout


# -- benchtui's own faults: the session says "failed", with the reason --------------------------------
STAGES = ("begin", "start_runner", "apply", "listener", "summary")


@pytest.mark.parametrize("stage", STAGES)
def test_an_exception_in_the_engine_fails_the_session(
    tmp_path: Path, hostile_python: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    plan = hostile_plan(hostile_python, runs=3)
    seen: list[str] = []

    def listener(event: dict[str, Any]) -> None:
        seen.append(event["type"])
        if stage == "listener" and event["type"] == "epoch":
            raise RuntimeError("injected in the listener")

    session = start_session(plan, tmp_path / "sessions", use_nvml=False, listener=listener)
    engine = session.engine

    def boom(*args: object, **kwargs: object) -> Any:
        raise RuntimeError(f"injected at {stage}")

    if stage == "begin":
        monkeypatch.setattr(engine, "_place", boom)
    elif stage == "start_runner":
        monkeypatch.setattr(engine_module, "start_runner", boom)
    elif stage == "apply":
        real = engine.model.apply

        def apply(event: dict[str, Any]) -> None:
            if event.get("type") == "epoch" and event.get("run") == "002-torch-resnet50-2":
                raise RuntimeError("injected in the fold")
            real(event)

        monkeypatch.setattr(engine.model, "apply", apply)
    elif stage == "summary":
        monkeypatch.setattr(engine.model, "summary", boom)

    status = asyncio.run(engine.run())
    assert status == "failed"
    meta = json.loads((session.path / "session.json").read_text())
    assert meta["status"] == "failed" and meta["failure"].startswith("benchtui stopped on an internal error")
    assert "injected" in meta["failure"] and "RuntimeError" in meta["error_traceback"]
    loaded = load_session(session.path)
    statuses = {rid: str(r.status) for rid, r in loaded.model.runs.items()}
    assert "queued" not in statuses.values() and "running" not in statuses.values(), statuses
    if stage in ("begin", "start_runner"):
        assert statuses["001-torch-resnet50-1"] in ("failed", "skipped")
    if stage in ("apply",):
        assert statuses["001-torch-resnet50-1"] == "ok"  # what finished before stays as it was
        assert statuses["002-torch-resnet50-2"] == "failed" and statuses["003-torch-resnet50-3"] == "skipped"
    [listed] = list_sessions(tmp_path / "sessions")
    assert listed["status"] == "failed"


def test_an_exception_in_the_watch_engine_fails_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchtui.core.plan.plan import watch_plan

    script = tmp_path / "train.py"
    script.write_text(HUGE_INT_SCRIPT)  # a hello after one bad line: the fold fails on the hello
    session = start_session(
        watch_plan([sys.executable, str(script)], str(tmp_path)), tmp_path / "s", use_nvml=False
    )
    real = session.engine.model.apply

    def apply(event: dict[str, Any]) -> None:
        if event.get("type") == "hello":
            raise RuntimeError("injected in the fold")
        real(event)

    monkeypatch.setattr(session.engine.model, "apply", apply)
    assert asyncio.run(session.engine.run()) == "failed"
    meta = json.loads((session.path / "session.json").read_text())
    assert meta["status"] == "failed" and "injected in the fold" in meta["failure"]
    assert [str(r.status) for r in load_session(session.path).model.runs.values()] == ["failed"]


@pytest.mark.parametrize("bad", ["NaN", "-nan", "Infinity", True, {"loss": 1.0}, [1.0]])
def test_a_loss_the_wire_does_not_allow_is_one_malformed_line(tmp_path: Path, bad: Any) -> None:
    """An epoch's loss is a number or exactly "nan" / "inf" / "-inf" (issue 36): any other value makes that
    epoch line one malformed line, said in the run's log; the other epochs' losses are read as sent."""
    from support import stand_in_session

    third = [bad, 0.5, 1.5] if isinstance(bad, list) else bad  # a list entry is [mean, min, max]
    _, path, engine = stand_in_session(tmp_path, [[2.5, 2.0, 3.0], "inf", third])
    (run,) = engine.model.runs.values()
    assert run.malformed == 1
    log = (path / "logs" / f"{run.spec.run_id}.log").read_text(errors="replace")
    assert log.count("malformed event line (epoch.loss ") == 1
    assert run.losses == {1: 2.5, 2: float("inf")} and (run.loss_mins, run.loss_maxs) == ({1: 2.0}, {1: 3.0})
    recorded = [e for e in events_of(path) if e["type"] == "epoch"]
    assert [e["epoch"] for e in recorded] == [1, 2]  # the malformed line is not recorded
