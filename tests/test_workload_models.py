"""Every model beyond the study's builds and steps once in each framework, at its smallest size, on CPU.

One fresh process per framework runs ``tests/data/step_models.py`` over all of them: build
with random weights, one inference forward, one training step (loss, backward, SGD update)
at batch 2 (images at max(32, minimum) px, ViTs at 32 px: 2x2 patches; GPT-2 at 8 tokens).
The processes run at once, one thread each (~65 s wall on two cores). Keras trains through
compile + train_on_batch, eagerly: tracing each step's graph would add ~10 s a model.
PyTorch and tf.keras step every model; Keras on JAX steps the two small keras-hub models
(ViT-Ti/16, GPT-2 mini: the same keras-hub classes as ViT-B/16 and GPT-2 small, which would
add ~30 s of eager JAX for nothing new). Full-size GPT-2 (124M parameters) is included: its
builds and step cost ~7 s in PyTorch and ~6 s in tf.keras."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchtui_runners import catalog
from benchtui_runners.flops import einsum_flops
from benchtui_runners.models import source_text

SCRIPT = Path(__file__).resolve().parent / "data" / "step_models.py"
NEW_MODELS = [m for m in catalog.MODEL_ORDER if catalog.MODELS[m].group != "study"]
JAX_MODELS = ["vit_ti_16", "gpt2_mini"]
#: Keras sides whose weights must equal PyTorch's exactly: those the catalog records no difference
#: for, and the twin written to match torchvision (resnet50_v1_5). Others: within 1% (ResNet v1's biases).
EXACT = [m for m in NEW_MODELS if not catalog.MODELS[m].sides or m == catalog.MODELS["resnet50"].twin]


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location("step_models", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start(framework: str, models: list[str], log: Any) -> subprocess.Popen[str]:
    # The log goes to a file: a pipe left unread while another process is awaited could fill and stall it.
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), framework, *models],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


def _results(proc: subprocess.Popen[str]) -> tuple[dict[str, dict[str, Any]], float]:
    """The process's JSON lines by model, and the seconds it took by its own clock."""
    stdout, _ = proc.communicate(timeout=600)
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    done: dict[str, Any] = next((r for r in lines if r.get("done")), {})
    return {r["model"]: r for r in lines if "model" in r}, float(done.get("seconds", math.nan))


@pytest.mark.slow
def test_every_new_model_builds_trains_and_infers_in_each_framework(
    record_property: Callable[[str, object], None],
) -> None:
    for module in ("torch", "torchvision", "transformers", "tensorflow", "keras", "keras_hub"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    script = _load_script()
    runs = {"torch": NEW_MODELS, "tensorflow": NEW_MODELS}
    if importlib.util.find_spec("jax") is not None:
        runs["keras-jax"] = JAX_MODELS
    started = time.perf_counter()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    problems: list[str] = []
    with contextlib.ExitStack() as stack:
        logs = {fw: stack.enter_context(tempfile.TemporaryFile("w+")) for fw in runs}
        procs = {fw: _start(fw, models, logs[fw]) for fw, models in runs.items()}
        for fw, proc in procs.items():
            results[fw], seconds = _results(proc)
            record_property(f"seconds_{fw}", round(seconds, 1))
            print(f"{fw}: {len(results[fw])} models in {seconds:.1f} s")
            if proc.returncode != 0:
                logs[fw].seek(0)
                problems.append(f"{fw}: exit {proc.returncode}\n{logs[fw].read()[-3000:]}")
    print(f"all frameworks: {time.perf_counter() - started:.1f} s")

    for fw, models in runs.items():
        for model in models:
            row = results[fw].get(model)
            if row is None or "error" in row:
                problems.append(f"{fw} {model}: {row['error'] if row else 'no result'}")
                continue
            train_shape, infer_shape = script.expected_shapes(model)
            if row["train_shape"] != train_shape or row["infer_shape"] != infer_shape:
                problems.append(
                    f"{fw} {model}: outputs {row['train_shape']} / {row['infer_shape']}, "
                    f"expected {train_shape} / {infer_shape}"
                )
            if not math.isfinite(row["loss"]) or not row["infer_finite"]:
                problems.append(f"{fw} {model}: loss {row['loss']}, inference finite: {row['infer_finite']}")
            if not 0 < row["trainable"] <= row["params"]:
                problems.append(f"{fw} {model}: {row['trainable']} trainable of {row['params']} parameters")

    # The same network on both sides: trainable parameters within 1%, exactly equal where the
    # architectures are the same; Keras on JAX builds the very same Keras model as on TensorFlow.
    for model in NEW_MODELS:
        torch_n = results["torch"].get(model, {}).get("trainable")
        keras_n = results["tensorflow"].get(model, {}).get("trainable")
        if torch_n is None or keras_n is None:
            continue  # failed to build or step: reported above
        if model in EXACT and torch_n != keras_n:
            problems.append(f"{model}: {torch_n} trainable parameters in PyTorch, {keras_n} in tf.keras")
        elif abs(torch_n - keras_n) > 0.01 * torch_n:
            problems.append(f"{model}: {torch_n} vs {keras_n} trainable parameters: more than 1% apart")
    for model in runs.get("keras-jax", []):
        jax_n = results["keras-jax"].get(model, {}).get("trainable")
        keras_n = results["tensorflow"].get(model, {}).get("trainable")
        if jax_n is not None and jax_n != keras_n:
            problems.append(f"{model}: {jax_n} trainable parameters on JAX, {keras_n} on TensorFlow")
    assert not problems, "\n".join(problems)


def test_einsum_flops_count_every_index_once() -> None:
    # Keras' attention logits: B x N x T x S outputs, H multiply-adds each.
    assert einsum_flops("BTNH,BSNH->BNTS", [[2, 5, 3, 4], [2, 7, 3, 4]]) == 2 * 2 * 3 * 5 * 7 * 4
    # TensorFlow's gradient einsums use an ellipsis for the batch dimensions, broadcast from the right.
    assert einsum_flops("...ij,...jk->...ik", [[6, 2, 3], [3, 4]]) == 2 * 6 * 2 * 3 * 4
    assert einsum_flops("abc->cba", [[2, 3, 4]]) == 0  # a transpose: no multiply-add


def test_source_text_names_library_and_version_without_importing_it() -> None:
    assert source_text("torch", "vit_b_16").startswith("torchvision ")
    assert source_text("torch", "vit_b_16").endswith(" VisionTransformer")
    assert source_text("keras", "resnet50_v1_5").startswith("benchtui ResNet50 v1.5 from keras.layers")
    assert source_text("keras", "gpt2").startswith("keras-hub ") and source_text("keras", "gpt2").endswith(
        " GPT2Backbone"
    )
    assert source_text("torch", "gpt2").startswith("transformers ")
    assert source_text("keras", "pnasnet_large") == ""


def test_importing_the_builders_and_counters_loads_no_framework() -> None:
    code = (
        "import sys, benchtui_runners.models, benchtui_runners.flops; "
        "print(sorted({'torch', 'torchvision', 'tensorflow', 'keras', 'jax', 'transformers', 'keras_hub'}"
        " & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr[-2000:])
