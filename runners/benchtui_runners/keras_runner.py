"""The Keras runner: tf.keras on TensorFlow, or Keras 3 on JAX or torch (``KERAS_BACKEND``).

Every run trains with ``model.fit``, what Keras users run: on a NumPy array in host memory
(``--data host``, as the study did), or on a few batches made on the device (``--data
device``). Steps and epochs are timed by the clock every runner shares
(``benchtui_runners.timing``) from a callback that waits for the device once per window
of steps, never per step.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from benchtui_runners import custom as user
from benchtui_runners import lifecycle
from benchtui_runners.catalog import MODELS, custom_entry
from benchtui_runners.config import (
    ClusterError,
    DeviceMissing,
    RunConfig,
    Unavailable,
    allocator_settings,
    apply_gpu_memory_env,
    peak_rss_bytes,
    rendezvous_timeout,
    tf_config,
    training_record,
    usable_cores,
    xla_flags,
)
from benchtui_runners.protocol import EventWriter, deadline
from benchtui_runners.timing import StepClock


def _backend() -> str:
    return os.environ.get("KERAS_BACKEND", "tensorflow")


def _pre_import_settings(config: RunConfig) -> None:
    """Environment the frameworks read once, at import or when their runtime starts."""
    # cuDNN autotuning (TensorFlow), and XLA's own kernel autotuning (JAX, TF with XLA).
    os.environ["TF_CUDNN_USE_AUTOTUNE"] = "1" if config.cudnn_autotune else "0"
    os.environ["XLA_FLAGS"] = xla_flags(config.cudnn_autotune)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    # Memory policy, the same idea everywhere: allocate as needed, so peak memory means the
    # same thing in every framework. TensorFlow otherwise maps nearly all of every visible
    # GPU; JAX preallocates 75%. A user's own setting wins, and is recorded.
    apply_gpu_memory_env()  # the doctor's probes start under the same policy
    if config.device == "cpu" and _backend() == "jax":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no CUDA plugin start-up on a CPU plan
        if config.replicas > 1:
            # Data parallel on the CPU: XLA makes the host look like that many devices (JAX's own
            # tests do this), read once when the backend starts.
            flag = f"--xla_force_host_platform_device_count={config.replicas}"
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()


def _logical_cpus(config: RunConfig, backend: str) -> None:
    """tf.distribute on the CPU: split the host into ``replicas`` logical CPU devices, before the
    runtime starts (as TensorFlow's own distribution tests do)."""
    if backend != "tensorflow" or config.replicas <= 1 or config.device != "cpu":
        return
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(config.replicas)]
    )


def data_parallel(
    config: RunConfig, backend: str, writer: EventWriter | None = None
) -> tuple[Any, dict[str, Any]]:
    """The framework's own data parallel over the run's devices: (a scope to build and train in, the
    record of how it reduces gradients). TensorFlow: ``tf.distribute.MirroredStrategy``; JAX:
    ``keras.distribution.DataParallel`` (set for the whole process). Several nodes:
    ``MultiWorkerMirroredStrategy`` from ``TF_CONFIG``, or DataParallel over every process's devices
    once ``jax.distributed`` has joined them (``join_jax``)."""
    n = config.replicas
    kind = "CPU" if config.device == "cpu" else "GPU"
    if config.nodes > 1 and backend == "tensorflow":
        return multi_worker(config, kind, writer)
    if config.nodes > 1 and backend == "jax":
        return jax_processes(config, kind)
    if backend == "tensorflow":
        import tensorflow as tf

        names = [f"/{kind.lower()}:{i}" for i in range(n)]
        strategy = tf.distribute.MirroredStrategy(devices=names)
        ops = getattr(strategy.extended, "_cross_device_ops", None)
        ops_name = type(ops).__name__ if ops is not None else "default"
        options = getattr(ops, "_options", None)
        implementation = getattr(getattr(options, "implementation", None), "name", None)
        pack = getattr(options, "bytes_per_pack", None)
        return strategy.scope(), {
            "engine": "tf.distribute.MirroredStrategy (one process, a replica per device)",
            "replicas": strategy.num_replicas_in_sync,
            "devices": names,
            "all_reduce": f"{ops_name}"
            + (
                f" (implementation {implementation}: NCCL on GPUs, ring on the CPU when AUTO)"
                if implementation
                else ""
            ),
            "bucket": f"{pack} bytes per pack" if pack else "all gradients in one pack (bytes_per_pack 0)",
            "overlap": "no: Keras computes every gradient, then the optimizer all-reduces them in its apply step",
        }
    if backend == "jax":
        import contextlib

        import keras

        devices = keras.distribution.list_devices(kind.lower())
        if len(devices) < n:
            raise DeviceMissing(f"Keras/JAX sees {len(devices)} {kind} device(s), the run asks for {n}")
        distribution = keras.distribution.DataParallel(devices=devices[:n])
        keras.distribution.set_distribution(distribution)
        return contextlib.nullcontext(), {
            "engine": "keras.distribution.DataParallel (JAX SPMD over a 1-D device mesh)",
            "replicas": n,
            "devices": [str(d) for d in devices[:n]],
            "all_reduce": "inserted by XLA's SPMD partitioner (NCCL on GPUs, in-process on the CPU)",
            "bucket": "XLA's all-reduce combiner joins gradients up to its size threshold",
            "overlap": "as XLA schedules it (asynchronous collectives on GPUs can overlap the backward pass)",
        }
    raise DeviceMissing(
        f"{_LABELS.get(backend, backend)} has no data parallel in Keras 3 (keras.distribution: JAX only)"
    )


def refuse_nodes(config: RunConfig, backend: str) -> None:
    """Several nodes where Keras has no engine for them: refused in one line, before anything starts."""
    if config.nodes <= 1:
        return
    if backend == "torch":
        raise Unavailable(
            "Keras/torch cannot train on several nodes: Keras 3's distribution (keras.distribution) runs on JAX only"
        )
    if backend == "tensorflow" and config.replicas > 1 and config.device == "cpu":
        raise Unavailable(
            "tf.keras on several nodes runs one replica per node on the CPU (MultiWorkerMirroredStrategy "
            "takes one CPU device per worker): use --devices 1 with --nodes on a CPU"
        )


def check_tf_config(config: RunConfig) -> dict[str, Any]:
    """``TF_CONFIG``, which the parent writes from the nodes' addresses (``config.tf_config``): present,
    and naming this run's workers and this node's index; else one line saying what is wrong."""
    import json

    raw = os.environ.get("TF_CONFIG", "")
    if not raw:
        raise ClusterError(
            "tf.keras on several nodes needs TF_CONFIG in the runner's environment (benchtui writes it from "
            f"the nodes' addresses: {tf_config(config)}); it is missing"
        )
    try:
        found = json.loads(raw)
    except ValueError as exc:
        raise ClusterError(f"TF_CONFIG is not JSON ({exc}): {raw[:200]}") from None
    want = json.loads(tf_config(config))
    if not isinstance(found, dict):
        raise ClusterError(f"TF_CONFIG is not a JSON object: {raw[:200]}")
    workers = (found.get("cluster") or {}).get("worker") if isinstance(found.get("cluster"), dict) else None
    if workers != want["cluster"]["worker"]:
        raise ClusterError(
            f"TF_CONFIG's workers {workers} are not the run's nodes {want['cluster']['worker']}"
        )
    if found.get("task") != want["task"]:
        raise ClusterError(f"TF_CONFIG's task {found.get('task')} is not this node's {want['task']}")
    return want


