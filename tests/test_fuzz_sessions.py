"""Fuzzing a real session's files: every reader survives, says what it skipped, and changes no other run.

A session is written by the real engine (a stand-in runner through ``--python``, real pipes);
then its files are damaged one way at a time (cut at every line boundary and at random
offsets, bytes replaced, fields of session.json given wrong types) and every reader runs on
each copy: ``show``, every export, ``compare`` and a replay. Each must end with exit 0 or 2
and no exception; a damaged events.jsonl must be said in a warning; and the figures of every
run whose lines were not touched must be exactly those of the undamaged session.

Then each of session.json, summary.json and events.jsonl is made something a writer never
makes (a FIFO, a folder, a link to /dev/zero or to a file, a 20 GB hole, a file at and just over
its bound, a line nested 100,000 deep) and every reader runs on it in a fresh process, as a user
runs it: ``sessions``, ``show``, every export, ``compare``, a replay and the sessions screen's
loading. Each must end well within a timeout (a hang fails, never blocks), within 200 MB, with a
listing or a warning (exit 0) or one line (exit 2), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from benchtui.cli import main
from benchtui.core.running.replay import Replayer
from benchtui.core.store.session import (
    MAX_EVENT_LINE_BYTES,
    MAX_META_BYTES,
    MAX_SUMMARY_BYTES,
    SessionError,
    load_session,
)
from support import ROOT, benchtui, only_session

HOSTILE = Path(__file__).parent / "data" / "hostile_runner.py"
MEASURED = ("mean_epoch_s", "first_epoch_s", "mean_epoch_excl_first_s", "images_per_s")
SEED = 20261123
#: Every test here is long (~400 test-seconds in all, no framework); the fast tier (-m "not slow") runs
#: each loop on a seeded sample of its cases (the ``cases`` fixture), ``python -m pytest`` all of them.
pytestmark = pytest.mark.long
T = TypeVar("T")
#: The ``cases`` fixture (conftest): a loop's cases, all or a seeded sample of them.
Sample = Callable[[Sequence[T]], list[T]]
WRONG = [None, 7, -1, 1e308, "text", [], {}, True, [1, "x"], {"a": None}]


@pytest.fixture(scope="module")
def real_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_session(tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def sweep_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_session(tmp_path_factory.mktemp("fuzz-sweep"), sweep=("batch=4,8", "channels-last=off,on"))


def record_session(tmp: Path, sweep: Sequence[str] = ()) -> Path:
    """A session written by the real engine, through a stand-in runner (2 frameworks x 2 runs x 3 epochs);
    ``sweep``: its --sweep options (then no --batch-size: the sweep's batch axis sets it)."""
    tmp.mkdir(parents=True, exist_ok=True)
    python = tmp / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {HOSTILE} "$@"\n')
    python.chmod(0o755)
    args = ["run", "--headless", "--frameworks", "torch,tensorflow", "--models", "resnet50"]
    args += ["--image-size", "32", "--samples", "24", "--epochs", "3", "--runs", "2"]
    args += [f"--sweep={s}" for s in sweep] or ["--batch-size", "8"]
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
def test_cut_at_every_line_boundary(real_session: Path, tmp_path: Path, part: int, cases: Sample) -> None:
    """A file cut between two lines: what came before is kept unchanged, the cut is said."""
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    every = range(part, len(lines), 4)
    assert len(every) >= len(lines) // 4
    for k in cases(every):
        path = _copy(real_session, tmp_path / f"cut{k}")
        (path / "events.jsonl").write_bytes(b"".join(lines[:k]))
        damaged = {run_of(raw) for raw in lines[k:]}
        check(path, real_session, damaged, figures, warn=True)
        shutil.rmtree(path.parent)


@pytest.mark.parametrize("part", range(2))
def test_cut_at_random_offsets(real_session: Path, tmp_path: Path, part: int, cases: Sample) -> None:
    data = (real_session / "events.jsonl").read_bytes()
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    rng = random.Random(SEED + part)
    offsets = [rng.randrange(1, len(data)) for _ in range(25)]
    for case, offset in cases(list(enumerate(offsets))):
        path = _copy(real_session, tmp_path / f"off{case}")
        (path / "events.jsonl").write_bytes(data[:offset])
        line_no = data[:offset].count(b"\n")
        damaged = {run_of(raw) for raw in lines[line_no:]}
        check(path, real_session, damaged, figures, warn=True)
        shutil.rmtree(path.parent)


@pytest.mark.parametrize("part", range(4))
def test_bytes_replaced(real_session: Path, tmp_path: Path, part: int, cases: Sample) -> None:
    """One byte replaced: at most the run of that line changes (and the run a changed tag names)."""
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    rng = random.Random(SEED * 7 + part)
    flips = []
    for _ in range(30):
        k = rng.randrange(len(lines))
        raw = bytearray(lines[k])
        i = rng.randrange(len(raw))
        raw[i] = rng.choice(
            [0, 0x1B, 0x22, 0x7B, 0x2C, 0x3A, 0x31, 0x39, 0xFF, 0x0A, 0x20, rng.randrange(256)]
        )
        flips.append((k, raw))
    for case, (k, raw) in cases(list(enumerate(flips))):
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
def test_wrong_types_in_every_session_json_field(
    real_session: Path, tmp_path: Path, part: int, cases: Sample
) -> None:
    figures = run_figures(real_session)
    every = list(enumerate(_meta_cases(real_session)[part::4]))
    for n, (where, key, value) in cases(every):
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


def test_a_sweep_session_reads_clean_and_survives_cuts(
    sweep_session: Path, tmp_path: Path, cases: Sample
) -> None:
    """A sweep's session (4 points, tf.keras sharing its channels-last runs): every reader, its answer
    recomputable, and cut between any two lines, read as any other session."""
    loaded = load_session(sweep_session)
    assert loaded.warnings == [] and len(loaded.model.runs) == 12
    summary = json.loads((sweep_session / "summary.json").read_text())
    assert summary["sweep"]["best"] and summary["sweep"]["gains"]
    assert json.loads(json.dumps(loaded.model.summary())) == summary
    assert every_reader(sweep_session, sweep_session) == [0] * 8
    lines = lines_of(sweep_session)
    figures = run_figures(sweep_session)
    for k in cases(range(0, len(lines), 3)):
        path = _copy(sweep_session, tmp_path / f"cut{k}")
        (path / "events.jsonl").write_bytes(b"".join(lines[:k]))
        check(path, sweep_session, {run_of(raw) for raw in lines[k:]}, figures, warn=True)
        shutil.rmtree(path.parent)


def test_a_sweep_s_plan_of_the_wrong_shape_reads(sweep_session: Path, tmp_path: Path, cases: Sample) -> None:
    """session.json's sweep given what no writer writes: read as no sweep or as its valid part, never a crash."""
    shapes: list[Any] = [*WRONG, {"batch": "4,8"}, {"batch": [4, 8]}, {"warp": ["1", "2"]}, {"batch": []}]
    shapes += [
        {"batch": ["4", "4"]},
        {"batch": ["0"]},
        {"channels-last": ["on", "sideways"]},
        {"devices": ["1", "2"]},
    ]
    for n, shape in cases(list(enumerate(shapes))):
        path = _copy(sweep_session, tmp_path / f"sweep{n}")
        meta = json.loads((path / "session.json").read_text())
        meta["plan"]["sweep"] = shape
        (path / "session.json").write_text(json.dumps(meta))
        codes = every_reader(path, sweep_session)
        assert set(codes) <= {0, 2}, (shape, codes)
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
    (row,) = [r for r in loaded.model.rows() if r.framework == "torch"]
    assert any(w["kind"] == "missing-data" for w in row.warnings)
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
def test_wrong_types_in_every_event_field(
    real_session: Path, tmp_path: Path, part: int, cases: Sample
) -> None:
    """Each field of each kind of event, nested ones too, given a wrong type: skipped or folded, never a crash."""
    lines = lines_of(real_session)
    figures = run_figures(real_session)
    every = _event_cases(real_session)
    assert len(every) > 200
    for n, (k, field_path, wrong) in cases(list(enumerate(every[part::4]))):
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


# -- files a writer never makes: every reader, bounded in time and memory ------------------------
GIB = 1 << 30
#: What a reader may take on any folder (the issue's bounds). The tests hold the memory bound and a
#: timeout that only catches hangs; benchmarks/hostile_readers.py measures each reader's time.
READER_S, READER_MB, HANG_S = 1.0, 200, 10.0
#: A reader that tries to take a 20 GB file in fails fast under this cap instead of swapping.
ADDRESS_CAP = 4 * GIB
#: The sessions screen's loading: the list (read on the UI thread as the screen mounts), then each
#: session's summary as its worker draws it (the screen shows one it cannot read as a red line).
_SCREEN = """
def screen(root):
    from pathlib import Path
    from benchtui.core.store.session import SessionError, list_sessions
    from benchtui.screens.sessions import summary_view
    for info in list_sessions(root):
        print(info["status"], info["name"], info.get("error", ""))
        try:
            summary_view(Path(info["path"]), 100)
        except SessionError as exc:
            print(f"Cannot read {info['name']}: {exc}")
    return 0
"""
#: A replay's reading (what the live screen plays), every event applied without waiting.
_REPLAY = """
def replay(path):
    import sys
    from benchtui.core.running.replay import replay_all
    from benchtui.core.store.session import SessionError
    try:
        replay_all(path)
    except SessionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
"""
#: Readers run one after another in one fresh process: a command line's through ``main`` (what
#: ``python -m benchtui`` runs), the others by name. Prints each one's exit, output, wall time and the
#: process's peak memory after it, as JSON.
_READ_ALL = (
    _SCREEN
    + _REPLAY
    + r"""
import contextlib, io, json, resource, sys, time, traceback
from benchtui.cli import main
named = {"screen": screen, "replay": replay}
results = {}
for name, args in json.loads(sys.argv[1]).items():
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = named[args[1]](args[2]) if args[0] == ":" else main(args)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            rc = 1
    wall = time.perf_counter() - started
    # VmHWM: this process's own peak. ru_maxrss would carry its parent's from before the exec (Linux keeps
    # the larger at exec), and a pytest worker that ran a framework's tests is hundreds of MB.
    rss = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) / 1024
    results[name] = {"rc": rc, "wall_s": wall, "rss_mb": rss, "out": out.getvalue()[-20000:], "err": err.getvalue()[-20000:]}
print(json.dumps(results))
"""
)


@dataclass
class Read:
    """One reader's run on one folder."""

    reader: str
    rc: int | None  # None: it did not end before the timeout
    wall_s: float
    rss_mb: float  # the peak of its process (in one process with others: the peak so far)
    out: str
    err: str


def _child(args: list[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """``args`` in a fresh process from the repository, under the address-space cap; None at the timeout."""

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_CAP, ADDRESS_CAP))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "120"}
    try:
        return subprocess.run(
            args,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            preexec_fn=cap,
        )
    except subprocess.TimeoutExpired:
        return None


