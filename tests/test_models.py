"""Every study model builds and trains one batch in every framework that has it (small images), through
the real runner. The modern models are built and stepped in tests/test_workload_models.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchtui_runners import catalog
from support import benchtui, only_session, read_events

pytestmark = pytest.mark.slow
SIZE = max(
    catalog.MODELS[m].min_image_size for m in catalog.STUDY_MODELS
)  # 75: the Inception family's minimum


def _run_all(framework: str, models: list[str], root: Path) -> tuple[dict, list[dict]]:
    result = benchtui(
        "run",
        "--headless",
        "--frameworks",
        framework,
        "--models",
        ",".join(models),
        "--image-size",
        str(SIZE),
        "--samples",
        "2",
        "--batch-size",
        "2",
        "--epochs",
        "1",
        "--runs",
        "1",
        "--device",
        "cpu",
        "--num-classes",
        "10",
        "--sessions-dir",
        str(root),
        # PyTorch: one thread, as two test workers share two cores and its oversubscribed pools crawl
        # (TensorFlow's do not: it keeps the cores the engine gives it).
        *(["--threads", "1"] if catalog.family(framework) == "torch" else []),
        timeout=1500,
    )
    session = only_session(root)
    rows = {r["model"]: r for r in json.loads((session / "summary.json").read_text())["rows"]}
    assert result.returncode == 0, (result.stdout[-3000:], {m: r.get("reason") for m, r in rows.items()})
    return rows, read_events(session)


@pytest.mark.parametrize(
    ("framework", "models"),
    [
        ("torch", catalog.STUDY_MODELS),
        # tf.keras in two sessions, so the two test workers share its minutes of graph building.
        ("tensorflow", catalog.STUDY_MODELS[:4]),
        ("tensorflow", catalog.STUDY_MODELS[4:]),
    ],
)
def test_every_model_trains_one_batch(framework: str, models: list[str], sessions_root: Path) -> None:
    rows, events = _run_all(framework, models, sessions_root)
    for model in models:
        ok, reason = catalog.available(framework, model)
        if ok:
            assert rows[model]["status"] == "ok", (model, rows[model].get("reason"))
            batches = [e for e in events if e["type"] == "batch" and e["run"] in rows[model]["run_ids"]]
            assert len(batches) == 1 and batches[0]["seconds"] > 0
            assert rows[model]["build_s"] > 0
        else:
            assert rows[model]["status"] == "unavailable" and rows[model]["reason"] == reason


@pytest.mark.parametrize("framework, module", [("keras-jax", "jax"), ("keras-torch", "torch")])
def test_keras_3_backends_train(framework: str, module: str, sessions_root: Path) -> None:
    if importlib.util.find_spec(module) is None or importlib.util.find_spec("keras") is None:
        pytest.skip(f"{framework} is not installed")
    rows, events = _run_all(framework, ["resnet50"], sessions_root)
    assert rows["resnet50"]["status"] == "ok"
    hello = next(e for e in events if e["type"] == "hello")
    assert hello["framework"] == framework and "keras" in hello["versions"]
