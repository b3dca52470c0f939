"""Fault injection: nothing a runner, a disk or a flag can do takes benchtui down or changes its numbers.

A hostile stand-in runner (tests/data/hostile_runner.py) is started through ``--python``,
exactly as a real runner is, by the real CLI in a fresh process; the disk-full case runs the
real engine over real pipes with events.jsonl on /dev/full (ENOSPC from the kernel).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchtui.core.plan.plan import Plan
from benchtui.core.running.launcher import LOG_CAP_BYTES, LOG_TAIL_BYTES
from benchtui.core.running.session_run import start_session
from benchtui.core.store.session import list_sessions, load_session
from support import benchtui, only_session

HOSTILE = Path(__file__).parent / "data" / "hostile_runner.py"


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} in strict JSON")


def strict_json(path: Path) -> object:
    return json.loads(path.read_text(), parse_constant=_no_constant)


@pytest.fixture
def hostile_python(tmp_path: Path) -> Path:
    script = tmp_path / "hostile-python"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {HOSTILE} "$@"\n')
    script.chmod(0o755)
    return script


def run_hostile(
    tmp_path: Path, python: Path, modes: str, *extra: str, frameworks: str = "torch", timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    root = tmp_path / "sessions"
    args = ["run", "--headless", "--frameworks", frameworks, "--models", "resnet50", "--image-size", "32"]
    args += ["--samples", "32", "--batch-size", "8", "--epochs", "2", "--runs", "1", "--device", "cpu"]
    args += ["--no-nvml", "--sessions-dir", str(root), *extra]
    args += [f"--python={fw}={python}" for fw in frameworks.split(",")]
    started = time.monotonic()
    proc = benchtui(*args, env={"BENCHTUI_HOSTILE": modes}, timeout=timeout)
    return proc, only_session(root), time.monotonic() - started


MEASURED = ("mean_epoch_s", "first_epoch_s", "mean_epoch_excl_first_s", "images_per_s")


def figures(session: Path) -> dict[str, object]:
    """Each run's figures from what the runner measured (not the wall-clock phases, which differ run to run)."""
    out: dict[str, object] = {}
    for rid, run in load_session(session).model.runs.items():
        got = run.figures()
        out[rid] = ({k: got[k] for k in MEASURED}, run.batch_seconds.tolist(), run.missing_steps)
    return out


def assert_readable(session: Path) -> None:
    """Every reader takes the session: show, every export, compare (no traceback, rc 0)."""
    for args in (
        ["show", str(session)],
        *(
            ["export", str(session), "--format", f, "-o", str(session.parent / f"x.{f}")]
            for f in ("md", "csv", "json", "html")
        ),
        ["compare", str(session), str(session), "--fail-above", "5"],
    ):
        proc = benchtui(*args)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])


# -- values from the pipe ---------------------------------------------------------------------
def test_nonsense_values_are_counted_malformed_and_change_no_figure(
    tmp_path: Path, hostile_python: Path
) -> None:
    good, good_session, _ = run_hostile(tmp_path / "good", hostile_python, "")
    proc, session, _ = run_hostile(tmp_path / "bad", hostile_python, "bad-values")
    assert good.returncode == 0 and proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    # Zero, 1e308, NaN, Infinity and -1 seconds, a dict and a string for steps_per_epoch, 1e999:
    # each is a malformed line with its reason in the run's log; nothing of them is folded.
    log = (session / "logs" / "001-torch-resnet50-1.log").read_text()
    for reason in (
        "batch.seconds is 0, outside",
        "batch.seconds is 1e+308",
        "NaN is not a number",
        "Infinity is not a number",
        "hello.steps_per_epoch is dict",
        "hello.steps_per_epoch is str",
        "1e999 is too large",
    ):
        assert reason in log
    summary = strict_json(session / "summary.json")  # no NaN in it: strict parsers read it
    assert isinstance(summary, dict) and summary["malformed_lines"] >= 14
    assert figures(session) == figures(good_session)
    run_end = [e for e in map(json.loads, (session / "events.jsonl").open()) if e["type"] == "run_end"]
    assert run_end[0]["status"] == "ok" and run_end[0]["malformed"] == 14
    assert_readable(session)


