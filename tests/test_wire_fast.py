"""The fast reader (issue 35): msgspec where it certainly gives what json gives, the checks derived from the
wire's one statement as msgspec Structs; every line gives exactly what the standard library's path gives.

``parse_line_exact`` is the reader before issue 35 (json with its hooks, then ``check_event``), kept as the
path for every line the fast one cannot vouch for; each test holds ``parse_line`` to it: the same event
(same keys, same order, same types) or the same refusal, same reason.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.wire import events
from benchtui.core.wire.events import Malformed, parse_line, parse_line_exact
from benchtui_runners import wire
from sessionfactory import make_session

TESTS = Path(__file__).parent


def outcome(parse: Any, line: bytes | str) -> tuple[str, Any]:
    """What ``parse`` makes of ``line``: the event as (key, type, value) triples in order, or why not."""
    try:
        event = parse(line)
    except Malformed as exc:
        return "malformed", str(exc)
    return "event", _typed(event)


def _typed(value: Any) -> Any:
    """``value`` with every part's exact type beside it (1 == 1.0 == True; the reader must not say either)."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def assert_same(lines: list[bytes]) -> int:
    """Each line read the fast way and the exact way: the same outcome."""
    events_seen = 0
    for line in lines:
        want = outcome(parse_line_exact, line)
        assert outcome(parse_line, line) == want, line[:300]
        events_seen += want[0] == "event"
    return events_seen


def golden_lines() -> list[bytes]:
    lines: list[bytes] = []
    for path in sorted([*TESTS.glob("golden/**/events.jsonl"), *TESTS.glob("data/*/events.jsonl")]):
        lines += path.read_bytes().splitlines(keepends=True)
    return lines


@pytest.fixture(scope="module")
def made_lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """A made session's lines: every event type the engine and the runners write, GPU samples included."""
    root = tmp_path_factory.mktemp("wire-fast")
    path = make_session(
        root, models=["resnet50", "densenet121"], runs=2, epochs=2, steps=6, write_summary=False
    )
    return (path / "events.jsonl").read_bytes().splitlines(keepends=True)


def test_every_line_of_the_golden_sessions_reads_as_before() -> None:
    lines = golden_lines()
    assert len(lines) > 200
    kinds = {json.loads(line).get("type") for line in lines}
    assert {"batch", "epoch", "gpu", "hello", "run_start", "run_end"} <= kinds
    assert assert_same(lines) == len(lines)  # and every one is an event


def test_every_line_of_a_made_session_reads_as_before(made_lines: list[bytes]) -> None:
    assert assert_same(made_lines) == len(made_lines)


def test_the_fast_path_takes_the_common_lines() -> None:
    """The lines a session is made of are read by msgspec and checked by a Struct, not the slow way."""
    lines = golden_lines()
    slow = [line for line in lines if events.fast_event(line) is None]
    assert len(slow) <= len(lines) // 50
    # Only a colon in a text (an error's message) sends a written line the exact way.
    assert all(line.count(b":") > events._keys(json.loads(line)) for line in slow)
    assert {"batch", "gpu", "epoch", "hello"} <= set(events._STRUCTS)


