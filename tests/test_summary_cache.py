"""The summary cache (issue 35): a finished session's summary.json is read back instead of folding the events
while what it was folded from (events.jsonl's size and mtime, the code, in summary-cache.json beside it) still
holds. summary.json itself stays the summary and nothing else."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.store import session as store
from benchtui.core.store.session import SessionFolder, load_session
from sessionfactory import make_session

DATA = Path(__file__).parent / "data"


@pytest.fixture
def made(tmp_path: Path) -> Path:
    return make_session(tmp_path, name="cache", models=("resnet50",), runs=2, epochs=2, steps=12)


def _file(path: Path) -> dict[str, Any]:
    """summary.json, with its cache entry (summary-cache.json) under "cache" where there is one."""
    data: dict[str, Any] = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    assert "cache" not in data  # summary.json is the summary alone
    cache = path / "summary-cache.json"
    if cache.exists():
        data["cache"] = json.loads(cache.read_text(encoding="utf-8"))
    return data


def _write_cache(path: Path, entry: Any) -> None:
    (path / "summary-cache.json").write_text(json.dumps(entry))


def _cached(path: Path) -> dict[str, Any]:
    """Load and summarise once: the cache is written."""
    summary = load_session(path).summary()
    assert SessionFolder(path).cached_summary() == summary
    return summary


def test_a_loads_summary_is_cached_and_read_back_while_the_events_are_unchanged(made: Path) -> None:
    assert SessionFolder(made).cached_summary() is None  # written by the factory: no cache key yet
    before = (made / "summary.json").read_text(encoding="utf-8")
    summary = _cached(made)
    data = _file(made)
    st = os.stat(made / "events.jsonl")
    assert data["cache"]["events_size"] == st.st_size
    assert data["cache"]["events_mtime_ns"] == st.st_mtime_ns
    assert data["cache"]["code"] == store.summary_code()
    assert "summary" not in data["cache"]  # the writer's summary is the load's: not written twice
    # summary.json is left as it was, to the byte: the cache's entry is a file of its own.
    assert (made / "summary.json").read_text(encoding="utf-8") == before
    assert summary == {k: v for k, v in data.items() if k != "cache"}


def test_the_cached_summary_is_used_not_refolded(made: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = _cached(made)
    loaded = load_session(made)

    def refold() -> dict[str, Any]:
        raise AssertionError("the summary was computed again")

    monkeypatch.setattr(loaded.model, "summary", refold)
    assert loaded.summary() == summary


@pytest.mark.parametrize("change", ["size", "mtime"])
def test_a_changed_events_file_is_folded_again(made: Path, change: str) -> None:
    _cached(made)
    events = made / "events.jsonl"
    st = os.stat(events)
    if change == "size":  # a line appended, the mtime put back: the size alone says so
        with open(events, "a", encoding="utf-8") as fh:
            fh.write('{"type":"note","t":1.0,"run":null}\n')
        os.utime(events, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:  # the same bytes rewritten later (a copy over it)
        os.utime(events, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert SessionFolder(made).cached_summary() is None
    # The next load's summary is cached again, for the file as it is now.
    _cached(made)
    assert _file(made)["cache"]["events_mtime_ns"] == os.stat(events).st_mtime_ns


def test_other_code_makes_the_cache_stale(made: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _cached(made)
    monkeypatch.setattr(store, "summary_code", lambda: "0123456789abcdef")
    assert SessionFolder(made).cached_summary() is None


def test_the_code_hash_follows_the_folding_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """summary_code reads the model package's files: one byte more there is another hash."""
    core = tmp_path / "benchtui" / "core"
    for package in store._SUMMARY_PACKAGES:
        (core / package).mkdir(parents=True)
        (core / package / "a.py").write_text("x = 1\n")
    (core / "store" / "session.py").write_text("")
    monkeypatch.setattr(store, "__file__", str(core / "store" / "session.py"))
    store.summary_code.cache_clear()
    try:
        first = store.summary_code()
        (core / "model" / "a.py").write_text("x = 2\n")
        store.summary_code.cache_clear()
        assert store.summary_code() != first
    finally:
        store.summary_code.cache_clear()


@pytest.mark.parametrize(
    "damage", ["no key", "not a mapping", "bad size", "running", "warnings not text", "summary gone"]
)
def test_a_summary_json_without_a_usable_cache_is_folded(made: Path, damage: str) -> None:
    _cached(made)
    data = _file(made)
    if damage == "no key":
        del data["cache"]
    elif damage == "not a mapping":
        data["cache"] = [1, 2]
    elif damage == "bad size":
        data["cache"]["events_size"] = "12"
    elif damage == "warnings not text":
        data["cache"]["warnings"] = [1]
    elif damage == "summary gone":
        data["cache"]["summary"] = None
    if damage == "running":  # a session still being written is never read from a cache
        meta = json.loads((made / "session.json").read_text())
        meta["status"] = "running"
        (made / "session.json").write_text(json.dumps(meta))
    elif damage == "no key":
        (made / "summary-cache.json").unlink()
    else:
        _write_cache(made, data["cache"])
    assert SessionFolder(made).cached_summary() is None
    assert SessionFolder(made).cached_warnings() is None


def test_a_summary_that_differs_from_the_load_is_left_as_written(made: Path) -> None:
    """The writer's summary (its live model's) stays; the load's goes under the key and is what is read."""
    data = _file(made)
    data.pop("cache", None)
    data["malformed_lines"] = 99  # what the live model saw and the file does not hold
    written = json.dumps(data, indent=2) + "\n"
    (made / "summary.json").write_text(written)
    summary = _cached(made)
    after = _file(made)
    assert summary["malformed_lines"] == 0
    assert after["malformed_lines"] == 99
    assert after["cache"]["summary"] == summary


