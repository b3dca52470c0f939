"""The wire format: what a runner writes is what the parent reads, and junk never crashes it."""

from __future__ import annotations

import json
import os

import pytest

from benchtui.core.wire.events import Malformed, parse_line
from benchtui_runners.protocol import WIRE_VERSION, EventWriter, ParentGone


def _roundtrip(emit) -> list[dict]:  # a callable taking a writer
    read_fd, write_fd = os.pipe()
    writer = EventWriter(write_fd)
    emit(writer)
    writer.close()
    with os.fdopen(read_fd, "rb") as fh:
        return [parse_line(line) for line in fh]


def test_every_event_type_round_trips() -> None:
    def emit(w: EventWriter) -> None:
        w.hello(framework="torch", versions={"torch": "2.x"}, config={"batch_size": 8})
        w.phase("build", "start")
        w.batch(1, 3, 0.125, 8)
        w.epoch(1, 1.5, 64)
        w.memory(peak_bytes=123, source="test")
        w.error("oom", "out of memory", "tb")
        w.done(peak_bytes=123)

    events = _roundtrip(emit)
    assert [e["type"] for e in events] == ["hello", "phase", "batch", "epoch", "memory", "error", "done"]
    assert all(e["v"] == WIRE_VERSION and isinstance(e["t"], float) for e in events)
    assert events[0]["pid"] == os.getpid() and events[0]["config"] == {"batch_size": 8}
    assert events[1] == {**events[1], "name": "build", "edge": "start"}
    assert (events[2]["epoch"], events[2]["step"], events[2]["seconds"], events[2]["samples"]) == (
        1,
        3,
        0.125,
        8,
    )
    assert events[5]["kind"] == "oom" and events[5]["traceback"] == "tb"


def test_non_finite_numbers_become_null_and_unicode_survives() -> None:
    events = _roundtrip(lambda w: w.emit("memory", peak=float("nan"), inf=float("inf"), note="µs ✓"))
    assert events[0]["peak"] is None and events[0]["inf"] is None and events[0]["note"] == "µs ✓"


def test_times_are_monotonic() -> None:
    events = _roundtrip(lambda w: [w.batch(1, i, 0.1, 1) for i in range(1, 51)])
    times = [e["t"] for e in events]
    assert times == sorted(times)


def test_unknown_types_and_fields_pass_through() -> None:
    event = parse_line(b'{"v": 1, "type": "future", "t": 1.0, "extra": [1, 2]}\n')
    assert event["type"] == "future" and event["extra"] == [1, 2]


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"\n",
        b"not json\n",
        b"[1, 2]\n",
        b'{"no_type": 1}\n',
        b'{"type": 3}\n',
        b"\xff\xfe\n",
        b'{"type": "batch"',
    ],
)
def test_malformed_lines_raise_malformed(line: bytes) -> None:
    with pytest.raises(Malformed):
        parse_line(line)


def test_a_closed_pipe_means_the_parent_is_gone_and_the_run_stops() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    writer = EventWriter(write_fd)
    with pytest.raises(ParentGone):
        writer.batch(1, 1, 0.1, 1)  # EPIPE: nobody records this run any more
    assert writer.closed
    writer.batch(1, 2, 0.1, 1)  # and once closed, it stays quiet


def test_writer_without_fd_is_silent() -> None:
    writer = EventWriter(None)
    writer.batch(1, 1, 0.1, 1)
    assert writer.closed


def test_events_are_single_json_lines() -> None:
    events = _roundtrip(lambda w: w.error("exception", "multi\nline", "a\nb\nc"))
    assert events[0]["message"] == "multi\nline"
    assert json.dumps(events[0])


def test_an_epochs_time_to_first_batch_is_carried_and_checked() -> None:
    events = _roundtrip(lambda w: [w.epoch(2, 5.5, 256, to_first_batch_s=4.71), w.epoch(3, 5.0, 256)])
    assert events[0]["to_first_batch_s"] == 4.71
    assert "to_first_batch_s" not in events[1]  # runners before issue 30: still an epoch
    base = '{"v": 1, "type": "epoch", "t": 1.0, "epoch": 2, "seconds": 5.5, "to_first_batch_s": %s}'
    assert parse_line((base % "0").encode())["to_first_batch_s"] == 0
    assert parse_line((base % "null").encode())["to_first_batch_s"] is None  # not known
    for bad in ("-0.5", "1e7", '"4.7"', "true", "[1]"):
        with pytest.raises(Malformed, match="epoch.to_first_batch_s"):
            parse_line((base % bad).encode())
