"""`benchtui sessions` and `show`, damaged and foreign folders, and hostile session names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchtui.cli import main
from benchtui.core.plan.plan import Plan
from benchtui.core.store.session import SessionWriter, list_sessions, load_session, resolve_session, slugify
from sessionfactory import cut_off, make_session
from support import UNAVAILABLE_RUN, benchtui

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    make_session(
        root, name="alpha", models=("resnet50",), runs=2, epochs=3, steps=8, folder="20260101T000000Z_alpha"
    )
    make_session(
        root,
        name="beta",
        frameworks=("torch",),
        models=("densenet121",),
        runs=1,
        epochs=2,
        steps=4,
        gpu=False,
        folder="20260102T000000Z_beta",
    )
    return root


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("benchtui: error: "), err


# -- sessions ----------------------------------------------------------------------
def test_sessions_lists_newest_first(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # wide enough for every column unwrapped
    assert main(["sessions", "--sessions-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.index("20260102T000000Z_beta") < out.index("20260101T000000Z_alpha")
    for text in (
        "NVIDIA H100 80GB HBM3",
        "torch, tensorflow",  # a space after each comma: a narrow column wraps between ids
        "resnet50",
        "densenet121",
        "complete",
        "2026-01-02 03:04:05",
    ):
        assert text in out
    infos = list_sessions(root)
    assert [i["label"] for i in infos] == ["beta", "alpha"]
    assert infos[0]["device"] == "cpu" and infos[1]["device"] == "NVIDIA H100 80GB HBM3"


def test_sessions_marks_unreadable_and_skips_strays(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "stray").mkdir()
    newer = root / "20270101T000000Z_newer"
    newer.mkdir()
    (newer / "session.json").write_text(json.dumps({"kind": "benchtui-session", "schema": 99}))
    assert main(["sessions", "--sessions-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "stray" not in out
    assert "unreadable" in out and "schema 99" in out
    assert list_sessions(root)[-1]["status"] == "unreadable"


def test_sessions_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--sessions-dir", str(tmp_path / "none")]) == 0
    assert "no sessions in" in capsys.readouterr().err


# -- show -------------------------------------------------------------------------
def test_show_by_prefix_with_ratios(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "alpha", "--sessions-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "ResNet50" in out and "PyTorch" in out and "tf.keras" in out
    assert "The verdict: frameworks compared" in out
    assert re.search(r"PyTorch \d\.\d\d× faster than tf\.keras \(95% CI", out)
    assert main(["show", "20260101", "--sessions-dir", str(root)]) == 0
    assert main(["show", str(root / "20260101T000000Z_alpha")]) == 0


def test_show_ambiguous_and_missing(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "2026", "--sessions-dir", str(root)]) == 2
    err = capsys.readouterr().err
    _no_traceback(err)
    assert "matches 2 sessions" in err
    assert main(["show", "gamma", "--sessions-dir", str(root)]) == 2
    _no_traceback(capsys.readouterr().err)


def test_show_cut_off_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_off(make_session(tmp_path, name="cut", runs=2, epochs=3, steps=10), 0.55)
    assert main(["show", str(path)]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2, captured.err
    assert "cut off mid-write and was skipped" in warnings[0]
    assert re.search(
        r"the session was cut off during run \d{3}-\w+-resnet50-\d (\(epoch \d of 3, step \d+\) )?\(",
        warnings[1],
    )
    assert "planned run(s) never started" in warnings[1]
    assert "incomplete" in captured.out or "interrupted" in captured.out


def test_show_live_session_is_not_called_cut_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_off(make_session(tmp_path, name="live", runs=2, epochs=3, steps=10), 0.55, live=True)
    loaded = load_session(path)
    assert any("still being written" in w for w in loaded.warnings)
    assert not any(r.status == "interrupted" for r in loaded.model.runs.values())


def test_show_escapes_markup_in_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_session(
        tmp_path,
        name="markup",
        runs=1,
        epochs=2,
        steps=4,
        fail={
            ("tensorflow", "resnet50", 1): {
                "kind": "exception",
                "message": "ValueError: [/] and [bold]x[/bold]",
            }
        },
    )
    assert main(["show", str(path)]) == 0
    assert "[/] and [bold]x[/bold]" in capsys.readouterr().out.replace("\n", "")


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("newer", "schema 2; this benchtui reads up to 1: upgrade benchtui"),
        ("not-a-session", "is not a benchtui session (no session.json)"),
        ("garbage", "session.json is unreadable"),
        ("other-kind", "is not a benchtui session"),
        ("unknown-model", "uses model 'vit_h14', unknown to this benchtui: upgrade benchtui"),
        ("bad-plan", "has no usable plan"),
        ("bad-runs", "the plan's runs is 'three'"),
    ],
)
def test_foreign_folders_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    path = make_session(tmp_path, name=case, runs=1, epochs=2, steps=3)
    meta_path = path / "session.json"
    meta = json.loads(meta_path.read_text())
    if case == "newer":
        meta["schema"] = 2
    elif case == "not-a-session":
        meta_path.unlink()
    elif case == "garbage":
        meta_path.write_text("{not json")
    elif case == "other-kind":
        meta["kind"] = "something-else"
    elif case == "unknown-model":
        meta["plan"]["models"] = ["vit_h14"]
    elif case == "bad-plan":
        meta["plan"] = [1, 2]
    elif case == "bad-runs":
        meta["plan"]["runs"] = "three"
    if case not in ("not-a-session", "garbage"):
        meta_path.write_text(json.dumps(meta))
    for argv in (
        ["show", str(path)],
        ["export", str(path), "--format", "json"],
        ["compare", str(path), str(path)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        _no_traceback(err)
        assert message in err


# -- hostile names ----------------------------------------------------------------
HOSTILE_NAMES = [
    "../../etc",
    "a/b",
    "..",
    ".",
    "",
    "   ",
    "ünïcødé 漢字 — ok",
    "x" * 5000,
    "nul\0byte",
    "/abs/path",
    "~root",
    "C:\\Windows\\system32",
    "-rf",
    ".hidden",
    "CON",
    "a\nb",
    "<script>",
    "%2e%2e%2f",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_stay_inside_the_sessions_folder(tmp_path: Path, name: str) -> None:
    root = tmp_path / "sessions"
    before = set(tmp_path.iterdir())
    writer = SessionWriter.create(Plan(frameworks=["torch"], models=["resnet50"], name=name), root)
    writer.close()
    path = writer.path
    assert path.parent.resolve() == root.resolve()
    assert re.fullmatch(r"\d{8}T\d{6}Z_[a-z0-9][a-z0-9._-]*", path.name), path.name
    assert len(path.name) <= 80 and not path.name.endswith((".", "-"))
    assert set(tmp_path.iterdir()) - before == {root}  # nothing written beside the sessions folder
    assert json.loads((path / "session.json").read_text())["name"] == (name or path.name)
    assert load_session(path).meta["name"] == (name or path.name)
    assert resolve_session(path.name, root) == path


def test_slugify_examples() -> None:
    assert slugify("../../etc") == "etc"
    assert slugify("a/b") == "a-b"
    assert slugify("..") == "session"
    assert slugify("") == "session"
    assert slugify("nul\0byte") == "nul-byte"
    assert slugify("x" * 500) == "x" * 60
    assert slugify("ResNet50 vs. tf.keras!") == "resnet50-vs.-tf.keras"


def test_hostile_spec_for_show_is_refused(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for spec in ("../..", "..", "", "a\0b", "/etc"):
        assert main(["show", spec, "--sessions-dir", str(root)]) == 2
        _no_traceback(capsys.readouterr().err)


def test_cli_run_with_hostile_name(tmp_path: Path) -> None:
    """A real headless run (an unavailable cell, so no framework starts) named '../../etc'."""
    root = tmp_path / "sessions"
    result = benchtui(
        *UNAVAILABLE_RUN, "--name", "../../etc", "--sessions-dir", str(root), cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions"]
    (folder,) = root.iterdir()
    assert folder.name.endswith("_etc")
    assert json.loads((folder / "session.json").read_text())["name"] == "../../etc"


def test_show_session_cut_off_before_most_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_off(
        make_session(tmp_path, name="early", models=("resnet50", "densenet121"), runs=2, epochs=2, steps=6),
        0.2,
    )
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "DenseNet121" in out and "never started" in out
    statuses = {r.model: r.status for r in load_session(path).model.rows()}
    assert statuses["densenet121"] == "incomplete"


def test_show_session_without_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_session(tmp_path, name="empty", runs=1, epochs=2, steps=3)
    (path / "events.jsonl").unlink()
    assert main(["show", str(path)]) == 0
    captured = capsys.readouterr()
    # A finished session never shows a run as pending: a run without its end is said and shown interrupted.
    assert "warning: events.jsonl is missing" in captured.err and "pending" not in captured.out
    assert "2 run(s) have no end in events.jsonl" in captured.err
    for fmt_ in ("md", "csv", "json", "html"):
        assert main(["export", str(path), "--format", fmt_, "-o", str(tmp_path / f"x.{fmt_}")]) == 0


def test_iter_events_accepts_what_json_loads_accepts(tmp_path: Path) -> None:
    """The fast parser must keep and drop exactly the lines strict json.loads would (no NaN: not JSON)."""
    from benchtui.core.store.session import iter_events

    lines = [
        b'{"type":"gpu","t":1}\n',
        b'  {"type":"lead","t":2}\n',  # leading spaces: json.loads accepts
        b'{"type":"trail","t":3}   \r\n',  # trailing whitespace and CRLF
        b'{"type":"extra","t":4} x\n',  # extra data: rejected
        b'\xef\xbb\xbf{"type":"bom","t":5}\n',  # UTF-8 byte order mark
        b'{"type":"bad-utf8","s":"\xff"}\n',
        b"[1, 2]\n",  # JSON but not an object
        b'{"type":"nan","seconds":NaN}\n',
        b"\n",
        b'{"type":"last","t":6}\n',
        b'{"type":"cut","t":',
    ]
    (tmp_path / "events.jsonl").write_bytes(b"".join(lines))
    warnings: list[str] = []
    got = [e["type"] for e in iter_events(tmp_path, warnings)]
    expected = []

    def no_constant(name: str) -> None:
        raise ValueError(name)

    for raw in lines[:-1]:
        try:
            event = json.loads(raw, parse_constant=no_constant)
        except ValueError:
            continue
        if isinstance(event, dict):
            expected.append(event["type"])
    assert got == expected == ["gpu", "lead", "trail", "bom", "last"]
    assert warnings == [
        "the last line of events.jsonl was cut off mid-write and was skipped",
        "5 unreadable line(s) in events.jsonl were skipped (first, line 4: not JSON)",
    ]


def test_loading_holds_back_old_gpu_samples_without_changing_the_model(tmp_path: Path) -> None:
    path = make_session(tmp_path, name="gpu-tail", runs=2, epochs=3, steps=200, interval=0.05)
    fast, full = load_session(path), load_session(path, keep_events=True)
    assert sum(1 for e in full.events if e["type"] == "gpu") > 600  # more samples than the window
    assert fast.model.events == full.model.events == len(full.events)
    assert list(fast.model.gpu_samples) == list(full.model.gpu_samples)
    assert fast.model.rows() == full.model.rows() and fast.warnings == full.warnings
