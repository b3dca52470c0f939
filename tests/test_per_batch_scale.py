"""The per-batch CSV at scale (issue 35): its batch lines read through the wire's lane (``batch_of``'s Structs,
``iter_events(..., batches=True)``) and their rows written as text a list at a time (``csvfile._batch_text``)
give the very bytes, row count and warnings the export gave before, when every line came as a dict and every
row went through ``csv.writer``.

The reference is that writer, copied verbatim below (``old_write_batches``). Sessions: made ones (two nodes,
a sweep, failures, inference), the golden outputs' and the recorded ones, the 1M-event session's first 200k
lines, and sessions of hostile lines and of numbers whose notation msgspec and ``repr`` write differently.
"""

from __future__ import annotations

import csv
import io
import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.reporting import csvfile, files
from benchtui.core.reporting.csvfile import BATCH_COLUMNS, axis_columns, csv_value
from benchtui.core.store.session import GpuTail, LoadedSession
from sessionfactory import make_session, shaped_sessions
from test_load_fastlane import HOSTILE, RUN, _hostile_session, _line

TESTS = Path(__file__).parent
BIG = sorted(Path("/tmp/big1m").glob("*_bench-1m"))


# -- the reference: the per-batch writer as it was before, verbatim ----------------------------------------
def old_write_batches(loaded: LoadedSession, fh: Any) -> int:
    axes = axis_columns(loaded.plan.points())
    heads = {
        rid: [
            csv_value(run.spec.run_id),
            csv_value(run.spec.framework),
            csv_value(run.spec.model),
            csv_value(run.spec.index),
        ]
        for rid, run in loaded.model.runs.items()
    }
    tails = {rid: [csv_value(run.spec.point.get(a)) for a in axes] for rid, run in loaded.model.runs.items()}
    nodes = loaded.plan.nodes > 1
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow([*BATCH_COLUMNS, *(["node"] if nodes else []), *axes])
    count = 0
    for event in loaded.folder.events(loaded.warnings, GpuTail(0)):
        if event.get("type") != "batch":
            continue
        rid = event.get("run")
        head = heads.get(rid) if isinstance(rid, str) else None
        if head is None:
            continue
        seconds, samples = event.get("seconds"), event.get("samples")
        rate = (
            samples / seconds
            if isinstance(seconds, (int, float)) and seconds > 0 and isinstance(samples, int)
            else None
        )
        writer.writerow(
            [
                *head,
                csv_value(event.get("epoch")),
                csv_value(event.get("step")),
                csv_value(seconds),
                csv_value(samples),
                csv_value(event.get("steps") or 1),
                csv_value(rate),
                csv_value(event.get("t")),
                *([csv_value(event.get("node") or 0)] if nodes else []),
                *tails[rid],
            ]
        )
        count += 1
    return count


def export_both(path: Path) -> tuple[tuple[str, int, list[str]], tuple[str, int, list[str]]]:
    """(text, rows, warnings) of the per-batch export of ``path``, the new way then the old way."""
    out = []
    for write in (csvfile.write_batches, old_write_batches):
        loaded = files.unfolded(path)  # as ``export --per-batch`` reads it
        fh = io.StringIO()
        rows = write(loaded, fh)
        out.append((fh.getvalue(), rows, loaded.warnings))
    return out[0], out[1]


def assert_same_export(path: Path) -> str:
    new, old = export_both(path)
    assert new[0] == old[0]
    assert new[1:] == old[1:]
    assert new[1] == new[0].count("\n") - 1  # the count is the rows written
    return new[0]


