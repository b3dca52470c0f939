"""The pass over every GPU sample (``SessionFolder.gpu_samples``) and the html's drawing of them run with
the cyclic garbage collector paused (issue 35: a third of that pass's time on a session of a million
events), and leave it as they found it, whatever happens inside."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import sys
from pathlib import Path

import pytest

from benchtui.core.reporting import htmlreport
from benchtui.core.store import session as store
from benchtui.core.wire.events import MAX_SAMPLE_GPUS
from sessionfactory import make_session


@pytest.fixture(autouse=True)
def _collector_back_on():
    yield
    gc.enable()


def _session(tmp_path: Path) -> store.SessionFolder:
    folder = tmp_path / "s"
    folder.mkdir()
    lines = [
        {"type": "gpu", "t": 1.0 + i, "run": None, "gpus": [{"index": 0, "util": i}], "watched": 0}
        for i in range(3)
    ]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    return store.SessionFolder(folder)


def test_the_collector_is_paused_inside_and_on_again_after() -> None:
    seen = []
    gc.enable()
    with store.no_gc_passes():
        seen.append(gc.isenabled())
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with store.no_gc_passes():
        pass
    assert not gc.isenabled()


def test_an_error_inside_turns_it_back_on() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), store.no_gc_passes():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_gpu_samples_pauses_it_and_gives_it_back(tmp_path: Path, monkeypatch) -> None:
    folder = _session(tmp_path)
    during = []
    lane = store.gpu_sample_of

    def watching(line):
        during.append(gc.isenabled())
        return lane(line)

    monkeypatch.setattr(store, "gpu_sample_of", watching)
    gc.enable()
    samples = folder.gpu_samples()
    assert [s["t"] for s in samples] == [1.0, 2.0, 3.0]
    assert during == [False, False, False]
    assert gc.isenabled()


def test_the_html_is_drawn_with_it_paused(monkeypatch) -> None:
    during = []

    def render(report):
        during.append(gc.isenabled())
        return "<html></html>\n"

    monkeypatch.setattr(htmlreport, "render", render)
    gc.enable()
    out = io.StringIO()
    htmlreport.write(None, out)  # type: ignore[arg-type]
    assert out.getvalue() == "<html></html>\n" and during == [False] and gc.isenabled()


def test_the_report_is_built_with_it_paused(tmp_path: Path, monkeypatch) -> None:
    """The samples' dicts are made with the collector paused, so they wait in its youngest generation: the
    first collection after would walk all of them (half a second of the 1M session's html, in build_report)."""
    from benchtui.core.reporting.model import build

    during = []
    environment = build.environment

    def watching(loaded, summary, samples=None):
        during.append(gc.isenabled())
        return environment(loaded, summary, samples)

    monkeypatch.setattr(build, "environment", watching)
    loaded = store.load_session(make_session(tmp_path))
    gc.enable()
    build.build_report(loaded, telemetry=True)
    assert during == [False] and gc.isenabled()


# -- the block scan: the samples the line-by-line pass found, on any file ----------------------------------
def _old_gpu_samples(folder: store.SessionFolder) -> list[dict]:
    """``gpu_samples`` as it was before the block scan (every line read and tested), verbatim."""
    out: list[dict] = []
    try:
        fh = store.open_session_file(folder.events_path)
    except store.SessionError:
        return out
    if fh is None:
        return out
    skipped = store.EventCheck()
    with fh, contextlib.suppress(OSError):
        for raw in store.event_lines(fh):
            if not raw.endswith(b"\n"):
                if len(raw) > store.MAX_EVENT_LINE_BYTES and store._skip_rest(fh):
                    continue
                break
            if b'"gpu"' not in raw or len(raw) > store.MAX_GPU_LINE_BYTES:
                continue
            try:
                event = store.fast_event(raw)
            except store.Malformed:
                continue
            if event is None:
                event = store._event_of(raw, store._DECODER.raw_decode, skipped)
            if event is not None and event["type"] == "gpu" and isinstance(event.get("t"), (int, float)):
                out.append(store.prune_gpu_sample(event))
    return out


def _gpu(t: float, **extra) -> bytes:
    event = {"type": "gpu", "t": t, "run": None, "gpus": [{"index": 0, "util": 3, "throttle": ["x"]}]}
    return json.dumps({**event, **extra}).encode() + b"\n"


def _hostile_lines() -> list[bytes]:
    """Sample lines and lines that only look like one: each kind of refusal, and '"gpu"' where it is no sample."""
    good = _gpu(1.0)
    return [
        good,
        b'{"type":"batch","run":"gpu","v":1,"epoch":0,"step":1,"seconds":0.1,"samples":8,"steps":1,"t":2.0}\n',
        b'{"type":"log","t":2.5,"run":null,"text":"\\"gpu\\" said hello"}\n',
        b'{"t":3.0,"type":"gpu","run":null,"gpus":[]}\n',  # the tag not first: a sample all the same
        b'{"type":"gpu","t":4.0,"t":5.0,"run":null}\n',  # a key twice
        b'{"type":"gpu","t":"6","run":null}\n',  # t not a number
        b'{"type":"gpu","run":null}\n',  # no t
        b'{"type":"gpu","t":7.0,"run":null,"gpus":' + b"[" * 200 + b"]" * 200 + b"}\n",  # nested deep
        b'{"type":"gpu","t":8.0,"run":null,"extra":1e400}\n',  # a huge value
        b'{"type":"gpu","t":9.0,"run":null,"extra":"\xff"}\n',  # bad UTF-8
        b'{"type":"gpu","t":10.0,"run":null,"extra":"\\ud800"}\n',  # a lone surrogate
        b'{"type":"gpu","t":11.0}{"type":"gpu"}\n',  # two objects
        b'{"type":"gpu","t":12.0,"run":null,"gpus":[{"index":0,"util":3,"util":4}]}\n',  # nested key twice
        b'not json at all "gpu"\n',
        b"\n",
        b'{"type":"gpu","t":13.0,"run":null}\r\n',  # CRLF
        _gpu(14.0, host={"cpu_percent": 5.0, "rss": 1, "other": 2}, devices=[0, 1], node=1),
        b'{"type":"gpu","t":15.0,"run":null,"pad":"' + b"p" * (store.MAX_GPU_LINE_BYTES - 50) + b'"}\n',
        b'{"type":"gpu","t":16.0,"run":null,"pad":"' + b"p" * (store.MAX_GPU_LINE_BYTES + 10) + b'"}\n',
        _gpu(17.0, watched=2),
    ]


def _write(tmp_path: Path, name: str, data: bytes) -> store.SessionFolder:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "events.jsonl").write_bytes(data)
    return store.SessionFolder(folder)


