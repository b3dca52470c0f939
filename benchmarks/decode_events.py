"""Decoding and checking a big session's lines, stage by stage, with each candidate decoder (issue 35).

    .venv/bin/python benchmarks/decode_events.py [--events 1000000] [--dir DIR] [--lines N] [--repeat 3]
        [--old PATH]

Builds (or reuses, with ``--dir``: a folder holding a ``*_bench-1m`` session, as
benchmarks/load_session.py builds) a study-shaped session and times, on its first ``--lines`` lines:

- read: the lines of events.jsonl as bytes (``event_lines``), nothing else;
- decode: one JSON value a line, for stdlib json (what today's parent runs: ``loads_strict``, and the
  file reader's ``raw_decode`` on text), orjson, msgspec untyped, msgspec typed (a ``Struct`` per batch
  line with ``Meta`` limits derived from ``benchtui_runners.wire``, converted to the dict the fold reads);
- decode + validate: what each decoder needs to give exactly what today gives (the guards that send a
  line it cannot vouch for to the stdlib path, then ``check_event``); and the load's batch lane
  (``batch_of``: a batch line straight into the wire's Struct, every other line as the file reader);
- ``parse_line`` as it is now in this checkout, and (``--old``: a checkout of the code before issue 35,
  e.g. a ``git worktree`` of c10ec9b) as it was, side by side in this one process;
- the file reader (``iter_events``: GPU samples held back, only the newest parsed) of both, each in a
  process of its own, on a file of those lines; and this checkout's as the load reads it (``batches``).

Prints M lines/s of CPU time (best of ``--repeat``, and the spread: worst over best), each ratio against today's stdlib path, and the
load average. Asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners"), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from benchtui.core.store.session import event_lines  # noqa: E402
from benchtui.core.wire import events  # noqa: E402
from benchtui.core.wire.events import Malformed, check_event, loads_strict  # noqa: E402
from benchtui_runners import wire  # noqa: E402


def lines_of(path: Path, most: int) -> list[bytes]:
    out: list[bytes] = []
    with open(path, "rb") as fh:
        for raw in event_lines(fh):
            out.append(raw)
            if len(out) >= most:
                break
    return out


def timed(fn: Callable[[], int], repeat: int) -> tuple[float, float, int]:
    """Best and worst CPU seconds of ``repeat`` runs of ``fn``, and what it counted. CPU time, not wall:
    on a shared machine the wall clock counts other processes' turns (the load average says how many)."""
    times = []
    n = 0
    for _ in range(repeat):
        t = time.process_time()
        n = fn()
        times.append(time.process_time() - t)
    return min(times), max(times), n


# -- the candidates ----------------------------------------------------------------------------------


def stdlib_strict(lines: list[bytes]) -> int:
    """Today's parse_line decode: json.loads with the hooks (no NaN, no key twice, finite floats)."""
    n = 0
    for raw in lines:
        try:
            loads_strict(raw.decode("utf-8"))
            n += 1
        except Malformed:
            pass
    return n


_RAW = json.JSONDecoder().raw_decode


def stdlib_raw(lines: list[bytes]) -> int:
    """Today's file reader's decode: raw_decode on text (no hooks; its slow path checks the rest)."""
    n = 0
    for raw in lines:
        try:
            _RAW(raw.decode("utf-8"))
            n += 1
        except ValueError:
            pass
    return n


def stdlib_file(lines: list[bytes]) -> int:
    """Today's file reader: raw_decode, plain_batch inline, anything else loads_strict + check_event."""
    n = 0
    for raw in lines:
        text = raw.decode("utf-8")
        parsed, end = _RAW(text)
        if type(parsed) is dict and parsed.get("type") == "batch" and "\\u" not in text:
            if events.plain_batch(parsed):
                n += 1
                continue
        try:
            check_event(loads_strict(text))
            n += 1
        except Malformed:
            pass
    return n


def counting(
    decode: Callable[[bytes], Any], bad: type[Exception] = ValueError
) -> Callable[[list[bytes]], int]:
    """A loop over the lines through ``decode``: how many it took (a line raising ``bad`` is not counted)."""

    def run(lines: list[bytes]) -> int:
        n = 0
        for raw in lines:
            try:
                decode(raw)
                n += 1
            except bad:
                pass
        return n

    return run


def parse_line_of(module: Any) -> Callable[[list[bytes]], int]:
    return counting(module.parse_line, module.Malformed)


def decode_only(loads: Callable[[bytes], Any]) -> Callable[[list[bytes]], int]:
    return counting(loads)


def guarded(loads: Callable[[bytes], Any]) -> Callable[[list[bytes]], int]:
    """A fast decoder, trusted only where it gives what json gives (ASCII, no escape, a flat object with
    no key twice: as many colons as keys); anything else through today's strict path; then check_event."""

    def run(lines: list[bytes]) -> int:
        n = 0
        for raw in lines:
            try:
                event = None
                if raw.isascii() and b"\\u" not in raw and raw.count(b"[") < 64:
                    try:
                        value = loads(raw)
                    except ValueError:
                        value = None
                    if type(value) is dict and raw.count(b":") == len(value):
                        event = value
                if event is None:
                    event = loads_strict(raw.decode("utf-8"))
                    if not isinstance(event, dict):
                        raise Malformed("not an object")
                check_event(event)
                n += 1
            except Malformed:
                pass
        return n

    return run


