"""The "how" line's thread totals and a runner's 'unlike a default' sentence; a replay judges load by the
recorded host (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

from benchtui.core.reporting.model import how_it_ran
from benchtui.core.running.replay import Replayer
from sessionfactory import make_session


def test_equal_thread_totals_are_said_equal() -> None:
    lines = how_it_ran(
        {
            "torch": {
                "settings": {"compile": "eager", "intra_op_threads": 1},
                "threads": {
                    "per_process": 1,
                    "processes": 2,
                    "total": 2,
                    "text": "1 thread per rank × 2 ranks (2 in all)",
                },
            },
            "tensorflow": {
                "settings": {"compile": "none", "intra_op_threads": 2},
                "threads": {"per_process": 2, "processes": 1, "total": 2, "text": "2 threads"},
            },
        }
    )
    assert lines[0].startswith(
        "PyTorch: eager; 1 thread per rank × 2 ranks (2 in all), the same 2 in all as tf.keras"
    )
    assert "2 threads, the same 2 in all as PyTorch" in lines[1]


def test_unequal_totals_and_old_sessions() -> None:
    lines = how_it_ran(
        {
            "torch": {
                "settings": {"compile": "eager"},
                "threads": {"per_process": 1, "processes": 1, "total": 1, "text": "1 thread"},
            },
            "tensorflow": {
                "settings": {"compile": "none", "intra_op_threads": 2}
            },  # recorded before issue 30
        }
    )
    assert lines == ["PyTorch: eager; 1 thread", "tf.keras: none; 2 threads"]


def test_a_runner_says_what_a_default_script_does_differently() -> None:
    line = how_it_ran(
        {"tensorflow": {"settings": {"compile": "none", "unlike_default": "unlike a default TensorFlow: X"}}}
    )
    assert line == ["tf.keras: none; unlike a default TensorFlow: X"]


def test_a_replay_knows_the_recorded_hosts_cores(tmp_path: Path) -> None:
    folder = make_session(tmp_path, name="host")
    meta = json.loads((folder / "session.json").read_text())
    cores = (meta.get("host") or {}).get("cpu_count")
    assert isinstance(cores, int)
    assert Replayer(folder).model.host_cores == cores
