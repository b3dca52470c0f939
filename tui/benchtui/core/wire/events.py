"""The wire format on the parent side: the events, typed, and reading one JSON object per line, never trusted.

A runner sends the runner events (``python -m benchtui_runners``, see its protocol.py); the
parent adds its own (``run_start``, ``run_end``, GPU samples, batch search) to events.jsonl.
Every event has ``type`` and ``t`` (monotonic seconds); the parent tags runner events with
``run``. What each carries, and each field's limits, is stated once, in ``benchtui_runners.wire`` (the
TypedDicts re-exported here); the checks below are derived from it. Unknown types and fields pass through.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec

from benchtui_runners import wire
from benchtui_runners.wire import (
    COUNTERS,
    EVENTS,
    PARENT_EVENTS,
    RUNNER_EVENTS,
    WIRE_VERSION,
    BatchChoiceEvent,
    BatchEvent,
    CountersEvent,
    DoneEvent,
    EnergyEvent,
    EpochEvent,
    ErrorEvent,
    FlopsEvent,
    GpuEvent,
    HelloEvent,
    MemoryEvent,
    ModelEvent,
    PhaseEvent,
    ProbeEvent,
    ProbeStartEvent,
    ProfileEvent,
    RanksEvent,
    RunEndEvent,
    RunStartEvent,
    SessionEndEvent,
    SettingsEvent,
)

__all__ = [
    "COUNTERS",
    "EVENTS",
    "PARENT_EVENTS",
    "RUNNER_EVENTS",
    "WIRE_VERSION",
    "BatchChoiceEvent",
    "BatchEvent",
    "CountersEvent",
    "DoneEvent",
    "EnergyEvent",
    "EpochEvent",
    "ErrorEvent",
    "FlopsEvent",
    "GpuEvent",
    "HelloEvent",
    "MemoryEvent",
    "ModelEvent",
    "PhaseEvent",
    "ProbeEvent",
    "ProbeStartEvent",
    "ProfileEvent",
    "RanksEvent",
    "RunEndEvent",
    "RunStartEvent",
    "SessionEndEvent",
    "SettingsEvent",
]

#: Types only the parent writes (its own events, the sampler's, the batch search's, the session's end):
#: a runner's line of one of these is malformed, never recorded as the parent's.
PARENT_ONLY = frozenset(PARENT_EVENTS)


class Malformed(ValueError):
    """A line that is not a wire event."""


def parse_line(line: bytes | str) -> dict[str, Any]:
    """Parse and check one line from a runner (``check_event``). Unknown types and fields pass through.

    Raises Malformed, with the reason, for anything that is not a JSON object with a string
    ``type`` whose known fields have the types and ranges their type says. A line of bytes is read by
    msgspec where that certainly gives what the standard library's json gives (``fast_event``), else
    as before (``parse_line_exact``): the same events, the same refusals, the same reasons. A ``str`` line
    (the cluster's relay) is read as its bytes when it is ASCII, else the exact way.
    """
    if len(line) > MAX_LINE_BYTES:
        raise Malformed(f"a line of {len(line)} bytes (at most {MAX_LINE_BYTES})")
    if type(line) is str and line.isascii():
        line = line.encode("ascii")  # the cluster's relay: the same text either way
    if type(line) is bytes:
        try:
            value = _DECODE(line)
        except (ValueError, RecursionError):
            return parse_line_exact(line)
        if (event := _checked(line, value)) is not None:
            return event
    return parse_line_exact(line)


def parse_line_exact(line: bytes | str) -> dict[str, Any]:
    """``parse_line`` with the standard library's json (``loads_strict``): what decides every line that
    ``fast_event`` cannot vouch for, and what it is tested against."""
    if len(line) > MAX_LINE_BYTES:
        raise Malformed(f"a line of {len(line)} bytes (at most {MAX_LINE_BYTES})")
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Malformed(f"not UTF-8: {exc}") from exc
    line = line.strip()
    if not line:
        raise Malformed("empty line")
    event = loads_strict(line)
    if not isinstance(event, dict):
        raise Malformed("not an event object with a 'type'")
    return check_event(event)


# -- validation: every event is checked where it enters the parent, and again when a file is read --
#: Most bytes one event line may have (a traceback included); longer lines are malformed.
MAX_LINE_BYTES = 1 << 20
_MAX_TIME = wire.MAX_TIME
_MAX_COUNT = wire.MAX_COUNT
_MAX_EPOCH = wire.MAX_EPOCH
_MAX_WINDOW = wire.MAX_WINDOW
_MAX_VERSION = wire.MAX_VERSION
_MAX_TEXT = wire.MAX_TEXT
_LONG_TEXT = wire.LONG_TEXT


def _reject_constant(name: str) -> Any:
    raise Malformed(f"{name} is not a number JSON allows")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise Malformed(f"field {dup!r} appears twice")
    return obj


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Malformed(f"{text[:20]} is too large for a number")
    return value


def loads_strict(text: str | bytes) -> Any:
    """JSON without NaN or Infinity (not JSON: strict parsers refuse them) and without duplicate keys.

    Raises Malformed, with the reason, whatever the parser raised: not JSON, an integer longer than
    Python converts (``sys.get_int_max_str_digits``: a ``ValueError``), nesting deeper than the
    interpreter's recursion limit. Lone surrogates (``"\\ud800"``) come back as U+FFFD.
    """
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_no_duplicates
        )
    except Malformed:
        raise
    except json.JSONDecodeError as exc:
        raise Malformed(f"not JSON: {exc.msg}") from exc
    except RecursionError as exc:
        raise Malformed("nested too deeply") from exc
    except ValueError as exc:  # int_max_str_digits, bad UTF-8 in bytes
        raise Malformed(f"not JSON: {str(exc)[:120]}") from exc
    if text.isascii() and ("\\u" not in text if isinstance(text, str) else b"\\u" not in text):
        return value  # no escape, no surrogate: the common line (a batch a step) is not walked
    try:
        return scrub_surrogates(value)
    except RecursionError as exc:  # the walk nests deeper than the parser did
        raise Malformed("nested too deeply") from exc


#: A UTF-16 surrogate: JSON's ``\\udXXX`` escapes make them; no UTF-8 encoder or terminal takes one alone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    What a JSON parser returns can hold them (``"\\ud800"`` is valid JSON; a path that was not
    UTF-8 reaches a traceback that way); every writer of UTF-8 and every strict terminal fails on
    them. Returns ``value`` itself when there is none (the common case costs one walk).
    """
    if isinstance(value, str):
        return value if value.isascii() or not _SURROGATE.search(value) else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        if all(
            (type(k) is not str or k.isascii() or not _SURROGATE.search(k)) and scrub_surrogates(v) is v
            for k, v in value.items()
        ):
            return value
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [scrub_surrogates(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _number(value: Any, lo: float, hi: float, *, above: bool = False) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is {type(value).__name__}, not a number"
    try:
        if not math.isfinite(value):  # an int past a float's range raises: not a number any view can show
            return "is not finite"
    except OverflowError:
        return "is not finite"
    if value < lo or value > hi or (above and value == lo):
        return f"is {value!r}, outside {'(' if above else '['}{lo:g}, {hi:g}]"
    return None


def _int(lo: int, hi: int = _MAX_COUNT) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"is {type(value).__name__}, not an integer"
        return None if lo <= value <= hi else f"is {value}, outside [{lo}, {hi}]"

    return check


def _float(lo: float, hi: float, above: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return _number(value, lo, hi, above=above)

    return check


def _text(limit: int = _MAX_TEXT) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return f"is {type(value).__name__}, not text"
        return None if len(value) <= limit else f"is {len(value)} characters long (at most {limit})"

    return check


def _ints(lo: int, hi: int, most: int = 4096) -> Callable[[Any], str | None]:
    """A list of whole numbers in [lo, hi] (at most ``most`` of them)."""
    one = _int(lo, hi)

    def check(value: Any) -> str | None:
        if not isinstance(value, list) or len(value) > most:
            return f"is not a list of at most {most} numbers"
        return next((why for v in value if (why := one(v)) is not None), None)

    return check


def _times(most: int = 65536) -> Callable[[Any], str | None]:
    """A non-empty list of measured durations (one per rank)."""

    def check(value: Any) -> str | None:
        if not isinstance(value, list) or not 0 < len(value) <= most:
            return f"is not a list of 1 to {most} durations"
        return next((why for v in value if (why := _TIME(v)) is not None), None)

    return check


def _loss(value: Any) -> str | None:
    """A loss: a finite number, or exactly one of ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no NaN)."""
    if isinstance(value, str):
        return (
            None if value in wire.NON_FINITE else f"is {value[:40]!r}, not a number, 'nan', 'inf' or '-inf'"
        )
    return _number(value, -math.inf, math.inf)


def _one_of(*words: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in words else f"is {str(value)[:40]!r}, not one of {', '.join(words)}"

    return check


def _kind(*types: type) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if type(value) in types:  # exactly: a bool is not an int here, nor an int a bool
            return None
        return f"is {type(value).__name__}, not {' or '.join(t.__name__ for t in types)}"

    return check


def _obj(spec: dict[str, Callable[[Any], str | None]], many: bool = False) -> Callable[[Any], str | None]:
    """An object (``many``: a list of at most ``MAX_OBJECTS`` objects) whose known fields pass ``spec``; None passes."""

    def one(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"is {type(value).__name__}, not an object"
        for name, check in spec.items():
            field = value.get(name)
            if field is not None and (why := check(field)) is not None:
                return f"has {name} that {why}"
        return None

    def check(value: Any) -> str | None:
        if not many:
            return one(value)
        if not isinstance(value, list) or len(value) > wire.MAX_OBJECTS:
            return f"is not a list of at most {wire.MAX_OBJECTS} objects"
        return next((f"[{i}] {why}" for i, item in enumerate(value) if (why := one(item)) is not None), None)

    return check


Check = Callable[[Any], str | None]  # None: the value passes; else why not


def _check(limit: wire.Limit) -> Check:
    """The check of one of the schema's limits: None when a value passes, else why not (after its name)."""
    if isinstance(limit, wire.Int):
        return _int(limit.lo, limit.hi)
    if isinstance(limit, wire.Num):
        return _float(limit.lo, limit.hi, limit.above)
    if isinstance(limit, wire.Text):
        return _text(limit.most)
    if isinstance(limit, wire.OneOf):
        return _one_of(*limit.words)
    if isinstance(limit, wire.Exactly):
        return _kind(*limit.types)
    if isinstance(limit, wire.Ints):
        return _ints(limit.lo, limit.hi, limit.most)
    if isinstance(limit, wire.Durations):
        return _times(limit.most)
    if isinstance(limit, wire.Obj):
        return _obj(_checks(limit.spec), limit.many)
    if isinstance(limit, wire.Loss):
        return _loss
    raise TypeError(f"{limit!r} is checked by hand where it is read, not by a limit")


def _checks(spec: type) -> dict[str, Check]:
    """Field -> check for every field ``spec`` (a schema TypedDict) gives a limit, in its order."""
    return {
        name: _check(f.limit)
        for name, f in wire.fields(spec).items()
        if f.limit is not None and not isinstance(f.limit, wire.Custom)
    }


_TIME = _check(wire.TIME)  # a duration that was measured: never zero
_COUNT = _check(wire.COUNT)
#: What the sampler reads of one GPU (``gpus`` of a ``gpu`` event) and of the host, and their checks.
_GPU_FIELDS = _checks(wire.GpuReading)
_HOST_FIELDS = _checks(wire.HostReading)
#: Most GPUs one sample keeps (NVML numbers a node's GPUs; the largest nodes have tens).
MAX_SAMPLE_GPUS = 256


#: The names of ``_HOST_FIELDS``, to test a host reading's keys against all at once.
_HOST_NAMES = frozenset(_HOST_FIELDS)


def _gpu_reading(gpu: dict[str, Any]) -> dict[str, Any]:
    """One GPU's known readings; its throttle reasons (a list) as at most 32 short words."""
    # Built a key at a time on purpose: a copy with throttle taken out and put back last is faster, but
    # the copy's table is then resized, 190 bytes more a reading (20 MB for the 1M session's samples).
    out = {k: v for k, v in gpu.items() if k in _GPU_FIELDS and k != "throttle"}
    if isinstance(throttle := gpu.get("throttle"), list):
        out["throttle"] = [w[:64] for w in throttle[:32] if isinstance(w, str)]
    return out


def prune_gpu_sample(event: dict[str, Any]) -> dict[str, Any]:
    """A ``gpu`` sample with only what the sampler writes: the fields ``FIELDS["gpu"]`` names, each GPU's
    and the host's known readings, throttle reasons as short words. A model keeps hundreds of samples:
    what a file adds to them must not grow with the file (a sample is about 450 bytes a GPU)."""
    gpus = event.get("gpus")
    host = event.get("host")
    out: dict[str, Any] = {
        k: event[k] for k in ("type", "t", "run", "v", "watched", "devices", "node") if k in event
    }
    if isinstance(gpus, list):
        out["gpus"] = [_gpu_reading(g) if isinstance(g, dict) else None for g in gpus[:MAX_SAMPLE_GPUS]]
    if isinstance(host, dict):
        out["host"] = (
            dict(host) if host.keys() <= _HOST_NAMES else {k: v for k, v in host.items() if k in _HOST_FIELDS}
        )
    if isinstance(out.get("devices"), list):
        out["devices"] = out["devices"][:MAX_SAMPLE_GPUS]
    return out


#: type -> field -> check, derived from the schema; ``REQUIRED`` names the fields an event of that type
#: cannot lack. Fields not named pass through unchecked (a newer runner's additions). The profile has its
#: own check (``check_profile``: a bad field is dropped, not the line).
FIELDS: dict[str, dict[str, Check]] = {
    kind: _checks(spec) for kind, spec in EVENTS.items() if kind != "profile"
}
REQUIRED: dict[str, tuple[str, ...]] = {
    kind: names
    for kind, spec in EVENTS.items()
    if (names := tuple(name for name, f in wire.fields(spec).items() if f.required))
}
#: What every event may carry (``type`` is checked by hand: it picks the rest).
_COMMON: dict[str, Check] = {
    name: _check(f.limit) for name, f in wire.common_fields().items() if f.limit is not None
}


def plain_batch(event: dict[str, Any]) -> bool:
    """A batch event with every field as a runner writes it: what ``FIELDS["batch"]`` and ``_COMMON``
    pass, tested inline (the slow path says why when this is False)."""
    get = event.get
    epoch, step, seconds, steps = get("epoch"), get("step"), get("seconds"), get("steps", 1)
    samples, t, v = get("samples", 0), get("t", 0.0), get("v", 1)
    return (
        type(epoch) is int
        and type(step) is int
        and type(seconds) is float
        and type(steps) is int
        and type(samples) is int
        and type(t) is float
        and type(v) is int
        and type(get("run", "")) is str
        and get("run", "").isascii()  # a surrogate needs the slow path's scrub
        and 0 < epoch <= _MAX_EPOCH
        and 0 < step <= _MAX_COUNT
        and 0.0 < seconds <= _MAX_TIME  # False for NaN
        and 0 < steps <= _MAX_WINDOW
        and 0 <= samples <= _MAX_COUNT
        and -_MAX_TIME <= t <= _MAX_TIME
        and 0 <= v <= _MAX_VERSION
    )


def check_event(event: dict[str, Any]) -> dict[str, Any]:
    """The event if every field it carries has the type and range its type says; else Malformed.

    The same check runs on a runner's line as it arrives and on every line of a session file
    as it is read, so nothing a file or a runner holds can reach the fold (or a view) unchecked.
    """
    kind = event.get("type")
    if kind == "batch" and plain_batch(event):
        return event  # the common case, a million times in a long session: no per-field calls
    try:
        event = scrub_surrogates(event)  # a file's line may come from a parser that kept them
    except RecursionError as exc:
        raise Malformed("nested too deeply") from exc
    kind = event.get("type")
    if not isinstance(kind, str) or len(kind) > 64:
        raise Malformed("not an event object with a 'type'")
    for name, check in _COMMON.items():
        if name in event and (why := check(event[name])) is not None:
            raise Malformed(f"{kind}.{name} {why}")
    if kind == "profile":
        return check_profile(event)
    spec = FIELDS.get(kind)
    if spec is None:
        return event  # a type this version does not know: kept, and never folded
    required = REQUIRED.get(kind, ())
    for name in required:
        if event.get(name) is None:
            raise Malformed(f"{kind} has no {name!r}")
    for name, check in spec.items():
        value = event.get(name)
        if value is not None and (why := check(value)) is not None:  # None: not known (flops without a count)
            raise Malformed(f"{kind}.{name} {why}")
    return event


# -- the profile event: its breakdown made safe rather than the line refused --------------------
#: The categories a profiled step's time is divided into, in the order every view lists them.
PROFILE_CATEGORIES = (
    "conv",
    "matmul",
    "norm",
    "elementwise",
    "optimizer",
    "data",
    "communication",
    "other",
    "idle",
)
#: Most ops a profile's ``top`` keeps (the runner sends at most this many, longest first).
PROFILE_TOP = 12
#: Most characters of an op's name kept (TensorFlow's scoped names can be long).
_OP_NAME = 240
_PROFILE_FIELDS = _checks(wire.ProfileEvent)  # those without a check of their own in check_profile
_SECONDS = _check(wire.SECONDS)  # a share of a step: may be zero


def check_profile(event: dict[str, Any]) -> dict[str, Any]:
    """A ``profile`` event made safe to fold: Malformed only when ``ok`` is not true or false.

    A profile is extra: a field that is wrong is dropped, not the line. A breakdown that is
    unusable (a category that is not a finite number of seconds, none above zero) turns the
    event into a failed profile that says why, so the run gets a note and never a wrong table.
    ``top`` keeps its first ``PROFILE_TOP`` entries that make sense; ``trace.file`` must be a
    plain file name (it is looked up in the session's traces folder), else the trace is not
    linked and the note says so. Unknown fields pass through, as in every event.
    """
    ok = event.get("ok")
    if type(ok) is not bool:
        raise Malformed("profile.ok is not true or false")
    out = dict(event)
    if not ok:
        reason = event.get("reason")
        out["reason"] = reason[:_LONG_TEXT] if isinstance(reason, str) and reason.strip() else ""
        return out
    categories, why = _profile_categories(event.get("categories"))
    if categories is None:
        return {
            **{k: event[k] for k in ("type", "t", "v", "run") if k in event},
            "ok": False,
            "reason": f"profile unavailable: the runner's breakdown is unusable ({why})",
        }
    out["categories"] = categories
    for name, check in _PROFILE_FIELDS.items():
        value = event.get(name)
        if value is None or check(value) is not None:
            out.pop(name, None)
    out["top"] = _profile_top(event.get("top"))
    trace, refused = _profile_trace(event.get("trace"))
    out["trace"] = trace
    notes = [n for n in (out.get("trace_note"), refused) if n]
    out["trace_note"] = "; ".join(notes) if notes else None
    return out


def _profile_categories(value: Any) -> tuple[dict[str, float] | None, str]:
    """Seconds per step by category (every known one; unknown names counted as "other"), or None and why."""
    if not isinstance(value, dict) or not 0 < len(value) <= 64:
        return None, "categories is not an object of 1 to 64 numbers"
    out = dict.fromkeys(PROFILE_CATEGORIES, 0.0)
    for name, seconds in value.items():
        if (why := _SECONDS(seconds)) is not None:
            return None, f"categories.{str(name)[:40]} {why}"
        out[name if name in out else "other"] += float(seconds)
    if not sum(out.values()) > 0:
        return None, "no time in any category"
    return out, ""


def _profile_top(value: Any) -> list[dict[str, Any]]:
    """The first ``PROFILE_TOP`` entries of ``top`` that have a name and a time; their bad fields dropped."""
    if not isinstance(value, list):
        return []
    out = []
    for entry in value[:PROFILE_TOP]:
        if not isinstance(entry, dict):
            continue
        name, seconds = entry.get("name"), entry.get("seconds")
        if not isinstance(name, str) or not name.strip() or _SECONDS(seconds) is not None:
            continue
        category = entry.get("category")
        op: dict[str, Any] = {
            "name": name if len(name) <= _OP_NAME else name[: _OP_NAME - 1] + "…",
            "category": category if category in PROFILE_CATEGORIES else "other",
            "seconds": float(entry["seconds"]),  # a number: checked above
        }
        calls, share = entry.get("calls"), entry.get("share")
        if calls is not None and _float(0.0, _MAX_COUNT)(calls) is None:
            op["calls"] = float(calls)
        if share is not None and _float(0.0, 1.0)(share) is None:
            op["share"] = float(share)
        out.append(op)
    return out


def _profile_trace(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The trace's plain file name and size, or None and (when there was one) why it is not linked."""
    if value is None:
        return None, None
    file = value.get("file") if isinstance(value, dict) else None
    if not plain_file_name(file):
        return None, "trace not linked: its file name is not a plain name inside the traces folder"
    size = value.get("bytes")
    return {"file": file, **({"bytes": size} if _COUNT(size) is None else {})}, None


def plain_file_name(name: Any) -> bool:
    """Whether ``name`` is a file's plain name: no folder in it (no slash, no backslash), not '.' or '..',
    nothing unprintable, at most 255 characters. The only kind of name a session's file may be opened by."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 255
        and name not in (".", "..")
        and "/" not in name
        and "\\" not in name
        and name.isprintable()
    )


# -- the fast reader: msgspec where it certainly gives what json gives, and the checks in C ---------
#: Decodes one JSON value from bytes. On what it takes (valid UTF-8, strict JSON: no NaN, no trailing
#: data, integers of at most 4,300 digits, floats correctly rounded) it returns what ``json.loads``
#: returns, key order included; it refuses lone surrogates (which json takes and ``loads_strict``
#: replaces) and keeps the last of a key given twice (which ``loads_strict`` refuses): ``fast_event``
#: hands both to the exact path.
_DECODE = msgspec.json.Decoder().decode
#: Most ``[`` a line read by ``fast_event`` may hold: nesting that deep is far within both decoders'
#: recursion limits (a line nested near them is for the exact path to refuse, as it always did).
_MOST_NESTED = 64


def _keys(value: Any, depth: int = 0) -> int:
    """How many keys the objects in ``value`` hold, all levels; -1 past ``_MOST_NESTED`` levels."""
    if depth > _MOST_NESTED:
        return -1
    items: Iterable[Any]
    if type(value) is dict:
        n = len(value)
        items = value.values()
    elif type(value) is list:
        n, items = 0, value
    else:
        return 0
    for item in items:
        if type(item) is dict or type(item) is list:
            k = _keys(item, depth + 1)
            if k < 0:
                return -1
            n += k
    return n


def _once_each(line: bytes, value: dict[str, Any]) -> bool:
    """Whether no object in ``line`` (decoded: ``value``) gives a key twice, and its nesting is shallow.

    Every key in the text is followed by one colon, so as many colons as keys decoded means no key was
    given twice (a colon inside a string only makes the count larger: such a line goes the exact way).
    """
    colons = line.count(b":")
    if colons == len(value):  # flat (an empty object nested is no key): only lists can nest
        return line.count(b"[") <= _MOST_NESTED
    return line.count(b"[") + line.count(b"{") <= _MOST_NESTED and _keys(value) == colons


#: The bounds msgspec takes for an int (a limit past them is stated as them: stricter, never looser).
_INT64 = (-(2**63), 2**63 - 1)


def _limited(base: Any, **bounds: Any) -> Any:
    """``base`` with msgspec's checks ``bounds`` (``ge``, ``le``, ``max_length``, ...)."""
    if base is int:
        bounds = {k: min(max(v, _INT64[0]), _INT64[1]) for k, v in bounds.items()}
    return Annotated[base, msgspec.Meta(**bounds)]


def _annotation(limit: wire.Limit | None, required: bool) -> Any:
    """A type msgspec checks a field against, no looser than ``_check(limit)`` (None: no such type).

    Only what is stricter or equal may be stated: a value this refuses goes to ``check_event``, which
    says why or passes it; a value this passes is never one ``check_event`` would refuse.
    """
    if limit is None:
        return None if required else Any  # required: anything but null, which msgspec cannot say
    if isinstance(limit, wire.Int):
        return _limited(int, ge=limit.lo, le=limit.hi)
    if isinstance(limit, wire.Num):
        # An int compared with a float bound exactly (as _number does), not through a float.
        lo_int = math.floor(limit.lo) + 1 if limit.above else math.ceil(limit.lo)
        as_int = _limited(int, ge=lo_int, le=math.floor(limit.hi))
        bounds = {"gt" if limit.above else "ge": limit.lo, "le": limit.hi}
        return as_int | _limited(float, **bounds)
    if isinstance(limit, wire.Text):
        return _limited(str, max_length=limit.most)
    if isinstance(limit, wire.OneOf):
        words = limit.words
        return Literal[words] if words and all(type(w) is str for w in words) else None
    if isinstance(limit, wire.Exactly):
        exact = {(bool,): bool, (dict,): dict[str, Any], (list,): list[Any], (str, type(None)): str | None}
        return exact.get(tuple(limit.types))
    if isinstance(limit, wire.Ints):
        return _limited(list[_limited(int, ge=limit.lo, le=limit.hi)], max_length=limit.most)  # type: ignore[misc]
    if isinstance(limit, wire.Durations):
        return _limited(list[_annotation(wire.TIME, False)], min_length=1, max_length=limit.most)  # type: ignore[misc]
    if isinstance(limit, wire.Obj):
        nested = _struct(limit.spec.__name__, limit.spec, nested=True)
        if nested is None:
            return None
        return _limited(list[nested], max_length=wire.MAX_OBJECTS) if limit.many else nested  # type: ignore[valid-type]
    if isinstance(limit, wire.Loss):
        # A float decoded is finite (JSON has no NaN; 1e400 is refused); an int past a float's range is not.
        int64 = _limited(int, ge=_INT64[0], le=_INT64[1])
        return Literal[tuple(wire.NON_FINITE)] | int64 | float
    return None  # a hand check (Custom): check_event's


def _struct(name: str, spec: type, nested: bool = False) -> type[msgspec.Struct] | None:
    """A Struct that passes only events of type ``name`` (``nested``: objects of ``spec``) that check_event
    passes as they are; None when a field cannot be stated. A field it does not declare is ignored, as
    check_event ignores it; a null passes where check_event skips it (an optional field's, not a common one's)."""
    required: list[tuple[str, Any]] = []
    optional: list[tuple[str, Any, Any]] = []
    common = {} if nested else wire.common_fields()
    for field, f in {**common, **wire.fields(spec)}.items():
        if field == "type" and not nested:
            continue  # the tag
        annotation = _annotation(f.limit, f.required)
        if annotation is None:
            return None
        if f.required:
            required.append((field, annotation))
        else:
            optional.append((field, annotation if field in common else annotation | None, None))
    if nested:
        return msgspec.defstruct(f"{name}_check", [*required, *optional])
    struct = msgspec.defstruct(f"{name}_check", [*required, *optional], tag_field="type", tag=name)
    msgspec.json.Decoder(
        struct
    )  # msgspec reads the types now: a limit it cannot take fails here, not on a line
    return struct


#: type -> the Struct its events are checked against in one call (``_struct``); types it cannot state
#: (and ``profile``, which ``check_profile`` rewrites) are checked by ``check_event`` alone.
_STRUCTS: dict[str, type[msgspec.Struct]] = {
    kind: struct
    for kind, spec in EVENTS.items()
    if kind != "profile" and (struct := _struct(kind, spec)) is not None
}


def fast_event(line: bytes) -> dict[str, Any] | None:
    """The event of ``line`` as ``parse_line_exact`` gives it, checked; None when msgspec cannot vouch
    for the line (not JSON it takes, a key twice, a lone surrogate, deep nesting): ask the exact path.

    Raises Malformed (with ``check_event``'s reason) for an event of the wrong types or ranges.
    """
    try:
        value = _DECODE(line)
    except (ValueError, RecursionError):
        return None
    return _checked(line, value)


def _checked(line: bytes, value: Any) -> dict[str, Any] | None:
    """``fast_event`` of ``line``, which msgspec decoded to ``value``."""
    if type(value) is not dict:
        return None
    if (line.count(b":") != len(value) or b"[" in line) and not _once_each(line, value):
        return None  # a flat line with no key twice (a batch) asks nothing more
    kind = value.get("type")
    struct = _STRUCTS.get(kind) if type(kind) is str else None
    if struct is not None:
        try:
            msgspec.convert(value, struct)
            return value
        except msgspec.ValidationError:
            pass  # check_event says why (or passes what the Struct is stricter about: a null)
    return check_event(value)


# -- the batch lane: a batch line decoded and checked into a Struct in one call, never a dict ----------
#: The batch event's Struct (``_STRUCTS["batch"]``): what a load folds a batch line from (``batch_of``).
BATCH: type[msgspec.Struct] = _STRUCTS["batch"]
_DECODE_BATCH: Callable[[bytes], Any] = msgspec.json.Decoder(BATCH).decode
#: The fields a runner's batch line gives (``Progress.batch``, tagged by the parent): all but ``node``.
_RUNNERS_FIELDS = tuple(name for name in BATCH.__struct_fields__ if name != "node")


def _without_null(annotation: Any) -> Any:
    """``annotation`` without None (``int | None``: ``int``)."""
    args = get_args(annotation)
    if get_origin(annotation) in (Union, UnionType) and type(None) in args:
        return Union[tuple(a for a in args if a is not type(None))]  # noqa: UP007 (a tuple of types)
    return annotation


#: ``BATCH`` as a runner's line fills it: every field of ``_RUNNERS_FIELDS`` given, none null. Tried first:
#: what ``batch_of`` must know is then one count (the line's colons), no test of a field in Python.
RUNNERS_BATCH: type[msgspec.Struct] = msgspec.defstruct(
    "batch_runners",
    [(f.name, _without_null(f.type)) for f in msgspec.structs.fields(BATCH) if f.name in _RUNNERS_FIELDS],
    tag_field="type",
    tag="batch",
)
_DECODE_RUNNERS_BATCH: Callable[[bytes], Any] = msgspec.json.Decoder(RUNNERS_BATCH).decode
#: The colons of a runner's batch line: the tag's, then one a field.
_RUNNERS_COLONS = 1 + len(_RUNNERS_FIELDS)


def batch_of(line: bytes) -> Any | None:
    """The batch event of ``line`` as a Struct (``RUNNERS_BATCH`` or ``BATCH``), when that certainly holds
    what ``parse_line_exact`` gives and ``check_event`` passes; None for any other line: ask ``fast_event``.

    msgspec checks the known fields' types and ranges as it decodes, but skips the rest of an object
    unread (an unknown field's bad UTF-8, its 1e400, its 30-digit integer) and keeps the last of a key
    given twice, where the exact path refuses such lines. So the line must hold nothing but the tag and
    the fields the Struct holds: every key in JSON text is followed by a colon, so as many colons as
    the tag and the fields that are not None means no other key, no key twice, no null and no colon
    inside a string (a line that fails this goes the exact way, which says why or folds it alike).
    A ``node`` goes the way of the dict (``SessionModel._apply_node``).
    """
    try:
        batch = _DECODE_RUNNERS_BATCH(line)
    except (ValueError, RecursionError):  # another shape of batch, or not one
        pass
    else:  # its every field given, none null: a colon more is a key more (a node, a key twice, another)
        return batch if line.count(b":") == _RUNNERS_COLONS else None
    try:
        batch = _DECODE_BATCH(line)
    except (ValueError, RecursionError):  # not JSON msgspec takes, not a batch, a field out of range
        return None
    if batch.node is not None:
        return None
    given = len(BATCH.__struct_fields__) - msgspec.structs.astuple(batch).count(None)
    return batch if line.count(b":") == 1 + given else None


# -- the GPU lane: a sample as the sampler writes it, vouched for whole and kept as decoded -------------
def _sample_struct() -> type[msgspec.Struct]:
    """A Struct that passes a ``gpu`` sample only where ``prune_gpu_sample`` of its checked event keeps
    every key and value as they are: each field ``_STRUCTS["gpu"]`` checks, as it checks it, and no other
    key at any level (``forbid_unknown_fields``); ``gpus`` a list of readings and ``host`` an object, never
    null; a reading's ``throttle`` a list of at most 32 words of at most 64 characters; at most
    ``MAX_SAMPLE_GPUS`` readings and devices. A field left out stays ``UNSET``."""

    def optional(annotation: Any) -> tuple[Any, Any]:
        return annotation | msgspec.UnsetType, msgspec.UNSET

    reading = msgspec.defstruct(
        "gpu_reading_kept",
        [
            (
                name,
                *optional(
                    _limited(list[_limited(str, max_length=64)], max_length=32)  # type: ignore[misc]
                    if name == "throttle"
                    else _annotation(f.limit, False) | None
                ),
            )
            for name, f in wire.fields(wire.GpuReading).items()
        ],
        forbid_unknown_fields=True,
    )
    host = msgspec.defstruct(
        "host_reading_kept",
        [
            (name, *optional(_annotation(f.limit, False) | None))
            for name, f in wire.fields(wire.HostReading).items()
        ],
        forbid_unknown_fields=True,
    )
    common = wire.common_fields()
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for name, f in {**common, **wire.fields(wire.GpuEvent)}.items():
        if name == "type":
            continue  # the tag
        if name == "gpus":
            fields.append((name, *optional(_limited(list[reading], max_length=MAX_SAMPLE_GPUS))))  # type: ignore[valid-type]
        elif name == "host":
            fields.append((name, *optional(host)))
        elif name == "devices":
            assert isinstance(f.limit, wire.Ints)
            ints = wire.Ints(f.limit.lo, f.limit.hi, min(f.limit.most, MAX_SAMPLE_GPUS))
            fields.append((name, *optional(_annotation(ints, False) | None)))
        elif f.required or name == "t":  # a sample without a number for its time is none (``_gpu_sample``)
            fields.insert(0, (name, _annotation(f.limit, True)))
        else:
            annotation = _annotation(f.limit, False)
            fields.append((name, *optional(annotation if name in common else annotation | None)))
    struct = msgspec.defstruct("gpu_kept", fields, tag_field="type", tag="gpu", forbid_unknown_fields=True)
    msgspec.json.Decoder(struct)  # the types are read now: one msgspec cannot take fails here
    return struct


#: What ``gpu_sample_of`` checks a decoded sample against (``_sample_struct``).
SAMPLE: type[msgspec.Struct] = _sample_struct()


def gpu_sample_of(line: bytes) -> dict[str, Any] | None:
    """The sample of ``line`` as ``prune_gpu_sample(fast_event(line))`` gives it (the same keys and values;
    the keys in the line's order, which no reader of the samples depends on), without a copy: the decoded
    object itself when ``SAMPLE`` passes it and the line gives no key twice; None for any other line (not a
    sample, not JSON msgspec takes, a key unknown, twice or null where pruning would drop it): ask
    ``fast_event``.

    Key twice: once ``SAMPLE`` has passed it, the sample's only objects are itself, its readings and its
    host, so it holds as many keys as the line has colons unless a key came twice (msgspec keeps the last)
    or a string holds a colon (the exact way then, as for a batch: ``batch_of``).
    """
    try:
        value = _DECODE(line)
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or value.get("type") != "gpu":
        return None
    try:
        msgspec.convert(value, SAMPLE)
    except msgspec.ValidationError:
        return None
    keys = len(value)
    if (gpus := value.get("gpus")) is not None:
        keys += sum(map(len, gpus))
    if (host := value.get("host")) is not None:
        keys += len(host)
    return value if line.count(b":") == keys else None
