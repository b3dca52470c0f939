"""The CI trackers' formats: Bencher's metric format and github-action-benchmark's custom format, checked against
the schemas and examples their projects publish (tests/data/trackers/, sources in its README), with the
figures of the summary and only the cells that trained."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from benchtui.cli import main
from benchtui.core.model.status import CellStatus
from benchtui.core.reporting.files import export_session
from benchtui.core.reporting.model import build_report
from benchtui.core.reporting.registry import WRITERS
from benchtui.core.store.session import load_session
from sessionfactory import make_session

DATA = Path(__file__).parent / "data" / "trackers"
NAN = float("nan")


# -- a validator of the JSON Schema keywords these schemas use (draft-07: type, properties, patternProperties,
# required, items); jsonschema is not a dependency of the project
def errors(doc: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    found: list[str] = []
    kind = schema.get("type")
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    }
    if kind is not None and not checks[kind](doc):
        return [f"{where}: not a {kind}: {doc!r}"]
    if isinstance(doc, dict):
        found += [f"{where}: {key!r} missing" for key in schema.get("required", []) if key not in doc]
        for key, value in doc.items():
            if key in schema.get("properties", {}):
                found += errors(value, schema["properties"][key], f"{where}.{key}")
            for pattern, sub in schema.get("patternProperties", {}).items():
                if re.search(pattern, key):
                    found += errors(value, sub, f"{where}.{key}")
    if isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            found += errors(item, schema["items"], f"{where}[{i}]")
    return found


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


BMF = _load("bmf.schema.json")
GAB = _load("gab-custom.schema.json")


def test_the_schemas_hold_their_published_examples_and_refuse_what_the_formats_refuse() -> None:
    assert errors(_load("bmf-example.json"), BMF) == []
    assert errors(_load("gab-customBiggerIsBetter.json"), GAB) == []
    assert errors(_load("gab-customSmallerIsBetter.json"), GAB) == []
    assert errors({"b": {"m": {"lower_value": 1.0}}}, BMF)  # no value
    assert errors({"b": {"m": {"value": "1"}}}, BMF)  # a value as text
    assert errors([{"name": "b", "value": 1.0}], GAB)  # no unit
    assert errors([{"name": "b", "unit": "s", "value": 1.0, "range": 0.1}], GAB)  # range is text
    assert errors({"name": "b"}, GAB)  # one entry, not a list


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PyTorch trains every model; tf.keras: ResNet50 with one run of three diverged, DenseNet121 with every
    run diverged, and PNASNet unavailable; InceptionV3 had a run that ran out of memory on PyTorch."""
    return make_session(
        tmp_path_factory.mktemp("trackers"),
        models=("resnet50", "densenet121", "pnasnet_large", "inception_v3"),
        runs=3,
        epochs=3,
        steps=6,
        loss={
            **{
                (fw, m, i): [2.3, 2.1, 1.9]
                for fw in ("torch", "tensorflow")
                for m in ("resnet50",)
                for i in (1, 2, 3)
            },
            ("tensorflow", "resnet50", 2): [2.3, NAN, NAN],
            **{("tensorflow", "densenet121", i): [2.3, math.inf, NAN] for i in (1, 2, 3)},
        },
        fail={("torch", "inception_v3", 2): {"kind": "oom", "message": "OOM when allocating", "epoch": 2}},
    )


