"""The Keras runner: tf.keras on TensorFlow, or Keras 3 on JAX or torch (``KERAS_BACKEND``).

``--data host`` trains with ``model.fit`` on a NumPy array, as the study did, timing
every batch in a callback (``steps_per_execution=1``). ``--data device`` keeps a few
batches as backend tensors on the device and steps with ``train_on_batch``. Either
way each step is forced to complete before the clock is read.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any

from runners.config import RunConfig, Unavailable, peak_rss_bytes
from runners.protocol import EventWriter


def _backend() -> str:
    return os.environ.get("KERAS_BACKEND", "tensorflow")


def _pre_import_settings(config: RunConfig) -> None:
    # Read by TensorFlow at import: cuDNN autotuning and log noise.
    os.environ["TF_CUDNN_USE_AUTOTUNE"] = "1" if config.cudnn_autotune else "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if _backend() == "jax":
        # JAX grabs 75% of GPU memory up front by default; allocate as needed so
        # peak memory means the same thing as in the other frameworks.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def _versions() -> dict[str, Any]:
    import keras

    versions: dict[str, Any] = {"python": platform.python_version(), "keras": keras.__version__}
    backend = _backend()
    if backend == "tensorflow":
        import tensorflow as tf

        versions["tensorflow"] = tf.__version__
        build = tf.sysconfig.get_build_info()
        versions["cuda"] = build.get("cuda_version")
        versions["cudnn"] = build.get("cudnn_version")
    elif backend == "jax":
        import jax
        import jaxlib

        versions["jax"] = jax.__version__
        versions["jaxlib"] = jaxlib.__version__
    elif backend == "torch":
        import torch

        versions["torch"] = torch.__version__
        versions["cuda"] = torch.version.cuda
    return versions


def _devices() -> list[dict[str, Any]]:
    backend = _backend()
    out: list[dict[str, Any]] = []
    if backend == "tensorflow":
        import tensorflow as tf

        for dev in tf.config.list_physical_devices():
            kind = dev.device_type.lower()
            if kind not in ("cpu", "gpu"):
                continue
            info: dict[str, Any] = {"type": "cuda" if kind == "gpu" else "cpu", "name": dev.name}
            if kind == "gpu":
                details = tf.config.experimental.get_device_details(dev)
                info["name"] = details.get("device_name", dev.name)
            out.append(info)
    elif backend == "jax":
        import jax

        for dev in jax.devices():
            out.append({"type": "cuda" if dev.platform == "gpu" else dev.platform, "name": dev.device_kind})
    elif backend == "torch":
        import torch

        out.append({"type": "cpu", "name": platform.machine()})
        for i in range(torch.cuda.device_count()):
            out.append({"type": "cuda", "index": i, "name": torch.cuda.get_device_name(i)})
    return out


def describe(framework: str, device_spec: str) -> dict[str, Any]:
    """Versions and devices, for ``benchtui doctor``."""
    return {"versions": _versions(), "devices": _devices()}


def _resolve_device(spec: str) -> tuple[str, dict[str, Any]]:
    """Map ``auto|cpu|cuda|cuda:N`` to a Keras device name, or refuse."""
    gpus = [d for d in _devices() if d["type"] == "cuda"]
    if spec == "auto":
        spec = "cuda" if gpus else "cpu"
    if spec == "cpu":
        return "cpu", {"type": "cpu", "name": platform.machine()}  # "cpu:0" breaks gradients on the torch backend
    index = int(spec.split(":")[1]) if ":" in spec else 0
    if index >= len(gpus):
        raise Unavailable(f"{spec}: {_backend()} sees {len(gpus)} GPU(s)")
    return f"gpu:{index}", {**gpus[index], "index": index}


def _sync(backend: str, logs: Any = None) -> None:
    """Block until the device has finished all work queued so far."""
    if backend == "tensorflow":
        import tensorflow as tf

        tf.test.experimental.sync_devices()
    elif backend == "jax":
        import jax

        # Outputs of one compiled step all become ready together with the update.
        jax.block_until_ready(logs)
        jax.effects_barrier()
    elif backend == "torch":
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()


def _peak_memory(backend: str, device_name: str) -> dict[str, Any]:
    try:
        if device_name.startswith("gpu"):
            if backend == "tensorflow":
                import tensorflow as tf

                info = tf.config.experimental.get_memory_info(device_name.upper())
                return {"peak_bytes": info["peak"], "source": "tf get_memory_info peak"}
            if backend == "jax":
                import jax

                index = int(device_name.split(":")[1])
                stats = jax.devices("gpu")[index].memory_stats() or {}
                return {
                    "peak_bytes": stats.get("peak_bytes_in_use"),
                    "source": "jax memory_stats peak_bytes_in_use",
                }
            if backend == "torch":
                import torch

                return {"peak_bytes": torch.cuda.max_memory_allocated(), "source": "torch.cuda.max_memory_allocated"}
    except Exception as exc:  # noqa: BLE001 - a missing counter is reported, not fatal
        return {"peak_bytes": None, "source": f"unavailable ({exc})"}
    return {"peak_bytes": peak_rss_bytes(), "source": "process peak RSS (CPU)"}


def _settings(config: RunConfig, backend: str) -> dict[str, Any]:
    import keras

    settings: dict[str, Any] = {"precision": config.precision, "data": config.data}
    policy = {"amp-fp16": "mixed_float16", "amp-bf16": "mixed_bfloat16"}.get(config.precision, "float32")
    keras.mixed_precision.set_global_policy(policy)
    settings["keras_dtype_policy"] = policy
    tf32 = config.precision == "tf32"
    if backend == "tensorflow":
        import tensorflow as tf

        # TensorFlow enables TF32 by default and PyTorch does not: choose it explicitly.
        tf.config.experimental.enable_tensor_float_32_execution(tf32)
        settings["tf32"] = tf.config.experimental.tensor_float_32_execution_enabled()
        settings["cudnn_autotune"] = os.environ.get("TF_CUDNN_USE_AUTOTUNE") == "1"
        settings["compile"] = "xla (jit_compile=True)" if config.compile else "tf.function graph"
        if config.threads > 0:
            tf.config.threading.set_intra_op_parallelism_threads(config.threads)
        # 0 means TensorFlow sizes the pool itself: one thread per logical core.
        settings["intra_op_threads"] = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    elif backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "float32")
        settings["tf32"] = tf32
        settings["compile"] = "xla (JAX always compiles)"
        settings["intra_op_threads"] = config.threads or os.cpu_count()
    elif backend == "torch":
        import torch

        if config.threads > 0:
            torch.set_num_threads(config.threads)
        settings["intra_op_threads"] = torch.get_num_threads()
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = config.cudnn_autotune
        settings["tf32"] = tf32
        settings["cudnn_autotune"] = config.cudnn_autotune
        settings["compile"] = "torch.compile" if config.compile else "eager"
    settings["channels_last"] = True  # Keras applications are NHWC
    return settings


def _jit_compile(config: RunConfig, backend: str) -> bool:
    if backend == "jax":
        return True  # without jit, JAX runs op by op: no one trains that way
    return bool(config.compile)


def run(config: RunConfig, writer: EventWriter, import_started: float) -> None:
    _pre_import_settings(config)
    import keras
    import numpy as np

    backend = _backend()
    writer.phase("import", "end")
    device_name, device_info = _resolve_device(config.device)
    settings = _settings(config, backend)
    keras.utils.set_random_seed(config.seed)
    writer.hello(
        framework=config.framework,
        versions=_versions(),
        device=device_info,
        config=config.to_dict(),
        settings=settings,
        steps_per_epoch=config.steps_per_epoch,
        samples_per_epoch=config.samples_per_epoch,
    )
    bs, size, steps = config.batch_size, config.image_size, config.steps_per_epoch
    n = config.samples_per_epoch

    with keras.device(device_name):
        writer.phase("data", "start")
        rng = np.random.default_rng(config.seed)
        if config.data == "host":
            x_host = rng.standard_normal((n, size, size, 3), dtype=np.float32)
            y_host = rng.integers(0, config.num_classes, n, dtype=np.int64)
            pool = []
        else:
            pool = [
                (
                    keras.random.normal((bs, size, size, 3), seed=config.seed + i),
                    keras.ops.convert_to_tensor(rng.integers(0, config.num_classes, bs), dtype="int32"),
                )
                for i in range(min(steps, 4))
            ]
            _sync(backend, [p[0] for p in pool])
        writer.phase("data", "end")

        from runners.models import build_keras

        writer.phase("build", "start")
        model = build_keras(config.model, config.num_classes, size)
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate=config.learning_rate, momentum=config.momentum),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=_jit_compile(config, backend),
            steps_per_execution=1,
        )
        _sync(backend)
        writer.phase("build", "end")

        state = {"first": True, "epoch": 0, "t_batch": 0.0, "t_epoch": 0.0}

        def batch_begin(step: int) -> None:
            if state["first"]:
                writer.phase("first_batch", "start")
            state["t_batch"] = time.perf_counter()

        def batch_end(step: int, logs: Any) -> None:
            _sync(backend, logs)
            writer.batch(state["epoch"], step + 1, time.perf_counter() - state["t_batch"], bs)
            if state["first"]:
                writer.phase("first_batch", "end")
                state["first"] = False

        def epoch_begin(epoch: int) -> None:
            _sync(backend)
            state["epoch"] = epoch + 1
            state["t_epoch"] = time.perf_counter()

        def epoch_end(epoch: int) -> None:
            _sync(backend)
            writer.epoch(epoch + 1, time.perf_counter() - state["t_epoch"], n)
            writer.memory(epoch=epoch + 1, **_peak_memory(backend, device_name))

        if config.data == "host":

            class Timing(keras.callbacks.Callback):
                def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
                    batch_begin(batch)

                def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                    batch_end(batch, logs)

                def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
                    epoch_begin(epoch)

                def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                    epoch_end(epoch)

            model.fit(
                x_host,
                y_host,
                batch_size=bs,
                epochs=config.epochs_to_run,
                shuffle=False,
                verbose=0,
                callbacks=[Timing()],
            )
        else:
            for epoch in range(config.epochs_to_run):
                epoch_begin(epoch)
                for step in range(steps):
                    x, y = pool[step % len(pool)]
                    batch_begin(step)
                    logs = model.train_on_batch(x, y, return_dict=True)
                    batch_end(step, logs)
                epoch_end(epoch)
        final_memory = _peak_memory(backend, device_name)  # before counting: no part of the run
        if config.mode == "train":
            # FLOPs of one step, counted after the timed epochs so it warms up nothing timed.
            from runners.flops import count_keras, emit_flops

            emit_flops(writer, lambda: count_keras(model, backend, bs, size, config.num_classes), bs)
    writer.done(**final_memory)