def test_the_loads_warnings_are_kept_with_it(made: Path) -> None:
    lines = (made / "events.jsonl").read_text().splitlines(keepends=True)
    (made / "events.jsonl").write_text("".join(lines[:5] + ["not json\n"] + lines[5:]))
    loaded = load_session(made)
    assert loaded.warnings and "unreadable line" in loaded.warnings[0]
    loaded.summary()
    assert SessionFolder(made).cached_warnings() == loaded.warnings


def test_a_folder_that_cannot_be_written_is_folded_and_left_alone(
    made: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(path: Path, data: dict[str, Any]) -> None:
        raise OSError(30, "Read-only file system")

    before = (made / "summary.json").read_bytes()
    monkeypatch.setattr(store, "_write_json_atomic", read_only)
    summary = load_session(made).summary()
    assert summary["rows"]
    assert (made / "summary.json").read_bytes() == before
    assert SessionFolder(made).cached_summary() is None


def test_an_unfinished_session_gets_no_cache(made: Path) -> None:
    meta = json.loads((made / "session.json").read_text())
    meta["status"] = "running"
    meta.pop("writer", None)
    (made / "session.json").write_text(json.dumps(meta))
    before = (made / "summary.json").read_bytes()
    load_session(made).summary()
    assert (made / "summary.json").read_bytes() == before


def test_events_changed_during_the_load_are_not_cached(made: Path) -> None:
    loaded = load_session(made)
    with open(made / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"type":"note","t":1.0,"run":null}\n')
    loaded.summary()
    assert "cache" not in _file(made)


def test_an_older_session_loads_as_before_and_its_show_is_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session from before the cache (no key): folded as ever; once cached, show says the same bytes."""
    from benchtui.cli import main

    path = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny-cpu-session", path)
    assert "cache" not in _file(path)
    assert main(["show", str(path)]) == 0
    first = capsys.readouterr().out
    summary = load_session(path).summary()
    assert _file(path)["cache"]["code"] == store.summary_code()
    assert SessionFolder(path).cached_summary() == summary
    assert main(["show", str(path)]) == 0
    assert capsys.readouterr().out == first


def _written(tmp_path: Path, status: str) -> Path:
    """A session as the engine writes it: a writer, a model folding what it appends, finish with its summary."""
    from benchtui.core.model.session_model import SessionModel
    from benchtui.core.plan.plan import Plan
    from benchtui.core.store.session import SessionWriter

    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=8,
        batch_sizes={"resnet50": 8},
        epochs=1,
        runs=2,
        device="cpu",
    ).validate()
    writer = SessionWriter.create(plan, tmp_path)
    model = SessionModel(plan)
    for run in model.runs:
        events: list[dict[str, Any]] = [
            {"type": "run_start", "t": 0.0, "run": run},
            *(
                {"type": "batch", "t": 0.1 * s, "run": run, "epoch": 1, "step": s, "seconds": 0.1}
                for s in range(1, 9)
            ),
            {"type": "epoch", "t": 1.0, "run": run, "epoch": 1, "seconds": 0.8, "samples": 64},
            {"type": "done", "t": 1.1, "run": run},
            {"type": "run_end", "t": 1.2, "run": run, "status": "ok"},
        ]
        for event in events:
            writer.append(event)
            model.apply(event)
    writer.finish(status, model.summary())
    return writer.path


def test_a_complete_session_is_written_with_its_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _written(tmp_path, "complete")
    cache = _file(path)["cache"]
    st = os.stat(path / "events.jsonl")
    assert (cache["events_size"], cache["events_mtime_ns"]) == (st.st_size, st.st_mtime_ns)
    assert "warnings" not in cache and "summary" not in cache
    loaded = load_session(path)
    fresh = json.loads(json.dumps(loaded.model.summary()))
    assert SessionFolder(path).cached_summary() == fresh  # what a load would compute, read instead
    assert SessionFolder(path).cached_warnings() is None  # the writer has not loaded the file
    monkeypatch.setattr(loaded.model, "summary", lambda: pytest.fail("computed again"))
    assert loaded.summary() == fresh


@pytest.mark.parametrize("status", ["interrupted", "failed", "incomplete"])
def test_a_session_that_did_not_complete_is_written_without_one(tmp_path: Path, status: str) -> None:
    """Its live model may hold what the file's fold settles otherwise (a cut run): a load caches it."""
    path = _written(tmp_path, status)
    assert "cache" not in _file(path)
    load_session(path).summary()
    assert SessionFolder(path).cached_summary() is not None


def test_a_summary_json_past_the_cache_s_bound_is_folded_and_left_alone(
    made: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A summary.json larger than a real one (the densest JSON at the file's bound) is not parsed for a cache."""
    _cached(made)
    monkeypatch.setattr(store, "MAX_CACHED_SUMMARY_BYTES", 100)  # the made session's is a few KB
    assert SessionFolder(made).cached_summary() is None
    (made / "summary-cache.json").unlink()
    load_session(made).summary()
    assert "cache" not in _file(made)


@pytest.mark.parametrize("kind", ["fifo", "directory", "oversized", "not json"])
def test_a_hostile_cache_entry_is_folded_past_never_hung_on(made: Path, kind: str) -> None:
    """summary-cache.json is read as a stranger's file: a FIFO (which would block a plain open), a folder, a file
    past the bound or one that is no JSON give no cache, and the session is folded as before."""
    _cached(made)
    entry = made / "summary-cache.json"
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "directory":
        entry.mkdir()
    elif kind == "oversized":
        entry.write_text(" " * (store.MAX_CACHED_SUMMARY_BYTES + 1) + "{}")
    else:
        entry.write_text("{not json")
    assert SessionFolder(made).cached_summary() is None
    assert load_session(made).summary()["rows"]