def lane_rows(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many rows the fast text (``_run_text``'s msgspec text) made: the lane was really taken."""
    made = []
    real = csvfile._run_text

    def counted(numbers: list[tuple[Any, ...]], batches: list[Any], ends: Any) -> str:
        text = real(numbers, batches, ends)
        if text != "".join(csvfile._batch_rows(batches, ends)):
            raise AssertionError("the fast text differs from the rows made one by one")
        encoded = csvfile._ENCODE(numbers)
        made.append(len(numbers) if b"e" not in encoded and b"0.0000" not in encoded else 0)
        return text

    monkeypatch.setattr(csvfile, "_run_text", counted)
    assert_same_export(path)
    monkeypatch.undo()
    return sum(made)


# -- sessions ---------------------------------------------------------------------------------------------
def test_made_sessions_export_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = [
        *shaped_sessions(tmp_path),
        make_session(tmp_path, name="nodes", nodes=2, runs=2, frameworks=("torch",), folder="nodes"),
        make_session(
            tmp_path,
            name="sweep",
            sweep={"batch": ["8", "16"], "channels-last": ["off", "on"]},
            runs=1,
            folder="sweep",
        ),
    ]
    for path in made:
        text = assert_same_export(path)
        assert text.count("\n") > 10
        assert lane_rows(path, monkeypatch) > 0
    assert assert_same_export(made[4]).splitlines()[0].endswith(",t,node")
    assert "channels-last" in assert_same_export(made[5]).splitlines()[0]


def test_golden_and_data_sessions_export_the_same(tmp_path: Path) -> None:
    from test_golden_outputs import _made

    folders = [*_made(tmp_path / "made").values()]
    for folder in sorted(p.parent for p in TESTS.glob("data/*/events.jsonl")):
        folders.append(tmp_path / folder.name)
        shutil.copytree(folder, folders[-1])
    assert len(folders) >= 6
    for folder in folders:
        assert_same_export(folder)


@pytest.mark.skipif(not BIG, reason="no /tmp/big1m (benchmarks/load_session.py --dir /tmp/big1m builds it)")
def test_the_big_sessions_head_exports_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / BIG[0].name
    copy.mkdir()
    shutil.copy(BIG[0] / "session.json", copy)
    with open(BIG[0] / "events.jsonl", "rb") as src, open(copy / "events.jsonl", "wb") as out:
        out.writelines(itertools.islice(src, 200_000))
    assert lane_rows(copy, monkeypatch) > 150_000


def test_hostile_lines_export_the_same(tmp_path: Path) -> None:
    path = _hostile_session(tmp_path, "hostile", HOSTILE)
    new, _ = export_both(path)
    assert any("unreadable line" in w for w in new[2])
    assert_same_export(path)


# -- numbers: where msgspec's notation is not repr's, and lists of several runs -----------------------------
def _number_lines() -> list[bytes]:
    """Batch lines of the session's run whose numbers msgspec writes otherwise than ``repr`` (an exponent,
    ``0.0000``, an infinite rate) or alike (ints, -0.0, the ranges' edges), one shape of line at a time."""
    base = dict(
        run=f'"{RUN}"', v="1", type='"batch"', t="1003.5", epoch="1", step="3", seconds="0.0625", samples="32"
    )
    out = []
    step = 31  # past the made session's own steps: each line its own window, folded or not
    for key, values in {
        "seconds": [
            "1e-5",
            "0.00001",
            "5e-324",
            "1e-4",
            "0.0001",
            "0.00012",
            "2",
            "1000000000",
            "1e9",
            "7.0",
        ],
        "t": ["-0.0", "0", "-1e-5", "-0.00001", "1e-7", "999999999.5", "-1000000000", "12", "1e+2", "1.50"],
        "samples": ["0", "1000000000000", "999999999999", "1"],
    }.items():
        for value in values:
            step += 1
            line = {**base, key: value, "step": str(step)}
            out.append(_line([*line.items(), ("steps", "1")]))
    # An infinite rate (1e12 samples in 5e-324 s), a rate from 1e16 (an exponent) and one below 1e-4.
    for seconds, samples in (("5e-324", "1000000000000"), ("1e-5", "1000000000000"), ("100000", "1")):
        step += 1
        line = {**base, "seconds": seconds, "samples": samples, "step": str(step)}
        out.append(_line([*line.items(), ("steps", "1")]))
    return out


def _numbers_session(tmp_path: Path, name: str, lines: list[bytes]) -> Path:
    """A session whose first run's batch lines are each followed by one of ``lines`` (in turn), and a line of
    the other runs between: lists of the lane that change run and shape often, each run's rows in a row a
    few, so that one odd number sends only those few the one-by-one way."""
    path = make_session(tmp_path, name=name, runs=2, epochs=2, steps=40, folder=name, write_summary=False)
    raw = (path / "events.jsonl").read_bytes().splitlines(keepends=True)
    out: list[bytes] = []
    for i, line in enumerate(raw):
        out.append(line)
        if b'"type":"batch"' in line and RUN.encode() in line:
            out.append(lines[i % len(lines)])
    (path / "events.jsonl").write_bytes(b"".join(out))
    return path


def test_numbers_of_every_notation_export_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _number_lines()
    path = _numbers_session(tmp_path, "numbers", lines)
    text = assert_same_export(path)
    for cell in ("1e-05", "5e-324", ",inf,", "e+16", ",-0.0", ",1e-07"):
        assert cell in text
    assert lane_rows(path, monkeypatch) > 0
    # The shapes of line only the wire's second Struct takes (a field left out), and ones the dict path
    # reads (a node, an unknown run), among them.
    odd = [
        _line([("run", f'"{RUN}"'), ("type", '"batch"'), ("epoch", "1"), ("step", "40"), ("seconds", "0.5")]),
        _line([("run", f'"{RUN}"'), ("type", '"batch"'), ("epoch", "1"), ("step", "41"), ("seconds", "2")]),
        _line(
            [("run", '"no-such-run"'), ("type", '"batch"'), ("epoch", "1"), ("step", "1"), ("seconds", "1")]
        ),
        _line(
            [("run", f'"{RUN}"'), ("type", '"batch"'), ("epoch", "1"), ("step", "42"), ("seconds", "1e-6")]
        ),
        _line(
            [
                ("run", f'"{RUN}"'),
                ("type", '"batch"'),
                ("epoch", "1"),
                ("step", "43"),
                ("seconds", "1"),
                ("node", "1"),
            ]
        ),
    ]
    path = _numbers_session(tmp_path, "odd", [*lines, *odd])
    text = assert_same_export(path)
    assert ",1e-06," in text


def test_the_fast_text_is_repr_where_it_is_taken() -> None:
    """``_run_text`` of one run's numbers is the rows ``_batch_rows`` makes one by one, for numbers across
    every notation (whatever msgspec writes otherwise goes the one-by-one way)."""
    import random

    from benchtui.core.wire.events import batch_of

    rng = random.Random(35)
    ends = {RUN: (f"{RUN},torch,resnet50,1,", ",x\n")}
    for _ in range(3000):  # a few rows a time: one in another notation sends them all the one-by-one way
        batches = []
        for step in range(1, 4):
            seconds = rng.uniform(0, 1) * 10 ** rng.uniform(-9, 9.0) or 0.5
            t = rng.uniform(-1, 1) * 10 ** rng.uniform(-8, 9.0)
            line = (
                f'{{"run":"{RUN}","v":1,"type":"batch","t":{t!r},"epoch":1,"step":{step},'
                f'"seconds":{seconds!r},"samples":{rng.choice([0, 1, 32, 10**12])},"steps":1}}\n'
            )
            batch = batch_of(line.encode())
            if batch is not None:
                batches.append(batch)
        text, rows = csvfile._batch_text(batches, ends)
        assert text == "".join(csvfile._batch_rows(batches, ends))
        assert rows == len(batches)


@pytest.mark.parametrize("value", ["", "plain", "a,b", 'say "hi"', "two\nlines", "cr\r", " space ", 7, "'=x"])
def test_a_runs_cell_is_written_as_csv_writer_writes_it(value: Any) -> None:
    """A run's cells (id, framework, model, index, a sweep's point) are written once per run as csv.writer
    writes them inside a row: quoted where they must be, an empty one empty."""
    row = io.StringIO()
    csv.writer(row, lineterminator="\n").writerow(["x", value, "y"])
    assert row.getvalue() == f"x,{csvfile._csv_cell(value)},y\n"
