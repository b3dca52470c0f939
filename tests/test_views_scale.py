"""The views' light load (issue 35, ``reporting.light``): where a finished session's summary cache holds,
show, the exports and compare fold every event but the batch lines of a running run, and every output is
the full load's, byte for byte. A stale cache (events appended, another mtime, other code) is never used."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchtui.cli import main
from benchtui.core.reporting import light
from benchtui.core.reporting.model import build_report
from benchtui.core.store import session as store
from benchtui.core.store.session import LoadedSession, load_session
from sessionfactory import make_session

DATA = Path(__file__).parent / "data"

#: The views a light load serves, and the two it never does (they write each run's batch times).
VIEWS = ("md", "csv", "bencher", "gab-throughput", "gab-step-time", "json", "html")


def _shapes(root: Path) -> dict[str, Path]:
    """Sessions of several shapes: a study with a failed run, a sweep, inference, a generate plan, two
    nodes, data parallel, an interrupted session, and the two recorded ones under tests/data."""
    made = {
        "study": make_session(
            root,
            name="study",
            models=("resnet50", "densenet121"),
            runs=2,
            fail={("tensorflow", "densenet121", 1): {"kind": "oom", "message": "OOM", "epoch": 2}},
            folder="study",
        ),
        "sweep": make_session(
            root,
            name="sweep",
            models=("resnet50_v1_5",),
            sweep={"batch": ["4", "8"], "channels-last": ["off", "on"]},
            batch_size=8,
            runs=2,
            folder="sweep",
        ),
        "infer": make_session(
            root,
            name="infer",
            frameworks=("torch", "tensorflow", "keras-jax"),
            gpu=False,
            task="inference",
            timing="step",
            runs=2,
            epochs=2,
            steps=5,
            batch_size=4,
            image_size=64,
            folder="infer",
        ),
        "generate": make_session(
            root,
            name="generate",
            models=("gpt2_mini",),
            runs=2,
            epochs=2,
            steps=3,
            batch_size=4,
            timing="step",
            generate={"prompt_len": 16, "new_tokens": 6},
            folder="generate",
        ),
        "nodes": make_session(
            root, name="nodes", nodes=2, devices=2, node_speed={1: 1.25}, runs=2, folder="nodes"
        ),
        "scaling": make_session(root, name="scaling", devices=4, scaling=True, runs=2, folder="scaling"),
        "one-epoch": make_session(root, name="one", epochs=1, runs=2, folder="one-epoch"),
        "interrupted": _interrupted(root),
    }
    for name in ("tiny-cpu-session", "gpu-session"):
        shutil.copytree(DATA / name, root / name)
        made[name] = root / name
    return made


def _interrupted(root: Path) -> Path:
    """A finished session whose last run lost its end (and a batch line cut in two): its runs show as
    interrupted and the load's warnings say so, which the cache holds."""
    path = make_session(root, name="cut", runs=2, folder="interrupted")
    events = path / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    last = [i for i, line in enumerate(lines) if b'"type":"run_end"' in line][-1]
    batch = next(i for i, line in enumerate(lines) if b'"type":"batch"' in line)
    lines[batch] = lines[batch][:40] + b"\n"  # not JSON: one skipped line
    events.write_bytes(b"".join(lines[:last] + lines[last + 1 :]))
    return path


def _cache(path: Path) -> None:
    """The summary cache a load writes (as the sessions screen and a first view do); summary.json first
    where a recorded session has none (as its writer writes it)."""
    if not (path / "summary.json").exists():
        (path / "summary.json").write_text(json.dumps(load_session(path).model.summary()), encoding="utf-8")
    load_session(path).summary()
    assert store.SessionFolder(path).cached_warnings() is not None


def _outputs(path: Path, other: Path, capsys: pytest.CaptureFixture[str], tmp: Path) -> dict[str, str]:
    """Every view's stdout, stderr and file of ``path`` (compare against ``other`` and itself)."""
    out: dict[str, str] = {}

    def run(key: str, argv: list[str]) -> None:
        capsys.readouterr()
        code = main(argv)
        got = capsys.readouterr()
        out[key] = f"{code}\n{got.out}\n--\n{got.err}".replace(str(tmp), "<TMP>")

    run("show", ["show", str(path)])
    for fmt in VIEWS:
        target = tmp / f"x.{fmt}"
        run(fmt, ["export", str(path), "--format", fmt, "-o", str(target)])
        out[f"{fmt} file"] = target.read_text(encoding="utf-8").replace(str(path), "<SESSION>")
        target.unlink()
    run("csv stdout", ["export", str(path), "--format", "csv"])
    run("compare", ["compare", str(path), str(other)])
    run("compare back", ["compare", str(other), str(path)])
    run("compare self", ["compare", str(path), str(path)])
    return out


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    found = _shapes(tmp_path_factory.mktemp("shapes"))
    for path in found.values():
        _cache(path)
    return found