def typed_msgspec() -> tuple[Callable[[list[bytes]], int], Callable[[list[bytes]], int]]:
    """msgspec typed: a Struct for the batch line (Meta limits from wire.py), converted to a dict."""
    import msgspec

    def meta(limit: Any) -> Any:
        if isinstance(limit, wire.Int):
            return msgspec.Meta(ge=limit.lo, le=limit.hi)
        if isinstance(limit, wire.Num):
            return (
                msgspec.Meta(gt=limit.lo, le=limit.hi)
                if limit.above
                else msgspec.Meta(ge=limit.lo, le=limit.hi)
            )
        if isinstance(limit, wire.Text):
            return msgspec.Meta(max_length=limit.most)
        return None

    py = {int: int, float: float, str: str}
    ns: dict[str, Any] = {}
    for name, f in {**wire.common_fields(), **wire.fields(wire.BatchEvent)}.items():
        if name == "type":
            continue
        base = py.get(f.type, Any)
        m = meta(f.limit)
        ns[name] = Annotated[base, m] if m is not None else base
    ns_defaults = {k: msgspec.UNSET for k in ns}
    annotations = {k: v | msgspec.UnsetType for k, v in ns.items()}
    Batch = type(
        "Batch",
        (msgspec.Struct,),
        {"__annotations__": annotations, **ns_defaults},
        tag_field="type",
        tag="batch",
        forbid_unknown_fields=True,
    )
    dec = msgspec.json.Decoder(Batch)
    untyped = msgspec.json.Decoder()
    to_builtins = msgspec.to_builtins

    def decode(lines: list[bytes]) -> int:
        n = 0
        for raw in lines:
            try:
                to_builtins(dec.decode(raw))
            except msgspec.ValidationError:
                untyped.decode(raw)
            n += 1
        return n

    def validate(lines: list[bytes]) -> int:
        n = 0
        for raw in lines:
            try:
                event = None
                if raw.isascii() and b"\\u" not in raw:
                    try:
                        event = to_builtins(dec.decode(raw))
                        if raw.count(b":") != len(event) or type(event.get("seconds")) is not float:
                            event = None
                    except msgspec.ValidationError:
                        event = None
                if event is None:
                    event = loads_strict(raw.decode("utf-8"))
                    if not isinstance(event, dict):
                        raise Malformed("not an object")
                    check_event(event)
                n += 1
            except Malformed:
                pass
        return n

    return decode, validate