def read_all(readers: dict[str, list[str]], timeout: float = HANG_S) -> dict[str, Read]:
    """Every reader in one fresh process (one start-up for all): exits, outputs, wall times, memory.

    A reader that hangs holds up the rest: every reader after it is reported as not having ended.
    """
    proc = _child([sys.executable, "-c", _READ_ALL, json.dumps(readers)], timeout + 5 * len(readers))
    if proc is None:
        return {name: Read(name, None, timeout, 0.0, "", "") for name in readers}
    assert proc.returncode == 0 and proc.stdout, proc.stderr[-3000:]
    return {name: Read(name, **got) for name, got in json.loads(proc.stdout.splitlines()[-1]).items()}


def measured(reader: str, args: list[str], timeout: float = HANG_S) -> Read:
    """One reader in a fresh process of its own, as a user runs it: its exit, output, wall time
    (start-up included) and peak memory."""
    argv = [sys.executable, "-c", _READ_ALL, json.dumps({reader: args})]
    started = time.perf_counter()
    proc = _child(argv, timeout)
    wall = time.perf_counter() - started
    if proc is None:
        return Read(reader, None, wall, 0.0, "", "")
    assert proc.returncode == 0 and proc.stdout, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])[reader]
    return Read(reader, **{**got, "wall_s": wall})


