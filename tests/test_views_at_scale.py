"""Views of a long session (issue 35): the per-batch CSV folds nothing (one pass over the events), each view
computes a summary once or takes summary.json's cache, the plots' fast paths draw what the slow ones did, and a
replay draws before it has read its file."""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchtui.cli import main
from benchtui.core.model.session_model import SessionModel
from benchtui.core.reporting import csvfile, jsonfile
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.plots import _finite_points, downsample_minmax
from benchtui.core.store.session import SessionFolder, load_session
from sessionfactory import make_session


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_session(tmp_path_factory.mktemp("scale"), name="scale", runs=2, epochs=3, steps=60)


def _batches_as_before(path: Path) -> str:
    """batches.csv as written from a session folded whole (the export before issue 35)."""
    buf = io.StringIO()
    csvfile.write_batches(load_session(path), buf)
    return buf.getvalue()


def _count(monkeypatch: pytest.MonkeyPatch, calls: list[int]) -> None:
    real = SessionModel.session_summary

    def counted(self: SessionModel) -> Any:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(SessionModel, "session_summary", counted)


def test_the_per_batch_csv_folds_no_event(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _batches_as_before(session)
    assert expected.count("\n") == 1 + 2 * 2 * 3 * 60  # a header, then every batch of 2 runs × 2 frameworks

    def no_fold(self: SessionModel, event: dict[str, Any]) -> None:
        raise AssertionError("the per-batch export folded an event")

    monkeypatch.setattr(SessionModel, "apply", no_fold)
    out = tmp_path / "b.csv"
    assert main(["export", str(session), "--format", "csv", "--per-batch", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == expected
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["export", str(session), "--format", "csv", "--per-batch"]) == 0
    assert stdout.getvalue() == expected


def test_the_per_batch_csv_says_what_it_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_session(tmp_path, name="damaged", runs=1, epochs=1, steps=4)
    with open(path / "events.jsonl", "ab") as fh:
        fh.write(b"not json\n")
    assert main(["export", str(path), "--format", "csv", "--per-batch", "-o", str(tmp_path / "b.csv")]) == 0
    err = capsys.readouterr().err
    assert "1 unreadable line(s) in events.jsonl were skipped" in err
    assert (tmp_path / "b.csv").read_text(encoding="utf-8").count("\n") == 1 + 2 * 4


def test_compare_computes_each_summary_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = make_session(tmp_path, name="a", runs=2, epochs=2, steps=8, seed=1)
    b = make_session(tmp_path, name="b", runs=2, epochs=2, steps=8, seed=2)
    for path in (a, b):  # no cache to read: each summary is computed
        (path / "summary.json").unlink()
    calls: list[int] = []
    _count(monkeypatch, calls)
    cmp = compare_sessions(a, b)
    assert cmp.common and len(calls) == 2


def test_a_tracker_export_computes_its_summary_once(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    _count(monkeypatch, calls)
    assert main(["export", str(session), "--format", "bencher", "-o", str(tmp_path / "b.json")]) == 0
    assert len(calls) <= 1  # once, or none when summary.json's cache holds


def test_show_and_compare_take_the_cached_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_session(tmp_path, name="cached", runs=2, epochs=2, steps=8)
    loaded = load_session(path)
    loaded.summary()  # the cache written into summary.json, as a finished session has it
    if loaded.folder.cached_summary() is None:
        pytest.skip("no summary cache in this store")
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert main(["compare", str(path), str(path)]) == 0
    compared = capsys.readouterr().out

    def refused(self: SessionModel) -> Any:
        raise AssertionError("a summary was computed where summary.json's cache holds")

    monkeypatch.setattr(SessionModel, "session_summary", refused)
    assert main(["show", str(path)]) == 0
    assert capsys.readouterr().out == shown
    assert main(["compare", str(path), str(path)]) == 0
    assert capsys.readouterr().out == compared


def _finite_points_one_by_one(xs: list[Any], ys: list[Any]) -> tuple[list[Any], list[Any]]:
    """``_finite_points`` as it was: point by point."""
    out_x, out_y = [], []
    for x, y in zip(xs, ys, strict=False):
        if isinstance(x, (int, float)) and math.isfinite(x):
            out_x.append(x)
            out_y.append(y if isinstance(y, (int, float)) and math.isfinite(y) else None)
    return out_x, out_y


@pytest.mark.parametrize(
    ("xs", "ys"),
    [
        ([1.0, 2.0, 3.0], [0.5, 0.25, 0.125]),
        ([1, 2, 3], [True, 2, 3.5]),
        ([1.0, 2.0, 3.0], [0.5, None, 1.0]),
        ([1.0, 2.0, 3.0], [math.nan, 1.0, math.inf]),
        ([1.0, math.nan, 3.0], [1.0, 2.0, 3.0]),
        ([1.0, -math.inf, 3.0], [1.0, 2.0, 3.0]),
        ([1e308, 1e308, 1.0], [1e308, 1e308, 1.0]),  # a sum that overflows: every point is still finite
        ([1.0, 2.0], [1.0, 2.0, 3.0]),  # unequal lengths: zip's
        ([1.0, 2.0, 3.0], [1.0, 2.0]),
        ([1.0, "2", 3.0], [1.0, 2.0, 3.0]),
        ([1.0, 2.0, 3.0], [1.0, "2", 3.0]),
        ([], []),
    ],
)
def test_finite_points_keeps_what_it_kept_point_by_point(xs: list[Any], ys: list[Any]) -> None:
    got = _finite_points(xs, ys)
    want = _finite_points_one_by_one(xs, ys)
    assert repr(got) == repr(want)  # repr: nan == nan is False, and a bool kept stays a bool


def _downsample_by_key(xs: list[float], ys: list[float], max_points: int) -> tuple[list[float], list[float]]:
    """``downsample_minmax`` as it was: min/max over indices by key."""
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    buckets = max(1, max_points // 2)
    size = n / buckets
    out_x: list[float] = []
    out_y: list[float] = []
    for b in range(buckets):
        lo, hi = int(b * size), min(n, int((b + 1) * size))
        if lo >= hi:
            continue
        seg = range(lo, hi)
        for i in sorted({min(seg, key=ys.__getitem__), max(seg, key=ys.__getitem__)}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


@pytest.mark.parametrize("seed", range(4))
def test_downsample_keeps_the_first_extreme_of_each_bucket(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(900, 5000)
    ys = [float(rng.randrange(5)) for _ in range(n)]  # many ties: which of equal values is kept matters
    xs = [float(i) for i in range(n)]
    for budget in (7, 100, 800):
        assert downsample_minmax(xs, ys, budget) == _downsample_by_key(xs, ys, budget)
        assert downsample_minmax(tuple(xs), tuple(ys), budget) == _downsample_by_key(xs, ys, budget)


@pytest.mark.ui
def test_a_replay_draws_before_it_has_read_its_file(tmp_path: Path) -> None:
    """The live screen's first redraw of a replay comes while most of the recording is still unread: the
    replayer reads events.jsonl as it plays, whatever the file's length."""
    from benchtui.app import make_app
    from benchtui.screens.live import LiveScreen

    path = make_session(tmp_path, name="long", runs=2, epochs=3, steps=400)
    with open(path / "events.jsonl", "rb") as fh:
        total = sum(1 for _ in fh)
    seen: list[int] = []  # events read from the file when the screen first drew one
    read = [0]
    tick, events = LiveScreen.tick, SessionFolder.events

    def first_tick(self: LiveScreen) -> None:
        tick(self)
        if not seen and self.model.events > 0:
            seen.append(read[0])

    def counted(self: SessionFolder, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        for event in events(self, *args, **kwargs):
            read[0] += 1
            yield event

    async def run() -> None:
        app = make_app(replay=path, speed=1.0, use_nvml=False)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(400):
                if seen:
                    break
                await pilot.pause(0.01)
            app.exit()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LiveScreen, "tick", first_tick)
        mp.setattr(SessionFolder, "events", counted)
        asyncio.run(run())
    assert seen, "the replay never drew an event"
    assert seen[0] < total // 10, (seen[0], total)


@pytest.mark.parametrize(
    "values",
    [
        [0.25, 0.5, 1e-9, 123456.789],
        [0.25, 2, True, 0.5],  # an int or a bool among floats: written as its float
        [0.25, math.nan, 0.5, math.inf, -math.inf],
        [1e308, 1e308, 0.5],  # a sum that overflows
        [float(i) / 7 for i in range(3 * jsonfile.CHUNK + 5)],  # several chunks, the fast path in each
        [],
    ],
)
def test_json_steps_as_written_value_by_value(values: list[Any]) -> None:
    def one_by_one(v: Any) -> str:
        return jsonfile._seconds(v)  # not the writer's own function: the path of a value at a time

    assert list(jsonfile._steps(values)) == list(jsonfile._steps(values, one_by_one))


def test_a_watch_sessions_html_reads_its_samples_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long ``benchtui watch`` is most of a million events in GPU samples: its html (plots and telemetry
    lines) reads them from the file once."""
    import subprocess
    import sys

    root = tmp_path / "sessions"
    args = ["watch", "--headless", "--no-nvml", "--sessions-dir", str(root), "--interval", "0.05"]
    command = [sys.executable, "-c", "import time; time.sleep(0.6)"]
    done = subprocess.run(
        [sys.executable, "-m", "benchtui", *args, "--", *command],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (path,) = root.iterdir()
    reads: list[int] = []
    real = SessionFolder.gpu_samples

    def counted(self: SessionFolder) -> list[dict[str, Any]]:
        reads.append(1)
        return real(self)

    monkeypatch.setattr(SessionFolder, "gpu_samples", counted)
    assert main(["export", str(path), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    assert len(reads) == 1
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Watched" in html and "CPU over time" in html
