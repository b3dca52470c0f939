"""Hostile session folders, case by case: what ``benchtui run`` refuses is refused when loading, a line
nested too deep is one skipped line, lone surrogates come out replaced, and one bad folder never hides
the others, in the list or on the app's sessions screen.

Every folder is built here (FIFOs, links, sparse holes, hand-written session.json); a reader that could
hang runs in a fresh process with a timeout, so a hang fails the test instead of blocking it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.store.session import (
    MAX_EVENT_LINE_BYTES,
    MAX_SKIP_BYTES,
    SessionError,
    SessionFolder,
    iter_events,
    list_sessions,
    load_session,
)
from benchtui.core.wire.events import MAX_LINE_BYTES
from benchtui_runners import catalog
from sessionfactory import make_session
from test_fuzz_sessions import HANG_S, check_read, measured, read_all, readers

PLACEMENT = {"kind": "gpu", "gpu": {"name": "NVIDIA H100"}}


def session(root: Path, name: str = "good", **kw: Any) -> Path:
    """A small finished session as the engine writes it (with a placement: the list reads summary.json)."""
    return make_session(root, folder=f"20260101T0000{len(list(root.glob('*'))):02d}Z_{name}", **kw)


def edit_meta(path: Path, change: Any) -> None:
    meta = json.loads((path / "session.json").read_text())
    change(meta)
    (path / "session.json").write_text(json.dumps(meta))


def figures(path: Path) -> dict[str, Any]:
    return {
        rid: (run.figures()["mean_epoch_s"], str(run.status))
        for rid, run in load_session(path).model.runs.items()
    }


# -- item 7: the loader applies the bounds ``run`` applies ---------------------------------------
def _plan(**fields: Any) -> Any:
    return lambda meta: meta["plan"].update(fields)


REFUSED_PLANS = {
    "runs": (_plan(runs=100_000), "runs is 100,000"),
    "epochs": (_plan(epochs=10**6), "epochs is 1,000,000"),
    "a model 5,000 times": (_plan(models=["resnet50"] * 5000), "'resnet50' twice"),
    "a framework twice": (_plan(frameworks=["torch", "torch"]), "'torch' twice"),
    # Each count within its bound, the runs they make together not (4 x 21 x 1000 x 3 device counts).
    "runs in all": (
        _plan(
            frameworks=list(catalog.FRAMEWORKS),
            models=list(catalog.MODEL_ORDER),
            runs=1000,
            devices=4,
            scaling=True,
        ),
        "runs, more than",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_PLANS))
def test_a_plan_run_refuses_is_refused_when_loading(tmp_path: Path, case: str) -> None:
    """A 2 KB session.json asking for 100,000 runs (or a model 5,000 times) ran show for 44 s into a
    MemoryError: it is refused at once, with one line naming what is out of bounds."""
    path = session(tmp_path, runs=1, epochs=1, steps=2, meta_extra={"placement": PLACEMENT})
    edit_meta(path, REFUSED_PLANS[case][0])
    assert (path / "session.json").stat().st_size < 64 * 1024
    with pytest.raises(SessionError, match=REFUSED_PLANS[case][1]):
        load_session(path)
    read = measured("show", ["show", str(path)])
    check_read(read, case)
    assert read.rc == 2 and REFUSED_PLANS[case][1] in read.err
    listed = {info["name"]: info for info in list_sessions(tmp_path)}
    assert listed[path.name]["status"] != "unreadable"  # the list reads no plan's runs: it lists it


def test_a_plan_at_runs_bounds_loads(tmp_path: Path) -> None:
    path = session(tmp_path, runs=1, epochs=1, steps=2)
    edit_meta(path, _plan(runs=1000, epochs=10_000))
    loaded = load_session(path)
    assert len(loaded.model.runs) == 2 * 1000


# -- item 8: a line nested deeper than Python goes ----------------------------------------------
def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


NESTED_LINES = {
    "a bare value": lambda d: _nested(d),
    "a sample's field": lambda d: '{"type":"gpu","t":1.0,"run":null,"x":' + _nested(d) + "}",
    "a batch's field": lambda d: (
        '{"run":"001-torch-resnet50-1","type":"batch","epoch":1,"step":1,"seconds":0.5,"x":'
        + _nested(d)
        + "}"
    ),
    "an event's field": lambda d: '{"type":"note","t":1.0,"run":null,"x":' + _nested(d) + "}",
}


@pytest.mark.long
@pytest.mark.parametrize("where", list(NESTED_LINES))
@pytest.mark.parametrize("depth", [600, 100_000])
def test_a_line_nested_too_deep_is_one_skipped_line(tmp_path: Path, where: str, depth: int) -> None:
    """100,000 deep killed show, every export and compare with RecursionError. A line the parser or
    what walks its value after cannot take is one counted line; nothing else changes."""
    path = session(tmp_path, runs=1, epochs=2, steps=4, meta_extra={"placement": PLACEMENT})
    before = figures(path)
    lines = (path / "events.jsonl").read_bytes().splitlines(keepends=True)
    (path / "events.jsonl").write_bytes(
        b"".join([*lines[:3], NESTED_LINES[where](depth).encode() + b"\n", *lines[3:]])
    )
    loaded = load_session(path)
    assert figures(path) == before
    skipped = [w for w in loaded.warnings if "unreadable line" in w]
    if depth == 100_000:  # past the parser itself: always skipped and said
        assert skipped and "1 unreadable line(s)" in skipped[0] and "line 4" in skipped[0], loaded.warnings
    SessionFolder(path).gpu_samples()  # what the HTML report and the device check read
    out = tmp_path / "out"
    out.mkdir()
    for read in read_all(readers(path, path, out)).values():
        check_read(read, (where, depth))
        assert read.rc == 0, (read.reader, read.err)


# -- item 9, reading: lone surrogates come out replaced -----------------------------------------
def _surrogates(meta: dict[str, Any]) -> None:
    meta["name"] = "caf\udce9 \ud800"
    meta["host"]["hostname"] = "h\udcff"
    meta["plan"]["name"] = "plan \udfff"
    meta["failure"] = "module in /home/\udce9t\udce9/x.py"
    meta["placement"] = {**(meta.get("placement") or {}), "gpu": {"name": "GPU \ud83d"}}


def test_lone_surrogates_in_session_files_come_out_replaced(tmp_path: Path) -> None:
    """A folder name that was not UTF-8 reaches a file as ``\\udce9``: read back, it is U+FFFD, so no
    writer (export -o, a UTF-8 terminal) meets a string it cannot encode."""
    path = session(tmp_path, meta_extra={"placement": PLACEMENT})
    edit_meta(path, _surrogates)  # json.dumps writes them as \\ud... escapes: valid JSON
    summary = json.loads((path / "summary.json").read_text())
    for env, kind in zip(summary["frameworks"].values(), ("gpu\udc80", "cpu"), strict=True):
        env["device"]["type"] = kind  # two kinds: the list says "mixed: cpu/gpu..."
    (path / "summary.json").write_text(json.dumps(summary))
    # events.jsonl: a batch as a runner writes it, with a field of its own holding one.
    batch = '{"run":"001-torch-resnet50-1","type":"batch","epoch":1,"step":1,"seconds":0.5,"x":"\\udce9"}\n'
    with open(path / "events.jsonl", "a") as fh:
        fh.write(batch)
    loaded = load_session(path, keep_events=True)
    json.dumps(loaded.events, ensure_ascii=False).encode("utf-8")
    assert loaded.meta["name"] == "caf\ufffd \ufffd" and loaded.meta["host"]["hostname"] == "h\ufffd"
    assert loaded.plan.name == "plan \ufffd"
    json.dumps(loaded.meta, ensure_ascii=False).encode("utf-8")  # strict: raises on a surrogate
    (info,) = list_sessions(tmp_path)
    assert info["label"] == "caf\ufffd \ufffd" and info["device"] == "mixed: cpu/gpu\ufffd"
    json.dumps(info, ensure_ascii=False).encode("utf-8")
    out = tmp_path / "out"
    out.mkdir()
    for read in read_all(readers(path, path, out)).values():
        check_read(read, "surrogates")
        assert read.rc == 0, (read.reader, read.err)


# -- one bad folder never breaks the listing of the others ---------------------------------------
def _fifo(name: str) -> Any:
    return lambda path: ((path / name).unlink(), os.mkfifo(path / name))


def _hole(name: str) -> Any:
    return lambda path: os.truncate(path / name, 20 << 30)


def _text(name: str, text: str) -> Any:
    return lambda path: (path / name).write_text(text)


def _meta(**fields: Any) -> Any:
    return lambda path: edit_meta(path, lambda meta: meta.update(fields))


BAD_FOLDERS = {
    "session-fifo": _fifo("session.json"),
    "session-hole": _hole("session.json"),
    "session-folder": lambda path: ((path / "session.json").unlink(), (path / "session.json").mkdir()),
    "session-zero": lambda path: (
        (path / "session.json").unlink(),
        (path / "session.json").symlink_to("/dev/zero"),
    ),
    "session-deep": _text("session.json", _nested(100_000)),
    "session-digits": _text("session.json", '{"kind": "benchtui-session", "schema": ' + "9" * 5000 + "}"),
    "session-list": _text("session.json", "[]"),
    "plan-frameworks-number": lambda path: edit_meta(path, lambda meta: meta["plan"].update(frameworks=5)),
    "plan-models-number": lambda path: edit_meta(path, lambda meta: meta["plan"].update(models=5)),
    "plan-watch-text": lambda path: edit_meta(path, lambda meta: meta["plan"].update(watch="python x.py")),
    "placement-odd": _meta(placement={"gpu": ["x"], "kind": {"a": 1}}),
    "summary-fifo": _fifo("summary.json"),
    "summary-hole": _hole("summary.json"),
    "summary-list": _text("summary.json", '{"frameworks": [1, 2]}'),
    "events-fifo": _fifo("events.jsonl"),
}
#: Folders the list shows whole (their session.json is fine; the rest is read when the session is).
LISTED_WHOLE = {
    "plan-watch-text",
    "placement-odd",
    "summary-fifo",
    "summary-hole",
    "summary-list",
    "events-fifo",
}


def test_one_bad_folder_never_hides_the_others(tmp_path: Path) -> None:
    """summary.json as a FIFO hung ``benchtui sessions``; a 20 GB session.json, or a plan whose list of
    frameworks is a number, took the whole list down. Each bad folder is one line; the rest are listed."""
    root = tmp_path / "sessions"
    root.mkdir()
    session(root, "good", meta_extra={"placement": PLACEMENT})
    for name, damage in BAD_FOLDERS.items():
        damage(session(root, name, runs=1, epochs=1, steps=2, meta_extra={"placement": PLACEMENT}))
    read = measured("sessions", ["sessions", "--sessions-dir", str(root)])
    check_read(read, "list")
    assert read.rc == 0

    def row(name: str) -> str:
        (line,) = [line for line in read.out.splitlines() if f"Z_{name} " in line]
        return line

    assert "complete" in row("good")
    for name in BAD_FOLDERS:
        assert ("complete" if name in LISTED_WHOLE else "unreadable") in row(name), row(name)
    # The screen lists what the command lists, from the same function.
    screen = read_all({"sessions screen": [":", "screen", str(root)]})["sessions screen"]
    check_read(screen, "screen")
    listed = screen.out.splitlines()
    assert sum(line.startswith("unreadable ") for line in listed) == len(BAD_FOLDERS) - len(LISTED_WHOLE)


_APP = r"""
import asyncio, sys
from benchtui.app import make_app
from benchtui.screens.plan import GpuProbe
from benchtui.screens.sessions import SessionsScreen