def readers(bad: Path, good: Path, out: Path) -> dict[str, list[str]]:
    """Every reader of a session folder: the command line's (its arguments), a replay and the sessions screen."""
    return {
        "sessions": ["sessions", "--sessions-dir", str(bad.parent)],
        "show": ["show", str(bad)],
        **{
            f"export {fmt}": ["export", str(bad), "--format", fmt, "-o", str(out / f"x.{fmt}")]
            for fmt in ("md", "csv", "json", "html")
        },
        "export --per-batch": [
            "export",
            str(bad),
            "--format",
            "csv",
            "--per-batch",
            "-o",
            str(out / "b.csv"),
        ],
        "compare": ["compare", str(good), str(bad)],
        "replay": [":", "replay", str(bad)],
        "sessions screen": [":", "screen", str(bad.parent)],
    }


def _hole(path: Path, data: bytes) -> None:
    """A 20 GB file with no newline: a hole (sparse: no disk), what a crash or a truncate leaves."""
    path.write_bytes(b"")
    os.truncate(path, 20 * GIB)


def _tail_hole(path: Path, data: bytes) -> None:
    """The file as it was, then a 20 GB hole."""
    path.write_bytes(data)
    os.truncate(path, len(data) + 20 * GIB)


def _link_to_file(path: Path, data: bytes) -> None:
    """A link to a file holding exactly what was there (refused: a writer never makes a link)."""
    real = path.with_name(path.name + ".real")
    real.write_bytes(data)
    path.symlink_to(real)


#: The most bytes each file may have (events.jsonl: the most one of its lines may have).
BOUNDS = {
    "session.json": MAX_META_BYTES,
    "summary.json": MAX_SUMMARY_BYTES,
    "events.jsonl": MAX_EVENT_LINE_BYTES,
}