HOSTILE: list[bytes | str] = [
    b"",
    b"\n",
    b"   \n",
    b"not json\n",
    b"[1, 2]\n",
    b"null",
    b'"batch"',
    b'{"no_type": 1}\n',
    b'{"type": 3}\n',
    b'{"type": ["batch"]}\n',
    b'{"type": {"a": 1}}\n',
    b"\xff\xfe\n",
    b'{"type": "batch"',
    b'{"type": "batch"}} ',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1}{"type":"x"}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1} x',
    b'\xef\xbb\xbf{"type":"batch","epoch":1,"step":1,"seconds":0.1}',  # a BOM
    b'\x0b{"type":"batch","epoch":1,"step":1,"seconds":0.1}\x0c',  # whitespace json does not take
    b' \t{"type":"batch","epoch":1,"step":1,"seconds":0.1}\r\n',
    b'{"type":"batch","epoch":1,"step":1,"seconds":NaN}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":Infinity}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":1e400}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":-1e400}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":1e-400}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"samples":' + b"9" * 5000 + b"}",
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"samples":' + b"9" * 4300 + b"}",
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"extra":' + b"9" * 4300 + b"}",
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"extra":' + b"9" * 30 + b"}",
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"extra":-' + b"9" * 30 + b".5}",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"type":"hello","a":' * 50_000 + b"1" + b"}" * 50_000,
    b'{"type":"x","a":' + b"[" * 600 + b"]" * 600 + b"}",
    b'{"type":"x","a":' + b"[" * 63 + b"]" * 63 + b"}",
    b'{"type":"x","a":' + b"[" * 65 + b"]" * 65 + b"}",
    *(
        b'{"type":"x","a":' + b"[" * n + b"]" * n + b"}" for n in range(900, 1100, 7)
    ),  # near the recursion limit
    *(b'{"type":"x","a":' + b'{"b":' * n + b"1" + b"}" * n + b"}" for n in range(900, 1100, 7)),
    b'{"type":"x","a":' + b'{"b":' * 70 + b"1" + b"}" * 70 + b"}",
    b'{"type":"x","a":' + b'{"b":' * 30 + b"1" + b"}" * 30 + b"}",
    # A key given twice: json's hook refuses it, msgspec keeps the last.
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"seconds":-5}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":-5,"seconds":0.1}',
    b'{"type":"batch","type":"x","epoch":1,"step":1,"seconds":0.1}',
    b'{"type":"x","a":{"b":1,"b":2}}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"index":-4}]}',
    b'{"type":"x","a":{"b":1,"b":2},"c":"::"}',  # a colon in a string evens the count: still refused
    b'{"type":"x","a:b":{"c":1,"c":2}}',
    b'{"type" : "batch", "epoch" : 1, "step" : 1, "seconds" : 0.1, "seconds" : 2}',
    # Lone surrogates: json takes them (loads_strict replaces them), msgspec refuses.
    b'{"type":"error","kind":"exception","message":"in /home/\\udce9t\\u00e9/m.py"}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":"r\\ud800"}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"\\udc80":1}',
    b'{"type":"b\\u0061tch","epoch":1,"step":1,"seconds":0.1}',
    '{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":"é€𝄞"}'.encode(),
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":"\xed\xa0\x80"}',  # a surrogate in UTF-8
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":"\xc0\xaf"}',  # overlong
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":"a\x01b"}',  # a control character
    b'{"type":"batch","epoch":01,"step":1,"seconds":0.1}',
    b'{"type":"batch","epoch":1.0,"step":1,"seconds":0.1}',
    b'{"type":"batch","epoch":true,"step":1,"seconds":0.1}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":1}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":true}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":-0.0}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"samples":null,"steps":null}',
    b'{"type":"batch","epoch":null,"step":1,"seconds":0.1}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"t":null}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":null}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"node":0}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"v":-1}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":1000000000.0000001}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":1000000000}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":1000000001}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"t":-1000000000}',
    b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"t":-1000000001}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"util":1000000000000000000}]}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"util":1000000000000000001}]}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"util":1e18}]}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"util":-1000000000000000001}]}',
    b'{"type":"gpu","t":1.0,"gpus":[null]}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":null,"name":null}],"host":null}',
    b'{"type":"gpu","t":1.0,"gpus":{"index":0}}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"throttle":"x"}]}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"lost":1}]}',
    b'{"type":"gpu","t":1.0,"gpus":[{"index":0,"future":{"a":[1,2]}}],"devices":[0,1,-1]}',
    b'{"v":1,"type":"epoch","t":1.0,"epoch":2,"seconds":5.5,"loss":"nan","loss_min":"-inf","loss_max":1}',
    b'{"v":1,"type":"epoch","t":1.0,"epoch":2,"seconds":5.5,"loss":"NaN"}',
    b'{"v":1,"type":"epoch","t":1.0,"epoch":2,"seconds":5.5,"loss":true}',
    b'{"v":1,"type":"epoch","t":1.0,"epoch":2,"seconds":5.5,"loss":' + b"9" * 400 + b"}",
    b'{"v":1,"type":"phase","t":1.0,"name":"build","edge":"middle"}',
    # A limit past an int64 (FLOPs: up to 1e30), stated to msgspec as an int64's.
    b'{"v":1,"type":"flops","t":1.0,"per_step":1e29,"per_image":100000000000000000000000000000}',
    b'{"v":1,"type":"flops","t":1.0,"per_step":1e31,"per_image":9223372036854775807}',
    b'{"v":1,"type":"flops","t":1.0,"per_step":-1,"per_image":9223372036854775808}',
    b'{"v":1,"type":"phase","t":1.0,"name":"' + "é".encode() * wire.MAX_TEXT + b'","edge":"end"}',
    b'{"v":1,"type":"phase","t":1.0,"name":"' + "𝄞".encode() * (wire.MAX_TEXT + 1) + b'","edge":"end"}',
    b'{"v": 1, "type": "future", "t": 1.0, "extra": [1, 2]}\n',
    b'{"type":"profile","ok":true,"categories":{"conv":1e999}}',
    b'{"type":"profile","ok":true,"categories":{"conv":0.5},"top":[{"name":"x","seconds":0.1}]}',
    b'{"type":"profile","ok":"yes"}',
    b'{"type":"' + b"x" * 65 + b'"}',
    '{"type":"batch","epoch":1,"step":1,"seconds":0.1}',  # a str (the cluster's relay)
    '{"type":"batch","epoch":1,"step":1,"seconds":0.1,"seconds":-1}',
    '{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":"\\ud800"}',
    ' {"type":"batch","epoch":1,"step":1,"seconds":0.1}\x0b',
    '{"type":"batch","epoch":1,"step":1,"seconds":0.1,"run":"é"}',
    '{"type":"error","kind":"exception","message":"\udce9"}',
    b"x" * (events.MAX_LINE_BYTES + 1),
]


