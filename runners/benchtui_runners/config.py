"""A run's configuration as the runner receives it, and helpers every runner shares."""

from __future__ import annotations

import json
import os
import resource
import sys
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from benchtui_runners.catalog import MODELS, custom_entry
from benchtui_runners.timing import WINDOW_TARGET_S, describe

PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16")
#: ``--compile``: each framework's own default (Keras: XLA where ``jit_compile="auto"`` picks it;
#: PyTorch: eager), or compilation on (XLA, ``torch.compile``) or off everywhere.
COMPILE_MODES = ("default", "on", "off")
#: Optimizers and the learning rate each gets when the plan names none (the study's Adam used 1e-4).
OPTIMIZERS = {"sgd": 0.01, "adam": 1e-4}
#: Heads: ``softmax``, ``num_classes`` logits with softmax cross-entropy (parity mode);
#: ``sigmoid``, one sigmoid output with binary cross-entropy (the study's scripts).
HEADS = ("softmax", "sigmoid")
#: Each head in words, for the record (the same on every framework).
HEAD_TEXT = {
    "softmax": "global average pooling, dense to num_classes logits, softmax cross-entropy",
    "sigmoid": "global average pooling, dense to one output, sigmoid, binary cross-entropy (the study's)",
}
#: The head of a token model, the same on every side (GPT-2's own).
TOKEN_HEAD_TEXT = (
    "the language-model head tied to the token embedding: logits over the vocabulary at every position "
    "(inference: the last position's, as the first step of generation)"
)
#: PyTorch host data: DataLoader worker processes unless the plan says (tf.data parallelises too).
LOADER_WORKERS_MAX = 4
#: What a run measures: training steps (forward, loss, backward, update), inference (forward
#: only, no gradients, eval mode, each framework's ordinary inference path), or generation (token
#: models: greedy decoding of exactly ``new_tokens`` tokens after a ``prompt_len``-token prompt, with a
#: key/value cache, through each framework's own generate; issue 34).
TASKS = ("train", "inference", "generate")
#: What a runner process does: the benchmark; one short pass to test a batch size (the largest
#: batch search); or only build the model and count its parameters and FLOPs (``benchtui parity``).
MODES = ("train", "probe", "count")


class Unavailable(Exception):
    """The framework cannot run this model here (missing package, no such model)."""


class ClusterError(Exception):
    """Several nodes did not meet (a peer that never came, a TF_CONFIG that disagrees with the run):
    one line naming the address, the run fails."""


class DeviceMissing(Exception):
    """The plan's device is a GPU and this framework cannot use it: the run fails, never falls back.

    The message is one line for the user: what the framework sees, why, and the command that fixes it.
    """