def _sized(path: Path, data: bytes, over: int) -> None:
    """At its bound (``over`` 0) or a byte past it: a JSON file padded with spaces; events.jsonl with
    one line of that length (not JSON) before its own lines."""
    bound = BOUNDS[path.name] + over
    if path.suffix == ".json":
        body = data.rstrip()
        path.write_bytes(body + b" " * (bound - len(body)))
    else:
        path.write_bytes(b"x" * bound + b"\n" + data)


def _densest(path: Path, data: bytes) -> None:
    """At its bound with what costs the most memory parsed, ``[{},{},...]`` (about 25 times its bytes),
    in a file that is otherwise whole: what a reader must take in."""
    if path.suffix == ".json":
        head = json.dumps(json.loads(data))[:-1].encode() + b', "pad": ['
    else:
        head = b'{"type":"note","t":1.0,"run":null,"pad":['
    room = BOUNDS[path.name] - len(head) - len(b"{}]}")
    text = head + b"{}," * (room // 3) + b" " * (room % 3) + b"{}]}"
    assert len(text) == BOUNDS[path.name]
    path.write_bytes(text if path.suffix == ".json" else text + b"\n" + data)


def _deep(path: Path, data: bytes) -> None:
    """Nested 100,000 deep: all of a JSON file; one line of events.jsonl, before its own lines."""
    nested = b"[" * 100_000 + b"]" * 100_000
    path.write_bytes(nested if path.suffix == ".json" else nested + b"\n" + data)


#: What a session's file can be made that no writer makes; each gets what was there (its bytes).
FILE_KINDS: dict[str, Callable[[Path, bytes], None]] = {
    "missing": lambda path, data: None,
    "empty": lambda path, data: path.write_bytes(b""),
    "fifo": lambda path, data: os.mkfifo(path),
    "folder": lambda path, data: path.mkdir(),
    "link to /dev/zero": lambda path, data: path.symlink_to("/dev/zero"),
    "link to a file": _link_to_file,
    "20 GB hole": _hole,
    "20 GB hole after it": _tail_hole,
    "at its bound": lambda path, data: _sized(path, data, 0),
    "a byte over its bound": lambda path, data: _sized(path, data, 1),
    "at its bound, densest": _densest,
    "nested 100,000 deep": _deep,
}
FILES = ("session.json", "summary.json", "events.jsonl")


def hostile_folder(real_session: Path, root: Path, file: str, kind: str) -> tuple[Path, Path]:
    """A good copy of the session and a copy whose ``file`` is made ``kind``, side by side in ``root``."""
    good = root / f"20200101T000000Z_{real_session.name.partition('_')[2]}"
    bad = root / f"20300101T000000Z_{slug(file)}-{slug(kind)}"
    shutil.copytree(real_session, good)
    shutil.copytree(real_session, bad)
    data = (bad / file).read_bytes()
    (bad / file).unlink()
    FILE_KINDS[kind](bad / file, data)
    return good, bad


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def check_read(read: Read, what: object) -> None:
    """What every reader must do on any folder: end, within the memory bound, with a listing, warnings
    or one line, never a traceback."""
    said = (what, read.reader, read.rc, read.err[-600:])
    assert read.rc is not None, f"hung: {said}"
    assert "Traceback" not in read.err + read.out, said
    assert read.rss_mb < READER_MB, (read.rss_mb, said)
    assert read.rc in (0, 2), said
    if read.rc == 2:
        assert len(read.err.strip().splitlines()) == 1, said


@pytest.mark.parametrize("kind", list(FILE_KINDS))
@pytest.mark.parametrize("file", FILES)
def test_every_reader_survives_a_file_no_writer_makes(
    real_session: Path, tmp_path: Path, file: str, kind: str
) -> None:
    good, bad = hostile_folder(real_session, tmp_path / "sessions", file, kind)
    out = tmp_path / "out"
    out.mkdir()
    reads = read_all(readers(bad, good, out))
    for read in reads.values():
        check_read(read, (file, kind))
    # One bad folder never hides another: the good session is listed, and the screen summarises it.
    assert good.name in reads["sessions"].out
    assert f"Cannot read {good.name}" not in reads["sessions screen"].out
    refused = file == "session.json" and not kind.startswith("at its bound")
    for name in ("show", "export md", "compare", "replay"):
        assert reads[name].rc == (2 if refused else 0), (name, reads[name].err)
    if refused and kind != "missing":
        assert "session.json" in reads["show"].err
        assert (
            "unreadable" in reads["sessions"].out
            and f"Cannot read {bad.name}" in reads["sessions screen"].out
        )
    if file == "events.jsonl" and kind != "at its bound, densest":  # that one is a whole event
        assert "events.jsonl" in reads["show"].err  # what was not read is said