def _export(session: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> tuple[Any, str]:
    assert main(["export", str(session), "--format", fmt]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def _rows(session: Path) -> dict[tuple[str, str], Any]:
    summary = load_session(session).model.session_summary()
    return {(r.model, r.framework): r for r in summary.rows}


H100 = "NVIDIA H100 80GB HBM3"


def test_bencher_has_every_cell_that_trained_with_its_figures_and_intervals(
    session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, err = _export(session, "bencher", capsys)
    assert errors(doc, BMF) == []
    rows = _rows(session)
    assert rows["resnet50", "tensorflow"].status == CellStatus.OK  # 2 of 3 trained: its figures are theirs
    assert rows["densenet121", "tensorflow"].status == CellStatus.DIVERGED
    assert set(doc) == {
        f"resnet50/torch/fp32/{H100}",
        f"resnet50/tensorflow/fp32/{H100}",
        f"densenet121/torch/fp32/{H100}",
        f"pnasnet_large/torch/fp32/{H100}",
        f"inception_v3/tensorflow/fp32/{H100}",
    }
    for (model, fw), row in rows.items():
        name = f"{model}/{fw}/fp32/{H100}"
        if name not in doc:
            continue
        measures = doc[name]
        low, high = row.ci_of("images_per_s")
        assert measures["images-per-second"] == {
            "value": row.images_per_s,
            "lower_value": low,
            "upper_value": high,
        }
        assert measures["step-time-seconds"] == {"value": row.median_batch_s}
        low, high = row.ci_of("mean_epoch_s")
        assert measures["epoch-time-seconds"] == {
            "value": row.mean_epoch_s,
            "lower_value": low,
            "upper_value": high,
        }
        assert low <= row.mean_epoch_s <= high
    # What is left out is said on stderr, one line each, with why: a CI log shows it.
    lines = err.splitlines()
    assert any(
        line.startswith("note: not in the bencher export: DenseNet121 · tf.keras: ") and "diverged" in line
        for line in lines
    )
    assert any(line.startswith("note: not in the bencher export: InceptionV3 · PyTorch: ") for line in lines)
    assert any(line.startswith("note: not in the bencher export: PNASNet · tf.keras: ") for line in lines)
    assert len(lines) == 3 and "Traceback" not in err


def test_the_diverged_run_is_not_in_the_figures(session: Path) -> None:
    """ResNet50 · tf.keras's throughput is that of its two runs that trained: the diverged one is faster."""
    report = build_report(load_session(session))
    runs = report.cell_runs("tensorflow", "resnet50")
    assert [str(r.status) for r in runs] == ["ok", "diverged", "ok"]
    doc = json.loads(_write(report, "bencher"))
    row = next(r for r in report.summary.rows if (r.model, r.framework) == ("resnet50", "tensorflow"))
    assert doc[f"resnet50/tensorflow/fp32/{H100}"]["images-per-second"]["value"] == row.images_per_s
    assert row.runs == 2


def _write(report: Any, fmt: str) -> str:
    import io

    buf = io.StringIO()
    WRITERS[fmt].write(report, buf)
    return buf.getvalue()


def test_github_action_benchmark_one_direction_per_file(
    session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bigger, _ = _export(session, "gab-throughput", capsys)
    smaller, err = _export(session, "gab-step-time", capsys)
    assert errors(bigger, GAB) == [] and errors(smaller, GAB) == []
    rows = _rows(session)
    row = rows["resnet50", "torch"]
    name = f"resnet50/torch/fp32/{H100}"
    entry = next(e for e in bigger if e["name"] == name)
    low, high = row.ci_of("images_per_s")
    assert entry["unit"] == "images/s" and entry["value"] == row.images_per_s
    assert entry["range"] == f"95% CI {low:.6g} to {high:.6g}"
    assert {e["unit"] for e in bigger} == {"images/s"} and len(bigger) == 5
    # Smaller is better: the step and the epoch time, each named.
    times = {e["name"]: e for e in smaller}
    assert times[f"{name} - step time"]["value"] == row.median_batch_s
    assert "range" not in times[f"{name} - step time"]  # the summary has no interval of a median
    assert times[f"{name} - mean epoch time"]["value"] == row.mean_epoch_s
    assert {e["unit"] for e in smaller} == {"s"} and len(smaller) == 10
    # The device and the versions ride in extra (the chart's tooltip).
    summary = load_session(session).model.session_summary()
    torch_version = summary.frameworks["torch"]["versions"]["torch"]
    assert f"device: {H100}" in entry["extra"] and f"torch {torch_version}" in entry["extra"]
    diverged_one = next(e for e in bigger if e["name"].startswith("resnet50/tensorflow/"))
    assert "note: 1 of 3 runs diverged: loss NaN at epoch 2" in diverged_one["extra"]
    assert "not in the gab-step-time export" in err


def test_a_sweep_names_its_point_and_a_cpu_its_device(tmp_path: Path) -> None:
    sweep = make_session(
        tmp_path,
        frameworks=("torch",),
        models=("resnet50_v1_5",),
        sweep={"batch": ["4", "8"], "precision": ["fp32", "amp-bf16"]},
        batch_size=8,
        runs=2,
        gpu=False,
        folder="sweep",
    )
    doc = json.loads(export_session(sweep, "bencher", tmp_path / "b.json").read_text())
    assert sorted(doc) == [
        "resnet50_v1_5/torch/amp-bf16/batch=4/cpu",
        "resnet50_v1_5/torch/amp-bf16/batch=8/cpu",
        "resnet50_v1_5/torch/fp32/batch=4/cpu",
        "resnet50_v1_5/torch/fp32/batch=8/cpu",
    ]
    assert errors(doc, BMF) == []


def test_a_data_parallel_cell_names_its_device_count(tmp_path: Path) -> None:
    path = make_session(tmp_path, frameworks=("torch",), devices=4, runs=2, folder="dp")
    doc = json.loads(export_session(path, "gab-throughput", tmp_path / "g.json").read_text())
    assert [e["name"] for e in doc] == [f"resnet50/torch/fp32/4x {H100}"]


def test_a_session_with_no_cell_that_trained_is_an_empty_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_session(
        tmp_path,
        frameworks=("torch",),
        runs=1,
        fail={("torch", "resnet50", 1): {"kind": "exception", "message": "boom", "epoch": 1}},
    )
    for fmt, empty in (("bencher", {}), ("gab-throughput", []), ("gab-step-time", [])):
        doc, err = _export(path, fmt, capsys)
        assert doc == empty and "ResNet50 · PyTorch: failed: boom" in err


def test_tracker_files_go_into_the_session_folder(session: Path) -> None:
    for fmt in ("bencher", "gab-throughput", "gab-step-time"):
        written = export_session(session, fmt)
        assert written.parent == session and written.name == WRITERS[fmt].filename
        json.loads(written.read_text(encoding="utf-8"))


def test_a_token_model_is_tracked_in_tokens_per_second(tmp_path: Path) -> None:
    path = make_session(tmp_path, frameworks=("torch",), models=("gpt2_mini",), seq_len=128, runs=2)
    row = load_session(path).model.session_summary().rows[0]
    doc = json.loads(export_session(path, "bencher", tmp_path / "b.json").read_text())
    low, high = row.ci_of("tokens_per_s")
    throughput = doc[f"gpt2_mini/torch/fp32/{H100}"]["tokens-per-second"]
    assert throughput == {"value": row.tokens_per_s, "lower_value": low, "upper_value": high}
    (entry,) = json.loads(export_session(path, "gab-throughput", tmp_path / "g.json").read_text())
    assert (entry["unit"], entry["value"]) == ("tokens/s", row.tokens_per_s)
