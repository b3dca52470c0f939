"""The pieces that make a million events load fast (issue 35) do what the slower ones did: the fold's batch
path, the reader's msgspec path, the summary's arithmetic in C, the sessions screen's cached summary.
Behaviour only: no clock is read here."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model import stats
from benchtui.core.model.session_model import MAX_WATCH_WINDOW, SessionModel
from benchtui.core.plan.plan import Plan
from benchtui.core.store import session as store
from benchtui.core.store.session import SessionFolder, iter_events, load_session

DATA = Path(__file__).parent / "data"
RUN = "001-torch-resnet50-1"


def _model(watch: bool = False) -> SessionModel:
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=8,
        batch_sizes={"resnet50": 8},
        epochs=2,
        runs=1,
        device="cpu",
    ).validate()
    return SessionModel(plan)


def _batch(epoch: int, step: int, seconds: float = 0.1, **extra: Any) -> dict[str, Any]:
    return {"type": "batch", "t": 1.0, "run": RUN, "epoch": epoch, "step": step, "seconds": seconds, **extra}


def test_batches_fold_with_every_check_of_the_general_path() -> None:
    model = _model()
    run = model.runs[RUN]
    for event in (
        _batch(1, 1, 0.5),  # the first step: its own window, not the watchdog's scale
        _batch(1, 3, 0.2, steps=2),  # a window of two
        _batch(1, 3, 0.2),  # step 3 again: refused
        _batch(1, 9),  # past the plan's 8 samples a epoch: refused
        _batch(3, 1),  # past the plan's 2 epochs: refused
        _batch(1, 4, 0.1, steps=-1),  # refused
        _batch(1, 6, 0.3),  # steps 4 and 5 lost: counted, never filled in
        {**_batch(1, 7, 0.4), "run": "002-nope"},  # a run the plan does not have
        {**_batch(1, 7, 0.4), "run": None},  # no run: ignored
        {**_batch(1, 7, 0.4), "run": ["x"]},  # not a run id: counted as unknown
        {**_batch(1, 7, 9.0), "node": 1},  # node 1's share: never this run's figures
        _batch(2, 1, 0.25),
    ):
        model.apply(event)
    assert list(run.batch_seconds) == [0.5, 0.2, 0.2, 0.3, 0.25]
    assert list(run.batch_epochs) == [1, 1, 1, 1, 2]
    assert model.malformed == 4
    assert model.unknown_runs == 2
    assert run.missing_steps == 2
    assert run.window_max_s == 0.4  # the window of two (0.2 x 2), not the first step's 0.5
    assert (run.current_epoch, run.current_step) == (2, 1)
    assert run.status == "running"
    assert list(run.nodes[1].batch_seconds) == [9.0]
    assert model.events == 12


def test_a_runner_s_own_steps_per_epoch_bounds_its_windows() -> None:
    model = _model()
    model.runs[RUN].hello = {"steps_per_epoch": 4}
    model.apply(_batch(1, 4))
    model.apply(_batch(1, 5))  # inside the plan's 8, past the runner's 4
    assert model.malformed == 1
    model = _model()
    model.runs[RUN].hello = {
        "steps_per_epoch": True
    }  # a bool is an int to the check: a bound of 1, as before
    model.apply(_batch(1, 1))
    model.apply(_batch(1, 2))
    assert model.malformed == 1 and len(model.runs[RUN].batch_seconds) == 1


def test_a_watched_command_s_window_is_bounded() -> None:
    plan = Plan(
        frameworks=["command"], models=["watch"], runs=1, watch={"command": ["python", "x.py"], "cwd": "/tmp"}
    ).validate()
    model = SessionModel(plan)
    (run_id,) = model.runs
    model.apply({**_batch(1, MAX_WATCH_WINDOW, steps=MAX_WATCH_WINDOW), "run": run_id})
    model.apply({**_batch(1, 3 * MAX_WATCH_WINDOW, steps=MAX_WATCH_WINDOW + 1), "run": run_id})
    assert model.malformed == 1
    assert len(model.runs[run_id].batch_seconds) == MAX_WATCH_WINDOW


HOSTILE_LINES = [
    '{"type":"batch","t":1.0,"run":"R","epoch":1,"step":1,"seconds":0.1}',
    '{"type":"batch","t":1.0,"run":"R","epoch":1,"step":2,"seconds":-0.1}',  # out of range
    '{"type":"batch","t":1.0,"run":"R","epoch":1,"step":3,"seconds":NaN}',  # not JSON
    '{"type":"batch","t":1.0,"run":"R","run":"S","epoch":1,"step":4,"seconds":0.1}',  # a key twice
    '{"type":"batch","t":1.0,"run":"R\\ud800","epoch":1,"step":5,"seconds":0.1}',  # a lone surrogate
    '{"type":"batch","t":1.0,"run":"R","epoch":"1","step":6,"seconds":0.1}',  # a string for a number
    '{"type":"epoch","t":1.0,"run":"R","epoch":1,"seconds":0.6,"samples":48}',
    '{"type":"gpu","t":1.5,"gpus":[{"index":0,"util":50.0}]}',
    '{"type":"gpu","t":2.0,"gpus":"none"}',
    "[1, 2]",
    '{"type":"made_up","t":1.0,"run":"R","x":[[[1]]]}',
    '{"type":"error","t":1.0,"run":"R","kind":"exception","message":"a: b, c: d [1]"}',
    '{"type":"session_end","t":3.0,"run":null,"lines":14,"status":"complete"}',
]


@pytest.mark.parametrize("tail", [False, True])
def test_the_fast_reader_reads_what_the_exact_path_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: bool
) -> None:
    """Every line, good or hostile: the same events, the same skipped lines and reasons, the same end."""
    (tmp_path / "events.jsonl").write_text("\n".join(HOSTILE_LINES) + "\n")

    def read() -> tuple[list[dict[str, Any]], list[str], int, Any]:
        warnings: list[str] = []
        check = store.EventCheck()
        gpu = store.GpuTail(1) if tail else None
        events = list(iter_events(tmp_path, warnings, gpu, check))
        return events, warnings, check.bad, check.end

    fast = read()
    assert fast[2] >= 5 and fast[3] is not None  # the hostile lines were refused, the end found
    monkeypatch.setattr(store, "fast_event", lambda raw: None)  # every line the exact way
    exact = read()
    assert json.dumps(fast) == json.dumps(exact)


def _groups_before(groups: list[list[float]]) -> list[tuple[float, float]]:
    """_groups' mean and standard error as they were computed before issue 35 (generators)."""
    out = []
    for g in groups:
        vals = tuple(float(v) for v in g)
        m = math.fsum(vals) / len(vals)
        se = (
            math.sqrt(math.fsum((v - m) ** 2 for v in vals) / (len(vals) - 1) / len(vals))
            if len(vals) > 1
            else 0.0
        )
        out.append((m, se))
    return out


