"""The session store: one SessionFolder for every path and every read, and provenance in session.json."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchtui.cli import main
from benchtui.core.plan.plan import Plan
from benchtui.core.provenance import _checkout_version, benchtui_version, runner_code_hash
from benchtui.core.running.replay import Replayer
from benchtui.core.store.session import SessionError, SessionFolder, SessionWriter, load_session
from sessionfactory import make_session


def _plan() -> Plan:
    return Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=8,
        batch_sizes={"resnet50": 8},
        epochs=1,
        runs=1,
        device="cpu",
    ).validate()


def test_a_new_session_records_which_code_recorded_it(tmp_path: Path) -> None:
    writer = SessionWriter.create(_plan(), tmp_path)
    writer.close()
    meta = json.loads((writer.path / "session.json").read_text())
    recorded = meta["benchtui"]
    assert recorded["version"] == benchtui_version() != "unknown"
    assert recorded["runner_hash"] == runner_code_hash() and re.fullmatch(
        r"[0-9a-f]{64}", recorded["runner_hash"]
    )
    # This checkout is a git checkout: the commit is known (a wheel records None).
    assert recorded["commit"] is None or re.fullmatch(r"[0-9a-f]{40}(-dirty)?", recorded["commit"])
    assert meta["host"]["cpu_model"]


def test_a_checkout_that_is_not_installed_records_its_own_version(tmp_path: Path) -> None:
    """The lent GPU machine runs benchtui from the checkout (PYTHONPATH=tui:runners, no install): its sessions
    recorded "unknown", and every later show warned "recorded by benchtui unknown"."""
    root = Path(__file__).resolve().parents[1]
    code = "from benchtui.core.provenance import benchtui_version; print(benchtui_version())"
    out = subprocess.run(  # -S: no site-packages, so no installed benchtui for importlib.metadata to find
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": f"{root / 'tui'}:{root / 'runners'}", "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == benchtui_version() != "unknown"
    assert out == re.search(r'^version = "(.+)"$', (root / "pyproject.toml").read_text(), re.M).group(1)
    # Only the [project] table's version counts; a file without one gives none.
    other = tmp_path / "pyproject.toml"
    other.write_text('[tool.x]\nversion = "9.9"\n\n[project]\nname = "b"\nversion = "1.2.3"\n\n[tool.y]\n')
    assert _checkout_version(other) == "1.2.3"
    other.write_text('[tool.x]\nversion = "9.9"\n')
    assert _checkout_version(other) is None
    assert _checkout_version(tmp_path / "missing.toml") is None


def test_the_runner_hash_follows_the_runner_code(tmp_path: Path) -> None:
    package = tmp_path / "benchtui_runners"
    package.mkdir()
    (package / "__main__.py").write_text("print('a')\n")
    first = runner_code_hash(package)
    (package / "__main__.py").write_text("print('b')\n")
    runner_code_hash.cache_clear()
    assert runner_code_hash(package) != first


@pytest.mark.parametrize(
    ("recorded", "said"),
    [
        (
            {"version": "0.0.1", "commit": None, "runner_hash": "0" * 64},
            "recorded by benchtui 0.0.1; this is benchtui",
        ),
        (None, "recorded by a benchtui older than 0.2 (session.json names no version)"),
    ],
)
def test_show_says_when_another_version_recorded_the_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded: dict | None, said: str
) -> None:
    path = make_session(tmp_path, name="old", runs=1, epochs=2, steps=4)
    meta = json.loads((path / "session.json").read_text())
    if recorded is None:
        del meta["benchtui"]
    else:
        meta["benchtui"] = recorded
    (path / "session.json").write_text(json.dumps(meta))
    assert any(said in w for w in load_session(path).warnings)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr()
    assert said in out.out + out.err


def test_the_same_version_says_nothing(tmp_path: Path) -> None:
    path = make_session(tmp_path, name="same", runs=1, epochs=2, steps=4)
    assert not [w for w in load_session(path).warnings if "recorded by" in w]


def test_replay_checks_the_plan_as_loading_does(tmp_path: Path) -> None:
    path = make_session(tmp_path, name="odd", runs=1, epochs=2, steps=4)
    meta = json.loads((path / "session.json").read_text())
    meta["plan"]["models"] = ["resnet9000"]
    (path / "session.json").write_text(json.dumps(meta))
    for open_it in (load_session, Replayer):
        with pytest.raises(SessionError, match="unknown to this benchtui"):
            open_it(path)


def test_every_path_comes_from_the_folder(tmp_path: Path) -> None:
    writer = SessionWriter.create(_plan(), tmp_path)
    writer.append({"type": "run_start", "run": "torch-resnet50-1", "t": 0.0})
    writer.close()
    folder = SessionFolder.open(writer.path)
    assert writer.log_path("torch-resnet50-1") == folder.log_path("torch-resnet50-1")
    assert folder.log_path("x").parent == folder.logs_dir and folder.logs_dir.is_dir()
    assert {folder.meta_path, folder.events_path} <= set(writer.path.iterdir())
    assert Replayer(writer.path).log_path("x") == folder.log_path("x")
    with pytest.raises(SessionError):
        SessionFolder.open(tmp_path / "nothing-here")