def test_a_runner_cannot_retag_its_events(tmp_path: Path, hostile_python: Path) -> None:
    proc, session, _ = run_hostile(tmp_path, hostile_python, "run-tag", frameworks="torch,tensorflow")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (session / "events.jsonl").read_text().splitlines()
    tf_lines = [
        line for line in lines if '"framework": "tensorflow"' in line or "tensorflow-resnet50" in line
    ]
    assert tf_lines and all(line.count('"run"') == 1 for line in lines)
    for line in lines:
        event = json.loads(line)
        if event["type"] == "hello" and event.get("framework") == "tensorflow":
            assert event["run"] == "002-tensorflow-resnet50-1"  # not the id the runner wrote
    # summary.json is what the events fold to: recomputable.
    recomputed = json.loads(json.dumps(load_session(session).model.summary()))
    assert recomputed == strict_json(session / "summary.json")
    assert load_session(session).model.runs["002-tensorflow-resnet50-1"].status == "ok"


def test_an_overlong_line_is_one_malformed_line(tmp_path: Path, hostile_python: Path) -> None:
    proc, session, _ = run_hostile(tmp_path, hostile_python, "overlong")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_end = [e for e in map(json.loads, (session / "events.jsonl").open()) if e["type"] == "run_end"]
    assert run_end[0]["malformed"] == 1 and run_end[0]["status"] == "ok"


def test_a_runner_log_is_capped(tmp_path: Path, hostile_python: Path) -> None:
    proc, session, _ = run_hostile(tmp_path, hostile_python, "flood")
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = session / "logs" / "001-torch-resnet50-1.log"
    size = log.stat().st_size
    assert LOG_CAP_BYTES <= size <= LOG_CAP_BYTES + LOG_TAIL_BYTES + 500  # 80 MB written
    assert b"this log reached its cap" in log.read_bytes()[LOG_CAP_BYTES:]


# -- the watchdog -----------------------------------------------------------------------------
def test_a_stopped_runner_is_failed_as_stalled(tmp_path: Path, hostile_python: Path) -> None:
    proc, session, took = run_hostile(tmp_path, hostile_python, "stall", "--stall-timeout", "3")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert took < 60
    run = load_session(session).model.runs["001-torch-resnet50-1"]
    assert run.status == "failed" and run.reason.startswith("stalled: the runner sent nothing for 3 s")
    assert json.loads((session / "session.json").read_text())["status"] == "failed"
    pid = run.hello["pid"]
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_grandchild_holding_the_pipe_does_not_hold_the_session(
    tmp_path: Path, hostile_python: Path
) -> None:
    proc, session, took = run_hostile(tmp_path, hostile_python, "grandchild")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert took < 60  # the grandchild would hold the pipe for 10 minutes
    assert load_session(session).model.runs["001-torch-resnet50-1"].status == "ok"


def test_stall_limit_is_derived_from_the_run() -> None:
    from benchtui.core.model.runs import RunState
    from benchtui.core.plan.plan import run_order
    from benchtui.core.running.engine import STALL_BEFORE_STEPS_S, STALL_FLOOR_S, stall_limit

    run = RunState(run_order(Plan(models=["resnet50"], runs=1))[0], 5)
    assert stall_limit(0, run) == STALL_BEFORE_STEPS_S  # nothing timed yet: building, compiling
    run.window_max_s = 0.3
    assert stall_limit(0, run) == STALL_FLOOR_S
    run.window_max_s = 10.0
    assert stall_limit(0, run) == 500.0
    run.phase = "flops"
    assert stall_limit(0, run) == STALL_BEFORE_STEPS_S
    assert stall_limit(7.0, run) == 7.0 and stall_limit(-1, run) is None


