"""The wire is stated once (``benchtui_runners.wire``): the parent's checks, its TypedDicts, every event the
runners and the parent write, the runners' EventWriter and a made session all agree with that statement."""

from __future__ import annotations

import ast
import inspect
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.wire import events
from benchtui_runners.protocol import EventWriter
from sessionfactory import RESNET50_NETWORKS, make_session

ROOT = Path(__file__).resolve().parents[1]
#: Every event's own fields (``type``, ``t``, ``v``, ``run``).
COMMON = {"type", "t", "v", "run"}


def declared() -> dict[str, type]:
    """Event type -> its TypedDict, as the parent exports them."""
    return {**events.RUNNER_EVENTS, **events.PARENT_EVENTS}


def names(kind: str) -> set[str]:
    """The fields an event of ``kind`` declares (a TypedDict's annotations hold its bases' too)."""
    return set(declared()[kind].__annotations__) | COMMON


def test_every_event_the_parent_checks_is_declared_with_every_field_it_checks() -> None:
    """Drift before issue 31: ``run_start`` was checked for ``pid`` its type lacked; ``probe``,
    ``probe_start``, ``batch_choice`` and ``session_end`` were checked and had no type at all."""
    for kind, checks in events.FIELDS.items():
        assert kind in declared(), f"{kind} is checked but not declared"
        assert not set(checks) - names(kind), f"{kind} checks {set(checks) - names(kind)} it does not declare"
        assert not set(events.REQUIRED.get(kind, ())) - names(kind)
    assert events.PARENT_ONLY == set(events.PARENT_EVENTS)
    assert not set(events.RUNNER_EVENTS) & set(events.PARENT_EVENTS)


# -- every event written anywhere, read from the source --------------------------------------
_METHODS = {
    name: [
        p.name
        for p in inspect.signature(getattr(EventWriter, name)).parameters.values()
        if p.name != "self" and p.kind is not p.VAR_KEYWORD
    ]
    for name in ("hello", "phase", "batch", "epoch", "memory", "error", "done")
}


def _sent(node: ast.Call) -> tuple[str, list[str]] | None:
    """The event type and the field names a call sends, when it sends one: an EventWriter's method
    (``writer.batch(...)``, ``writer.emit("flops", ...)``), the engine's ``_parent_event("run_end", ...)``,
    the made session's ``tl.parent(t, "run_end", ...)``. ``**fields`` cannot be read: only named ones."""
    func = node.func
    if not isinstance(func, ast.Attribute):
        return None
    keywords = [k.arg for k in node.keywords if k.arg is not None]
    receiver = ast.unparse(func.value)
    if func.attr in _METHODS and (receiver.endswith("writer") or receiver.startswith("tl.runner(")):
        return func.attr, _METHODS[func.attr][: len(node.args)] + keywords
    if func.attr in ("emit", "_parent_event", "parent"):
        kind = next(
            (a.value for a in node.args if isinstance(a, ast.Constant) and a.value in declared()),
            None,
        )
        if kind is not None:
            return str(kind), keywords
    return None


def _literal(node: ast.Dict) -> tuple[str, list[str]] | None:
    """A dict literal that is an event (``{"type": "counters", ...}``): its type and its named keys."""
    keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == "type" and isinstance(value, ast.Constant):
            if value.value in declared():
                return str(value.value), keys
    return None


def _sources() -> Iterator[Path]:
    yield from sorted((ROOT / "runners" / "benchtui_runners").glob("*.py"))
    yield from sorted((ROOT / "tui" / "benchtui").rglob("*.py"))
    yield from sorted((ROOT / "tests" / "data").glob("*.py"))
    yield ROOT / "tests" / "fake_runner.py"
    yield ROOT / "tests" / "sessionfactory.py"


def written_events() -> list[tuple[str, str, list[str]]]:
    """(where, type, fields) of every event written in the runners, the parent and the test runners."""
    out = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found = _sent(node) if isinstance(node, ast.Call) else None
            found = _literal(node) if isinstance(node, ast.Dict) else found
            if found is not None:
                out.append((f"{path.relative_to(ROOT)}:{node.lineno}", *found))
    return out


