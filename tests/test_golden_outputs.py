"""Every output byte for byte: show, md, csv (both), json, html and compare of fixed sessions (a sweep's
among them: issue 32).

The files under ``tests/golden/`` were written by the code before the house's second step (issue
31) and are the promise that restructuring the report changed no output. A change that means to
change an output rewrites them (``BENCHTUI_GOLDEN_UPDATE=1 pytest tests/test_golden_outputs.py``)
and says why in its commit; a diff here that nobody meant is a regression.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchtui.cli import main
from sessionfactory import DENSENET121_NETWORKS, RESNET50_NETWORKS, make_session

GOLDEN = Path(__file__).parent / "golden"
DATA = Path(__file__).parent / "data"
UPDATE = os.environ.get("BENCHTUI_GOLDEN_UPDATE") == "1"
SHARES = {"conv": 0.6, "norm": 0.1, "elementwise": 0.1, "optimizer": 0.1, "idle": 0.1}


def _made(root: Path) -> dict[str, Path]:
    """Three made sessions that between them reach most of the report's sections."""
    study = make_session(
        root,
        name="study",
        models=("resnet50", "densenet121"),
        runs=3,
        networks={**RESNET50_NETWORKS, **DENSENET121_NETWORKS},
        fail={
            ("tensorflow", "densenet121", 1): {"kind": "oom", "message": "OOM when allocating", "epoch": 2}
        },
        counters={"available": True, "source": "NVML GPM", "reason": ""},
        gpu_counters={"torch": {"sm_active": 62.0}, "tensorflow": {"sm_active": 48.0}},
        profile={("torch", "resnet50"): {"shares": SHARES}, ("tensorflow", "resnet50"): {"shares": SHARES}},
        folder="study",
    )
    scaling = make_session(root, name="scaling", devices=4, scaling=True, gpu=True, runs=2, folder="scaling")
    infer = make_session(
        root,
        name="infer",
        frameworks=("torch", "tensorflow", "keras-jax"),
        gpu=False,
        task="inference",
        timing="step",
        runs=3,
        epochs=2,
        steps=5,
        batch_size=4,
        image_size=64,
        folder="infer",
    )
    # A sweep (issue 32): PyTorch fastest at batch 8 with channels-last, tf.keras at batch 4 (channels-last
    # changes nothing for it): best vs best, the verdict per point, what each setting buys, the curve.
    sweep = make_session(
        root,
        name="sweep",
        frameworks=("torch", "tensorflow"),
        models=("resnet50_v1_5",),
        sweep={"batch": ["4", "8"], "channels-last": ["off", "on"]},
        batch_size=8,  # the plan's samples: the largest batch's steps (at batch 4, half as many samples)
        runs=3,
        point_speed={
            ("torch", "batch=8,channels-last=on"): 0.7,
            ("tensorflow", "batch=8,channels-last=off"): 1.3,
        },
        folder="sweep",
    )
    return {"study": study, "scaling": scaling, "infer": infer, "sweep": sweep}


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("golden")
    found = _made(root)
    for name in ("tiny-cpu-session", "gpu-session"):
        shutil.copytree(DATA / name, root / name)
        found[name] = root / name
    return found


def _outputs(name: str, path: Path, capsys: pytest.CaptureFixture[str], tmp: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    out["show.txt"] = capsys.readouterr().out
    for fmt, per_batch in (("md", False), ("csv", False), ("csv", True), ("json", False), ("html", False)):
        target = tmp / f"{name}.{fmt}{'.batches' if per_batch else ''}"
        assert (
            main(
                [
                    "export",
                    str(path),
                    "--format",
                    fmt,
                    "-o",
                    str(target),
                    *(["--per-batch"] if per_batch else []),
                ]
            )
            == 0
        )
        capsys.readouterr()
        out[target.name.removeprefix(f"{name}.")] = target.read_text(encoding="utf-8")
    return {key: text.replace(str(path), "<SESSION>") for key, text in out.items()}


def _check(folder: str, outputs: dict[str, str]) -> None:
    where = GOLDEN / folder
    if UPDATE:
        where.mkdir(parents=True, exist_ok=True)
        for key, text in outputs.items():
            (where / key).write_text(text, encoding="utf-8")
        return
    differ = [key for key, text in outputs.items() if (where / key).read_text(encoding="utf-8") != text]
    assert not differ, f"{folder}: {', '.join(differ)} differ from tests/golden/{folder}"


@pytest.mark.parametrize("name", ["tiny-cpu-session", "gpu-session", "study", "scaling", "infer", "sweep"])
def test_every_output_as_before(
    name: str, sessions: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _check(name, _outputs(name, sessions[name], capsys, tmp_path))


def test_compare_as_before(sessions: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    outputs: dict[str, str] = {}
    for a, b in (("study", "gpu-session"), ("tiny-cpu-session", "gpu-session"), ("scaling", "study")):
        capsys.readouterr()
        main(["compare", str(sessions[a]), str(sessions[b])])
        text = capsys.readouterr().out
        for key in (a, b):
            text = text.replace(str(sessions[key]), f"<{key}>")
        outputs[f"{a}-vs-{b}.txt"] = text
    _check("compare", outputs)
