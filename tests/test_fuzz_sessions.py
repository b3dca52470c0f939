"""Fuzzing a real session's files: every reader survives, says what it skipped, and changes no other run.

A session is written by the real engine (a stand-in runner through ``--python``, real pipes);
then its files are damaged one way at a time (cut at every line boundary and at random
offsets, bytes replaced, fields of session.json given wrong types) and every reader runs on
each copy: ``show``, every export, ``compare`` and a replay. Each must end with exit 0 or 2
and no exception; a damaged events.jsonl must be said in a warning; and the figures of every
run whose lines were not touched must be exactly those of the undamaged session.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from benchtui.cli import main
from benchtui.core.running.replay import Replayer
from benchtui.core.store.session import SessionError, load_session
from conftest import benchtui, only_session

HOSTILE = Path(__file__).parent / "data" / "hostile_runner.py"
MEASURED = ("mean_epoch_s", "first_epoch_s", "mean_epoch_excl_first_s", "images_per_s")
SEED = 20261123
WRONG = [None, 7, -1, 1e308, "text", [], {}, True, [1, "x"], {"a": None}]


@pytest.fixture(scope="module")
def real_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("fuzz")
    python = tmp / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {HOSTILE} "$@"\n')
    python.chmod(0o755)
    args = ["run", "--headless", "--frameworks", "torch,tensorflow", "--models", "resnet50"]
    args += ["--image-size", "32", "--samples", "24", "--batch-size", "8", "--epochs", "3", "--runs", "2"]
    args += ["--device", "cpu", "--no-nvml", "--interval", "0.05", "--sessions-dir", str(tmp / "s")]
    args += [f"--python={fw}={python}" for fw in ("torch", "tensorflow")]
    proc = benchtui(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return only_session(tmp / "s")


def run_figures(path: Path) -> dict[str, Any]:
    out = {}
    for rid, run in load_session(path).model.runs.items():
        got = run.figures()
        out[rid] = ({k: got[k] for k in MEASURED}, run.batch_seconds.tolist(), str(run.status))
    return out


def every_reader(path: Path, baseline: Path) -> list[int]:
    """show, md, csv, json, html, compare and a replay at full speed: their exit codes (no exception)."""
    codes = []
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        codes.append(main(["show", str(path)]))
        for fmt in ("md", "csv", "json", "html"):
            codes.append(main(["export", str(path), "--format", fmt, "-o", str(path / f"out.{fmt}")]))
        codes.append(main(["export", str(path), "--format", "csv", "--per-batch", "-o", str(path / "b.csv")]))
        codes.append(main(["compare", str(baseline), str(path)]))
    try:
        replayer = Replayer(path, speed=float("inf"))
    except SessionError:
        codes.append(2)
    else:
        assert asyncio.run(replayer.run()) in ("complete", "incomplete", "failed", "interrupted", "abandoned")
        # The end of a replay shows what loading shows: no run left pending in a finished session.
        loaded = load_session(path)
        assert {r: s.status for r, s in replayer.model.runs.items()} == {
            r: s.status for r, s in loaded.model.runs.items()
        }
        codes.append(0)
    return codes


def lines_of(path: Path) -> list[bytes]:
    return (path / "events.jsonl").read_bytes().splitlines(keepends=True)


def run_of(raw: bytes) -> str | None:
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    return event.get("run") if isinstance(event, dict) and isinstance(event.get("run"), str) else None


def check(path: Path, baseline: Path, damaged: set[str | None], figures: dict[str, Any], warn: bool) -> None:
    codes = every_reader(path, baseline)
    assert set(codes) <= {0, 2}, codes
    try:
        loaded = load_session(path)
    except SessionError:
        assert 2 in codes
        return
    if warn:
        assert loaded.warnings, "damage that was not said"
    now = run_figures(path)
    for rid, before in figures.items():
        if rid not in damaged:
            assert now[rid] == before, rid


def _copy(real_session: Path, tmp_path: Path) -> Path:
    path = tmp_path / real_session.name
    shutil.copytree(real_session, path)
    return path


def test_the_real_session_reads_clean(real_session: Path) -> None:
    loaded = load_session(real_session)
    assert loaded.warnings == [] and all(r.status == "ok" for r in loaded.model.runs.values())
    assert every_reader(real_session, real_session) == [0] * 8


@pytest.mark.parametrize("part", range(4))
def test_cut_at_every_line_boundary(real_session: Path, tmp_path: Path, part: int) -> None:
    """A file cut between two lines: what came before is kept unchanged, the cut is said."""
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    cases = 0
    for k in range(part, len(lines), 4):
        path = _copy(real_session, tmp_path / f"cut{k}")
        (path / "events.jsonl").write_bytes(b"".join(lines[:k]))
        damaged = {run_of(raw) for raw in lines[k:]}
        check(path, real_session, damaged, figures, warn=True)
        shutil.rmtree(path.parent)
        cases += 1
    assert cases >= len(lines) // 4


@pytest.mark.parametrize("part", range(2))
def test_cut_at_random_offsets(real_session: Path, tmp_path: Path, part: int) -> None:
    data = (real_session / "events.jsonl").read_bytes()
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    rng = random.Random(SEED + part)
    for case in range(25):
        offset = rng.randrange(1, len(data))
        path = _copy(real_session, tmp_path / f"off{case}")
        (path / "events.jsonl").write_bytes(data[:offset])
        line_no = data[:offset].count(b"\n")
        damaged = {run_of(raw) for raw in lines[line_no:]}
        check(path, real_session, damaged, figures, warn=True)
        shutil.rmtree(path.parent)


@pytest.mark.parametrize("part", range(4))
def test_bytes_replaced(real_session: Path, tmp_path: Path, part: int) -> None:
    """One byte replaced: at most the run of that line changes (and the run a changed tag names)."""
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    rng = random.Random(SEED * 7 + part)
    for case in range(30):
        k = rng.randrange(len(lines))
        raw = bytearray(lines[k])
        i = rng.randrange(len(raw))
        raw[i] = rng.choice(
            [0, 0x1B, 0x22, 0x7B, 0x2C, 0x3A, 0x31, 0x39, 0xFF, 0x0A, 0x20, rng.randrange(256)]
        )
        mutated = [*lines[:k], bytes(raw), *lines[k + 1 :]]
        path = _copy(real_session, tmp_path / f"flip{case}")
        (path / "events.jsonl").write_bytes(b"".join(mutated))
        damaged = {run_of(lines[k]), *(run_of(part) for part in bytes(raw).split(b"\n"))}
        if damaged == {None} or run_of(lines[k]) is None:
            damaged |= set(figures)  # a session-level line (a sample, the end): any run may be touched
        unreadable = False
        for piece in bytes(raw).split(b"\n"):
            if piece.strip():
                try:
                    unreadable |= not isinstance(json.loads(piece), dict)
                except ValueError:
                    unreadable = True
        check(path, real_session, damaged, figures, warn=unreadable)
        shutil.rmtree(path.parent)


def _meta_cases(real_session: Path) -> list[tuple[str, str, Any]]:
    meta = json.loads((real_session / "session.json").read_text())
    cases = [("meta", key, value) for key in meta for value in WRONG]
    cases += [("plan", key, value) for key in meta["plan"] for value in WRONG[:6]]
    return cases


@pytest.mark.parametrize("part", range(4))
def test_wrong_types_in_every_session_json_field(real_session: Path, tmp_path: Path, part: int) -> None:
    figures = run_figures(real_session)
    cases = _meta_cases(real_session)[part::4]
    for n, (where, key, value) in enumerate(cases):
        path = _copy(real_session, tmp_path / f"meta{n}")
        meta = json.loads((path / "session.json").read_text())
        (meta if where == "meta" else meta["plan"])[key] = value
        (path / "session.json").write_text(json.dumps(meta))
        codes = every_reader(path, real_session)
        assert set(codes) <= {0, 2}, (where, key, value, codes)
        if 2 not in codes and where == "meta" and key != "plan":
            # A field views read, of the wrong type: ignored with a warning, the figures as they were.
            assert run_figures(path) == figures, (key, value)
        shutil.rmtree(path.parent)


def test_summary_json_is_strict_and_recomputable(real_session: Path) -> None:
    def no_constant(name: str) -> None:
        raise ValueError(name)

    summary = json.loads((real_session / "summary.json").read_text(), parse_constant=no_constant)
    assert json.loads(json.dumps(load_session(real_session).model.summary())) == summary


def test_a_lost_line_leaves_a_gap_not_a_shift(real_session: Path, tmp_path: Path) -> None:
    """Epoch 1's line of one run lost: its first epoch is unknown and said, never epoch 2's time."""
    path = _copy(real_session, tmp_path)
    lines = lines_of(path)
    victim = "001-torch-resnet50-1"
    (k,) = [
        i
        for i, raw in enumerate(lines)
        if run_of(raw) == victim and json.loads(raw)["type"] == "epoch" and json.loads(raw)["epoch"] == 1
    ]
    batch = next(
        i
        for i, raw in enumerate(lines)
        if run_of(raw) == victim and json.loads(raw)["type"] == "batch" and i > k
    )
    (path / "events.jsonl").write_bytes(b"".join(lines[:k] + lines[k + 1 : batch] + lines[batch + 1 :]))
    loaded = load_session(path)
    run = loaded.model.runs[victim]
    assert run.figures()["first_epoch_s"] is None and run.missing_epochs() == [1]
    assert run.missing_steps == 1  # the lost batch line: a gap in the step numbers, counted
    assert any(f"run {victim}: epoch 1 missing" in w for w in loaded.warnings)
    (row,) = [r for r in loaded.model.rows() if r["framework"] == "torch"]
    assert any(w["kind"] == "missing-data" for w in row["warnings"])
    others = {rid: f for rid, f in run_figures(path).items() if rid != victim}
    assert others == {rid: f for rid, f in run_figures(real_session).items() if rid != victim}


def _event_cases(real_session: Path) -> list[tuple[int, tuple[str, ...], Any]]:
    """(line, path to a field, wrong value): every field of the first event of each type, nested ones too."""
    lines = lines_of(real_session)
    seen: set[str] = set()
    cases = []
    for k, raw in enumerate(lines):
        event = json.loads(raw)
        if event["type"] in seen:
            continue
        seen.add(event["type"])
        paths: list[tuple[str, ...]] = []
        for key, value in event.items():
            if key == "type":
                continue
            paths.append((key,))
            if isinstance(value, dict):
                paths += [(key, sub) for sub in value]
            if isinstance(value, list) and value and isinstance(value[0], dict):
                paths += [(key, "0", sub) for sub in value[0]]
        cases += [(k, p, wrong) for p in paths for wrong in (None, "text", -1, 1e308, [], {"a": 1})]
    return cases


@pytest.mark.parametrize("part", range(4))
def test_wrong_types_in_every_event_field(real_session: Path, tmp_path: Path, part: int) -> None:
    """Each field of each kind of event, nested ones too, given a wrong type: skipped or folded, never a crash."""
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    cases = _event_cases(real_session)
    assert len(cases) > 200
    for n, (k, field_path, wrong) in enumerate(cases[part::4]):
        event = json.loads(lines[k])
        target: Any = event
        for step in field_path[:-1]:
            target = target[int(step)] if isinstance(target, list) else target[step]
        target[field_path[-1]] = wrong
        mutated = [*lines[:k], (json.dumps(event) + "\n").encode(), *lines[k + 1 :]]
        path = _copy(real_session, tmp_path / f"ev{n}")
        (path / "events.jsonl").write_bytes(b"".join(mutated))
        damaged = {run_of(lines[k]), run_of(mutated[k])}
        if damaged == {None}:
            damaged |= set(figures)
        check(path, real_session, damaged, figures, warn=False)
        shutil.rmtree(path.parent)