#: Fields a test's own runner adds (undeclared fields pass through, as a newer runner's would).
TEST_ONLY = {("hello", "child_pid")}  # tests/data/fake_runner.py: its child, which the test sees stopped


def test_every_field_any_writer_sends_is_declared() -> None:
    """Drift before issue 31: the runners sent ``hello.config``, ``memory.epoch``, ``flops.by_op`` and
    ``error.rank``, and the engine ``run_start.pid``, none of them declared."""
    written = written_events()
    kinds = {kind for _, kind, _ in written}
    # The reading covers the wire: every event but the GPU sample (built field by field) is seen written.
    assert kinds >= set(declared()) - {"gpu"}, set(declared()) - kinds
    undeclared = [
        f"{where}: {kind}.{name}"
        for where, kind, fields in written
        for name in fields
        if name not in names(kind) and (kind, name) not in TEST_ONLY
    ]
    assert not undeclared, undeclared


def test_the_event_writers_methods_send_declared_events() -> None:
    """Each of the EventWriter's methods sends the event of its name, every field of it declared and
    passing the parent's check; a rank's error names its rank."""
    lines: list[bytes] = []
    writer = EventWriter(None, sink=lines.append, clock=lambda: 12.5)
    writer.hello(
        framework="torch", versions={"torch": "2.5"}, device={"type": "cuda", "index": 0}, settings={}
    )
    writer.phase("build", "start", at=12.0)
    writer.batch(1, 4, 0.05, 32, steps=4)
    writer.epoch(1, 1.5, 128, to_first_batch_s=0.01)
    writer.memory(epoch=1, peak_bytes=10, source="fake")
    writer.error("oom", "out of memory", "Traceback ...")
    writer.done(peak_bytes=10, source="fake")
    EventWriter(None, rank=2, sink=lines.append).error("exception", "boom")
    sent = [events.parse_line(line) for line in lines]
    assert [e["type"] for e in sent] == [
        "hello",
        "phase",
        "batch",
        "epoch",
        "memory",
        "error",
        "done",
        "error",
    ]
    for event in sent:
        assert not set(event) - names(event["type"]), (event["type"], set(event) - names(event["type"]))
    assert sent[0]["t"] == 12.5 and sent[0]["v"] == events.WIRE_VERSION and isinstance(sent[0]["pid"], int)
    assert sent[-1]["rank"] == 2
    for method, params in _METHODS.items():
        assert method in events.RUNNER_EVENTS and not set(params) - names(method), method


def test_a_made_session_is_the_wire() -> None:
    """Every line a made session holds passes the parent's check and declares every field it has, down to
    each GPU's reading, the host's, the device's and each GPU's figures (``make_session`` cannot drift)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = make_session(
            tmp,
            networks=RESNET50_NETWORKS,
            profile={("torch", "resnet50"): {}, ("tensorflow", "resnet50"): {"ok": False}},
            counters={"available": True, "source": "DCGM profiling fields 1002, 1004, 1005", "reason": ""},
            gpu_counters={"torch": {"sm_active": 60.0, "tensor_active": 30.0, "dram_active": 20.0}},
            fail={("tensorflow", "resnet50", 2): {"kind": "oom", "epoch": 2}},
            devices=2,
            write_summary=False,
        )
        lines = (path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    seen: set[str] = set()
    nested = {
        ("gpu", "gpus"): "GpuReading",
        ("gpu", "host"): "HostReading",
        ("hello", "device"): "DeviceInfo",
        ("run_end", "per_gpu"): "GpuFigures",
    }
    parsed = [events.parse_line(line) for line in lines]  # each passes the parent's check
    for line, event in zip(lines, parsed, strict=True):
        kind = event["type"]
        seen.add(kind)
        assert not set(event) - names(kind), (kind, set(event) - names(kind))
        if "v" in event:  # a runner's line: what the runners' EventWriter writes, tagged by the engine
            assert line.startswith('{"run":' + json.dumps(event["run"]) + ',"v":1,"type":')
    from benchtui_runners import wire

    for event in parsed:
        for (kind, name), spec in nested.items():
            if event["type"] == kind and event.get(name) is not None:
                value = event[name]
                for item in value if isinstance(value, list) else [value]:
                    extra = set(item) - set(getattr(wire, spec).__annotations__)
                    assert not extra, (kind, name, extra)
    assert seen >= {
        "hello",
        "phase",
        "batch",
        "ranks",
        "epoch",
        "memory",
        "model",
        "profile",
        "flops",
        "done",
    }
    assert seen >= {"error", "run_start", "run_end", "gpu", "counters"}


# -- each limit fits its field's type -----------------------------------------------------------
def _leaves(tp: Any) -> set[Any]:
    """The plain types a type annotation allows (a Literal of words: str; ``list[int]``: list)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_leaves(a) for a in typing.get_args(tp)))
    if origin is typing.Literal:
        return {type(a) for a in typing.get_args(tp)}
    return {origin or tp}


