"""Build models at their smallest size and step each once in one framework: a training step and a forward.

Run by tests/test_workload_models.py, one fresh process per framework:

    python tests/data/step_models.py FRAMEWORK MODEL [MODEL ...]

FRAMEWORK is a catalog framework id (torch, tensorflow, keras-jax, keras-torch). For every
model: build it with random weights (the runners' builders), run one inference forward
(eval / ``training=False``; token models: a second build, returning only the last
position's logits), then train one batch of 2 (loss, backward, SGD update). Prints one
JSON line per model, and a last line ``{"done": true, "seconds": ...}``. A model that fails prints ``{"model", "error"}``
and the others still run. One thread per framework: the tests share two cores.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runners"))

from benchtui_runners import catalog
from benchtui_runners.config import apply_thread_env

BATCH = 2
NUM_CLASSES = 10
SEQ_LEN = 8


def image_size(model: str) -> int:
    """The smallest size the test builds a model at (ViTs: 32 px, 2x2 patches of 16)."""
    return max(32, catalog.MODELS[model].min_image_size)


def expected_shapes(model: str) -> tuple[list[int], list[int]]:
    """The shapes of a model's outputs: (training, inference)."""
    info = catalog.MODELS[model]
    if info.kind == "tokens":
        vocab = info.config["vocab"]
        return [BATCH, SEQ_LEN, vocab], [BATCH, 1, vocab]
    return [BATCH, NUM_CLASSES], [BATCH, NUM_CLASSES]


def step_torch(model_id: str) -> dict[str, Any]:
    import torch

    from benchtui_runners.models import build_torch, torch_loss, torch_params

    info = catalog.MODELS[model_id]
    size, seq = image_size(model_id), (SEQ_LEN if info.kind == "tokens" else 0)
    torch.manual_seed(0)
    if info.kind == "tokens":
        x = torch.randint(0, info.config["vocab"], (BATCH, SEQ_LEN))
        y = torch.randint(0, info.config["vocab"], (BATCH, SEQ_LEN))
    else:
        x = torch.randn(BATCH, 3, size, size)
        y = torch.randint(0, NUM_CLASSES, (BATCH,))
    started = time.perf_counter()
    model = build_torch(model_id, NUM_CLASSES, size, seq)
    params, trainable = torch_params(model)
    built = time.perf_counter()
    # Inference first, on the weights as built: one SGD step at batch 2 and 32 px can blow up
    # weights behind batch norms over 1x1 maps, and the forward after it overflow (not a bug).
    inference = build_torch(model_id, NUM_CLASSES, size, seq, last_only=True) if seq else model
    inference.eval()
    with torch.inference_mode():
        predicted = inference(x)
    inferred = time.perf_counter()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    outputs = model(x)
    loss = torch_loss("softmax", info.kind)(outputs.float(), y)
    loss.backward()
    optimizer.step()
    return {
        "params": params,
        "trainable": trainable,
        "loss": float(loss),
        "train_shape": list(outputs.shape),
        "infer_shape": list(predicted.shape),
        "infer_finite": bool(torch.isfinite(predicted).all()),
        "build_s": built - started,
        "infer_s": inferred - built,
        "step_s": time.perf_counter() - inferred,
    }


def step_keras(model_id: str) -> dict[str, Any]:
    import keras
    import numpy as np

    from benchtui_runners.models import build_keras, keras_loss, keras_params

    info = catalog.MODELS[model_id]
    size, seq = image_size(model_id), (SEQ_LEN if info.kind == "tokens" else 0)
    rng = np.random.default_rng(0)
    x: Any
    if info.kind == "tokens":
        x = rng.integers(0, info.config["vocab"], (BATCH, SEQ_LEN), dtype="int32")
        y = rng.integers(0, info.config["vocab"], (BATCH, SEQ_LEN), dtype="int32")
    else:
        x = rng.standard_normal((BATCH, size, size, 3), dtype="float32")
        y = rng.integers(0, NUM_CLASSES, (BATCH,), dtype="int32")
    started = time.perf_counter()
    model = build_keras(model_id, NUM_CLASSES, size, "softmax", seq)
    params, trainable = keras_params(model)
    built = time.perf_counter()
    # Inference first, on the weights as built (see step_torch). Token models: the inference
    # build, which returns only the last position's logits.
    inference = build_keras(model_id, NUM_CLASSES, size, "softmax", seq, last_only=True) if seq else model
    predicted = keras.ops.convert_to_numpy(inference(x, training=False))
    inferred = time.perf_counter()
    # Eager, no XLA: this proves the model builds and trains through Keras' own training step
    # (compile, train_on_batch, the optimizer), not how fast. Tracing a graph of the step would
    # cost ~10 s a model on two cores (the runners' tests and FLOP counts trace them).
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras_loss("softmax", info.kind),
        jit_compile=False,
        run_eagerly=True,
    )
    # train_on_batch: one step, no callbacks, no progress bar, no dataset adapter.
    loss = model.train_on_batch(x, y)
    train_shape = [BATCH, *model.outputs[0].shape[1:]]  # what the compiled step's forward returns
    return {
        "params": params,
        "trainable": trainable,
        "loss": float(np.asarray(loss).reshape(-1)[0]),
        "train_shape": train_shape,
        "infer_shape": list(predicted.shape),
        "infer_finite": bool(np.isfinite(predicted).all()),
        "build_s": built - started,
        "infer_s": inferred - built,
        "step_s": time.perf_counter() - inferred,
    }


def main(framework: str, models: list[str]) -> None:
    started = time.perf_counter()
    family, backend, _ = catalog.FRAMEWORKS[framework]
    if backend:
        os.environ["KERAS_BACKEND"] = backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    apply_thread_env(1)
    if family == "torch" or backend == "torch":
        import torch

        torch.set_num_threads(1)
    step = step_torch if family == "torch" else step_keras
    for model in models:
        try:
            result: dict[str, Any] = {"model": model, "framework": framework, **step(model)}
        except Exception as exc:  # one model's failure must not hide the others'
            result = {"model": model, "framework": framework, "error": f"{type(exc).__name__}: {exc}"}
            traceback.print_exc()
        print(json.dumps(result), flush=True)
    print(json.dumps({"done": True, "framework": framework, "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
