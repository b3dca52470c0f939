"""Settings that change the answer reach the runner, are applied, and are recorded in the session."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, benchtui, only_session, read_events

# One process per framework applies every precision in turn (the framework is imported once:
# a fresh process per case cost the fast suite a minute and a half). TF32 comes before fp32, so
# fp32 must switch off what the case before switched on, as a fresh process never would show.
PRECISIONS = ["tf32", "fp32", "amp-fp16", "amp-bf16"]
PROBE = r"""
import json, os, sys
from benchtui_runners.config import RunConfig
fw = sys.argv[1]
out = {}
for precision in sys.argv[2:]:
    autotune = precision != "fp32" if fw == "torch" else precision == "fp32"
    cfg = RunConfig(framework=fw, model="resnet50", precision=precision, cudnn_autotune=autotune, compile="on")
    if fw == "torch":
        import torch
        from benchtui_runners import torch_runner
        out[precision] = torch_runner._settings(cfg, torch.device("cpu"))
    else:
        os.environ["KERAS_BACKEND"] = "tensorflow"
        from benchtui_runners import keras_runner
        keras_runner._pre_import_settings(cfg)
        out[precision] = keras_runner._settings(cfg, "tensorflow")
print(json.dumps(out))
"""


@functools.cache
def _all_settings(framework: str) -> dict[str, dict]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, framework, *PRECISIONS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _settings(framework: str, precision: str) -> dict:
    return _all_settings(framework)[precision]


@pytest.mark.slow  # PyTorch, in a subprocess
@pytest.mark.parametrize("precision", PRECISIONS)
def test_torch_applies_each_precision(precision: str) -> None:
    s = _settings("torch", precision)
    assert s["precision"] == precision
    assert (
        s["tf32_matmul"] is s["tf32_cudnn"] is (precision == "tf32")
    )  # off unless asked: plain fp32 is fp32
    assert s["cudnn_benchmark"] is (precision != "fp32")
    assert s["compile"] == "torch.compile"


@pytest.mark.slow  # TensorFlow, in a subprocess
@pytest.mark.parametrize("precision", PRECISIONS)
def test_tensorflow_applies_each_precision(precision: str) -> None:
    s = _settings("tensorflow", precision)
    assert s["precision"] == precision
    # TensorFlow turns TF32 on by default: "fp32" must switch it off.
    assert s["tf32"] is (precision == "tf32")
    assert s["keras_dtype_policy"] == {"amp-fp16": "mixed_float16", "amp-bf16": "mixed_bfloat16"}.get(
        precision, "float32"
    )
    assert s["cudnn_autotune"] is (precision == "fp32")
    # What Keras compiles with is known after model.compile: the runner sends it then (a settings event).
    assert s["compile_asked"] == "on" and "compile" not in s


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_the_study_preset_and_non_default_settings_reach_the_runner_and_the_session(
    framework: str, sessions_root: Path
) -> None:
    # The study's preset, shrunk, with every setting a user may change on top of it.
    result = benchtui(
        "run",
        "--headless",
        "--preset",
        "study",
        "--frameworks",
        framework,
        "--models",
        "resnet50",
        "--image-size",
        "32",
        "--samples",
        "8",
        "--batch-size",
        "4",
        "--epochs",
        "1",
        "--runs",
        "1",
        "--device",
        "cpu",
        "--precision",
        "amp-bf16",
        "--no-cudnn-autotune",
        "--channels-last",
        "--threads",
        "1",
        "--loader-workers",
        "1",
        "--sessions-dir",
        str(sessions_root),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    session = only_session(sessions_root)
    plan = json.loads((session / "session.json").read_text())["plan"]
    assert (
        plan["preset"],
        plan["precision"],
        plan["data"],
        plan["cudnn_autotune"],
        plan["channels_last"],
        plan["order"],
    ) == ("study", "amp-bf16", "host", False, True, "grouped")
    events = read_events(session)
    hello = next(e for e in events if e["type"] == "hello")
    config, settings = hello["config"], hello["settings"]
    assert (config["precision"], config["data"], config["cudnn_autotune"], config["channels_last"]) == (
        "amp-bf16",
        "host",
        False,
        True,
    )
    # The study's scripts (Wrosinski/dl_frameworks_benchmark): Adam at 1e-4, one sigmoid output with
    # binary cross-entropy, the NumPy array shuffled every epoch (model.fit's default; the PyTorch
    # DataLoader's shuffle=True), what each runner says it trained with.
    assert (config["optimizer"], config["learning_rate"], config["head"], config["shuffle"]) == (
        "adam",
        1e-4,
        "sigmoid",
        True,
    )
    assert settings["optimizer"] == "adam (lr 0.0001)" and settings["loss"] == "binary cross-entropy"
    assert settings["head"] == "sigmoid" and settings["outputs"] == 1 and settings["shuffle"] is True
    assert settings["precision"] == "amp-bf16" and settings["data"] == "host"
    assert config["threads"] == 1 and settings["intra_op_threads"] == 1  # the same pool size everywhere
    if framework == "torch":
        assert settings["cudnn_benchmark"] is False and settings["channels_last"] is True
        assert settings["tf32_matmul"] is False and settings["compile"] == "eager"
        # The study's loader is 4 workers with pinned memory; --loader-workers 1 changed it, and says so.
        assert settings["input"].startswith(
            "DataLoader over a NumPy array in host memory: 1 worker process(es)"
        )
        assert "shuffle on" in settings["input"]
    else:
        assert settings["keras_dtype_policy"] == "mixed_bfloat16" and settings["tf32"] is False
        assert settings["input"].startswith("model.fit on a NumPy array in host memory")
    # What Keras's jit_compile="auto" became reaches the run's settings after the build.
    resolved = {**settings, **next((e["settings"] for e in events if e["type"] == "settings"), {})}
    summary = json.loads((session / "summary.json").read_text())
    assert summary["frameworks"][framework]["settings"] == resolved  # and into every export from there
    if framework == "tensorflow":
        assert resolved["compile"] == "tf.function graph, no XLA (Keras's default, jit_compile='auto')"
    # The headless run ends with how each framework ran.
    assert (
        f"how: {'PyTorch' if framework == 'torch' else 'tf.keras'}: {resolved['compile']}; 1 thread"
        in result.stdout
    )