def load_old(path: Path) -> Any:
    """The wire module of another checkout (``--old``), loaded beside this one's."""
    for sub in ("runners", "tui"):
        sys.path.insert(0, str(path / sub))
    saved = {
        k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith(("benchtui", "benchtui_runners"))
    }
    try:
        spec = importlib.util.spec_from_file_location(
            "old_events", path / "tui/benchtui/core/wire/events.py", submodule_search_locations=None
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for k in [k for k in sys.modules if k.startswith(("benchtui", "benchtui_runners"))]:
            del sys.modules[k]
        sys.modules.update(saved)
        del sys.path[:2]


_READER = """
import sys, time
sys.path[:0] = [sys.argv[1] + "/tui", sys.argv[1] + "/runners"]
from pathlib import Path
from benchtui.core.store.session import iter_events
import inspect
# sys.argv[4] == "1": as the load reads (batch lines as the wire's Structs), where the checkout can.
lane = {"batches": True} if sys.argv[4] == "1" and "batches" in inspect.signature(iter_events).parameters else {}
best, n = 1e9, 0
for _ in range(int(sys.argv[3])):
    t = time.process_time()
    n = sum(len(e) if type(e) is list else 1 for e in iter_events(Path(sys.argv[2]), [], **lane))
    best = min(best, time.process_time() - t)
print(best, n)
"""


def file_reader(checkout: Path, folder: Path, repeat: int, lane: bool = False) -> tuple[float, int]:
    """Best CPU seconds of ``iter_events`` (the file reader, GPU samples included) of ``checkout``'s code on
    ``folder``'s events.jsonl, in a process of its own (two versions of the package cannot share one);
    ``lane``: as the load reads it (its batch lines as the wire's Structs)."""
    out = subprocess.run(
        [sys.executable, "-c", _READER, str(checkout), str(folder), str(repeat), "1" if lane else "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), int(out[1])


def session_file(args: argparse.Namespace, tmp: str) -> Path:
    root = args.dir or Path(tmp)
    existing = sorted(root.glob("*_bench-1m"))
    if existing:
        return existing[0] / "events.jsonl"
    from load_session import build

    return build(root, args.events) / "events.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=int, default=1_000_000, help="the session to build (without --dir's)"
    )
    parser.add_argument("--dir", type=Path, help="a folder with a *_bench-1m session (built there if none)")
    parser.add_argument("--lines", type=int, default=300_000, help="lines timed (the first of the file)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--old", type=Path, help="a checkout of the code before issue 35, timed beside")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = session_file(args, tmp)
        t = time.perf_counter()
        lines = lines_of(path, args.lines)
        read = time.perf_counter() - t
    n = len(lines)
    batches = sum(1 for raw in lines if b'"type":"batch"' in raw)
    print(
        f"{path.parent.name}: {n:,} lines timed ({batches / n:.0%} batch lines); read {n / read / 1e6:.2f} M lines/s"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")

    candidates: list[tuple[str, Callable[[list[bytes]], int]]] = []

    def read_only(ls: list[bytes]) -> int:
        with open(path, "rb") as fh:
            return sum(1 for _, _raw in zip(range(len(ls)), event_lines(fh), strict=False))

    candidates.append(("read: event_lines (bytes)", read_only))
    candidates.append(("decode: stdlib loads_strict (parse_line's)", stdlib_strict))
    candidates.append(("decode: stdlib raw_decode (file reader's)", stdlib_raw))
    try:
        import orjson

        candidates.append(("decode: orjson", decode_only(orjson.loads)))
    except ImportError:
        print("orjson: not installed")
    try:
        import msgspec

        candidates.append(("decode: msgspec untyped", decode_only(msgspec.json.Decoder().decode)))
        typed_decode, typed_validate = typed_msgspec()
        candidates.append(("decode: msgspec typed Struct -> dict", typed_decode))
    except ImportError:
        msgspec = None  # type: ignore[assignment]
        print("msgspec: not installed")
    candidates.append(("decode+validate: stdlib, today's file reader", stdlib_file))
    if "orjson" in sys.modules:
        candidates.append(
            ("decode+validate: orjson + guards + check_event", guarded(sys.modules["orjson"].loads))
        )
    if msgspec is not None:
        candidates.append(
            ("decode+validate: msgspec untyped + guards", guarded(msgspec.json.Decoder().decode))
        )
        candidates.append(("decode+validate: msgspec typed + guards", typed_validate))
    if hasattr(events, "fast_event"):
        fast_event = events.fast_event

        def file_reader_fast(ls: list[bytes]) -> int:
            """What the file reader gets from ``fast_event`` (its exact path for the lines it returns None)."""
            n = 0
            for raw in ls:
                try:
                    event = fast_event(raw)
                    if event is None:
                        event = check_event(loads_strict(raw.decode("utf-8")))
                    n += 1
                except Malformed:
                    pass
            return n

        candidates.append(("decode+validate: fast_event, then the exact path", file_reader_fast))
    if hasattr(events, "batch_of"):
        batch_of = events.batch_of

        def load_lane(ls: list[bytes]) -> int:
            """What the load gets: a batch line as the wire's Struct (``batch_of``), else as the file reader."""
            rest = [raw for raw in ls if batch_of(raw) is None]
            return len(ls) - len(rest) + file_reader_fast(rest)

        candidates.append(("decode+validate: batch_of, else fast_event (load)", load_lane))
    if args.old:
        candidates.append(("parse_line: before (--old)", parse_line_of(load_old(args.old))))
    candidates.append(("parse_line: this checkout", parse_line_of(events)))
    if hasattr(events, "parse_lines"):

        def batch(ls: list[bytes]) -> int:
            return sum(1 for e in events.parse_lines(ls) if not isinstance(e, Malformed))

        candidates.append(("parse_lines: this checkout (batch)", batch))

    results: dict[str, tuple[float, float]] = {}
    for name, fn in candidates:
        best, worst, _count = timed(lambda fn=fn: fn(lines), args.repeat)
        results[name] = (best, worst)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "events.jsonl").write_bytes(b"".join(lines))
        for name, checkout, lane in (
            ("file reader: iter_events before (--old)", args.old, False),
            ("file reader: iter_events now", ROOT, False),
            ("file reader: iter_events now, the load's batch lane", ROOT, True),
        ):
            if checkout is not None:
                times = [file_reader(checkout, Path(tmp), 1, lane)[0] for _ in range(args.repeat)]
                results[name] = (min(times), max(times))
    base = {
        "read": results["read: event_lines (bytes)"][0],
        "decode": results["decode: stdlib loads_strict (parse_line's)"][0],
        "decode+validate": results["decode+validate: stdlib, today's file reader"][0],
        "parse_line": results.get("parse_line: before (--old)", results["parse_line: this checkout"])[0],
        "parse_lines": results.get("parse_line: before (--old)", results["parse_line: this checkout"])[0],
        "file reader": results.get(
            "file reader: iter_events before (--old)", results["file reader: iter_events now"]
        )[0],
    }
    print(f"{'stage: candidate':52} {'M lines/s':>10} {'spread':>8} {'× today':>8}")
    for name, (best, worst) in results.items():
        stage = name.split(":")[0]
        ratio = base[stage] / best
        spread = (worst - best) / best
        print(f"{name:52} {n / best / 1e6:10.2f} {spread:7.0%} {ratio:8.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