def _items(tp: Any) -> set[Any]:
    """What a ``list[...]`` holds."""
    return _leaves(typing.get_args(tp)[0]) if typing.get_origin(tp) is list else set()


def _specs() -> Iterator[tuple[str, type]]:
    from benchtui_runners import wire

    yield from declared().items()
    for name in ("DeviceInfo", "GpuReading", "HostReading", "GpuFigures"):
        yield name, getattr(wire, name)


@pytest.mark.parametrize("kind,spec", list(_specs()), ids=[k for k, _ in _specs()])
def test_each_limit_fits_the_type_it_limits(kind: str, spec: type) -> None:
    """What mypy sees of a field and what the parent checks of it are one statement: they cannot disagree."""
    from benchtui_runners import wire

    for name, f in wire.fields(spec, common=True).items():
        limit, leaves = f.limit, _leaves(f.type)
        where = f"{kind}.{name}: {f.type} {limit}"
        if isinstance(limit, wire.Int):
            assert int in leaves, where
        elif isinstance(limit, wire.Num):
            assert float in leaves, where
        elif isinstance(limit, (wire.Text, wire.OneOf)):
            assert str in leaves, where
        elif isinstance(limit, wire.Exactly):
            assert set(limit.types) - {type(None)} <= leaves, where
        elif isinstance(limit, wire.Ints):
            assert leaves == {list} and _items(f.type) == {int}, where
        elif isinstance(limit, wire.Durations):
            assert leaves == {list} and _items(f.type) == {float}, where
        elif isinstance(limit, wire.Loss):
            assert leaves == {float, str}, where
        elif isinstance(limit, wire.Obj):
            assert leaves == ({list} if limit.many else {dict}), where
            assert not limit.many or _items(f.type) == {dict}, where
        if f.required:
            assert limit is not None, f"{where}: required but unchecked"


# -- the batch event's fast path (``plain_batch``) is the schema's check written inline ------------
def _slow_verdict(event: dict[str, Any]) -> bool:
    """Whether a batch event passes the checks derived from the schema (no fast path)."""
    if any(event.get(name) is None for name in events.REQUIRED["batch"]):
        return False
    checks = {**events._COMMON, **events.FIELDS["batch"]}
    return all(event.get(name) is None or check(event[name]) is None for name, check in checks.items())