async def main():
    app = make_app(None, sessions_dir=sys.argv[1], use_nvml=False, probe=GpuProbe((), "NVML unavailable: test"))
    shown = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_sessions()
        while not isinstance(app.screen, SessionsScreen):
            await pilot.pause(0.05)
        screen = app.screen
        while not screen.is_mounted or not screen.infos:  # mounted: the list is read
            await pilot.pause(0.05)
        for info in screen.infos:  # every row's summary, as the user moves down the list
            while screen.shown is None or screen.shown != screen.selected:
                await pilot.pause(0.05)
            shown.append(f"{info['status']} {info['name']}")
            await pilot.press("down")
    print("\n".join(shown))  # not inside the app: it takes stdout while it runs

asyncio.run(main())
"""


def test_the_sessions_screen_lists_and_summarises_beside_fifos(tmp_path: Path) -> None:
    """The app's sessions screen read summary.json on the UI thread: a FIFO froze the app for good."""
    root = tmp_path / "sessions"
    root.mkdir()
    session(root, "good", meta_extra={"placement": PLACEMENT})
    for name in ("summary-fifo", "events-fifo", "session-fifo"):
        BAD_FOLDERS[name](session(root, name, runs=1, epochs=1, steps=2, meta_extra={"placement": PLACEMENT}))
    import subprocess

    from support import ROOT

    proc = subprocess.run(
        [sys.executable, "-c", _APP, str(root)],
        capture_output=True,
        text=True,
        timeout=HANG_S * 6,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    shown = proc.stdout.splitlines()
    assert len(shown) == 4 and sum("unreadable" in line for line in shown) == 1, shown


# -- the bounds themselves ------------------------------------------------------------------------
def test_a_full_runner_line_with_the_parents_tag_is_read(tmp_path: Path) -> None:
    """A runner's line may be MAX_LINE_BYTES; the parent writes it with its run tag in front. Re-serialised
    (a runner that sent its own tag), \\u escapes double text of 3-byte characters: still read."""
    tagged = (
        b'{"run":"001-torch-resnet50-1",'
        + b'"type":"note","t":1.0,"text":"'
        + b"x" * (MAX_LINE_BYTES - 40)
        + b'"}\n'
    )
    escaped = (
        json.dumps({"type": "note", "t": 2.0, "run": None, "text": "\u20ac" * (MAX_LINE_BYTES // 3 - 20)})
        + "\n"
    )
    assert len(tagged) > MAX_LINE_BYTES and len(escaped) > 2 * (MAX_LINE_BYTES - 100)
    (tmp_path / "events.jsonl").write_bytes(tagged + escaped.encode() + b'{"type":"last","t":3.0}\n')
    warnings: list[str] = []
    assert [e["t"] for e in iter_events(tmp_path, warnings)] == [1.0, 2.0, 3.0] and warnings == []


def test_a_line_over_its_bound_is_one_skipped_line(tmp_path: Path) -> None:
    """Damage in the middle of a file (a line of 2 MiB and more, which no writer writes) costs that line."""
    (tmp_path / "events.jsonl").write_bytes(
        b'{"type":"first","t":1.0}\n' + b"[" * (MAX_EVENT_LINE_BYTES * 3) + b'\n{"type":"after","t":2.0}\n'
    )
    warnings: list[str] = []
    assert [e["type"] for e in iter_events(tmp_path, warnings)] == ["first", "after"]
    assert warnings == [
        "1 unreadable line(s) in events.jsonl were skipped (first, line 2: longer than 2 MiB, which no writer writes)"
    ]
    assert [e["type"] for e in SessionFolder(tmp_path).events([])] == ["first", "after"]


def test_a_hole_with_no_newline_ends_the_reading_with_a_warning(tmp_path: Path) -> None:
    """A 20 GB hole after the last line (sparse: no disk) is looked into only so far for a newline."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type":"first","t":1.0}\n')
    os.truncate(path, path.stat().st_size + (20 << 30))
    warnings: list[str] = []
    assert [e["type"] for e in iter_events(tmp_path, warnings)] == ["first"]
    assert warnings == [
        f"line 2 of events.jsonl runs on for more than {MAX_SKIP_BYTES >> 20} MiB without a newline: "
        "the file is damaged there and was read no further"
    ]


def test_a_session_folder_that_is_a_link_is_read(tmp_path: Path) -> None:
    """Links are refused for the files inside a session folder, not for the folder: a sessions folder
    moved to another disk and linked back reads as before."""
    path = session(tmp_path / "real")
    (tmp_path / "linked").symlink_to(path, target_is_directory=True)
    assert figures(tmp_path / "linked") == figures(path)


# -- what the model keeps: it must not grow with what a file adds to the lines it keeps ---------
def _dense_line(head: bytes, size: int, tail: bytes = b"]}") -> bytes:
    """One line of ``size`` bytes whose padding is the densest JSON (``{}`` a value: ~24x in objects)."""
    room = size - len(head) - len(b"{}\n") - len(tail)
    return head + b"{}," * (room // 3) + b" " * (room % 3) + b"{}" + tail + b"\n"


@pytest.mark.long
def test_gpu_samples_and_long_lines_a_file_pads_are_bounded(tmp_path: Path) -> None:
    """Ten GPU samples padded to the line bound took export html to 1 GB: a sample longer than a sampler
    writes is one skipped line, a sample's unknown fields are not kept, and long lines past a budget
    are skipped; every reader stays within the memory bound."""
    from benchtui.core.store.session import LONG_LINE_BYTES, LONG_LINES_BUDGET, MAX_GPU_LINE_BYTES

    path = session(tmp_path, runs=1, epochs=2, steps=4, meta_extra={"placement": PLACEMENT})
    before = figures(path)
    big_gpu = _dense_line(b'{"type":"gpu","t":1.0,"run":null,"pad":[', MAX_EVENT_LINE_BYTES)
    small_gpu = _dense_line(
        b'{"type":"gpu","t":1.5,"run":null,"gpus":[{"index":0,"junk":[', 60 << 10, b"]}]}"
    )
    long_note = _dense_line(b'{"type":"note","t":2.0,"run":null,"pad":[', 1 << 20)
    with open(path / "events.jsonl", "ab") as fh:
        fh.write(big_gpu * 10 + small_gpu * 3 + long_note * ((LONG_LINES_BUDGET >> 20) + 3))
    assert len(small_gpu) <= MAX_GPU_LINE_BYTES and len(long_note) > LONG_LINE_BYTES
    loaded = load_session(path)
    assert figures(path) == before
    [said] = [w for w in loaded.warnings if "unreadable line" in w]
    assert said.startswith("13 unreadable line(s)") and "a GPU sample of" in said, said  # 10 samples, 3 notes
    kept = [s for s in loaded.model.gpu_samples if s.get("t") == 1.5]
    assert len(kept) == 3 and kept[0]["gpus"] == [{"index": 0}]  # the padding was never kept
    assert all(s["gpus"] == [{"index": 0}] for s in SessionFolder(path).gpu_samples() if s["t"] == 1.5)
    out = tmp_path / "out"
    out.mkdir()
    for read in read_all(readers(path, path, out)).values():
        check_read(read, "padded lines")
        assert read.rc == 0, (read.reader, read.err)
