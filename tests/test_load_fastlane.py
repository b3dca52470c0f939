"""The load's batch lane (issue 35): a batch line decoded straight into the wire's Struct and folded from its
fields (``events.batch_of``, ``SessionModel.fold_batches``) gives what the dict path gave before it.

The reference is the load as it was: every line through ``fast_event`` / ``_event_of`` into a dict (the
lane closed: ``batch_of`` answers None), folded by the batch fold as it was written before the lane (copied
below, ``old_on_batch``). Every count, warning and field of every run must be the same, on made sessions,
the golden ones, a 1M-event session's first 200k lines, and sessions of hostile batch lines; and every line
the lane takes must be one the exact reader (``parse_line_exact``) takes, to the same values and types.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import shutil
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model import session_model
from benchtui.core.model.session_model import MAX_WATCH_WINDOW, SessionModel
from benchtui.core.model.status import RunStatus
from benchtui.core.store import session as store
from benchtui.core.store.session import EventCheck, GpuTail, LoadedSession, iter_events
from benchtui.core.wire import events
from benchtui.core.wire.events import BATCH, RUNNERS_BATCH, Malformed, batch_of, parse_line_exact
from sessionfactory import make_session, shaped_sessions

TESTS = Path(__file__).parent
BIG = sorted(Path("/tmp/big1m").glob("*_bench-1m"))


# -- the reference: the batch fold as it was before the lane, verbatim -------------------------------------
def _old_check_window(self: SessionModel, run: Any, step: int, steps: int) -> None:
    said = run.hello.get("steps_per_epoch")
    bound = said if isinstance(said, int) and said > 0 else (None if self.plan.watch else self.plan.samples)
    if bound is not None and step > bound:
        raise ValueError(f"step {step} is beyond the epoch's {bound} steps")
    if self.plan.watch and steps > MAX_WATCH_WINDOW:
        raise ValueError(f"a window of {steps} steps (at most {MAX_WATCH_WINDOW})")


def old_on_batch(self: SessionModel, run: Any, event: dict[str, Any]) -> None:
    steps = int(event.get("steps") or 1)
    if steps < 1:
        raise ValueError("a window of no steps")
    seconds, epoch, step = float(event["seconds"]), int(event["epoch"]), int(event["step"])
    if (run.epochs_planned and epoch > run.epochs_planned) or step < steps:
        raise ValueError("a step outside the plan")
    said, watch = run.hello.get("steps_per_epoch"), self.plan.watch
    bound = said if isinstance(said, int) and said > 0 else (None if watch else self.plan.samples)
    if (bound is not None and step > bound) or (watch and steps > MAX_WATCH_WINDOW):
        _old_check_window(self, run, step, steps)
    before = run.current_step if epoch == run.current_epoch else 0
    if step - steps < before:
        raise ValueError("steps already counted")
    run.missing_steps += step - steps - before
    if steps == 1:
        run.batch_seconds.append(seconds)
        run.batch_epochs.append(epoch)
    else:
        run.batch_seconds.extend([seconds] * steps)
        run.batch_epochs.extend([epoch] * steps)
    if step > steps or epoch > 1:
        window = seconds * steps
        if window > run.window_max_s:
            run.window_max_s = window
    run.current_epoch = epoch
    run.current_step = step
    run.status = RunStatus.RUNNING


def load_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LoadedSession, LoadedSession]:
    """The session loaded the new way, then the old way (the lane closed, the old fold)."""
    new = store.load_session(path)
    with monkeypatch.context() as patch:
        patch.setattr(store, "batch_of", lambda raw: None)
        patch.setattr(session_model.SessionModel, "_on_batch", old_on_batch)
        old = store.load_session(path)
    return new, old


def _plain(value: Any) -> Any:
    """A value made comparable with its exact types (1 and 1.0 and True differ; NaN equals NaN)."""
    if isinstance(value, array):
        return (value.typecode, value.tobytes())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return (type(value).__name__, value)


def model_state(loaded: LoadedSession) -> dict[str, Any]:
    model = loaded.model
    return {
        "events": model.events,
        "malformed": model.malformed,
        "unknown_runs": model.unknown_runs,
        "current": model.current,
        "gpu_samples": _plain(list(model.gpu_samples)),
        "runs": {run_id: _plain(run) for run_id, run in model.runs.items()},
        "warnings": loaded.warnings,
        "status": loaded.meta.get("status"),
    }


def assert_same_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> LoadedSession:
    new, old = load_both(path, monkeypatch)
    got, want = model_state(new), model_state(old)
    for key in want:
        if key == "runs":
            for run_id in want["runs"]:
                for name, value in want["runs"][run_id].items():
                    assert got["runs"][run_id][name] == value, f"{path.name}: run {run_id}: {name}"
        assert got[key] == want[key], f"{path.name}: {key}"
    return new


def read_both(path: Path) -> tuple[list[Any], EventCheck, list[Any], EventCheck]:
    """iter_events with the lane (its lists of Structs flattened) and without it, each event as its fields
    with their types (a batch's every field: a Struct holds None for one the line does not give, which the
    dict lacks), and each one's check."""
    lane, plain = EventCheck(), EventCheck()
    got = [
        _fields(e)
        for item in iter_events(path, [], GpuTail(600), lane, batches=True)
        for e in (item if type(item) is list else [item])
    ]
    want = [_fields(e) for e in iter_events(path, [], GpuTail(600), plain)]
    return got, lane, want, plain