@pytest.mark.parametrize("line", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_line_reads_as_before(line: bytes | str) -> None:
    assert outcome(parse_line, line) == outcome(parse_line_exact, line)


def test_a_key_given_twice_is_refused_the_fast_way_too() -> None:
    """What the hostile lines above hold the fast reader to, said plainly (a broken count fails here)."""
    with pytest.raises(Malformed, match="appears twice"):
        parse_line(b'{"type":"batch","epoch":1,"step":1,"seconds":0.1,"seconds":-5}')
    with pytest.raises(Malformed, match="field 'b' appears twice"):
        parse_line(b'{"type":"x","a":{"b":1,"b":2}}')


#: Values put in every field of every kind of event (nested ones too): each limit's edges and beyond.
EDGES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 0.0, -0.0, 0.5, 1e-320, 1.5, 64, 65, 1000, 1024, 1025, 4096, 4097,
    10**6, 10**6 + 1, 10**7, 10**7 + 1, 10**9, 10**9 + 1, 1e9, 1000000000.0000001, 1e6, 1e7, 100.0, 100.00000000000001,
    10**12, 10**12 + 1, 10**18, 10**18 + 1, -(10**18) - 1, 1e18, -1e18, 2**63, 2**64 + 1, 10**30, 1e308, -1e308,
    "", "x", "nan", "inf", "-inf", "start", "end", "train", "x" * wire.MAX_TEXT, "é" * (wire.MAX_TEXT + 1),
    "x" * (wire.LONG_TEXT + 1), [], [1], [0, 1], [-1], [1.5], [True], [None], ["a"], [0.1] * 3, [{}], [{"index": 0}],
    [{"index": -1}], [None, {"index": 0}], {}, {"a": None}, {"a": 1}, {"file": "t.json", "bytes": 10},
]  # fmt: skip


def _mutations(lines: list[bytes]) -> list[bytes]:
    """Every field (nested one level, and in lists of objects) of the first line of each type, set to each edge."""
    seen: set[str] = set()
    out = []
    for raw in lines:
        event = json.loads(raw)
        if event.get("type") in seen:
            continue
        seen.add(event["type"])
        paths: list[tuple[str, ...]] = []
        declared = wire.event_fields(event["type"]) or {}
        for key in [*event, *declared, "node", "v", "run", "t"]:
            if key == "type" or (key,) in paths:
                continue
            paths.append((key,))
            value = event.get(key)
            if isinstance(value, dict):
                paths += [(key, sub) for sub in value]
            if isinstance(value, list) and value and isinstance(value[0], dict):
                paths += [(key, "0", sub) for sub in value[0]]
        for path in paths:
            for edge in EDGES:
                mutated = json.loads(raw)
                target: Any = mutated
                for step in path[:-1]:
                    target = target[int(step)] if isinstance(target, list) else target[step]
                target[path[-1]] = edge
                out.append((json.dumps(mutated, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))
    return out


def test_every_field_at_every_edge_reads_as_before(made_lines: list[bytes]) -> None:
    lines = _mutations(golden_lines() + made_lines)
    assert len(lines) > 10_000
    events_seen = assert_same(lines)
    assert 0.2 * len(lines) < events_seen < 0.9 * len(lines)  # both sides of every limit were tried