def _typed(value):
    """``value`` with each dict's keys sorted and every number tagged with its type: equal only where the
    keys, the values and their types are (the samples' key order is the line's since the GPU lane, and no
    reader of them depends on it: they are read by key, by the html's plots and a watch's facts)."""
    if isinstance(value, dict):
        return {k: _typed(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _same(folder: store.SessionFolder) -> list[dict]:
    new, old = folder.gpu_samples(), _old_gpu_samples(folder)
    assert json.dumps(_typed(new)) == json.dumps(_typed(old))  # keys, values and their types
    return new


@pytest.mark.parametrize("block", [1, 7, 64, 200, 4096, 1 << 22])
def test_hostile_lines_give_the_samples_they_gave(tmp_path: Path, monkeypatch, block: int) -> None:
    monkeypatch.setattr(store, "GPU_SCAN_BYTES", block)
    data = b"".join(_hostile_lines())
    samples = _same(_write(tmp_path, "a", data))
    assert {s["t"] for s in samples} >= {1.0, 3.0, 14.0, 15.0, 17.0} and 16.0 not in {s["t"] for s in samples}
    for cut in (len(data) - 1, len(data) - 5, len(data) // 2, 10):  # the last line cut off mid-write
        _same(_write(tmp_path, f"cut{cut}", data[:cut]))


@pytest.mark.parametrize("block", [64, 1000, 1 << 22])
def test_overlong_lines_are_passed_over_or_end_the_reading_as_before(
    tmp_path: Path, monkeypatch, block: int
) -> None:
    monkeypatch.setattr(store, "GPU_SCAN_BYTES", block)
    monkeypatch.setattr(store, "MAX_EVENT_LINE_BYTES", 300)
    monkeypatch.setattr(store, "MAX_SKIP_BYTES", 2000)
    long = b'{"type":"gpu","t":20.0,"run":null,"pad":"' + b"q" * 500 + b'"}\n'
    endless = b'{"type":"gpu","t":21.0,"pad":"' + b"z" * 5000 + b'"}\n'  # no newline within the skip
    for i, data in enumerate(
        [
            _gpu(1.0) + long + _gpu(2.0),
            long + _gpu(3.0) + long,
            _gpu(4.0) + endless + _gpu(5.0),
            _gpu(6.0) + b"x" * 2299 + b"\n" + _gpu(7.0),  # the newline where the skip just ends
            _gpu(6.0) + b"x" * 2300 + b"\n" + _gpu(7.0),
            _gpu(6.0) + b"x" * 2301 + b"\n" + _gpu(7.0),
            _gpu(8.0) + b"\0" * 9000,  # a hole of zeros at the end
        ]
    ):
        _same(_write(tmp_path, f"l{i}", data))


def test_a_read_error_keeps_what_was_read_before_it(tmp_path: Path, monkeypatch) -> None:
    data = b"".join(_gpu(float(i)) + b'{"type":"log","t":0,"run":null,"text":"x"}\n' for i in range(300))
    folder = _write(tmp_path, "e", data)
    real = store.open_session_file

    class Failing(io.BufferedReader):
        def read(self, n=-1):  # type: ignore[override]
            if self.tell() + (n if n and n > 0 else 0) > 9000:
                raise OSError(5, "Input/output error")
            return super().read(n)

        def readline(self, n=-1):  # type: ignore[override]
            if self.tell() > 9000:
                raise OSError(5, "Input/output error")
            return super().readline(n)

    def failing(path):
        real(path).close()  # what it refuses, it still refuses
        return Failing(io.FileIO(path))

    monkeypatch.setattr(store, "open_session_file", failing)
    for block in (64, 4096, 1 << 22):
        monkeypatch.setattr(store, "GPU_SCAN_BYTES", block)
        samples = _same(folder)
        assert 0 < len(samples) < 300


def test_the_big_session_gives_the_samples_it_gave() -> None:
    big = Path("/tmp/big1m/20260102T030405Z_bench-1m")
    if not big.is_dir():
        pytest.skip("no 1M-event session here (benchmarks/load_session.py --dir /tmp/big1m)")
    folder = store.SessionFolder(big)
    assert _same(folder)


# -- pruning: what it kept, in the order it kept it ----------------------------------------------------------
def _old_prune(event: dict) -> dict:
    """``prune_gpu_sample`` (and its ``_gpu_reading``) before issue 35's work, verbatim."""
    from benchtui.core.wire.events import _GPU_FIELDS, _HOST_FIELDS, MAX_SAMPLE_GPUS

    def reading(gpu: dict) -> dict:
        out = {k: v for k, v in gpu.items() if k in _GPU_FIELDS and k != "throttle"}
        if isinstance(throttle := gpu.get("throttle"), list):
            out["throttle"] = [w[:64] for w in throttle[:32] if isinstance(w, str)]
        return out

    gpus = event.get("gpus")
    host = event.get("host")
    out = {k: event[k] for k in ("type", "t", "run", "v", "watched", "devices", "node") if k in event}
    if isinstance(gpus, list):
        out["gpus"] = [reading(g) if isinstance(g, dict) else None for g in gpus[:MAX_SAMPLE_GPUS]]
    if isinstance(host, dict):
        out["host"] = {k: v for k, v in host.items() if k in _HOST_FIELDS}
    if isinstance(out.get("devices"), list):
        out["devices"] = out["devices"][:MAX_SAMPLE_GPUS]
    return out


def test_pruning_keeps_what_it_kept_in_its_order() -> None:
    sampler = {
        "index": 0, "util": 5, "mem_util": 1, "mem_used": 2, "mem_total": 3, "power_w": 60.0, "temp_c": 38,
        "sm_clock_mhz": 1980, "throttle": ["gpu_idle", "x" * 100] + [7] + ["w"] * 40, "proc_mem": None,
    }  # fmt: skip
    readings = [
        sampler,
        {k: sampler[k] for k in reversed(sampler)},
        {**sampler, "extra": 1},
        {"extra": 1, **sampler},
        {**sampler, "throttle": "not a list"},
        {k: v for k, v in sampler.items() if k != "throttle"},
        {"throttle": ["a"]},
        {},
        "not a dict",
        None,
    ]
    hosts = [
        {"cpu_percent": 1.0, "rss": 2},
        {"rss": 2, "cpu_percent": 1.0, "system_busy_cores": 3.0},
        {"rss": 2, "other": 1},
        {},
        [1],
        None,
    ]
    events = [
        {"type": "gpu", "t": 1.0, "run": None, "gpus": [r], "host": h, "watched": 0, "extra": 1}
        for r in readings
        for h in hosts
    ]
    events.append({"type": "gpu", "t": 1.0, "gpus": readings * 40, "devices": list(range(300)), "node": 1})
    events.append({"type": "gpu", "t": 1.0, "gpus": "not a list", "host": "nor a dict"})
    for event in events:
        new, old = store.prune_gpu_sample(event), _old_prune(event)
        assert json.dumps(new) == json.dumps(old)
        assert list(new) == list(old)
        # no bigger either: a copy whose table was resized held the 1M session's samples in 20 MB more
        assert _sizes(new) == _sizes(old)


def _sizes(value) -> list[int]:
    """The sizes of ``value``'s dicts and lists, all levels, in order."""
    if isinstance(value, dict):
        return [sys.getsizeof(value)] + [n for v in value.values() for n in _sizes(v)]
    if isinstance(value, list):
        return [sys.getsizeof(value)] + [n for v in value for n in _sizes(v)]
    return []


# -- the GPU lane: the decoded sample itself where pruning would keep it whole -----------------------------
def _sampler_line(**changes) -> bytes:
    """A sample as the sampler writes it (two GPUs, the host), with ``changes`` made to its object."""
    reading = {
        "index": 0, "util": 5, "mem_util": 1, "mem_used": 2, "mem_total": 3, "power_w": 60.0, "temp_c": 38,
        "sm_clock_mhz": 1980, "throttle": ["gpu_idle"], "proc_mem": None,
    }  # fmt: skip
    event = {
        "type": "gpu",
        "t": 1000.5,
        "run": "001-torch-resnet50-1",
        "gpus": [reading, {**reading, "index": 1, "util": 97.5, "throttle": []}],
        "watched": 0,
        "host": {"cpu_percent": 104.2, "rss": 3231564815, "system_busy_cores": 1.5},
    }
    for key, value in changes.items():
        if value is _GONE:
            event.pop(key)
        else:
            event[key] = value
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


_GONE = object()


def _old_sample(line: bytes) -> dict | None:
    """The sample the pass gave of ``line`` before the lane: checked by ``fast_event`` or the exact path,
    then pruned."""
    try:
        event = store.fast_event(line)
    except store.Malformed:
        return None
    if event is None:
        event = store._event_of(line, store._DECODER.raw_decode, store.EventCheck())
    if event is not None and event["type"] == "gpu" and isinstance(event.get("t"), (int, float)):
        return store.prune_gpu_sample(event)
    return None


def _lane_lines() -> list[tuple[bytes, bool | None]]:
    """(line, whether the lane takes it; None: either): the sampler's lines, each way a line differs from
    what pruning keeps whole, and the hostile lines of the block scan's tests."""
    base = json.loads(_sampler_line())
    reading = base["gpus"][0]
    taken = [
        _sampler_line(),
        _sampler_line(run=None, gpus=[], host={}),
        _sampler_line(gpus=_GONE, host=_GONE),
        _sampler_line(devices=[0, 1], node=2, v=1),
        _sampler_line(devices=None, watched=None),
        _sampler_line(gpus=[{**reading, "sm_active": 40.0, "tensor_active": 0, "dram_active": 12.5}]),
        _sampler_line(gpus=[{**reading, "throttle": ["x" * 64] * 32}]),
        _sampler_line(gpus=[reading] * MAX_SAMPLE_GPUS),
        b'{"t":3.0,"type":"gpu","run":null,"gpus":[]}\n',  # the tag not first
        _sampler_line(host={"rss": None, "cpu_percent": None}),
    ]
    refused = [
        _sampler_line(extra=1),  # a key pruning drops, at each level
        _sampler_line(gpus=[{**reading, "extra": 1}]),
        _sampler_line(host={"cpu_percent": 1.0, "other": 2}),
        _sampler_line(gpus=[{**reading, "throttle": None}]),  # pruning drops a throttle that is no list
        _sampler_line(gpus=[{**reading, "throttle": ["x" * 65]}]),  # or cuts it short
        _sampler_line(gpus=[{**reading, "throttle": ["w"] * 33}]),
        _sampler_line(gpus=[{**reading, "throttle": ["w", 7]}]),
        _sampler_line(gpus=None),
        _sampler_line(host=None),
        _sampler_line(gpus=[reading, None]),
        _sampler_line(gpus=[reading] * (MAX_SAMPLE_GPUS + 1)),
        _sampler_line(devices=list(range(MAX_SAMPLE_GPUS + 1))),
        _sampler_line(gpus=[{**reading, "name": "GPU-a:b"}]),  # a colon in a string
        _sampler_line().replace(b'"util":5,', b'"util":5,"util":6,'),  # a key twice, at each level
        _sampler_line().replace(b'"rss":', b'"rss":1,"rss":'),
        _sampler_line().replace(b'"watched":0,', b'"watched":0,"watched":1,'),
        _sampler_line(t="6"),  # the checks' refusals
        _sampler_line(t=_GONE),
        _sampler_line(gpus=[{**reading, "util": "high"}]),
        _sampler_line(watched=2000),
        _sampler_line(node=0),
        _sampler_line(type="batch"),
        _sampler_line().replace(b'"gpu_idle"', b'"\\ud800"'),  # a lone surrogate
        _sampler_line().rstrip(b"\n") + b"{}\n",  # two objects
    ]
    return (
        [(line, True) for line in taken]
        + [(line, False) for line in refused]
        + [(line, None) for line in _hostile_lines()]
    )


@pytest.mark.parametrize("line,taken", _lane_lines())
def test_the_lane_takes_the_samplers_lines_and_gives_what_pruning_gave(
    line: bytes, taken: bool | None
) -> None:
    sample = store.gpu_sample_of(line)
    assert taken is None or (sample is not None) == taken
    if sample is not None:
        assert json.dumps(_typed(sample)) == json.dumps(_typed(_old_sample(line)))
    assert json.dumps(_typed(store._gpu_sample(line, store.EventCheck()))) == json.dumps(
        _typed(_old_sample(line))
    )


def test_the_lane_takes_every_sample_of_the_recorded_sessions_but_a_null_throttle() -> None:
    """The sampler writes ``throttle: null`` where NVML gives no reasons: pruning drops it, so such a line
    goes the old way; every other sample of the sessions in tests/data is the lane's."""
    data = Path(__file__).parent / "data"
    lines = [
        line
        for path in sorted(data.glob("*/events.jsonl"))
        for line in path.read_bytes().splitlines(keepends=True)
        if line.startswith(store.GPU_LINE_PREFIX)
    ]
    assert len(lines) > 20
    for line in lines:
        taken = store.gpu_sample_of(line) is not None
        assert taken == (b'"throttle":null' not in line), line[:200]