@pytest.mark.parametrize(
    "name",
    [
        "study",
        "sweep",
        "infer",
        "generate",
        "nodes",
        "scaling",
        "one-epoch",
        "interrupted",
        "tiny-cpu-session",
        "gpu-session",
    ],
)
def test_the_light_load_gives_every_output_of_the_full_load(
    name: str,
    shapes: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, other = shapes[name], shapes["study" if name != "study" else "sweep"]
    stamp = store.SessionFolder(path).events_stamp()
    monkeypatch.setattr(light, "ENABLED", True)
    lit = _outputs(path, other, capsys, tmp_path)
    monkeypatch.setattr(light, "ENABLED", False)
    whole = _outputs(path, other, capsys, tmp_path)
    assert lit == whole
    assert store.SessionFolder(path).events_stamp() == stamp  # no view wrote into the session's events


@pytest.mark.parametrize(
    "name", ["study", "sweep", "infer", "generate", "scaling", "interrupted", "gpu-session"]
)
def test_the_light_load_holds_the_batch_lines_back_and_the_report_needs_none(
    name: str, shapes: dict[str, Path]
) -> None:
    """The light path is the one taken (not the full load's by a fallback): its runs' batch lines were held
    back and the report without batches is built from it; with batches it asks for the full load."""
    loaded = light.light_load(shapes[name])
    assert loaded is not None and light.is_light(loaded)
    held = [r for r in loaded.model.runs.values() if r.__dict__.get("_held_batches")]
    assert held, "no batch line was held back"
    whole = load_session(shapes[name])
    assert _folded(loaded) == _folded(whole)
    for run_id, run in loaded.model.runs.items():
        full_run = whole.model.runs[run_id]
        assert (run.status, run.reason, run.epoch_times, run.phases, run.other_cpu, run.per_gpu()) == (
            full_run.status,
            full_run.reason,
            full_run.epoch_times,
            full_run.phases,
            full_run.other_cpu,
            full_run.per_gpu(),
        )
    build_report(loaded, telemetry=False, batches=False)
    with pytest.raises(light.NeedsBatches):
        build_report(loaded, telemetry=False, batches=True)
    rid = held[0].spec.run_id
    assert light.full(loaded).model.runs[rid].batch_seconds == whole.model.runs[rid].batch_seconds


def _folded(loaded: LoadedSession) -> dict[str, Any]:
    """What a load folded, less what a light load leaves out: each run's every field but its batch fields (a
    node's share whole), the model's samples, choices and probes; the warnings."""
    runs = {
        run_id: {k: v for k, v in vars(run).items() if k not in light.BATCH_FIELDS and not k.startswith("_")}
        for run_id, run in loaded.model.runs.items()
    }
    model = {
        k: v
        for k, v in vars(loaded.model).items()
        if k not in ("runs", "events", "malformed", "unknown_runs", "_handlers")
    }
    return {"runs": runs, "model": model, "warnings": loaded.warnings, "meta": loaded.meta}


def _copy(path: Path, tmp: Path) -> Path:
    target = tmp / path.name
    shutil.copytree(path, target)
    os.utime(target / "events.jsonl", ns=(0, store.SessionFolder(path).events_stamp()[1]))  # type: ignore[index]
    return target


def test_a_stale_cache_is_never_used(
    shapes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = _copy(shapes["study"], tmp_path / "fresh")
    assert light.light_load(fresh) is not None

    appended = _copy(shapes["study"], tmp_path / "appended")
    with open(appended / "events.jsonl", "ab") as fh:
        fh.write(b'{"type":"session_note","t":1}\n')
    assert light.light_load(appended) is None

    touched = _copy(shapes["study"], tmp_path / "touched")
    os.utime(touched / "events.jsonl", ns=(0, 1_000_000_000))
    assert light.light_load(touched) is None

    edited = _copy(shapes["study"], tmp_path / "edited")
    meta = json.loads((edited / "session.json").read_text())
    meta["name"] = 5  # the wrong type: a warning the cache did not hold
    (edited / "session.json").write_text(json.dumps(meta))
    assert light.light_load(edited) is None

    monkeypatch.setattr(store, "summary_code", lambda: "other code")
    assert light.light_load(fresh) is None


def test_a_run_that_ended_before_its_held_batches_goes_to_the_full_load(
    shapes: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch line after its run's end sets it running again (then interrupted): never held back, and
    a run with held lines whose later batch must be folded sends the view to the full load."""
    path = _copy(shapes["study"], tmp_path / "late")
    events = path / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if b'"type":"run_end"' in line)
    run = json.loads(lines[end])["run"]
    batch = [line for line in lines[:end] if b'"type":"batch"' in line and run.encode() in line][-1]
    lines.insert(end + 1, batch)
    events.write_bytes(b"".join(lines))
    store.SessionFolder(path).summary_cache_path.unlink()
    _cache(path)
    assert light.light_load(path) is None
    monkeypatch.setattr(light, "ENABLED", True)
    capsys.readouterr()
    main(["show", str(path)])
    lit = capsys.readouterr()
    monkeypatch.setattr(light, "ENABLED", False)
    main(["show", str(path)])
    assert capsys.readouterr() == lit


@pytest.mark.parametrize(
    "extra",
    [
        b',"type":"error","kind":"exception","message":"a second type"}',
        b',"ty\\u0070e":"error","kind":"exception","message":"an escaped type"}',
        b',"node":1}',
        b',"run":"{first}"}',  # a run that has ended: a batch sets it running, then the load says interrupted
        b',"message":"a \\"type\\":\\"error\\" in a string"}',
    ],
)
def test_a_line_that_only_begins_as_a_batch_is_folded_as_the_load_folds_it(
    extra: bytes,
    shapes: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch line's beginning with another type, run or node key after it, or an escape: never held back
    (whatever the decoder makes of it, the light load's outputs are the full load's)."""
    path = _copy(shapes["study"], tmp_path / "odd")
    events = path / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    starts = [json.loads(line)["run"] for line in lines if b'"type":"run_start"' in line]
    head = b'{"run":"' + starts[-1].encode() + b'","v":1,"type":"batch"'
    at = next(i for i, line in enumerate(lines) if line.startswith(head))  # the last run's first step
    extra = extra.replace(b"{first}", starts[0].encode())
    lines.insert(at + 1, lines[at].rstrip(b"}\n") + extra + b"\n")
    events.write_bytes(b"".join(lines))
    store.SessionFolder(path).summary_cache_path.unlink()
    _cache(path)
    loaded = light.light_load(path)
    assert loaded is None or _folded(loaded) == _folded(load_session(path))
    outputs = []
    for enabled in (True, False):
        monkeypatch.setattr(light, "ENABLED", enabled)
        capsys.readouterr()
        main(["show", str(path)])
        main(["compare", str(path), str(shapes["study"])])
        main(["export", str(path), "--format", "md"])
        outputs.append(capsys.readouterr())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("name", ["study", "generate", "interrupted", "gpu-session"])
def test_the_sessions_screen_shows_a_cached_session_from_the_light_load(
    name: str, shapes: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sessions screen's look at a finished session reads it as ``show`` does (it did the full load: about
    3 s for a million events here, against 1 s), and shows the same as from the full load."""
    from rich.console import Console

    from benchtui.screens.sessions import summary_view

    def text(path: Path) -> str:
        with open(os.devnull, "w") as sink:
            console = Console(width=140, record=True, file=sink)
            console.print(summary_view(path, 140))
        return console.export_text()

    loads: list[Path] = []
    real_load = store.load_session

    def counted(path: Any, keep_events: bool = False) -> LoadedSession:
        loads.append(Path(path))
        return real_load(path, keep_events)

    monkeypatch.setattr(store, "load_session", counted)
    monkeypatch.setattr(light, "ENABLED", True)
    lit = text(shapes[name])
    assert loads == []  # the light load served it
    monkeypatch.setattr(light, "ENABLED", False)
    whole = text(shapes[name])
    assert loads == [shapes[name]]
    assert lit == whole and lit.startswith(shapes[name].name)


def test_the_writers_cache_becomes_a_loads_at_the_sessions_screens_first_look(
    shapes: dict[str, Path], tmp_path: Path
) -> None:
    """A session that ended "complete" has its writer's cache entry, without a load's warnings, which the light
    load needs: before, show and compare never took the light path for such a session (the common one). The
    sessions screen's first look (a full load) now adds its warnings; the views are light from then on."""
    from benchtui.screens.sessions import summary_view

    path = tmp_path / "study"
    shutil.copytree(shapes["study"], path)
    entry = path / "summary-cache.json"
    cache = json.loads(entry.read_text())
    cache.pop("warnings")  # as SessionWriter.finish writes it
    entry.write_text(json.dumps(cache))
    os.utime(path / "events.jsonl", ns=(cache["events_mtime_ns"], cache["events_mtime_ns"]))
    summary = (path / "summary.json").read_bytes()
    assert store.SessionFolder(path).cached_summary() is not None  # it holds
    assert light.light_load(path) is None  # but it is no load's
    summary_view(path, 120)
    assert light.light_load(path) is not None
    assert store.SessionFolder(path).cached_warnings() == load_session(path).warnings
    assert (path / "summary.json").read_bytes() == summary  # summary.json stays the writer's