def test_the_summary_s_arithmetic_gives_the_same_digits() -> None:
    rng = random.Random(7)
    groups = [[rng.lognormvariate(-2, 0.5) for _ in range(n)] for n in (1, 2, 5, 101, 3000)]
    assert [(g.mean, g.se) for g in stats._groups(groups)] == _groups_before(groups)
    values = [0.9, 0.5, *(rng.gauss(0.1, 0.01) for _ in range(400))]
    tail = sorted(values[len(values) // 2 :])
    m = stats.quantile(tail, 0.5)
    mad = stats.quantile(sorted(abs(v - m) for v in tail), 0.5)
    limit = m * 1.1 + 3 * 1.4826 * mad
    window = max(3, min(20, len(values) // 10))
    expected = next(i for i in range(len(values)) if all(v <= limit for v in values[i : i + window]))
    assert stats.warmup_cut(values) == expected
    # The bootstrap's replicates: the seeded figures of before (sums of lists, as of generators).
    reps = stats.hierarchical_replicates([[1.0, 2.0, 3.5], [2.5, 4.0], [3.0]], resamples=50, seed=3)
    assert len(reps) == 50 and min(reps) >= 1.0 and max(reps) <= 4.0
    assert stats.hierarchical_replicates([[1.0, 2.0, 3.5], [2.5, 4.0], [3.0]], resamples=50, seed=3) == reps


def test_the_sessions_screen_summarises_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from benchtui.screens.sessions import summary_view

    path = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny-cpu-session", path)

    def text() -> str:
        console = Console(width=120, record=True, file=open("/dev/null", "w"))
        console.print(summary_view(path, 118))
        console.file.close()
        return console.export_text()

    first = text()
    assert SessionFolder(path).cached_summary() is not None  # the first look cached it
    monkeypatch.setattr(SessionModel, "summary", lambda self: pytest.fail("computed again"))
    monkeypatch.setattr(SessionModel, "session_summary", lambda self: pytest.fail("computed again"))
    assert text() == first
    assert load_session(path).summary() == SessionFolder(path).cached_summary()


@pytest.mark.parametrize("slow_start", [0, 3, 200])
def test_a_run_s_sorted_steady_batches_are_its_steady_batches_sorted(slow_start: int) -> None:
    """Taken out of the sorted whole (a few warm-up batches) or sorted anew (many): the same values."""
    from array import array

    from benchtui.core.model import analysis

    rng = random.Random(slow_start)
    model = _model()
    run = model.runs[RUN]
    warm = [rng.uniform(1.0, 2.0) for _ in range(slow_start)]
    steady = [rng.choice([0.1, 0.11, 0.12]) + rng.random() * 1e-3 for _ in range(400)]
    run.batch_seconds = array("d", warm + steady + warm[:2])
    cut = stats.warmup_cut(run.batch_seconds)
    assert (cut > analysis._FEW_CUT) == (slow_start > analysis._FEW_CUT)
    every, kept = analysis.sorted_batches(run)
    assert list(every) == sorted(run.batch_seconds)
    assert list(kept) == sorted(analysis.steady_batches(run))
