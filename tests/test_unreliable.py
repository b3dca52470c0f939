"""A verdict that says when the machine made it (issue 30): when other processes kept busy the cores a
cell's runs needed, the verdict is marked "unreliable: …", names whose runs and how many of the host's
cores, and claims no winner; on an idle machine the mark goes away. Also: "about the same", a cell
interrupted after some runs is "incomplete", each epoch's time to its first batch, and compare speaking
the verdict's language. The real runs under a stand-in load are in ``test_unreliable_runs``."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from benchtui.cli import main
from benchtui.core.model.session_model import CONTENTION_SLACK_CORES, SessionModel
from benchtui.core.model.status import CautionKind
from benchtui.core.plan.plan import Plan, run_order, watch_plan
from benchtui.core.reporting import terminal
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.model import CI_NOTE, answer
from benchtui.core.store.session import LoadedSession, load_session
from sessionfactory import make_session
from support import small_plan


def _plan(**kw: Any) -> Plan:
    return small_plan(**{"device": "cpu", **kw})


def _run(
    run: str,
    seconds: float,
    others: float | None,
    threads: int = 2,
    device: str = "cpu",
    to_first_batch: dict[int, Any] | None = None,
    status: str = "ok",
    epochs: int = 3,
) -> list[dict[str, Any]]:
    """One run's events as the engine records them: its hello (device, thread pool), its epochs, and its
    run_end with the CPU other processes used during it (``others``, cores; None: not sampled)."""
    ev: list[dict[str, Any]] = [
        {"type": "run_start", "run": run, "t": 0.0},
        {
            "type": "hello",
            "run": run,
            "t": 1.0,
            "steps_per_epoch": 2,
            "samples_per_epoch": 16,
            "device": {"type": device},
            "config": {"batch_size": 8, "threads": threads},
            "settings": {"intra_op_threads": threads},
        },
    ]
    for e in range(1, epochs + 1):
        epoch: dict[str, Any] = {
            "type": "epoch",
            "run": run,
            "t": 2.0,
            "epoch": e,
            "seconds": seconds,
            "samples": 16,
        }
        if to_first_batch and e in to_first_batch:
            epoch["to_first_batch_s"] = to_first_batch[e]
        ev.append(epoch)
    end: dict[str, Any] = {"type": "run_end", "run": run, "t": 3.0, "status": status}
    if others is not None:
        end["other_cpu_cores"] = others
    return ev + [end]


def _model(
    others: dict[str, float | None],
    cores: int | None = 2,
    threads: int = 2,
    device: str = "cpu",
    seconds: dict[str, float] | None = None,
    **plan: Any,
) -> SessionModel:
    """Two frameworks, two runs each, PyTorch 1.5× faster; ``others`` per framework."""
    p = _plan(**plan)
    model = SessionModel(p, host={"cpu_count": cores} if cores is not None else None)
    speed = seconds or {"torch": 2.0, "tensorflow": 3.0}
    for spec in run_order(p):
        jitter = 1 + 0.01 * spec.index
        for event in _run(
            spec.run_id, speed[spec.framework] * jitter, others[spec.framework], threads, device
        ):
            model.apply(event)
    return model


# -- the mark ---------------------------------------------------------------------------------------
def test_a_loaded_cpu_marks_the_verdict_and_claims_no_winner() -> None:
    model = _model({"torch": 1.6, "tensorflow": 0.1})
    (verdict,) = model.summary()["ratios"]
    reason = "other processes kept 1.6 of 2 cores busy during PyTorch's runs (on 2 threads)"
    assert verdict["unreliable"] == reason
    assert verdict["faster_framework"] is None
    assert verdict["text"].startswith(f"unreliable: {reason}; measured, not a verdict: ")
    # What was measured follows, plainly not a verdict: no "faster" claimed.
    assert "tf.keras took 1.5" in verdict["text"] and "× PyTorch's time" in verdict["text"]
    assert "faster" not in verdict["text"]
    # The row's caution says the same, and that the verdict claims no winner.
    row = model.row("torch", "resnet50")
    (load,) = [w for w in row.warnings if w["kind"] == CautionKind.CPU_CONTENTION]
    assert load["message"].startswith(
        "other processes kept 1.6 of 2 cores busy during a run that used 2 threads"
    )
    assert "its verdict claims no winner" in load["message"] and "--threads N" in load["message"]


def test_a_run_on_one_thread_is_not_told_to_use_fewer() -> None:
    # The idle cores measured before the plan were 1 (or --threads 1): no smaller pool to give it.
    model = _model({"torch": 1.4, "tensorflow": 1.4}, threads=1)
    (load,) = [w for w in model.row("torch", "resnet50").warnings if w["kind"] == CautionKind.CPU_CONTENTION]
    assert "used 1 thread" in load["message"] and load["message"].endswith(
        "stop the other work and run again"
    )
    assert "--threads" not in load["message"]


def test_both_sides_loaded_are_both_named() -> None:
    (verdict,) = _model({"torch": 1.6, "tensorflow": 0.9}).summary()["ratios"]
    assert verdict["unreliable"] == (
        "other processes kept 1.6 of 2 cores busy during PyTorch's runs (on 2 threads) and 0.9 of 2 cores "
        "busy during tf.keras's runs (on 2 threads)"
    )


def test_the_mark_goes_away_on_an_idle_machine() -> None:
    # The same runs, the same code path: only the load other processes put on the cores differs.
    idle = _model({"torch": 0.1, "tensorflow": 0.05})
    (verdict,) = idle.summary()["ratios"]
    assert verdict["unreliable"] is None and verdict["faster_framework"] == "torch"
    assert verdict["text"].startswith("PyTorch 1.5") and "× faster than tf.keras" in verdict["text"]
    assert not [w for r in idle.rows() for w in r.warnings if w["kind"] == CautionKind.CPU_CONTENTION]


@pytest.mark.parametrize(
    ("threads", "others", "marked"),
    [
        # 2 cores, 2 threads: any load beyond the slack reaches into the run's cores.
        (2, CONTENTION_SLACK_CORES, False),
        (2, CONTENTION_SLACK_CORES + 0.05, True),
        # 2 cores, 1 thread (the issue's --threads 1): one core is the run's, the other is for the rest.
        (1, 1.0 + CONTENTION_SLACK_CORES, False),
        (1, 1.0 + CONTENTION_SLACK_CORES + 0.05, True),
        # More threads than cores: the run needed them all, the rule is as for 2.
        (8, 0.2, False),
        (8, 0.4, True),
    ],
)
def test_the_rule_is_others_beyond_the_cores_the_run_left_idle(
    threads: int, others: float, marked: bool
) -> None:
    (verdict,) = _model({"torch": others, "tensorflow": 0.0}, threads=threads).summary()["ratios"]
    assert (verdict["unreliable"] is not None) is marked
    assert verdict["text"].startswith("unreliable: ") is marked
    assert (verdict["faster_framework"] is None) is marked


def test_a_gpu_run_needs_one_host_core() -> None:
    # On a GPU the device does the arithmetic: a host busy elsewhere matters only when it leaves less
    # than the core that feeds the device.
    (verdict,) = _model({"torch": 6.0, "tensorflow": 6.0}, cores=8, device="cuda").summary()["ratios"]
    assert verdict["unreliable"] is None
    (verdict,) = _model({"torch": 7.5, "tensorflow": 0.0}, cores=8, device="cuda").summary()["ratios"]
    assert (
        verdict["unreliable"] == "other processes kept 7.5 of 8 cores busy during PyTorch's runs (on the GPU)"
    )


def test_without_the_hosts_cores_no_verdict_loses_its_winner_on_a_guess() -> None:
    model = _model({"torch": 1.6, "tensorflow": 0.0}, cores=None)
    (verdict,) = model.summary()["ratios"]
    assert verdict["unreliable"] is None and verdict["faster_framework"] == "torch"
    (load,) = [w for w in model.row("torch", "resnet50").warnings if w["kind"] == CautionKind.CPU_CONTENTION]
    assert "1.6 cores busy (the host's core count was not recorded)" in load["message"]


def test_a_watch_sessions_advice_is_what_a_watch_user_can_do() -> None:
    plan = watch_plan(["python", "train.py"], "/tmp")
    model = SessionModel(plan, host={"cpu_count": 2})
    (spec,) = run_order(plan)
    for event in _run(spec.run_id, 2.0, 1.6):
        model.apply(event)
    row = model.row(spec.framework, spec.model)
    (load,) = [w for w in row.warnings if w["kind"] == CautionKind.CPU_CONTENTION]
    assert "--threads" not in load["message"]  # watch takes no --threads
    assert "watch the command again" in load["message"] and "OMP_NUM_THREADS" in load["message"]


def test_the_answer_line_shows_the_mark_as_a_warning() -> None:
    summary = _model({"torch": 1.6, "tensorflow": 0.1}).summary()
    (line,) = terminal.answer_lines(answer(summary))
    assert line.plain.startswith("ResNet50: unreliable: other processes kept 1.6 of 2 cores busy")
    start = line.plain.index("unreliable:")
    styles = {str(span.style) for span in line.spans if span.start <= start < span.end}
    assert "bold yellow" in styles
    out = io.StringIO()
    terminal.print_answer(answer(summary), Console(file=out, width=200))  # show, the end of a headless run
    assert "ResNet50: unreliable: other processes kept 1.6 of 2 cores busy" in out.getvalue()


# -- about the same ----------------------------------------------------------------------------------
def test_a_ratio_that_rounds_to_one_is_about_the_same() -> None:
    model = _model({"torch": 0.0, "tensorflow": 0.0}, seconds={"torch": 2.0, "tensorflow": 2.003})
    (verdict,) = model.summary()["ratios"]
    assert verdict["about_same"] is True and verdict["faster_framework"] is None
    assert verdict["text"].startswith("PyTorch and tf.keras about the same (1.00×")
    assert "faster" not in verdict["text"]


def test_per_flop_about_the_same_too() -> None:
    p = _plan()
    model = SessionModel(p, host={"cpu_count": 2})
    for spec in run_order(p):
        for event in _run(spec.run_id, 2.0 if spec.framework == "torch" else 2.2, 0.0):
            model.apply(event)
            if event["type"] == "run_end":
                break
        # tf.keras builds a network 10% larger: per FLOP the two are the same speed.
        flops = 1e9 if spec.framework == "torch" else 1.1e9
        model.apply(
            {
                "type": "flops",
                "run": spec.run_id,
                "t": 2.5,
                "per_step": flops * 8,
                "per_image": flops,
                "batch_size": 8,
            }
        )
        model.apply({"type": "run_end", "run": spec.run_id, "t": 3.0, "status": "ok", "other_cpu_cores": 0.0})
    (verdict,) = model.summary()["ratios"]
    assert verdict["per_flop"]["about_same"] is True and verdict["per_flop"]["faster_framework"] is None
    assert verdict["per_flop"]["text"].startswith("per FLOP: about the same (1.00×")


# -- an interrupted cell ------------------------------------------------------------------------------
def test_a_cell_interrupted_after_some_runs_is_incomplete() -> None:
    p = _plan(frameworks=["torch"])
    model = SessionModel(p, host={"cpu_count": 2})
    first, second = (s.run_id for s in run_order(p))
    for event in _run(first, 2.0, 0.0):
        model.apply(event)
    model.apply({"type": "run_start", "run": second, "t": 4.0})
    model.apply({"type": "run_end", "run": second, "t": 5.0, "status": "interrupted", "reason": "Ctrl+C"})
    row = model.row("torch", "resnet50")
    assert row.status == "incomplete" and row.reason == "1 of 2 runs did not finish (interrupted)"
    assert row.runs == 1 and row.mean_epoch_s == pytest.approx(2.0)  # the finished run's figures
    # Runs still to come leave a cell "ok" while the session goes on.
    live = SessionModel(p)
    for event in _run(first, 2.0, 0.0):
        live.apply(event)
    assert live.row("torch", "resnet50").status == "ok"


# -- each epoch's time to its first batch -----------------------------------------------------------------
def test_to_first_batch_is_folded_per_epoch_and_absent_when_no_runner_said_it() -> None:
    p = _plan(frameworks=["torch"])
    model = SessionModel(p)
    first, second = (s.run_id for s in run_order(p))
    for event in _run(first, 2.0, 0.0, to_first_batch={1: 0.5, 2: 4.9, 3: 0.1}):
        model.apply(event)
    # The second run lost epoch 2's figure; junk values are not figures.
    for event in _run(second, 2.0, 0.0, to_first_batch={1: 0.7, 2: -1.0, 3: 0.3}):
        model.apply(event)
    row = model.row("torch", "resnet50")
    assert list(row.to_first_batch_s or ()) == [pytest.approx(0.6), pytest.approx(4.9), pytest.approx(0.2)]
    assert json.loads(json.dumps(model.summary()))["rows"][0]["to_first_batch_s"][1] == pytest.approx(4.9)
    # Junk in the field never becomes a figure (the wire's check counts it; the fold ignores it).
    junk = SessionModel(p)
    for value in (True, "1.0", math.nan, -0.5):
        junk.runs[first].to_first_batch.clear()
        for event in _run(first, 2.0, 0.0, to_first_batch={1: value}):
            if event["type"] == "epoch":
                junk.apply(event)
    assert junk.runs[first].to_first_batch == {}
    # Old runners omit it: None, not a list of Nones.
    old = SessionModel(p)
    for event in _run(first, 2.0, 0.0):
        old.apply(event)
    assert old.row("torch", "resnet50").to_first_batch_s is None
    # An epoch no run said it for is None in its place.
    gap = SessionModel(p)
    for event in _run(first, 2.0, 0.0, to_first_batch={1: 0.5, 3: 0.1}):
        gap.apply(event)
    assert list(gap.row("torch", "resnet50").to_first_batch_s or ()) == [0.5, None, 0.1]


# -- the CI note only under brackets --------------------------------------------------------------------
def test_the_ci_note_is_printed_only_under_a_table_with_brackets(tmp_path: Path) -> None:
    for runs, expected in ((1, False), (3, True)):
        path = make_session(tmp_path / str(runs), name="ci", runs=runs, epochs=2, steps=4)
        rows = load_session(path).model.rows()
        out = io.StringIO()
        terminal.print_summary(rows, "t", console=Console(file=out, width=200))
        text = out.getvalue()
        assert (CI_NOTE in text) is expected, text


# -- compare ----------------------------------------------------------------------------------------------
def _edit_events(path: Path, change: Any) -> None:
    lines = [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in change(lines)))


def _loaded(path: Path) -> LoadedSession:
    """A session read back: the loader gives its model the host's cores from session.json."""
    loaded = load_session(path)
    assert loaded.model.host_cores == loaded.meta["host"]["cpu_count"]
    return loaded