def _keras_multi_worker_fixes() -> None:
    """Keras 3's ``model.fit`` under ``MultiWorkerMirroredStrategy`` with several workers, made to run.

    Keras 3.15 fails there in two places (keras-team/keras#20585, open): its symbolic build reduces the
    first batch with ``strategy.reduce`` ("Attempt to convert a value (PerReplica ...) to a Tensor"),
    and each step's outputs (scalar metrics) are reduced with ``axis=0`` ("Invalid reduction dimension 0
    for input with 0 dimensions"). So, in this process only (a run on several nodes): the build takes
    the first local replica's batch (only its shapes matter), and a scalar is averaged over every
    replica with ``axis=None``. The training step itself is Keras's own.
    """
    import tensorflow as tf
    from keras.src import tree
    from keras.src.backend.tensorflow import trainer as tf_trainer

    if getattr(tf_trainer, "_benchtui_multi_worker", False):
        return
    reduce_per_replica = tf_trainer.reduce_per_replica

    def local(strategy: Any, value: Any) -> Any:
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    def reduce_scalars_too(values: Any, strategy: Any, reduction: str) -> Any:
        if reduction in ("auto", "mean") and tf_trainer._collective_all_reduce_multi_worker(strategy):
            return tree.map_structure(
                lambda v: strategy.reduce("MEAN", v, axis=None if local(strategy, v).shape.rank == 0 else 0),
                values,
            )
        return reduce_per_replica(values, strategy, reduction)

    def build_from_a_local_batch(self: Any, iterator: Any = None, data_batch: Any = None) -> None:
        if self._distribute_strategy is None:
            return
        strategy = self.distribute_strategy
        if iterator is not None:
            for _, _, it in iterator:
                data_batch = tree.map_structure(lambda v: local(strategy, v), next(it))
                break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    tf_trainer.reduce_per_replica = reduce_scalars_too
    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = build_from_a_local_batch
    tf_trainer._benchtui_multi_worker = True  # type: ignore[attr-defined]


def nodes_record(config: RunConfig, engine: str, process: int, link: str) -> dict[str, Any]:
    """What ``settings.distributed`` gains on several nodes (Keras: one process per node)."""
    return {
        "engine": engine,
        "nodes": config.nodes,
        "node_rank": config.node_rank,
        "ranks": [process, 1],
        "link": link,
    }


def multi_worker(config: RunConfig, kind: str, writer: EventWriter | None) -> tuple[Any, dict[str, Any]]:
    """tf.keras on several nodes: ``MultiWorkerMirroredStrategy`` from ``TF_CONFIG`` (checked against the
    run), its collectives over gRPC between the workers. It waits for every worker when it is built: a
    worker that never comes fails the run in ``rendezvous_timeout()`` seconds, in one line."""
    import tensorflow as tf

    check_tf_config(config)
    timeout = rendezvous_timeout()
    message = (
        f"MultiWorkerMirroredStrategy: the {config.nodes} TensorFlow workers at {', '.join(config.cluster)} "
        f"did not all start within {timeout:g} s (this node: worker {config.node_rank})"
    )
    with deadline(writer or EventWriter(None), timeout, message):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if strategy.num_replicas_in_sync != config.world:
        raise ClusterError(
            f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} replicas over {config.nodes} "
            f"workers; the run asks for {config.world} ({config.replicas} per node)"
        )
    _keras_multi_worker_fixes()
    extended = strategy.extended
    ops = getattr(extended, "_cross_device_ops", None)
    options = getattr(extended, "_communication_options", None)
    asked = getattr(getattr(options, "implementation", None), "name", None) or "AUTO"
    # AUTO: NCCL for GPU tensors, a ring (gRPC between workers) for the CPU's (TensorFlow's collectives).
    became = asked if asked != "AUTO" else ("NCCL" if kind == "GPU" else "RING")
    devices = [str(d) for d in getattr(extended, "worker_devices", ())]
    return strategy.scope(), {
        "replicas": strategy.num_replicas_in_sync,
        "devices": devices,
        "all_reduce": f"{type(ops).__name__ if ops is not None else 'default'} (implementation {asked}"
        + (f" -> {became})" if asked == "AUTO" else ")"),
        "bucket": "all gradients in one pack (bytes_per_pack 0)",
        "overlap": "no: Keras computes every gradient, then the optimizer all-reduces them in its apply step",
        **nodes_record(
            config,
            "tf.distribute.MultiWorkerMirroredStrategy",
            config.node_rank,
            f"{asked}{' -> ' + became if asked == 'AUTO' else ''} collectives over gRPC",
        ),
        "cluster": list(config.cluster),
        # Said where the wiring is read: this run's fit is Keras's with two fixes of benchtui's.
        "keras_patch": "model.fit under this strategy fixed in two places Keras 3 breaks (keras-team/keras#20585): "
        "the first step's build from one replica's batch, scalar metrics reduced without an axis",
    }