# -- storage ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["file", "under-a-file", "unwritable"])
def test_an_unusable_sessions_folder_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    (tmp_path / "f").write_text("not a folder")
    target = {
        "file": tmp_path / "f",
        "under-a-file": tmp_path / "f" / "sessions",
        "unwritable": Path("/proc/benchtui-sessions"),
    }[kind]
    proc = benchtui("run", "--headless", "--sessions-dir", str(target), "--no-nvml", "--device", "cpu")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("benchtui: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_full_disk_stops_the_session_cleanly(tmp_path: Path, hostile_python: Path) -> None:
    """events.jsonl on /dev/full: the kernel answers ENOSPC to the first event written."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    plan = Plan(
        frameworks=["torch", "tensorflow"],
        models=["resnet50"],
        image_size=32,
        samples=32,
        batch_sizes={"resnet50": 8},
        epochs=2,
        runs=2,
        device="cpu",
        python={"torch": str(hostile_python), "tensorflow": str(hostile_python)},
    ).validate()
    session = start_session(plan, tmp_path / "sessions", use_nvml=False)
    writer = session.writer
    writer._events.close()
    writer._events = open("/dev/full", "w", encoding="utf-8")  # the writer closes it

    status = asyncio.run(session.engine.run())
    assert status == "failed" and writer.failure.startswith("disk full while writing events.jsonl")
    meta = json.loads((writer.path / "session.json").read_text())
    assert meta["status"] == "failed" and meta["failure"] == writer.failure
    assert not list(writer.path.rglob("*.tmp"))
    # The plan stopped at the first run: the rest never started.
    assert [r.status for r in session.engine.model.runs.values()].count("skipped") == 3


def test_a_full_disk_on_the_command_line_is_one_line_and_exit_1(tmp_path: Path, hostile_python: Path) -> None:
    """A real full disk: a 1 MiB tmpfs (in a user and mount namespace) that the session outgrows."""
    root = tmp_path / "small"
    root.mkdir()
    args = ["run", "--headless", "--frameworks", "torch,tensorflow", "--models", "resnet50"]
    args += ["--image-size", "32", "--samples", "20000", "--batch-size", "1", "--epochs", "2", "--runs", "1"]
    args += ["--device", "cpu", "--no-nvml", "--sessions-dir", str(root)]
    args += [f"--python={fw}={hostile_python}" for fw in ("torch", "tensorflow")]
    inner = (
        f"mount -t tmpfs -o size=1m tmpfs {root} || exit 77; "
        f"{sys.executable} -m benchtui {' '.join(args)} >/dev/null; echo rc=$? >&2; "
        f"cat {root}/*/session.json; echo; ls -a {root}/*"
    )
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", inner], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    if proc.returncode == 77 or "unshare:" in proc.stderr:
        pytest.skip(f"no user namespace with tmpfs here: {proc.stderr.strip()[:200]}")
    assert "rc=1" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("benchtui: error:")]
    assert len(errors) == 1 and "disk full while writing events.jsonl" in errors[0]
    meta = json.loads(proc.stdout[: proc.stdout.rindex("}") + 1])
    assert meta["status"] == "failed" and meta["failure"].startswith("disk full")
    assert ".tmp" not in proc.stdout  # no temporary file left


# -- bounds -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flag",
    [
        ["--runs", "999999999"],
        ["--epochs", "10000000"],
        ["--samples", "1000000000000"],
        ["--interval", "inf"],
        ["--interval", "nan"],
        ["--interval", "1e-6"],
        ["--stall-timeout", "0.001"],
        ["--stall-timeout", "soon"],
        ["--name", "x\x1b]0;owned\x07"],
        ["--name", "n" * 500],
        ["--learning-rate", "nan"],
        ["--batch-size", "99999999999"],
    ],
)
def test_unbounded_flags_are_one_line_and_exit_2(tmp_path: Path, flag: list[str]) -> None:
    proc = benchtui(
        "run", "--headless", "--no-nvml", "--device", "cpu", "--sessions-dir", str(tmp_path), *flag
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("benchtui: error: ") and not list(tmp_path.iterdir())


# -- dead sessions ----------------------------------------------------------------------------
def test_a_session_whose_writer_is_gone_shows_abandoned(tmp_path: Path, hostile_python: Path) -> None:
    """kill -9 of the parent mid-run: session.json says "running" for ever, but its writer is gone."""
    root = tmp_path / "sessions"
    args = ["run", "--headless", "--frameworks", "torch", "--models", "resnet50", "--image-size", "32"]
    args += ["--samples", "32", "--batch-size", "8", "--epochs", "2", "--runs", "1", "--device", "cpu"]
    args += ["--no-nvml", "--sessions-dir", str(root), f"--python=torch={hostile_python}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtui", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "BENCHTUI_HOSTILE": "stall"},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and b'"first_batch"' not in b"".join(
        p.read_bytes() for p in root.glob("*/events.jsonl")
    ):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    session = only_session(root)
    for child in root.glob("*/events.jsonl"):  # the stopped runner outlives its parent: stop it
        for line in child.read_text().splitlines():
            event = json.loads(line)
            if event["type"] == "hello":
                os.kill(event["pid"], signal.SIGKILL)
    assert json.loads((session / "session.json").read_text())["status"] == "running"
    assert [s["status"] for s in list_sessions(root)] == ["abandoned"]
    loaded = load_session(session)
    assert loaded.meta["status"] == "abandoned"
    assert any("abandoned" in w and "the process writing it is gone" in w for w in loaded.warnings)
    assert loaded.model.runs["001-torch-resnet50-1"].status == "interrupted"
    shown = benchtui("sessions", "--sessions-dir", str(root))
    assert shown.returncode == 0 and "abandoned" in shown.stdout