@dataclass
class RunConfig:
    """Everything that decides what one runner process does."""

    framework: str
    model: str
    image_size: int = 299
    samples: int = 10000
    batch_size: int = 16
    epochs: int = 5
    device: str = "auto"
    data: str = "device"
    precision: str = "fp32"
    compile: str = "default"  # COMPILE_MODES
    cudnn_autotune: bool = True
    channels_last: bool = False
    num_classes: int = 1000
    optimizer: str = "sgd"  # OPTIMIZERS
    learning_rate: float = 0.01
    momentum: float = 0.9  # SGD only
    head: str = "softmax"  # HEADS
    shuffle: bool = False  # host data: a new order every epoch
    loader_workers: int = -1  # PyTorch host data: DataLoader workers; -1: min(4, usable cores)
    timing: str = "window"  # benchtui_runners.timing.TIMINGS
    window_s: float = WINDOW_TARGET_S  # seconds of work per timing window (tests ask for longer)
    seed: int = 0
    run_id: str = ""
    mode: str = "train"  # MODES: the benchmark, a probe of a batch size, or count parameters and FLOPs
    task: str = "train"  # TASKS
    seq_len: int = 0  # token models: tokens per sample (0: the model's context)
    # Generation (task "generate"): each sample is a prompt of ``prompt_len`` tokens, given exactly
    # ``new_tokens`` more, greedily (no early stop at an end token), one generate call per batch.
    prompt_len: int = 0
    new_tokens: int = 0
    probe_steps: int = 2
    memory_limit_mb: int = 0  # 0: no cap. A cap on the process's address space (probe tests).
    threads: int = 0  # CPU threads for the framework's ops; 0: the framework's own default
    # The GPU the parent assigned (NVML index, UUID, name, PCI bus id), for the record. The launcher
    # makes it the only visible GPU, so the runner's ``device`` is then ``cuda:0``.
    gpu: dict[str, Any] | None = None
    # Data parallel: replicas on this machine (torchrun ranks, MirroredStrategy replicas, JAX devices),
    # each taking ``batch_size`` samples a step, so the global batch is batch_size x replicas x nodes.
    replicas: int = 1
    gpus: list[dict[str, Any]] = field(default_factory=list)  # the assigned GPUs, for the record
    # Several machines (torchrun's rendezvous; MultiWorkerMirroredStrategy's TF_CONFIG; jax.distributed):
    # how many take part, this one's rank (0: the node whose benchtui records the session), and where the
    # framework's own engine meets, chosen per run by node 0's benchtui (``benchtui.core.running.cluster``):
    # ``rendezvous``: torchrun's c10d endpoint, or JAX's coordinator (host:port on node 0); ``cluster``:
    # every node's TensorFlow worker address (host:port, by node rank: TF_CONFIG's worker list);
    # ``rendezvous_id``: torchrun's --rdzv-id, unique per run so that two runs never meet.
    nodes: int = 1
    node_rank: int = 0
    rendezvous: str = ""  # host:port
    cluster: list[str] = field(default_factory=list)
    rendezvous_id: str = ""
    # ``--profile``: after the timed epochs, ``profile_steps`` steps (after ``PROFILE_WARMUP`` more)
    # captured with the framework's own profiler and reduced to where step time goes; the trace
    # is written to ``trace_path`` plus the profiler's own extension (the parent gives a path in
    # the session folder), and dropped when it is larger than ``trace_cap_mb``.
    profile: bool = False
    profile_steps: int = 5
    trace_path: str = ""
    trace_cap_mb: int = 200
    # A user's own model (``--model-def``, a model file): its definition, which the runner registers
    # in the catalog under ``model`` before anything else (catalog.check_definition); {}: the catalog's.
    model_def: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        raw = json.loads(text)
        known = {f.name for f in fields(cls)}
        config = cls(**{k: v for k, v in raw.items() if k in known})
        if isinstance(config.compile, bool):  # before benchtui 0.3 compile was on/off
            config.compile = "on" if config.compile else "off"
        if config.model_def:
            from benchtui_runners.catalog import register

            register(config.model_def)  # ValueError: the run fails with that line
        return config

    def sample_shape(self, family: str) -> tuple[int, ...]:
        """One input sample's shape as ``family`` ("torch" or "keras") lays it out: an image
        channels-first for PyTorch and channels-last for Keras, a token model's sequence, or a
        user's tensor (the same on both sides)."""
        info = MODELS.get(self.model)
        if self.tokens:
            return (self.tokens,)
        if info is not None and info.kind == "tensor":
            return tuple(info.custom["shape"])
        size = self.image_size
        return (3, size, size) if family == "torch" else (size, size, 3)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def tokens(self) -> int:
        """Tokens per sample of a token model (its sequence length); 0 for an image model."""
        info = MODELS.get(self.model)
        if info is None or info.kind != "tokens":
            return 0
        return self.seq_len or info.context

    @property
    def world(self) -> int:
        """Replicas in the whole data-parallel group (every node's)."""
        return max(1, self.replicas) * max(1, self.nodes)

    @property
    def global_batch(self) -> int:
        """Samples per step over every replica: the per-replica batch times the replicas."""
        return self.batch_size * self.world

    @property
    def steps_per_epoch(self) -> int:
        """Full batches per epoch; a last partial batch is dropped in every framework.

        A partial batch has another shape, which some frameworks retrace for; dropping
        it keeps every step the same work in every framework.
        """
        if self.mode == "probe":
            return self.probe_steps
        return max(1, self.samples // self.global_batch)

    @property
    def samples_per_epoch(self) -> int:
        """Samples of one epoch over every replica (each takes ``batch_size`` a step)."""
        return self.steps_per_epoch * self.global_batch

    @property
    def epochs_to_run(self) -> int:
        return 1 if self.mode == "probe" else self.epochs

    @property
    def outputs(self) -> int:
        """Width of the model's last layer: one sigmoid output, a logit per class, or per token of the vocabulary."""
        if self.tokens:
            return int(MODELS[self.model].config["vocab"])
        return 1 if self.head == "sigmoid" else self.num_classes

    @property
    def workers(self) -> int:
        """DataLoader workers for PyTorch host data (the plan's, or min(4, usable cores))."""
        return self.loader_workers if self.loader_workers >= 0 else min(LOADER_WORKERS_MAX, usable_cores())


def training_record(config: RunConfig) -> dict[str, Any]:
    """What the run trains with, as every runner records it in its settings (one wording everywhere)."""
    tokens = config.tokens
    generating = config.task == "generate"
    record: dict[str, Any] = {
        "task": config.task,
        "kind": "tokens" if tokens else "image",
        # Generation: a sequence is its prompt and its new tokens.
        "tokens_per_sample": config.prompt_len + config.new_tokens if generating else tokens,
        "timing": describe(config.timing, config.window_s, generating),
    }
    if tokens:
        head, text, loss = "lm", TOKEN_HEAD_TEXT, "softmax cross-entropy over the vocabulary, every position"
    else:
        head, text = config.head, HEAD_TEXT.get(config.head, config.head)
        loss = "binary cross-entropy" if config.head == "sigmoid" else "softmax cross-entropy"
    definition = MODELS[config.model].custom if config.model in MODELS else {}
    own_loss = own_optimizer = ""
    if definition:  # a user's own model: no head is added; its own loss and optimizer when it names them
        text = f"the model's own outputs ({config.outputs} wide; benchtui adds no head)"
        own_loss = custom_entry(definition.get("losses") or {}, config.framework)
        own_optimizer = custom_entry(definition.get("optimizers") or {}, config.framework)
        loss = f"{own_loss} (the model's own)" if own_loss else loss
    record.update(head=head, head_text=text, outputs=config.outputs)
    if config.task in ("inference", "generate"):
        # Forward only: nothing is trained, so no optimizer or loss is in force.
        return {**record, "optimizer": None, "loss": None, "shuffle": None}
    if own_optimizer:
        optimizer = f"{own_optimizer} (the model's own)"
    elif config.optimizer == "adam":
        optimizer = f"adam (lr {config.learning_rate:g})"
    else:
        optimizer = f"{config.optimizer} (lr {config.learning_rate:g}, momentum {config.momentum:g})"
    return {
        **record,
        "optimizer": optimizer,
        "loss": loss,
        "shuffle": config.shuffle if config.data == "host" else None,
    }


#: How long a runner waits for the other nodes to join its framework's rendezvous (torchrun's c10d,
#: MultiWorkerMirroredStrategy's cluster, jax.distributed's coordinator) before it fails in one line
#: naming the address. Seconds; the tests make it short. The parent also stops a run that hangs.
RENDEZVOUS_TIMEOUT_ENV = "BENCHTUI_RENDEZVOUS_TIMEOUT_S"
RENDEZVOUS_TIMEOUT_S = 60.0


def rendezvous_timeout() -> float:
    """``RENDEZVOUS_TIMEOUT_ENV`` in seconds (a positive number), else ``RENDEZVOUS_TIMEOUT_S``."""
    try:
        value = float(os.environ.get(RENDEZVOUS_TIMEOUT_ENV, ""))
    except ValueError:
        return RENDEZVOUS_TIMEOUT_S
    return value if 0 < value < 1e6 else RENDEZVOUS_TIMEOUT_S


def tf_config(config: RunConfig) -> str:
    """``TF_CONFIG`` for a run on several nodes, as the parent puts it in the runner's environment:
    every node's worker address (host:port, by node rank) and this node's index among them.
    ``tf.distribute.MultiWorkerMirroredStrategy`` reads it when it is built."""
    return json.dumps(
        {"cluster": {"worker": list(config.cluster)}, "task": {"type": "worker", "index": config.node_rank}},
        separators=(",", ":"),
    )


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, which a container or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def apply_thread_env(threads: int) -> None:
    """Before any framework is imported: the thread pools they size at import (OpenMP, MKL, TF, XLA)."""
    if threads > 0:
        n = str(threads)
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
            os.environ[name] = n
        # XLA's CPU backend: one thread for Eigen's ops (its own pool has no size flag). Every word
        # here must be an XLA flag: XLA stops reading XLA_FLAGS at the first word that is not.
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()


def xla_flags(cudnn_autotune: bool) -> str:
    """``XLA_FLAGS`` with GPU autotuning off when cuDNN autotuning is off (XLA tunes its own kernels).

    Read by XLA when it starts (JAX, and TensorFlow with ``jit_compile``): call before import.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if not cudnn_autotune and "--xla_gpu_autotune_level" not in flags:
        flags = f"{flags} --xla_gpu_autotune_level=0".strip()
    return flags


#: The memory policy set before any framework imports, in every runner process (a run's and a doctor's
#: probe alike): allocate as needed, so peak memory means the same thing in every framework and a
#: probe takes nothing up front while the others probe beside it. TensorFlow otherwise maps nearly
#: all of every visible GPU when its runtime starts; JAX preallocates 75% when its GPU client starts.
#: A user's own setting wins, and is recorded.
GPU_MEMORY_ENV = {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def apply_gpu_memory_env() -> dict[str, str]:
    """Set ``GPU_MEMORY_ENV`` where the user has not (call it before a framework imports); what is in force."""
    for name, value in GPU_MEMORY_ENV.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in GPU_MEMORY_ENV}


def allocator_settings() -> dict[str, str]:
    """The allocator variables in force (PyTorch, JAX, TensorFlow), for the record."""
    names = (
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
        "XLA_PYTHON_CLIENT_PREALLOCATE",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "XLA_CLIENT_MEM_FRACTION",
        "XLA_PYTHON_CLIENT_ALLOCATOR",
        "TF_FORCE_GPU_ALLOW_GROWTH",
        "TF_GPU_ALLOCATOR",
        "CUDA_VISIBLE_DEVICES",
    )
    return {name: os.environ[name] for name in names if name in os.environ}


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (Linux reports kilobytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def apply_memory_limit(limit_mb: int) -> None:
    if limit_mb > 0:
        limit = limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


_OOM_MARKERS = (
    "out of memory",
    "resource_exhausted",
    "resourceexhausted",
    "oom when allocating",
    "can't allocate memory",
    "cannot allocate memory",
    "failed to allocate",
    "std::bad_alloc",
    # cuDNN and cuBLAS report a full device as a failure to find or set up a kernel.
    "unable to find a valid cudnn algorithm",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
)


def is_oom(exc: BaseException) -> bool:
    """Whether an exception from any framework means the device (or host) ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__.lower()
    if "outofmemory" in name or "resourceexhausted" in name:
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _OOM_MARKERS)
