"""The pass over every GPU sample (``SessionFolder.gpu_samples``) and the html's drawing of them run with
the cyclic garbage collector paused (issue 35: a third of that pass's time on a session of a million
events), and leave it as they found it, whatever happens inside."""

from __future__ import annotations

import gc
import io
import json
from pathlib import Path

import pytest

from benchtui.core.reporting import htmlreport
from benchtui.core.store import session as store


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
    prune = store.prune_gpu_sample

    def watching(event):
        during.append(gc.isenabled())
        return prune(event)

    monkeypatch.setattr(store, "prune_gpu_sample", watching)
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