def _fields(event: Any) -> Any:
    if type(event) in (BATCH, RUNNERS_BATCH):
        event = {"type": "batch", **{k: getattr(event, k, None) for k in BATCH.__struct_fields__}}
    elif event.get("type") == "batch" and "node" not in event:
        event = {**dict.fromkeys(BATCH.__struct_fields__), **event}
    return _plain(event)


def assert_same_reading(path: Path) -> None:
    got, lane, want, plain = read_both(path)
    assert got == want
    assert (lane.lines, lane.bad, lane.first, lane.end) == (plain.lines, plain.bad, plain.first, plain.end)


# -- sessions: made, golden, the big one's head ------------------------------------------------------------
def test_made_sessions_fold_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = shaped_sessions(tmp_path)
    for path in made:
        loaded = assert_same_load(path, monkeypatch)
        assert any(len(r.batch_seconds) for r in loaded.model.runs.values())
        assert_same_reading(path)


def test_golden_and_data_sessions_fold_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sessions the golden outputs are made of (``test_golden_outputs``) and the recorded ones, summaries
    included."""
    from test_golden_outputs import _made

    folders = [*_made(tmp_path / "made").values()]
    for folder in sorted(p.parent for p in TESTS.glob("data/*/events.jsonl")):
        folders.append(tmp_path / folder.name)
        shutil.copytree(folder, folders[-1])
    assert len(folders) >= 6
    for folder in folders:
        new = assert_same_load(folder, monkeypatch)
        assert new.model.events > 0
        assert_same_reading(folder)
        old = load_both(folder, monkeypatch)[1]
        assert json.dumps(new.model.summary(), sort_keys=True, default=str) == json.dumps(
            old.model.summary(), sort_keys=True, default=str
        )


@pytest.mark.skipif(not BIG, reason="no /tmp/big1m (benchmarks/load_session.py --dir /tmp/big1m builds it)")
def test_the_big_sessions_head_folds_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / BIG[0].name
    copy.mkdir()
    shutil.copy(BIG[0] / "session.json", copy)
    with open(BIG[0] / "events.jsonl", "rb") as src, open(copy / "events.jsonl", "wb") as out:
        out.writelines(itertools.islice(src, 200_000))
    new = assert_same_load(copy, monkeypatch)
    assert new.model.events == 200_000 and new.model.malformed == 0
    assert_same_reading(copy)


# -- hostile batch lines -----------------------------------------------------------------------------------
RUN = "001-torch-resnet50-1"
BASE = [
    ("run", f'"{RUN}"'),
    ("v", "1"),
    ("type", '"batch"'),
    ("t", "1003.5"),
    ("epoch", "1"),
    ("step", "3"),
    ("seconds", "0.0625"),
    ("samples", "32"),
    ("steps", "1"),
]
VALUES = [
    "0", "-1", "1", "2", "7", "1.0", "2.5", "1e3", "1E2", "-0.0", "0.0", "true", "false", "null", '"1"', "[]",
    "{}", "[1]", '{"a":1}', "10000000", "10000001", "1000000000", "1000000001", "1000000000000",
    "1000000000001", "9223372036854775807", "9223372036854775808", "18446744073709551616",
    "1" + "0" * 30, "1e400", "-1e400", "1e-400", "NaN", "Infinity", "-Infinity", "1e9", "1000000000.5",
    "-1000000000", "-1000000001", '"a:b"', '"\\ud800"', '"\\u00e9t\\u00e9"', '"\xc3\xa9"', '"\xff"',
]  # fmt: skip
RUN_VALUES = [
    f'"{RUN}"', '"other-run"', f'"{RUN}:x"', '"\\ud800"', '"\\udc00x"', '"\xc3\xa9"', '"\xff\xfe"',
    f'"\\u0030{RUN[1:]}"', "null", "1", "true", "[]", '{"run":1}', '""',
]  # fmt: skip


def _line(pairs: list[tuple[str, str]], sep: str = ",", colon: str = ":") -> bytes:
    body = sep.join(f'"{k}"{colon}{v}' for k, v in pairs)
    return ("{" + body + "}\n").encode("utf-8", "surrogateescape")


def _replaced(key: str, value: str) -> list[tuple[str, str]]:
    return [(k, value if k == key else v) for k, v in BASE]


def hostile_lines() -> Iterator[bytes]:
    for key, _ in BASE:
        if key == "type":
            continue
        for value in RUN_VALUES if key == "run" else VALUES:
            yield _line(_replaced(key, value))
        yield _line([(k, v) for k, v in BASE if k != key])  # missing
        yield _line([*BASE, (key, dict(BASE)[key])])  # twice, the same
        yield _line([*BASE, (key, "2")])  # twice, another value
        yield _line([(key, "2"), *BASE])
        yield _line([(k if k != key else "\\u00" + format(ord(key[0]), "x") + key[1:], v) for k, v in BASE])
    for value in ["1", "0", "null", "true", "4096", "4097", '"1"']:
        yield _line([*BASE, ("node", value)])
        yield _line([*[(k, v) for k, v in BASE if k != "samples"], ("node", value)])  # not a runner's shape
    for extra in [
        "1",
        "null",
        '"\xff"',
        '"\\ud800"',
        "1e400",
        "1" + "0" * 5000,
        '{"a":{"b":[1,2]}}',
        '"a:b"',
        "[]",
    ]:
        yield _line([*BASE, ("extra", extra)])
        yield _line([("extra", extra), *BASE])
    yield _line([*BASE, ("type", '"batch"')])
    yield _line([*BASE, ("type", '"gpu"')])
    yield _line([("type", '"gpu"'), *BASE[1:]])
    yield _line([(k, '"bat\\u0063h"' if k == "type" else v) for k, v in BASE])
    yield _line([(k, '"Batch"' if k == "type" else v) for k, v in BASE])
    yield _line([(k, v) for k, v in BASE if k != "type"])
    yield _line(BASE, sep=" , ", colon=" : ")
    yield _line(BASE, sep=",\t", colon="\t:\t")
    yield _line(BASE)[:-1] + b"\r\n"
    yield b"  " + _line(BASE)
    yield b"\xef\xbb\xbf" + _line(BASE)
    yield _line(BASE)[:-2] + b",}\n"
    yield _line(BASE)[:-1] + b"x\n"
    yield _line(BASE)[:-1] + b" {}\n"
    yield b"[" + _line(BASE)[:-1] + b"]\n"
    yield _line(BASE).replace(b'"seconds"', b'"seconds\\""')
    yield _line([*BASE[:-1], ("steps", "3"), ("step", "9")])
    yield _line([("epoch", "1"), ("step", "1"), ("seconds", "2"), ("type", '"batch"'), ("run", f'"{RUN}"')])
    yield _line([("type", '"batch"'), ("epoch", "1"), ("step", "2"), ("seconds", "0.5")])
    yield _line(
        [("type", '"batch"'), ("epoch", "2"), ("step", "5"), ("seconds", "1.5e-1"), ("run", f'"{RUN}"')]
    )


HOSTILE = list(hostile_lines())
#: A window's seconds as lines give them: an integer, a float, an exponent (taken in turn).
SECONDS = ("2", "0.5", "1e-3")


def _value_of(batch: Any, key: str) -> Any:
    return getattr(batch, key)


def test_every_line_the_lane_takes_is_what_the_exact_reader_gives() -> None:
    """The guard, line by line: a Struct only where parse_line_exact gives an event of the same fields,
    values and types (a field the Struct holds as None is one the line does not give)."""
    taken = 0
    for line in HOSTILE:
        batch = batch_of(line)
        if batch is None:
            continue
        taken += 1
        try:
            event = parse_line_exact(line)
        except Malformed as exc:
            raise AssertionError(
                f"the lane took {line[:200]!r}, which the exact reader refuses: {exc}"
            ) from exc
        assert "node" not in event, line
        fields = {
            k: _plain(getattr(batch, k)) for k in batch.__struct_fields__ if getattr(batch, k) is not None
        }
        assert fields == {k: _plain(v) for k, v in event.items() if k != "type"}, line
        assert event["type"] == "batch"
    # The lane is used, and not only by the runner's own line: both Structs, several shapes.
    assert taken > 40
    shapes = {type(batch_of(line)) for line in HOSTILE}
    assert {BATCH, RUNNERS_BATCH} <= shapes


def test_the_runners_line_takes_the_runners_struct() -> None:
    assert type(batch_of(_line(BASE))) is RUNNERS_BATCH
    assert type(batch_of(_line([(k, v) for k, v in BASE if k != "samples"]))) is BATCH
    assert batch_of(_line([*BASE, ("node", "1")])) is None  # a node's: the dict's way
    assert batch_of(b'{"type":"gpu","t":1.0}\n') is None
    assert batch_of(b"not json\n") is None


def _hostile_session(tmp_path: Path, name: str, lines: list[bytes]) -> Path:
    """A made session with ``lines`` set among its first run's batch lines, each with a step that may fold."""
    path = make_session(tmp_path, name=name, runs=1, epochs=2, steps=30, folder=name, write_summary=False)
    raw = (path / "events.jsonl").read_bytes().splitlines(keepends=True)
    out: list[bytes] = []
    hostile = iter(lines)
    for line in raw:
        out.append(line)
        if b'"type":"batch"' in line and RUN.encode() in line:
            out += itertools.islice(hostile, 12)
    out += list(hostile)
    (path / "events.jsonl").write_bytes(b"".join(out))
    return path