def _cpu_session(root: Path, name: str, others: float, speed: float, runs: int = 3) -> Path:
    path = make_session(
        root,
        name=name,
        frameworks=("torch",),
        gpu=False,
        runs=runs,
        epochs=3,
        steps=10,
        speed={("torch", "resnet50"): speed},
    )

    def load(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for e in events:
            if e.get("type") == "run_end":
                e["other_cpu_cores"] = others
            if e.get("type") == "hello":
                e["settings"]["intra_op_threads"] = 2
        return events

    _edit_events(path, load)
    meta = json.loads((path / "session.json").read_text())
    meta["host"]["cpu_count"] = 2
    (path / "session.json").write_text(json.dumps(meta))
    return path


def test_compare_carries_the_mark_and_never_fails_on_it(tmp_path: Path) -> None:
    a = _cpu_session(tmp_path, "a", 0.1, 0.040)
    b = _cpu_session(tmp_path, "b", 1.6, 0.060)  # 50% slower, and other processes kept 1.6 cores busy
    cmp = compare_sessions(_loaded(a), _loaded(b))
    (row,) = cmp.rows
    assert row.ratio is not None and row.ratio.conclusive and row.ratio.percent > 40
    assert row.unreliable == "other processes kept 1.6 of 2 cores busy during B's runs (on 2 threads)"
    assert row.text().startswith("unreliable: other processes kept 1.6 of 2 cores busy during B's runs")
    assert not row.slower_than(5) and not cmp.failing(5)
    assert "ResNet50 · PyTorch +" in cmp.gate(5) and "unreliable: other processes kept 1.6" in cmp.gate(5)
    out = io.StringIO()
    terminal.print_comparison(cmp, Console(file=out, width=250))
    assert "unreliable: other processes kept 1.6 of 2 cores busy during B's runs" in out.getvalue()
    # On idle machines the same slowdown fails the gate.
    c = _cpu_session(tmp_path, "c", 0.1, 0.060)
    idle = compare_sessions(_loaded(a), _loaded(c))
    assert idle.rows[0].unreliable is None and idle.failing(5) == idle.rows


def test_compare_of_sessions_with_no_cell_in_common_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_session(
        tmp_path, name="a", frameworks=("torch",), models=("resnet50",), runs=1, epochs=2, steps=3
    )
    b = make_session(
        tmp_path, name="b", frameworks=("tensorflow",), models=("densenet121",), runs=1, epochs=2, steps=3
    )
    assert main(["compare", str(a), str(b)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("benchtui: error: no cell in common: A ") and "ResNet50 with PyTorch" in line
    assert "DenseNet121 with tf.keras" in line or "DenseNet-121 with tf.keras" in line


def test_compare_threads_by_their_totals_and_never_for_a_run_that_never_started(tmp_path: Path) -> None:
    def threads(settings: dict[str, int], devices: dict[str, int] | None = None) -> Any:
        def change(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
            for e in events:
                if e.get("type") == "hello":
                    fw = e["framework"]
                    e["settings"]["intra_op_threads"] = settings[fw]
                    e["config"]["replicas"] = (devices or {}).get(fw, 1)
            return events

        return change

    a = make_session(tmp_path, name="a", gpu=False, runs=1, epochs=2, steps=3)
    _edit_events(a, threads({"torch": 2, "tensorflow": 2}))
    # B: PyTorch on 2 ranks of 1 thread each (the engine's split of 2 cores), tf.keras's replicas in one pool of 2.
    b = make_session(tmp_path, name="b", gpu=False, runs=1, epochs=2, steps=3)
    _edit_events(b, threads({"torch": 1, "tensorflow": 2}, {"torch": 2, "tensorflow": 2}))
    differences = compare_sessions(a, b).differences
    (line,) = [d for d in differences if "threads" in d]
    assert line == (
        "PyTorch threads (--threads): 2 threads vs 1 thread per rank × 2 ranks (2 in all): the same 2 in all"
    )

    # tf.keras never started in C: it has no thread setting to compare.
    c = make_session(tmp_path, name="c", gpu=False, runs=1, epochs=2, steps=3)

    def never(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [e for e in events if "tensorflow" not in str(e.get("run"))]
        ids = sorted({str(e["run"]) for e in events if "tensorflow" in str(e.get("run"))})
        return kept + [
            {"type": "run_end", "t": 1e4, "run": r, "status": "skipped", "reason": "x"} for r in ids
        ]

    _edit_events(c, never)
    _edit_events(a, threads({"torch": 2, "tensorflow": 4}))
    assert not [d for d in compare_sessions(a, c).differences if "tf.keras threads" in d]


def test_compare_says_an_interrupted_cell_is_incomplete(tmp_path: Path) -> None:
    a = make_session(tmp_path, name="a", frameworks=("torch",), runs=2, epochs=2, steps=3)
    b = make_session(tmp_path, name="b", frameworks=("torch",), runs=2, epochs=2, steps=3)

    def interrupt(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        second = sorted({str(e["run"]) for e in events if e.get("run")})[1]
        kept = [e for e in events if e.get("run") != second]
        return kept + [
            {"type": "run_end", "t": 1e4, "run": second, "status": "interrupted", "reason": "Ctrl+C"}
        ]

    _edit_events(b, interrupt)
    (row,) = compare_sessions(a, b).rows
    assert row.status_a == "ok" and row.status_b == "incomplete" and row.ratio is not None


def test_a_sessions_thread_totals_are_recorded_per_framework(tmp_path: Path) -> None:
    # --devices 2 on a CPU: PyTorch runs a process per rank of 1 thread each, tf.keras one process of 2:
    # the same 2 threads in all, which "threads 1" against "threads 2" hid.
    path = make_session(tmp_path, name="dp", gpu=False, devices=2, runs=1, epochs=2, steps=4)

    def pools(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for e in events:
            if e.get("type") == "hello":
                e["settings"]["intra_op_threads"] = 1 if e["framework"] == "torch" else 2
        return events

    _edit_events(path, pools)
    env = load_session(path).model.summary()["frameworks"]
    assert env["torch"]["threads"] == {
        "per_process": 1,
        "processes": 2,
        "total": 2,
        "text": "1 thread per rank × 2 ranks (2 in all)",
    }
    assert env["tensorflow"]["threads"]["total"] == 2 and env["tensorflow"]["threads"]["text"] == "2 threads"


def test_compare_of_a_sweep_with_a_session_without_one_says_the_points_are_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cells match by (framework, model, point): the same models and frameworks, one side a sweep, share no cell,
    and the one line says the points are the difference."""
    common = {"models": ("resnet50_v1_5",), "runs": 1, "epochs": 2, "steps": 3, "batch_size": 4}
    a = make_session(tmp_path, name="plain", **common)  # type: ignore[arg-type]
    b = make_session(tmp_path, name="grid", sweep={"batch": ["4", "8"]}, **common)  # type: ignore[arg-type]
    assert main(["compare", str(a), str(b)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("benchtui: error: no cell in common: A ")
    assert "ResNet50 v1.5 with PyTorch, tf.keras; B " in line and line.endswith("at 2 points (batch 4, 8)")