_ABSENT = object()
_BATCH_VALUES: dict[str, list[Any]] = {
    "epoch": [1, 0, -1, 10**7, 10**7 + 1, True, 1.0, "1", None],
    "step": [1, 0, 10**12, 10**12 + 1, False, 2.0],
    "seconds": [0.05, 0.0, -0.1, 1e-12, 1e9, 1e9 * 1.000001, float("nan"), float("inf"), 1, True],
    "steps": [_ABSENT, 1, 0, 10**9, 10**9 + 1, 1.0, None],
    "samples": [_ABSENT, 32, 0, -1, 10**12, 10**12 + 1, 32.0, None],
    "t": [_ABSENT, 12.5, -1e9, 1e9, -1e9 - 1, 1e9 + 1, 12, float("nan")],
    "v": [_ABSENT, 1, 0, -1, 10**6, 10**6 + 1, 1.0, True],
    "run": [_ABSENT, "001-torch-resnet50-1", None, "é", 5, ""],
}


def _batch(**values: Any) -> dict[str, Any]:
    base = {name: options[0] for name, options in _BATCH_VALUES.items()}
    return {"type": "batch", **{k: v for k, v in {**base, **values}.items() if v is not _ABSENT}}


def test_the_batch_fast_path_never_passes_what_the_schema_refuses() -> None:
    """``plain_batch`` (a batch a step, a million times a session) tests the batch's limits inline: it
    must pass only events the schema's checks pass, and ``check_event`` must say the same either way."""
    import random

    cases = [_batch(**{name: value}) for name, options in _BATCH_VALUES.items() for value in options]
    rng = random.Random(31)
    cases += [_batch(**{n: rng.choice(o) for n, o in _BATCH_VALUES.items()}) for _ in range(3000)]
    assert events.plain_batch(_batch())
    for event in cases:
        slow = _slow_verdict(event)
        if events.plain_batch(event):
            assert slow, event
        try:
            events.check_event(dict(event))
            passed = True
        except events.Malformed:
            passed = False
        assert passed == slow, event


# -- an epoch's loss: a number, or exactly "nan" / "inf" / "-inf" (issue 36) ---------------------------
def _epoch(**loss: Any) -> dict[str, Any]:
    return {"type": "epoch", "v": 1, "t": 1.0, "epoch": 2, "seconds": 0.5, "samples": 8, **loss}


@pytest.mark.parametrize("field", ["loss", "loss_min", "loss_max"])
@pytest.mark.parametrize("value", [2.3026, 0, -1.5, 1e30, 7, "nan", "inf", "-inf"])
def test_an_epochs_loss_is_a_number_or_one_of_three_words(field: str, value: Any) -> None:
    assert events.check_event(_epoch(**{field: value}))[field] == value  # kept as the wire sent it


@pytest.mark.parametrize("field", ["loss", "loss_min", "loss_max"])
@pytest.mark.parametrize(
    "value",
    ["NaN", "Infinity", "nan ", "2.3", "", "-nan", True, [1.0], {"v": 1.0}, float("nan"), float("inf")],
)
def test_any_other_loss_makes_the_epoch_line_malformed(field: str, value: Any) -> None:
    with pytest.raises(events.Malformed, match=f"epoch.{field} "):
        events.check_event(_epoch(**{field: value}))


def test_the_writer_sends_a_non_finite_loss_as_its_word_and_the_reader_gives_it_back() -> None:
    """JSON has no NaN (the writer's clean-up would make it null, and the loss would be lost): the epoch's
    loss fields go as "nan" / "inf" / "-inf", the parent passes the line, ``wire.loss_float`` reads it."""
    import math

    from benchtui_runners import wire

    lines: list[bytes] = []
    writer = EventWriter(None, sink=lines.append)
    writer.epoch(1, 0.5, 8, loss=float("nan"), loss_min=float("-inf"), loss_max=float("inf"))
    writer.epoch(2, 0.5, 8, loss=2.5, loss_min=1.0, loss_max=4.0)
    first, second = (events.parse_line(line) for line in lines)
    assert (first["loss"], first["loss_min"], first["loss_max"]) == ("nan", "-inf", "inf")
    assert (second["loss"], second["loss_min"], second["loss_max"]) == (2.5, 1.0, 4.0)
    assert math.isnan(wire.loss_float(first["loss"])) and wire.loss_float(first["loss_min"]) == -math.inf
    assert wire.loss_float(second["loss"]) == 2.5