def join_jax(config: RunConfig, writer: EventWriter) -> None:
    """Keras/JAX on several nodes: ``jax.distributed.initialize`` with node 0's coordinator, before
    anything starts the backend (CPU collectives between processes: gloo). A process that waits longer
    than ``rendezvous_timeout()`` seconds fails in one line (JAX's own timeout, set later as a
    backstop, aborts the process without a word)."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    timeout = rendezvous_timeout()
    message = (
        f"jax.distributed: the {config.nodes} processes did not all join the coordinator at "
        f"{config.rendezvous} within {timeout:g} s (this node: process {config.node_rank})"
    )
    with deadline(writer, timeout, message):
        jax.distributed.initialize(
            coordinator_address=config.rendezvous,
            num_processes=config.nodes,
            process_id=config.node_rank,
            initialization_timeout=int(timeout) + 30,
        )


def jax_processes(config: RunConfig, kind: str) -> tuple[Any, dict[str, Any]]:
    """Keras/JAX on several nodes: ``keras.distribution.DataParallel`` over every process's devices
    (``jax.devices()``, global once ``join_jax`` has run); each process feeds its own share of every
    global batch (``auto_shard_dataset`` off: the batch Keras is handed is this process's)."""
    import contextlib

    import jax
    import keras

    devices = keras.distribution.list_devices(kind.lower())
    if len(devices) != config.world:
        raise ClusterError(
            f"jax.distributed joined {jax.process_count()} processes with {len(devices)} {kind} device(s) in "
            f"all; the run asks for {config.world} ({config.replicas} on each of {config.nodes} nodes)"
        )
    distribution = keras.distribution.DataParallel(devices=devices)
    distribution.auto_shard_dataset = False
    keras.distribution.set_distribution(distribution)
    link = (
        "NCCL through XLA" if kind == "GPU" else "jax.distributed (gRPC coordinator), CPU collectives: gloo"
    )
    return contextlib.nullcontext(), {
        "replicas": len(devices),
        "devices": [str(d) for d in devices],
        "all_reduce": "inserted by XLA's SPMD partitioner (NCCL on GPUs, gloo between processes on the CPU)",
        "bucket": "XLA's all-reduce combiner joins gradients up to its size threshold",
        "overlap": "as XLA schedules it (asynchronous collectives on GPUs can overlap the backward pass)",
        **nodes_record(
            config, "jax.distributed + keras.distribution.DataParallel", jax.process_index(), link
        ),
        "rendezvous": f"jax.distributed coordinator at {config.rendezvous}",
    }


def _gpus() -> list[dict[str, Any]]:
    """The GPUs this backend sees, in its own order (the launcher makes that order the PCI order)."""
    backend = _backend()
    out: list[dict[str, Any]] = []
    if backend == "tensorflow":
        import tensorflow as tf

        for i, dev in enumerate(tf.config.list_physical_devices("GPU")):
            details = tf.config.experimental.get_device_details(dev)
            out.append(
                {
                    "type": "cuda",
                    "index": i,
                    "name": details.get("device_name", dev.name),
                    **_capability(details.get("compute_capability")),
                }
            )
    elif backend == "jax":
        out = [
            {
                "type": "cuda",
                "index": i,
                "name": d.device_kind,
                **_capability(getattr(d, "compute_capability", None)),
            }
            for i, d in enumerate(_jax_gpus())
        ]
    elif backend == "torch":
        import torch

        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                out.append(
                    {
                        "type": "cuda",
                        "index": i,
                        "name": torch.cuda.get_device_name(i),
                        **_capability(None if torch.version.hip else torch.cuda.get_device_capability(i)),
                    }
                )
    return out


def _capability(value: Any) -> dict[str, str]:
    """``{"capability": "8.6"}`` from what a backend says of a CUDA GPU (TensorFlow and torch: a
    tuple (8, 6); JAX: "8.6"); nothing where it says nothing."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return {"capability": f"{int(value[0])}.{int(value[1])}"}
    if isinstance(value, str) and value.count(".") == 1:
        return {"capability": value}
    return {}


def refuse_emulated_bf16(config: RunConfig, backend: str, device_info: dict[str, Any]) -> None:
    """``amp-bf16`` on a GPU without bfloat16 arithmetic (before compute capability 8.0): refused,
    as the PyTorch runner refuses it (XLA, and so JAX and TensorFlow with XLA, would compute it in
    float32; ``models.bf16_refusal``)."""
    if config.precision != "amp-bf16" or device_info.get("type") != "cuda":
        return
    major, _, minor = str(device_info.get("capability") or "").partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return  # unknown: nothing to refuse on
    from benchtui_runners.models import bf16_refusal

    refusal = bf16_refusal(_LABELS[backend], str(device_info.get("name")), (int(major), int(minor)))
    if refusal:
        raise DeviceMissing(refusal)


#: What makes every training step of ``model.fit`` wait for the device, per backend, where something does.
TF_LOGS_SYNC = (
    "model.fit converts every step's logs to Python floats on the main thread (TensorFlow's "
    "backend is not thread-safe, so Keras dispatches no callback asynchronously)"
)
TORCH_LOSS_SCALE_SYNC = (
    "LossScaleOptimizer's ops.cond is a Python if on the torch backend: it reads whether the "
    "gradients are finite (Tensor.__bool__) every step"
)
#: Seen under the faithful GPU fake (tests/test_fakegpu_faithful.py), Keras 3.15: its torch backend
#: turns Python numbers into device tensors with torch.as_tensor(x, device=...) (a blocking copy,
#: which waits for the queued work) in the loss's and the metrics' reductions, and its SGD passes the
#: learning rate, a device tensor, as foreach's alpha (a number: .item()).
TORCH_BACKEND_SYNC = (
    "Keras's torch backend copies Python numbers to the device with blocking copies every step "
    "(the loss's and the metrics' reductions, keras/src/backend/torch/core.py convert_to_tensor)"
)
TORCH_SGD_SYNC = (
    "its SGD reads the learning rate on the host (.item()) every step (torch_sgd.py, foreach alpha)"
)


def step_waits(config: RunConfig, backend: str) -> str | None:
    """What makes every training step wait for the device, in words; None when nothing does.

    TensorFlow: ``CallbackList`` dispatches ``on_train_batch_end`` asynchronously only on a
    thread-safe backend (keras/src/callbacks/callback_list.py, ``_configure_async_dispatch``;
    tensorflow/core.py ``IS_THREAD_SAFE = False``), so ``pythonify_logs`` floats the step's loss
    on the main thread, whatever the callbacks. ``mixed_float16`` adds nothing there: the
    LossScaleOptimizer's ``ops.cond`` is in the graph (tf.cond; on JAX, lax.cond under jit). On
    torch (eager) ``ops.cond`` is ``if pred:`` (keras/src/backend/torch/core.py), and every step
    makes blocking copies of Python numbers and, with SGD, reads the learning rate. Inference
    returns every batch's outputs to the host by design, on every side, and is not counted.
    """
    if config.task != "train":
        return None
    if backend == "tensorflow":
        return TF_LOGS_SYNC
    if backend == "torch":
        waits = [TORCH_BACKEND_SYNC]
        definition = MODELS[config.model].custom if config.model in MODELS else {}
        own_optimizer = custom_entry((definition or {}).get("optimizers") or {}, config.framework)
        if config.optimizer == "sgd" and not own_optimizer:
            waits.append(TORCH_SGD_SYNC)
        if config.precision == "amp-fp16":
            waits.append(TORCH_LOSS_SCALE_SYNC)
        return "; ".join(waits)
    return None


def _jax_gpus() -> list[Any]:
    """This process's GPUs (on several nodes ``jax.devices`` lists every process's: only its own are
    this node's to place on and to read memory from)."""
    import jax

    try:
        gpus = list(jax.devices("gpu"))
    except RuntimeError:  # "Unknown backend: 'gpu' requested": no CUDA plugin, or it failed to start
        return []
    if jax.process_count() > 1:
        gpus = [d for d in gpus if d.process_index == jax.process_index()]
    return gpus


def _devices() -> list[dict[str, Any]]:
    return [{"type": "cpu", "name": platform.machine()}, *_gpus()]


def _installed(distribution: str) -> bool:
    """Whether a distribution (a pip package) is installed in this environment."""
    from importlib import metadata

    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def why_no_gpu() -> str:
    """One line: why this backend cannot use the GPU that NVML sees, and the command that fixes it."""
    backend = _backend()
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1")
    if hidden:
        return f"{_LABELS[backend]} sees no GPU: CUDA_VISIBLE_DEVICES hides every GPU"
    if backend == "tensorflow":
        import tensorflow as tf

        if not tf.test.is_built_with_cuda():
            return (
                f"tf.keras sees no GPU: TensorFlow {tf.__version__} was built without CUDA; on Linux run "
                "benchtui envs create --gpu tensorflow (its CUDA 12 build, in an environment of its own)"
            )
        major = str(tf.sysconfig.get_build_info().get("cuda_version") or "12").split(".")[0]
        if not _installed(f"nvidia-cudnn-cu{major}"):  # what tensorflow[and-cuda] brings for its CUDA
            return (
                "tf.keras sees no GPU: TensorFlow was installed without its CUDA libraries; run benchtui "
                "envs create --gpu tensorflow (tensorflow[and-cuda], CUDA 12, in an environment of its own)"
            )
        return (
            "tf.keras sees no GPU: TensorFlow found its CUDA libraries but no usable GPU (driver too old "
            "for its CUDA? see the run's log)"
        )
    if backend == "jax":
        import jax

        if not (_installed("jax-cuda12-plugin") or _installed("jax-cuda13-plugin")):
            return (
                f"Keras/JAX sees no GPU: jax {jax.__version__} is the CPU-only build; install "
                "'benchtui[gpu]' (jax[cuda13]) or run benchtui envs create --gpu keras-jax"
            )
        return "Keras/JAX sees no GPU: JAX's CUDA plugin is installed but did not start (see the run's log)"
    from benchtui_runners.torch_runner import why_no_cuda

    return why_no_cuda("Keras/torch")


_LABELS = {"tensorflow": "tf.keras", "jax": "Keras/JAX", "torch": "Keras/torch"}


def describe(framework: str, device_spec: str) -> dict[str, Any]:
    """Versions and devices, for ``benchtui doctor``."""
    devices = _devices()
    sees = any(d["type"] == "cuda" for d in devices)
    gpu = {"sees_gpu": True} if sees else {"sees_gpu": False, "why": why_no_gpu()}
    return {"versions": KerasDevice(_backend(), "cpu", {}).versions(), "devices": devices, "gpu": gpu}


def _resolve_device(spec: str) -> tuple[str, dict[str, Any]]:
    """Map ``auto|cpu|cuda|cuda:N`` to a Keras device name, or refuse: never a silent CPU fallback."""
    gpus = _gpus()
    if spec == "auto":
        spec = "cuda" if gpus else "cpu"
    if spec == "cpu":
        return "cpu", {
            "type": "cpu",
            "name": platform.machine(),
        }  # "cpu:0" breaks gradients on the torch backend
    if not gpus:
        raise DeviceMissing(why_no_gpu())
    index = int(spec.split(":")[1]) if ":" in spec else 0
    if index >= len(gpus):
        raise DeviceMissing(f"{spec}: {_LABELS[_backend()]} sees {len(gpus)} GPU(s)")
    return f"gpu:{index}", gpus[index]


def _memory_policy(backend: str, device_name: str) -> dict[str, Any]:
    """Apply the allocate-as-needed policy where it needs a call, and say what peak memory counts."""
    policy: dict[str, Any] = {"env": allocator_settings()}
    if not device_name.startswith("gpu"):
        policy["counter"] = "process peak RSS (host memory)"
        return policy
    if backend == "tensorflow":
        import tensorflow as tf

        try:
            for gpu in tf.config.list_physical_devices("GPU"):
                tf.config.experimental.set_memory_growth(gpu, True)  # before the runtime starts
            policy["allocator"] = "memory growth (allocate as needed)"
        except RuntimeError:  # the runtime had started: TF_FORCE_GPU_ALLOW_GROWTH (set before import) holds
            policy["allocator"] = (
                f"memory growth (TF_FORCE_GPU_ALLOW_GROWTH={os.environ.get('TF_FORCE_GPU_ALLOW_GROWTH')})"
            )
        policy["counter"] = "tf.config.experimental.get_memory_info peak: bytes in use at the peak"
    elif backend == "jax":
        prealloc = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() not in ("false", "0")
        # XLA_CLIENT_MEM_FRACTION is the newer name of XLA_PYTHON_CLIENT_MEM_FRACTION.
        fraction = os.environ.get("XLA_CLIENT_MEM_FRACTION") or os.environ.get(
            "XLA_PYTHON_CLIENT_MEM_FRACTION"
        )
        policy["allocator"] = (
            f"preallocate {fraction or '75%'} of the GPU"
            if prealloc
            else "no preallocation (allocate as needed)"
        )
        policy["counter"] = "jax Device.memory_stats peak_bytes_in_use: bytes in use at the peak"
    elif backend == "torch":
        policy["allocator"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "default caching allocator"
        policy["counter"] = "torch.cuda.max_memory_allocated: bytes in tensors at the peak"
    return policy


def _gpu_index(device_name: str) -> int:
    return int(device_name.split(":")[1])


def _sync_worker(task: int) -> None:
    """``tf.test.experimental.sync_devices`` over this worker's own devices only: under
    MultiWorkerMirroredStrategy the logical devices include the other workers' (``/job:worker/task:K``),
    which a SyncDevice cannot run on ("Haven't set up remote eager worker")."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    mine = f"/task:{task}/"
    for device in tf.config.list_logical_devices():
        if "/task:" not in device.name or mine in device.name:
            with tf.device(device.name):
                tf.raw_ops.SyncDevice()
    context.async_wait()


class KerasDevice:
    """Keras's device layer, per backend: waits, peak memory, versions and the device's record.

    Used by the Keras runner and by the ``KerasTimer`` hook in a user's own script (``detail=False``:
    the framework's version only, no build libraries). ``name``: ``cpu`` or ``gpu:N``; ``info``: the
    device's record as resolved; ``state``: what the last step wrote (JAX waits for it).
    """

    def __init__(
        self,
        backend: str,
        name: str,
        info: dict[str, Any],
        state: Callable[[], Any] | None = None,
        detail: bool = True,
        task: int | None = None,
    ) -> None:
        self.backend = backend
        self.name = name
        self._info = info
        self.state = state
        self.detail = detail
        # TensorFlow on several nodes: this worker's task index (its devices are the ones it waits for).
        self.task = task
        self._torch_device: Any = None

    @property
    def gpu(self) -> bool:
        return self.name.startswith("gpu")

    def _torch(self) -> Any:
        """Keras on torch: PyTorch's own device layer, on the run's GPU (not the current one)."""
        if self._torch_device is None:
            import torch

            from benchtui_runners.torch_runner import TorchDevice

            self._torch_device = TorchDevice(torch.device("cuda", _gpu_index(self.name)), detail=False)
        return self._torch_device

    def sync(self, state: Any = None) -> None:
        """Block until the device has finished all work queued so far.

        ``state``: arrays the last step produced (its logs) or the model's variables; None: this
        device's ``state()``. JAX has no "wait for everything"; blocking on what the step wrote is how
        it waits for the step.
        """
        backend = self.backend
        if backend == "tensorflow" and self.task is not None:
            _sync_worker(self.task)
        elif backend == "tensorflow":
            import tensorflow as tf

            tf.test.experimental.sync_devices()
        elif backend == "jax":
            import jax

            jax.block_until_ready(state if state is not None or self.state is None else self.state())
            jax.effects_barrier()
        elif backend == "torch" and self.gpu:
            self._torch().sync()

    def peak_memory(self) -> dict[str, Any]:
        try:
            if self.gpu:
                index = _gpu_index(self.name)
                if self.backend == "tensorflow":
                    import tensorflow as tf

                    info = tf.config.experimental.get_memory_info(f"GPU:{index}")
                    return {"peak_bytes": info["peak"], "source": "tf get_memory_info peak"}
                if self.backend == "jax":
                    stats = _jax_gpus()[index].memory_stats() or {}
                    return {
                        "peak_bytes": stats.get("peak_bytes_in_use"),
                        "source": "jax memory_stats peak_bytes_in_use",
                    }
                if self.backend == "torch":
                    return dict(self._torch().peak_memory())
        except Exception as exc:  # a missing counter is reported, not fatal
            return {"peak_bytes": None, "source": f"unavailable ({exc})"}
        return {"peak_bytes": peak_rss_bytes(), "source": "process peak RSS (CPU)"}

    def versions(self) -> dict[str, Any]:
        import keras

        versions: dict[str, Any] = {"python": platform.python_version(), "keras": keras.__version__}
        backend, detail = self.backend, self.detail
        if backend == "tensorflow":
            import tensorflow as tf

            versions["tensorflow"] = tf.__version__
            if detail:
                build = tf.sysconfig.get_build_info()
                versions["cuda"] = build.get("cuda_version")
                versions["cudnn"] = build.get("cudnn_version")
        elif backend == "jax":
            import jax

            versions["jax"] = jax.__version__
            if detail:
                import jaxlib

                versions["jaxlib"] = jaxlib.__version__
        elif backend == "torch":
            import torch

            versions["torch"] = torch.__version__
            if detail:
                versions["cuda"] = torch.version.cuda
        return versions

    def info(self) -> dict[str, Any]:
        return self._info


def default_device(backend: str) -> tuple[str, dict[str, Any]]:
    """The device a script trains on when it names none (what the ``KerasTimer`` hook times): the
    backend's first GPU (torch: its current one) as ``gpu:N`` and its record, or the CPU."""
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            details = tf.config.experimental.get_device_details(gpus[0])
            return "gpu:0", {
                "type": "cuda",
                "index": 0,
                "name": str(details.get("device_name", gpus[0].name)),
            }
    elif backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform != "cpu":
            kind = "cuda" if device.platform in ("gpu", "cuda") else device.platform
            return "gpu:0", {"type": kind, "index": 0, "name": device.device_kind}
    elif backend == "torch":
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            index = torch.cuda.current_device()
            return f"gpu:{index}", {"type": "cuda", "index": 0, "name": torch.cuda.get_device_name()}
    return "cpu", {"type": "cpu", "name": platform.processor() or platform.machine()}


def _variables(model: Any) -> list[Any]:
    """The backend arrays behind a Keras model's variables (what a step updates)."""
    return [v.value for v in model.variables]


def _settings(config: RunConfig, backend: str) -> dict[str, Any]:
    import keras

    # "compile" is what model.compile resolved, sent after the build (a "settings" event).
    settings: dict[str, Any] = {
        "precision": config.precision,
        "data": config.data,
        "compile_asked": config.compile,
    }
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
        if config.threads > 0:
            tf.config.threading.set_intra_op_parallelism_threads(config.threads)
        # 0 means TensorFlow sizes the pool itself: one thread per logical core.
        settings["intra_op_threads"] = (
            tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
        )
    elif backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "float32")
        settings["tf32"] = tf32
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
    settings["channels_last"] = True  # Keras applications are NHWC
    return settings


def _jit_compile(config: RunConfig) -> bool | str:
    """Keras's ``jit_compile`` for ``--compile``: its own ``"auto"`` by default (XLA on a GPU for
    TensorFlow, always for JAX, never for torch), or on or off as asked."""
    return {"on": True, "off": False}.get(config.compile, "auto")


def resolved_compile(backend: str, jit: bool, asked: str) -> str:
    """What Keras compiled with, after ``model.compile`` resolved ``jit_compile``, in words."""
    what = {
        ("tensorflow", True): "xla (jit_compile=True)",
        ("tensorflow", False): "tf.function graph, no XLA",
        ("jax", True): "xla (jax.jit)",
        ("jax", False): "jax without jit (op by op)",
        ("torch", True): "torch.compile (jit_compile=True)",
        ("torch", False): "eager",
    }.get((backend, bool(jit)), f"jit_compile={jit}")
    why = {"default": "Keras's default, jit_compile='auto'", "on": "--compile on", "off": "--compile off"}
    return f"{what} ({why.get(asked, asked)})"


def device_scope(device_name: str) -> Any:
    """The Keras device scope a run trains under.

    On a GPU, none: the launcher makes the run's GPU the only visible one, and every
    backend uses its first visible GPU by default, as a user's script does. Host data
    (``model.fit`` on NumPy arrays) then stays on the host: under a GPU scope TensorFlow
    would copy the whole array to the GPU (the study's 10.7 GB). ``gpu:N`` with N > 0
    (a runner started by hand with several GPUs visible) is scoped explicitly.
    """
    import contextlib

    import keras

    if device_name == "cpu":
        return keras.device("cpu")
    index = _gpu_index(device_name)
    if index == 0:
        return contextlib.nullcontext()
    if _backend() == "jax":
        import jax

        return jax.default_device(_jax_gpus()[index])
    return keras.device(device_name)


def _labels(config: RunConfig, count: int, rng: Any) -> Any:
    """Targets: class ids (softmax head), 0/1 of shape (count, 1) (the study's sigmoid head), or the
    next token at every position (token models)."""
    import numpy as np

    if config.tokens:
        return rng.integers(0, config.outputs, (count, config.tokens)).astype(np.int32)
    if config.head == "sigmoid":
        return rng.integers(0, 2, (count, 1)).astype(np.float32)
    return rng.integers(0, config.num_classes, count).astype(np.int32)


def _host_inputs(config: RunConfig, count: int, rng: Any) -> Any:
    """A NumPy array of synthetic inputs: images (NHWC), or token ids."""
    import numpy as np

    if config.tokens:
        return rng.integers(0, config.outputs, (count, config.tokens)).astype(np.int32)
    return rng.standard_normal((count, *config.sample_shape("keras")), dtype=np.float32)


def _device_inputs(config: RunConfig, count: int, seed: int) -> Any:
    """A batch of synthetic inputs made on the device."""
    import keras

    if config.tokens:
        return keras.random.randint((count, config.tokens), 0, config.outputs, seed=seed, dtype="int32")
    return keras.random.normal((count, *config.sample_shape("keras")), seed=seed)


def _functional(model: Any, config: RunConfig) -> Any:
    """A user's Keras model as a functional one: as it is when it has inputs (functional, or a
    Sequential that starts with an Input), else called once on a symbolic input of the run's shape,
    which builds its weights (so its parameters are counted before training) and gives the input
    that ``_device_fed`` and the FLOP counter need. The same layers and weights either way."""
    import keras

    try:
        if model.inputs:
            return model
    except (AttributeError, ValueError):
        pass
    inputs = keras.Input(shape=config.sample_shape("keras"), dtype="int32" if config.tokens else "float32")
    outputs = user.call(f"{config.model}'s call", model, inputs)
    return keras.Model(inputs, outputs, name=model.name)


def _laid_out(x: Any, y: Any) -> tuple[Any, Any]:
    """A batch placed as the distribution lays data out (split along the batch over the devices)."""
    import jax
    import keras

    distribution = keras.distribution.distribution()
    return tuple(  # type: ignore[return-value]
        jax.device_put(a, distribution.get_data_layout(a.shape).backend_layout) for a in (x, y)
    )


def _device_fed(model: Any, pool: list[tuple[Any, Any]]) -> Any:
    """tf.keras with ``--data device``: the same network, whose ``train_step`` takes its batch from a
    pool held on the device, by the step's index (the only thing tf.data then yields).

    tf.data runs on the host: a dataset of device tensors would copy every batch back and forth.
    Overriding ``train_step`` is Keras's documented way to customise what ``fit`` does; the step
    itself is Keras's own (``super().train_step``).
    """
    import keras
    import tensorflow as tf

    xs = tf.stack([x for x, _ in pool])
    ys = tf.stack([y for _, y in pool])

    class DeviceFed(keras.Model):
        def train_step(self, data: Any) -> Any:
            return super().train_step((tf.gather(xs, data), tf.gather(ys, data)))

        def predict_step(self, data: Any) -> Any:
            return super().predict_step(tf.gather(xs, data))

    return DeviceFed(model.inputs, model.outputs, name=model.name)


#: tf.keras on host arrays: why benchtui feeds ``model.fit`` Keras's own array pipeline, repeated,
#: with ``steps_per_epoch``, rather than the arrays themselves. Measured on TensorFlow 2.21 / Keras
#: 3.15 (benchmarks/overhead.py, notes of issue 30).
ONE_ITERATOR = (
    "a default model.fit(x, y) makes a new tf.data iterator at every epoch's start "
    "(keras/src/trainers/epoch_iterator.py, steps_per_epoch None) and drops the last one there; "
    "TensorFlow then waits, idle, for the dropped iterator's autotuning thread to wake from its "
    "timed sleep (tf.data's model::Model::OptimizeLoop, whose period doubles from 10 ms to 60 s): "
    "from nothing to nearly an epoch's length, depending on where its wake-ups fall (0.01 to 9 s "
    "seen at the starts of 3 to 18 s epochs on 2 cores). "
    "benchtui gives fit the same pipeline (Keras's ArrayDataAdapter) repeated, with steps_per_epoch: "
    "one iterator for the whole run, no such stall"
)


def unlike_default(config: RunConfig, backend: str, on_cpu: bool) -> str | None:
    """What a default TensorFlow would do differently in this run, in a few words for the "how"
    line (the record's ``settings.input`` and ``ONE_ITERATOR`` say it in full); None when nothing."""
    if backend != "tensorflow" or not on_cpu:
        return None
    parts = []
    fed_once = (
        config.task == "train"
        and config.data == "host"
        and config.replicas <= 1
        and _array_adapter() is not None
    )
    if fed_once:
        parts.append(
            "one tf.data iterator for all epochs (a default model.fit(x, y) makes one per epoch and "
            "can stall for seconds at an epoch's start)"
        )
    cores = usable_cores()
    if config.threads > 0 and config.threads != cores:
        parts.append(
            f"{config.threads} op thread{'s' if config.threads != 1 else ''} (default: {cores}, one per core)"
        )
    return "unlike a default TensorFlow: " + "; ".join(parts) if parts else None


def _array_adapter() -> Any:
    """Keras's array data adapter (what ``model.fit(x, y)`` builds its tf.data pipeline with), or
    None where this Keras has it elsewhere (then the arrays go to fit as they are)."""
    try:
        from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter
    except ImportError:
        return None
    return ArrayDataAdapter if hasattr(ArrayDataAdapter, "get_tf_dataset") else None


def input_record(config: RunConfig, backend: str) -> str:
    """The input path in words, for the run's settings."""
    if config.task == "inference":
        if config.data == "host":
            return "a NumPy array in host memory, sliced into batches handed to predict_on_batch (copied each step)"
        return "a pool of 4 batches made on the device, cycled into predict_on_batch (no copy)"
    if config.data == "host":
        where = " (tensors on /CPU:0)" if backend == "tensorflow" else ""
        if backend == "tensorflow" and config.replicas <= 1 and _array_adapter() is not None:
            return (
                f"model.fit on a NumPy array in host memory{where}: Keras's own tf.data pipeline for "
                "arrays (slices, prefetches and copies each batch), made once and repeated, with "
                f"steps_per_epoch: one iterator for every epoch; shuffle {'on' if config.shuffle else 'off'}"
            )
        return (
            f"model.fit on a NumPy array in host memory{where}: Keras's own input pipeline for "
            f"{backend} slices, prefetches and copies each batch; shuffle {'on' if config.shuffle else 'off'}"
        )
    if backend == "tensorflow":
        return (
            "a pool of 4 batches made on the device; model.fit's train_step takes one by index "
            "(tf.data yields only the index)"
        )
    return "a pool of 4 batches made on the device, cycled into model.fit by a generator (no copy)"


def nodes_input_record(config: RunConfig, backend: str) -> str:
    """The input path of a run on several nodes, in words: each process feeds its own share."""
    what = (
        "the node's share of the epoch"
        if config.data == "host"
        else "a pool of 4 batches of the node's share"
    )
    if backend == "tensorflow":
        return (
            f"{what} in host memory, drawn from the node's own seed, in a tf.data dataset of per-replica batches "
            "that MultiWorkerMirroredStrategy hands to this worker's replicas (distribute_datasets_from_function)"
        )
    return (
        f"{what}, drawn from the node's own seed; Keras makes each global batch from every process's "
        "share at every step (jax.make_array_from_process_local_data)"
    )


def run(config: RunConfig, writer: EventWriter, import_started: float) -> None:
    lifecycle.run(config, writer, KerasBackend(config))


class KerasBackend:
    """Keras 3 (tf.keras on TensorFlow, Keras on JAX or torch) at each point of the lifecycle
    (``benchtui_runners.lifecycle``): ``model.fit`` on host arrays or a pool of device batches,
    ``predict_on_batch`` for inference, the framework's own data parallel."""

    device: KerasDevice  # set by start()
    lead: bool = True  # one process per node: it sends everything
    gather: Callable[[float], list[float]] | None = None

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.backend = _backend()
        self.inference = config.task == "inference"
        self.generating = config.task == "generate"
        self.generator: Any = None  # generate: keras-hub's generate on the run's prompts
        self.prompts: list[Any] = []
        self.writer: EventWriter | None = None
        self.jit = False
        # Data parallel: every step takes the global batch, which the framework splits among the devices.
        self.step_samples = self.flops_batch = config.global_batch
        self.parallel: Any = None  # the data-parallel scope
        self.distributed: dict[str, Any] | None = None
        self.mirrored = False
        self.pool: list[tuple[Any, Any]] = []
        self.x_host: Any = None
        self.y_host: Any = None
        self.model: Any = None

    def load(self) -> None:
        refuse_nodes(self.config, self.backend)
        _pre_import_settings(self.config)
        import keras  # noqa: F401 - imported here: the import phase

    def start(self, writer: EventWriter) -> dict[str, Any]:
        import keras

        config, backend = self.config, self.backend
        if config.nodes > 1 and backend == "jax":
            join_jax(config, writer)  # before anything starts the backend
        device_name, device_info = _resolve_device(config.device)
        refuse_emulated_bf16(config, backend, device_info)
        memory_policy = _memory_policy(backend, device_name)  # before anything starts the GPU runtime
        _logical_cpus(config, backend)  # before the runtime starts too
        runtime_settings = _settings(config, backend)
        if config.world > 1:
            self.parallel, self.distributed = data_parallel(config, backend, writer)
        distributed = self.distributed
        self.mirrored = distributed is not None and backend == "tensorflow"
        settings = {
            **runtime_settings,
            **training_record(config),
            "input": input_record(config, backend),
            "memory_policy": memory_policy,
        }
        if distributed is not None:
            settings["distributed"] = distributed
            if config.nodes > 1:
                settings["input"] = nodes_input_record(config, backend)
            elif config.data != "host" and backend == "tensorflow":
                settings["input"] = (
                    "a pool of 4 global batches in host memory, in a tf.data dataset that MirroredStrategy "
                    "splits among the replicas and prefetches to each device"
                )
        if config.data == "host":
            settings["host_data"] = "in host memory" + (
                " (tensors on /CPU:0)" if backend == "tensorflow" else ""
            )
        unlike = unlike_default(config, backend, device_name == "cpu")
        if unlike:
            settings["unlike_default"] = unlike
        if self.inference:
            settings["inference_path"] = (
                "model.predict_on_batch on every batch (compiled as jit_compile resolves, training=False), "
                "its outputs returned to the host as NumPy"
            )
        settings["xla_gpu_autotune"] = (
            "off" if "--xla_gpu_autotune_level=0" in os.environ.get("XLA_FLAGS", "") else "default"
        )
        if self.generating:
            from benchtui_runners import generate

            generate.lengths(config)  # refused before anything is built where they cannot be generated
            self.jit = generate.keras_jit(config, backend, device_name != "cpu")
            record = generate.keras_record(config, backend, self.jit)
            settings.update(
                generation=record,
                input="prompt batches of random token ids made on the device once, cycled",
            )
            settings.pop("inference_path", None)
            settings.update(optimizer=None, loss=None, shuffle=None)  # nothing is trained
        waits = step_waits(config, backend) if not self.generating else None
        if waits:
            settings["host_sync_per_step"] = waits
        if config.tokens and not config.model_def:
            from benchtui_runners.models import KERAS_GPT2_ATTENTION

            settings["attention"] = KERAS_GPT2_ATTENTION
        keras.utils.set_random_seed(config.seed)
        task = config.node_rank if config.nodes > 1 and backend == "tensorflow" else None
        self.device = KerasDevice(backend, device_name, device_info, state=self.state, task=task)
        return settings

    def scope(self) -> AbstractContextManager[Any]:
        return self.parallel if self.parallel is not None else device_scope(self.device.name)

    def data(self) -> None:
        import keras
        import numpy as np

        config, backend = self.config, self.backend
        if self.generating:
            from benchtui_runners.generate import lengths, prompts

            self.prompts = prompts(config, lengths(config)[0])
            return
        bs, steps, n = config.global_batch, config.steps_per_epoch, config.samples_per_epoch
        rng = np.random.default_rng(config.seed)
        if config.nodes > 1:
            # Several nodes: each process draws its own share of every global batch, from its own seed.
            bs, n = bs // config.nodes, n // config.nodes
            rng = np.random.default_rng(config.seed + config.node_rank)
        if self.mirrored:
            # tf.distribute splits batches of a tf.data dataset among its replicas: a few global
            # batches in host memory, repeated (or the whole epoch, for host data).
            count = n if config.data == "host" else bs * min(steps, 4)
            self.x_host, self.y_host = _host_inputs(config, count, rng), _labels(config, count, rng)
        elif config.data == "host":
            self.x_host, self.y_host = _host_inputs(config, n, rng), _labels(config, n, rng)
            if backend == "tensorflow" and not self.inference:
                # TensorFlow turns NumPy into a tensor on its default device, the GPU: the study's
                # 10.7 GB array would sit in GPU memory. Made on the host, Keras's own array
                # pipeline slices it there and copies one batch at a time.
                import tensorflow as tf

                with tf.device("/CPU:0"):
                    self.x_host, self.y_host = tf.constant(self.x_host), tf.constant(self.y_host)
        else:
            pool = [
                (
                    _device_inputs(config, bs, config.seed + config.node_rank * 4 + i),
                    keras.ops.convert_to_tensor(_labels(config, bs, rng)),
                )
                for i in range(min(steps, 4))
            ]
            if self.distributed is not None and config.nodes == 1:
                # JAX: each batch laid out over the devices once, here. Several nodes: Keras makes the
                # global batch from each process's share at every step (its devices are not all here).
                pool = [_laid_out(x, y) for x, y in pool]
            self.device.sync(pool)
            self.pool = pool

    def build(self, writer: EventWriter) -> dict[str, Any] | None:
        import keras

        from benchtui_runners.models import build_keras, emit_model, keras_loss

        config, backend, inference = self.config, self.backend, self.inference
        if self.generating:
            return self._build_generate(writer)
        custom = bool(config.model_def)
        if custom:  # a user's own model, from its builder (benchtui_runners.custom)
            model = _functional(user.build("keras", config.framework, config), config)
        else:
            model = build_keras(
                config.model,
                config.num_classes,
                config.image_size,
                config.head,
                config.tokens,
                last_only=inference,
            )
        if self.pool and backend == "tensorflow" and not inference and not self.mirrored:
            model = _device_fed(model, self.pool)
        emit_model(writer, "keras", config.model, config.tokens, model, config.framework)
        if inference:
            # Nothing is trained: compiled only for how predict_on_batch runs (jit_compile).
            model.compile(jit_compile=_jit_compile(config))
        else:
            loss = user.own_loss(config) or keras_loss(
                config.head, "tokens" if config.tokens else "image", logits=custom
            )
            optimizer = user.own_optimizer(config)
            if optimizer is None and config.optimizer == "adam":
                optimizer = keras.optimizers.Adam(learning_rate=config.learning_rate)
            elif optimizer is None:
                optimizer = keras.optimizers.SGD(learning_rate=config.learning_rate, momentum=config.momentum)
            model.compile(optimizer=optimizer, loss=loss, jit_compile=_jit_compile(config))
        self.model = model
        self.device.sync(_variables(model))
        # What "auto" became is known only now: the record is completed by a settings event.
        return {
            "compile": resolved_compile(backend, model.jit_compile, config.compile),
            "jit_compile": bool(model.jit_compile),
        }

    def _build_generate(self, writer: EventWriter) -> dict[str, Any] | None:
        """Generation: keras-hub's causal LM and its generate (benchtui_runners.generate)."""
        from benchtui_runners import generate
        from benchtui_runners.models import emit_model

        config, backend = self.config, self.backend
        prompt_len, new_tokens = generate.lengths(config)
        model = generate.keras_model(config)
        emit_model(writer, "keras", config.model, prompt_len + new_tokens, model, config.framework)
        sampler = generate.keras_sampler(backend, self.device.sync, stamped=config.timing == "step")
        model.compile(sampler=sampler, jit_compile=self.jit)
        self.model = model
        self.writer = writer
        self.generator = generate.KerasGenerator(
            model, backend, self.prompts, prompt_len, new_tokens, sampler
        )
        self.device.sync(_variables(model))
        return {"compile": generate.keras_compile_record(config, backend, self.jit), "jit_compile": self.jit}

    def state(self) -> Any:
        """What the last step wrote. On JAX, fit keeps it in ``model._jax_state`` while an epoch
        runs (the variables are emptied then), which is how Keras lets callbacks reach it. Keras
        tracks that dict (a TrackedDict of TrackedLists, which JAX's tree functions take for one
        opaque leaf): its arrays are taken out into a plain list, or nothing would be waited for."""
        return step_state(self.backend, self.model)

    def stepping(self) -> AbstractContextManager[Any]:
        return lifecycle.nothing()

    def epochs(self, clock: StepClock, epochs: int, epoch_done: lifecycle.EpochDone) -> None:
        if self.generating:
            from benchtui_runners.generate import run_epochs

            assert self.writer is not None
            run_epochs(self.generator, clock, self.config, self.writer, len(self.prompts), epochs, epoch_done)
            return
        if self.inference:
            _infer(self.model, clock, self.config, self.pool, self.x_host, epochs, epoch_done)
        else:
            _fit(
                self.model,
                clock,
                self.config,
                self.pool,
                self.x_host,
                self.y_host,
                self.backend,
                epochs,
                epoch_done,
                mirrored=self.mirrored,
            )

    def profile_steps(self, window: lifecycle.Window, warmup: int, count: int) -> None:
        """A few more steps on the timed path, under the backend's own profiler."""
        import keras

        config, model, pool, x_host = self.config, self.model, self.pool, self.x_host
        if self.inference:  # the timed loop's predict_on_batch, batch after batch
            bs, steps = config.batch_size, config.steps_per_epoch
            for i in range(warmup + count):
                if i == warmup:
                    window.open()
                step = i % steps
                x = x_host[step * bs : (step + 1) * bs] if x_host is not None else pool[step % len(pool)][0]
                model.predict_on_batch(x)
            window.steps = count
            window.close()
            return

        class Profiled(keras.callbacks.Callback):
            """Opens the window when the first profiled step begins, closes it when the epoch ends."""

            begun = 0

            def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
                self.begun = batch + 1
                if batch == warmup:
                    window.open()

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                window.steps = max(0, self.begun - warmup)
                window.close()

        _fit_on(
            model,
            config,
            pool,
            x_host,
            self.y_host,
            self.backend,
            self.mirrored,
            1,
            warmup + count,
            [Profiled()],
        )

    def capture(self, folder: str) -> Any:
        from benchtui_runners.profiling import keras_capture

        return keras_capture(self.backend, self.device.gpu)(folder)

    @property
    def profiler_version(self) -> str:
        return _backend_version(self.backend)

    def release(self) -> None:
        """Nothing to let go of: the framework's data parallel lives in the process."""

    def count_flops(self) -> dict[str, Any]:
        from benchtui_runners.flops import count_keras

        config = self.config
        where: Any = contextlib.nullcontext()
        if self.backend == "tensorflow" and config.nodes > 1:
            # MultiWorkerMirroredStrategy's variables cannot be read outside a replica ("DistributedVariable.
            # handle is not available outside the replica context"): the step is traced in this worker's
            # first replica's context (a trace runs nothing, and a step's forward and gradients hold no
            # collective: the all-reduce is the optimizer's).
            import tensorflow as tf

            where = tf.distribute.ReplicaContext(self.model.distribute_strategy, replica_id_in_sync_group=0)
        with where:
            return count_keras(
                self.model,
                self.backend,
                config.global_batch,
                config.image_size,
                config.num_classes,
                config.head,
                seq_len=config.tokens,
                vocab=config.outputs if config.tokens else 0,
                forward_only=self.inference,
                input_shape=config.sample_shape("keras"),
            )


def step_state(backend: str, model: Any) -> Any:
    """What a Keras model's last step wrote, for JAX to wait on (``KerasBackend.state``); its variables
    on every other backend, and outside ``model.fit``."""
    current = getattr(model, "_jax_state", None) if backend == "jax" else None
    if current:
        return [array for part in dict(current).values() for array in (part or [])]
    return _variables(model)


def _fit(
    model: Any,
    clock: StepClock,
    config: RunConfig,
    pool: list[tuple[Any, Any]],
    x_host: Any,
    y_host: Any,
    backend: str,
    epochs: int,
    epoch_done: lifecycle.EpochDone,
    mirrored: bool = False,
) -> None:
    """Train with ``model.fit``, timed by ``clock`` from a callback (``mirrored``: under tf.distribute)."""
    import keras

    class Timing(keras.callbacks.Callback):
        """benchtui's clock inside ``model.fit``.

        A step has ended when the next one begins, so this callback never overrides
        ``on_train_batch_end``: a callback that does makes Keras 3 convert every step's logs
        on the main thread (a wait for the device each step) instead of dispatching them
        asynchronously (JAX, torch). On TensorFlow Keras converts them on the main thread
        whatever the callbacks: that wait is part of what tf.keras users get.
        """

        begun = 0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            clock.epoch_begin(epoch + 1)
            self.begun = 0

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if batch > 0:
                clock.step_end(batch)  # step ``batch`` (1-based) ended: its successor begins
            clock.step_begin()  # the epoch's first: its time to first batch (Keras made its iterator)
            self.begun = batch + 1

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            if self.begun:
                clock.step_end(self.begun)
            epoch_done(epoch + 1, epoch_loss(logs))

    _fit_on(model, config, pool, x_host, y_host, backend, mirrored, epochs, None, [Timing()])


def epoch_loss(logs: Any) -> lifecycle.LossReading | None:
    """How to read the epoch's loss from ``model.fit``'s epoch logs: their ``loss``, the mean of the epoch's
    step losses (Keras's loss tracker; under tf.distribute, over every replica). Keras has made them Python
    numbers before it calls ``on_epoch_end`` (its own wait at the epoch's end, there whatever the callbacks),
    so reading them waits for nothing; None when the logs have no loss. The step losses themselves are not
    kept (a step's logs hold the running mean, and reading them would wait each step): no min or max."""
    if not isinstance(logs, dict) or logs.get("loss") is None:
        return None
    value = logs["loss"]
    return lambda: {"loss": float(value)}


def _fit_on(
    model: Any,
    config: RunConfig,
    pool: list[tuple[Any, Any]],
    x_host: Any,
    y_host: Any,
    backend: str,
    mirrored: bool,
    epochs: int,
    steps: int | None,
    callbacks: list[Any],
) -> None:
    """``model.fit`` on the run's data, as the timed epochs feed it (``steps``: per epoch, None: the run's)."""
    common = {"epochs": epochs, "verbose": 0, "callbacks": callbacks}
    if mirrored:  # MirroredStrategy: a batched dataset it splits among replicas
        import tensorflow as tf

        def dataset(batch: int) -> Any:
            data = tf.data.Dataset.from_tensor_slices((x_host, y_host))
            if config.shuffle and config.data == "host":
                data = data.shuffle(len(x_host), seed=config.seed, reshuffle_each_iteration=True)
            return data.batch(batch, drop_remainder=True).repeat().prefetch(tf.data.AUTOTUNE)

        if config.nodes > 1:
            # MultiWorkerMirroredStrategy: each worker feeds its own replicas from its own share
            # (per-replica batches of the worker's data: nothing is drawn twice and dropped).
            strategy = tf.distribute.get_strategy()
            data = strategy.distribute_datasets_from_function(
                lambda context: dataset(context.get_per_replica_batch_size(config.global_batch))
            )
        else:
            data = dataset(config.global_batch)
        model.fit(data, steps_per_epoch=steps or config.steps_per_epoch, **common)
    elif x_host is not None and backend == "tensorflow" and (adapter := _array_adapter()) is not None:
        # Keras's own pipeline for arrays, the one model.fit(x, y) builds, made once and repeated,
        # so one tf.data iterator serves every epoch (ONE_ITERATOR says why).
        data = adapter(
            x_host, y_host, batch_size=config.global_batch, shuffle=config.shuffle
        ).get_tf_dataset()
        model.fit(data.repeat(), steps_per_epoch=steps or config.steps_per_epoch, **common)
    elif x_host is not None:
        per_epoch = {"steps_per_epoch": steps} if steps else {}
        # Several nodes (JAX): each process is handed its own share of every global batch.
        batch = config.global_batch // max(1, config.nodes)
        model.fit(x_host, y_host, batch_size=batch, shuffle=config.shuffle, **per_epoch, **common)
    elif backend == "tensorflow":
        import tensorflow as tf

        model.fit(
            tf.data.Dataset.range(len(pool)).repeat(),
            steps_per_epoch=steps or config.steps_per_epoch,
            shuffle=False,
            **common,
        )
    else:

        def cycle() -> Any:
            while True:
                yield from pool

        model.fit(cycle(), steps_per_epoch=steps or config.steps_per_epoch, shuffle=False, **common)


def _backend_version(backend: str) -> str:
    """The backend's version and Keras's, for the profile's label (each distribution is named as its backend)."""
    import keras

    try:
        from importlib.metadata import version

        return f"{version(backend)}, Keras {keras.__version__}"
    except Exception:  # a label only
        return f"Keras {keras.__version__}"


def _infer(
    model: Any,
    clock: StepClock,
    config: RunConfig,
    pool: list[tuple[Any, Any]],
    x_host: Any,
    epochs: int,
    epoch_done: lifecycle.EpochDone,
) -> None:
    """Inference: ``model.predict_on_batch`` on every batch, as a loop serving requests does.

    Keras's own per-batch inference path: the forward pass compiled as ``model.compile``'s
    ``jit_compile`` resolved (XLA on JAX, ...), ``training=False``, and the outputs returned to
    the host as NumPy, so every batch has ended when it returns. ``model.predict`` is not used: it
    keeps every batch's outputs until the end and joins them, which for a language model's logits
    is more memory than the run, and its callbacks cannot reach the outputs to wait for them.
    """
    bs, steps = config.batch_size, config.steps_per_epoch
    for epoch in range(1, epochs + 1):
        clock.epoch_begin(epoch)
        for step in range(1, steps + 1):
            if x_host is not None:
                x = x_host[(step - 1) * bs : step * bs]
            else:
                x = pool[(step - 1) % len(pool)][0]
            clock.step_begin()
            model.predict_on_batch(x)
            clock.step_end(step)
        epoch_done(epoch)