def test_hostile_batch_lines_fold_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = assert_same_load(_hostile_session(tmp_path, "hostile", HOSTILE), monkeypatch)
    # The lines reached every count: folded, refused by the reader, refused by the fold, of no run.
    model = loaded.model
    assert (
        model.malformed > 0
        and model.unknown_runs > 0
        and any("unreadable line" in w for w in loaded.warnings)
    )
    assert_same_reading(tmp_path / "hostile")


def test_windows_gaps_and_odd_steps_fold_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines the lane takes whose fold is the point: windows of several steps, gaps, steps counted twice,
    epochs out of the plan, steps past the epoch, huge step numbers, seconds given as an integer."""
    lines = []
    for i, (epoch, step, steps) in enumerate(
        itertools.product((1, 2, 3, 10_000_000), (1, 2, 5, 9, 31, 1 << 39), (None, 1, 2, 4, 1 << 21))
    ):
        pairs = [("type", '"batch"'), ("run", f'"{RUN}"'), ("epoch", str(epoch)), ("step", str(step))]
        pairs += [("seconds", SECONDS[i % 3])] + ([("steps", str(steps))] if steps is not None else [])
        lines.append(_line(pairs))
    assert sum(batch_of(line) is not None for line in lines) > len(lines) // 2  # the lane folds them
    loaded = assert_same_load(_hostile_session(tmp_path, "windows", lines), monkeypatch)
    run = loaded.model.runs[RUN]
    assert run.missing_steps > 0 and loaded.model.malformed > 0 and run.window_max_s > 0


@pytest.mark.parametrize("kind", ["plan", "watch", "watch-with-hello"])
def test_struct_and_dict_fold_alike_event_by_event(kind: str) -> None:
    """fold_batches of the lane's Structs against apply() of the same lines as dicts with the old fold, one
    line at a time: a plan's run (bounded by its samples) and a watch's (no epochs limit, windows of at
    most MAX_WATCH_WINDOW steps; with a hello, at its steps per epoch), windows, gaps, repeats, other runs."""
    from benchtui.core.plan.plan import WATCH_RUN, Plan, watch_plan

    plan = (
        watch_plan(["python", "x.py"], "/tmp")
        if kind != "plan"
        else Plan(frameworks=["torch"], models=["resnet50"], runs=1, epochs=2, samples=30)
    )
    run_id = WATCH_RUN if kind != "plan" else RUN
    new, old = SessionModel(plan), SessionModel(plan)
    old._handlers["batch"] = old_on_batch.__get__(old)
    if kind == "watch-with-hello":
        for model in (new, old):
            model.runs[run_id].hello = {"steps_per_epoch": 40}
    # First a run's first step, then epoch 2's first step as the longest window (it counts; the run's first
    # does not), then every mix; seconds as the line's integer or float, in turn, so that each kind folds.
    lines = [
        _line([("type", '"batch"'), ("run", f'"{run_id}"'), ("epoch", e), ("step", s), ("seconds", sec)])
        for e, s, sec in (("1", "1", "9.5"), ("1", "2", "0.25"), ("2", "1", "3"), ("2", "2", "0.5"))
    ]
    lines += [
        _line(
            [
                ("type", '"batch"'),
                ("run", run),
                ("epoch", str(e)),
                ("step", str(s)),
                ("seconds", SECONDS[i % 3]),
            ]
            + w
        )
        for i, (e, s, w, run) in enumerate(
            itertools.product(
                (2, 3, 1),
                (3, 4, 30, 31, 41, MAX_WATCH_WINDOW + 5, 1 << 30),
                ([], [("steps", "1")], [("steps", "3")], [("steps", str(MAX_WATCH_WINDOW + 1))]),
                (f'"{run_id}"', '"nobody"'),
            )
        )
    ]
    folded = 0
    for line in lines:
        batch = batch_of(line)
        assert batch is not None, line
        new.fold_batches([batch])
        old.apply(parse_line_exact(line))
        assert _plain(new.runs) == _plain(old.runs), line
        assert (new.malformed, new.events, new.unknown_runs) == (old.malformed, old.events, old.unknown_runs)
        folded += len(new.runs[run_id].batch_seconds) > 0
    assert folded and new.malformed > 0 and new.unknown_runs > 0
    # The same lines a few thousand at a time (the load's lists) fold to the same model as one at a time.
    many = SessionModel(plan)
    if kind == "watch-with-hello":
        many.runs[run_id].hello = {"steps_per_epoch": 40}
    many.fold_batches([batch_of(line) for line in lines])
    assert _plain(many.runs) == _plain(new.runs)
    assert (many.malformed, many.events, many.unknown_runs) == (new.malformed, new.events, new.unknown_runs)


def test_runs_of_different_bounds_in_one_list_fold_as_dicts() -> None:
    """One list of Structs switching between runs whose windows end at different steps (one run's hello says
    its steps per epoch, the other's bound is the plan's samples), against the dicts one at a time."""
    from benchtui.core.plan.plan import Plan

    plan = Plan(frameworks=["torch", "tensorflow"], models=["resnet50"], runs=1, epochs=2, samples=30)
    new, old = SessionModel(plan), SessionModel(plan)
    old._handlers["batch"] = old_on_batch.__get__(old)
    first, second = list(new.runs)
    for model in (new, old):
        model.runs[first].hello = {"steps_per_epoch": 5}
    lines = [
        _line(
            [
                ("type", '"batch"'),
                ("run", f'"{run}"'),
                ("epoch", "1"),
                ("step", str(step)),
                ("seconds", "0.5"),
            ]
        )
        for step in range(1, 12)
        for run in (first, second)
    ]
    new.fold_batches([batch_of(line) for line in lines])
    for line in lines:
        old.apply(parse_line_exact(line))
    assert _plain(new.runs) == _plain(old.runs)
    assert new.malformed == old.malformed == 6  # steps 6 to 11 of the first run: past its epoch's 5
    assert len(new.runs[second].batch_seconds) == 11


def test_a_dict_batch_folds_as_before() -> None:
    """apply() of a batch dict (the live engine, a replay) goes through the same fold: the old and the new
    agree event by event, odd values included (an unchecked dict: floats, bools, text, steps 0 or below)."""
    from benchtui.core.plan.plan import Plan

    plan = Plan(frameworks=["torch"], models=["resnet50"], runs=1, epochs=2, samples=30)
    new, old = SessionModel(plan), SessionModel(plan)
    old._handlers["batch"] = old_on_batch.__get__(old)
    for e, s, w, sec in itertools.product(
        (1, 2, 3, 2.7, True), (1, 3, 4, 8, 30), (None, 0, 1, 3, -1), (0.5, 2, "x")
    ):
        event = {
            "type": "batch",
            "run": RUN,
            "epoch": e,
            "step": s,
            "seconds": sec,
            **({"steps": w} if w else {}),
        }
        new.apply(dict(event))
        old.apply(dict(event))
        assert _plain(new.runs) == _plain(old.runs), event
        assert (new.malformed, new.events) == (old.malformed, old.events)
    assert new.malformed > 0 and len(new.runs[RUN].batch_seconds) > 0


def test_events_have_the_batch_struct_of_the_wire() -> None:
    """The lane's Struct is the wire's, derived from its one statement: the tag, the fields."""
    assert BATCH is events._STRUCTS["batch"]
    assert set(RUNNERS_BATCH.__struct_fields__) == set(BATCH.__struct_fields__) - {"node"}
