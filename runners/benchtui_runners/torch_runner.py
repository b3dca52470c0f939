"""The PyTorch runner: trains one model on synthetic data in a plain training loop.

Steps and epochs are timed by the clock every runner shares (``benchtui_runners.timing``):
no wait for the device after a step, one synchronization per window of steps and at each
epoch's end.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import platform
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch

from benchtui_runners import custom as user
from benchtui_runners import lifecycle
from benchtui_runners.config import (
    DeviceMissing,
    RunConfig,
    allocator_settings,
    peak_rss_bytes,
    training_record,
)
from benchtui_runners.models import bf16_refusal, build_torch, emit_model, torch_loss
from benchtui_runners.protocol import EventWriter
from benchtui_runners.timing import StepClock


def _device(spec: str) -> torch.device:
    """``auto|cpu|cuda|cuda:N`` -> a torch device, always with an index on CUDA.

    ``torch.cuda.set_device`` and the memory counters reject ``torch.device("cuda")``
    (no index); the launcher makes the assigned GPU the only visible one, so a plan's
    GPU arrives here as ``cuda:0``.
    """
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(spec)
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        raise DeviceMissing(why_no_cuda())
    index = 0 if device.index is None else device.index
    if index >= torch.cuda.device_count():
        raise DeviceMissing(f"{spec}: PyTorch sees {torch.cuda.device_count()} CUDA device(s)")
    return torch.device("cuda", index)


def why_no_cuda(label: str = "PyTorch") -> str:
    """One line: why this torch cannot use the GPU that NVML sees, and the fix."""
    if torch.version.cuda is None:
        return (
            f"{label} sees no GPU: torch {torch.__version__} is a CPU-only build; install a CUDA build "
            "(pip install --force-reinstall 'torch>=2.4' 'torchvision>=0.19' on Linux, or benchtui envs create torch)"
        )
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return f"{label} sees no GPU: CUDA_VISIBLE_DEVICES hides every GPU"
    return (
        f"{label} sees no GPU: torch {torch.__version__} is built for CUDA {torch.version.cuda} but CUDA did not "
        "initialise (a driver older than that CUDA needs? see the run's log and nvidia-smi)"
    )


class TorchDevice:
    """PyTorch's device layer: waits, peak memory, versions and the device's record, on one device.

    Used by the PyTorch runner, by Keras on torch (``detail=False``) and by the ``StepTimer`` hook
    in a user's own script (``detail=False``). ``detail``: the runner's full record (the caching
    allocator's reserved bytes, torchvision's and cuDNN's versions, the GPU's memory and compute
    capability, the CPU's threads); without it only the counters every side reads, nothing that
    imports or queries more in a user's process.
    """

    def __init__(self, device: torch.device, detail: bool = True) -> None:
        self.device = device
        self.detail = detail

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)  # the run's GPU, not the current one

    def peak_memory(self) -> dict[str, Any]:
        if not self.cuda:
            return {"peak_bytes": peak_rss_bytes(), "source": "process peak RSS (CPU)"}
        if not self.detail:
            return {
                "peak_bytes": torch.cuda.max_memory_allocated(self.device),
                "source": "torch.cuda.max_memory_allocated",
            }
        return {
            "peak_bytes": torch.cuda.max_memory_allocated(self.device),
            "reserved_bytes": torch.cuda.max_memory_reserved(self.device),
            "source": "torch.cuda.max_memory_allocated (tensors; the allocator reserved reserved_bytes)",
        }

    def versions(self) -> dict[str, Any]:
        versions: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__}
        if self.detail:
            try:
                import torchvision

                versions["torchvision"] = torchvision.__version__
            except ImportError:
                pass
        versions["cuda"] = torch.version.cuda
        if self.detail:
            versions["cudnn"] = (
                torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            )
        return versions

    def info(self) -> dict[str, Any]:
        device = self.device
        if self.cuda and not self.detail:
            return {"type": "cuda", "index": device.index, "name": torch.cuda.get_device_name(device)}
        if self.cuda:
            props = torch.cuda.get_device_properties(device)
            return {
                "type": "cuda",
                "index": device.index,
                "name": props.name,
                "memory_bytes": props.total_memory,
                "capability": f"{props.major}.{props.minor}",
            }
        if not self.detail:
            return {"type": device.type, "name": platform.processor() or platform.machine()}
        return {
            "type": "cpu",
            "name": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
        }


def describe(framework: str, device_spec: str) -> dict[str, Any]:
    """Versions and devices, for ``benchtui doctor``."""
    devices = [{"type": "cpu", "name": platform.machine(), "threads": torch.get_num_threads()}]
    if torch.cuda.is_available():
        devices += [TorchDevice(torch.device("cuda", i)).info() for i in range(torch.cuda.device_count())]
    gpu = (
        {"sees_gpu": True}
        if torch.cuda.is_available()
        else {"sees_gpu": False, "why": why_no_cuda(_label(framework))}
    )
    return {"versions": TorchDevice(torch.device("cpu")).versions(), "devices": devices, "gpu": gpu}


def _label(framework: str) -> str:
    return "Keras/torch" if framework == "keras-torch" else "PyTorch"


def _settings(config: RunConfig, device: torch.device) -> dict[str, Any]:
    """Apply the settings that change the answer, and return what is in force."""
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    tf32 = config.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = config.cudnn_autotune
    return {
        "precision": config.precision,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "compile": "torch.compile" if config.compile == "on" else "eager",
        "compile_asked": config.compile,
        "channels_last": config.channels_last,
        "data": config.data,
        "intra_op_threads": torch.get_num_threads(),
        "memory_policy": memory_policy(device),
    }


def memory_policy(device: torch.device) -> dict[str, Any]:
    """What the peak-memory figure counts, and the allocator settings in force."""
    if device.type != "cuda":
        return {"counter": "process peak RSS (host memory)", "env": allocator_settings()}
    return {
        "counter": "torch.cuda.max_memory_allocated: bytes in tensors at the peak (the caching "
        "allocator reserves more: reserved_bytes)",
        "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
        or os.environ.get("PYTORCH_ALLOC_CONF")
        or "default",
        "env": allocator_settings(),
    }


def refuse_emulated_bf16(config: RunConfig, device: torch.device) -> None:
    """``amp-bf16`` on a GPU without bfloat16 arithmetic (before compute capability 8.0): refused.

    ``torch.cuda.is_bf16_supported()`` says True there, because by default it counts emulation
    (``including_emulation=True``: it then only tries to make a bfloat16 tensor); without
    emulation it is ``major >= 8`` (torch/cuda/__init__.py), the rule applied here to the run's
    own GPU. ROCm GPUs are not refused (torch counts every ROCm GPU as supporting bfloat16).
    """
    if config.precision != "amp-bf16" or device.type != "cuda" or torch.version.hip:
        return
    major, minor = torch.cuda.get_device_capability(device)
    refusal = bf16_refusal("PyTorch", torch.cuda.get_device_name(device), (major, minor))
    if refusal:
        raise DeviceMissing(refusal)


#: The host wait in PyTorch's float16 training step (``host_sync_per_step`` in the run's settings).
GRADSCALER_SYNC = "GradScaler.step reads found_inf (.item()) every step, to skip the update after an overflow"


def step_waits(precision: str, optimizer: Any) -> str | None:
    """What makes every training step wait for the device, in words; None when nothing does.

    ``amp-fp16``: ``GradScaler.step`` skips the optimizer's step when a gradient overflowed, and
    decides it on the host: ``if not sum(v.item() for v in found_inf_per_device.values())``
    (torch/amp/grad_scaler.py, ``_maybe_opt_step``). An optimizer with
    ``_step_supports_amp_scaling`` (the fused SGD, Adam, AdamW, Adagrad: ``fused=True``) is handed
    ``found_inf`` on the device instead, and skips on the device: no wait. The plan's optimizers are
    torch's defaults (not fused), as users get them; a user's own optimizer may be fused.
    bfloat16 needs no loss scaling (the scaler is off), and fp32 has none.
    """
    if precision != "amp-fp16" or optimizer is None:
        return None
    if getattr(optimizer, "_step_supports_amp_scaling", False):
        return None
    return GRADSCALER_SYNC


def _optimizer(config: RunConfig, params: Any) -> Any:
    """The plan's optimizer, or a user's own model's (its definition's ``optimizers``: ``fn(params)``)."""
    own = user.own_optimizer(config, params)
    if own is not None:
        return own
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.learning_rate)
    return torch.optim.SGD(params, lr=config.learning_rate, momentum=config.momentum)


def _loss(config: RunConfig) -> Any:
    """The plan's loss, or a user's own model's (its definition's ``losses``: ``fn(outputs, targets)``)."""
    return user.own_loss(config) or torch_loss(config.head, "tokens" if config.tokens else "image")


def _labels(config: RunConfig, count: int, device: Any = None) -> torch.Tensor:
    """Targets: class ids (softmax head), 0/1 of shape (count, 1) (the study's sigmoid head), or the
    next token at every position (token models)."""
    if config.tokens:
        return torch.randint(0, config.outputs, (count, config.tokens), device=device)
    if config.head == "sigmoid":
        return torch.randint(0, 2, (count, 1), device=device).float()
    return torch.randint(0, config.num_classes, (count,), device=device)


def _inputs(config: RunConfig, count: int, device: Any, memory_format: Any) -> torch.Tensor:
    """A synthetic batch: random images (or a user's tensors of their declared shape), or random token ids."""
    if config.tokens:
        return torch.randint(0, config.outputs, (count, config.tokens), device=device)
    x = torch.randn((count, *config.sample_shape("torch")), device=device)
    return x.contiguous(memory_format=memory_format) if x.dim() == 4 else x


def _loader(config: RunConfig, device: torch.device, rank: int = 0) -> Any:
    """The study's path: one array in host memory, fed through a DataLoader as a user would.

    Workers, pinned memory and non-blocking copies, as tf.data parallelises and prefetches on
    the other side: the input path is part of every step's time on both. Data parallel: each
    rank holds its own share of the epoch (what a DistributedSampler would give it), drawn from
    its own seed.
    """
    import numpy as np

    rng = np.random.default_rng(config.seed + rank)
    n = config.steps_per_epoch * config.batch_size
    if config.tokens:
        shape = (n, config.tokens)
        x_host = torch.from_numpy(rng.integers(0, config.outputs, shape, dtype=np.int64))
        y_host = torch.from_numpy(rng.integers(0, config.outputs, shape, dtype=np.int64))
    else:
        x_host = torch.from_numpy(rng.standard_normal((n, *config.sample_shape("torch")), dtype=np.float32))
        if config.head == "sigmoid":
            y_host = torch.from_numpy(rng.integers(0, 2, (n, 1)).astype(np.float32))
        else:
            y_host = torch.from_numpy(rng.integers(0, config.num_classes, n, dtype=np.int64))
    dataset = torch.utils.data.TensorDataset(x_host, y_host)
    workers = config.workers
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=config.shuffle,
        drop_last=True,
        num_workers=workers,
        pin_memory=device.type == "cuda",
        persistent_workers=workers > 0,  # started once, not at every epoch
        generator=torch.Generator().manual_seed(config.seed),
    )


def input_record(config: RunConfig, device: torch.device) -> str:
    """The input path in words, for the run's settings."""
    if config.data != "host":
        return "a pool of 4 batches made on the device, cycled (no input path)"
    return (
        f"DataLoader over a NumPy array in host memory: {config.workers} worker process(es), "
        f"pinned memory {'on' if device.type == 'cuda' else 'off (CPU)'}, non-blocking copies, "
        f"shuffle {'on' if config.shuffle else 'off'}"
    )


def ranks() -> tuple[int, int, int]:
    """(rank, local rank, world size) as torchrun sets them; (0, 0, 1) for a run on one device."""
    env = os.environ
    return int(env.get("RANK", 0)), int(env.get("LOCAL_RANK", 0)), int(env.get("WORLD_SIZE", 1))


def start_group(device: torch.device, world: int, config: RunConfig | None = None) -> dict[str, Any]:
    """Join torchrun's process group (NCCL on GPUs, Gloo on the CPU); what it is, for the record.

    Several nodes (``config.nodes`` > 1): which node this is, its processes' global ranks (``ranks``:
    [first, count], from torchrun's RANK and LOCAL_RANK: the c10d rendezvous orders the nodes as it
    likes, so they need not follow the node ranks), and the link between the nodes."""
    import datetime

    import torch.distributed as dist

    backend = "nccl" if device.type == "cuda" else "gloo"
    # A collective that hangs is the watchdog's to catch (the parent stops the group); this
    # bound only keeps a worker from waiting forever if the parent is gone too.
    dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    record: dict[str, Any] = {
        "engine": "torch.nn.parallel.DistributedDataParallel, started by torchrun",
        "replicas": world,
        "nodes": int(os.environ.get("GROUP_WORLD_SIZE", 1) or 1),
        "backend": backend,
    }
    if backend == "nccl":
        version = torch.cuda.nccl.version()
        version_text = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        record["all_reduce"] = (
            f"NCCL {version_text} all-reduce (ring or tree, chosen by NCCL"
            + (f"; NCCL_ALGO={os.environ['NCCL_ALGO']}" if os.environ.get("NCCL_ALGO") else "")
            + ")"
        )
    else:
        record["all_reduce"] = "Gloo all-reduce over TCP (ring), on the host"
    if config is not None and config.nodes > 1:
        env = os.environ
        rank, local_rank = int(env.get("RANK", 0)), int(env.get("LOCAL_RANK", 0))
        record.update(
            engine="torchrun c10d + DDP",
            nodes=config.nodes,
            node_rank=config.node_rank,
            ranks=[rank - local_rank, int(env.get("LOCAL_WORLD_SIZE", 1) or 1)],
            link=torch_link(backend),
            rendezvous=f"c10d at {config.rendezvous}",
        )
    return record


def torch_link(backend: str) -> str:
    """The link between nodes, as far as the environment says: Gloo's TCP, or NCCL's transport (NCCL
    picks InfiniBand or RoCE when it finds them, else sockets; its variables narrow the choice)."""
    env = os.environ
    if backend != "nccl":
        iface = env.get("GLOO_SOCKET_IFNAME")
        return "Gloo over TCP" + (f" (GLOO_SOCKET_IFNAME={iface})" if iface else "")
    if env.get("NCCL_NET"):
        parts = [f"NCCL_NET={env['NCCL_NET']}"]
    elif env.get("NCCL_IB_DISABLE", "0") not in ("", "0"):
        parts = ["sockets: InfiniBand off (NCCL_IB_DISABLE=1)"]
    else:
        parts = ["InfiniBand or RoCE where NCCL finds them, else sockets"]
    if env.get("NCCL_SOCKET_IFNAME"):
        parts.append(f"NCCL_SOCKET_IFNAME={env['NCCL_SOCKET_IFNAME']}")
    return f"NCCL ({'; '.join(parts)})"


def ddp_record(model: Any) -> dict[str, Any]:
    """How DDP reduces gradients: its buckets, and their overlap with the backward pass."""
    cap = getattr(model, "bucket_bytes_cap", None)
    return {
        "bucket": f"{cap / 2**20:g} MiB gradient buckets (bucket_cap_mb)" if cap else "DDP's default buckets",
        "overlap": "yes: each bucket is all-reduced as soon as its gradients are ready, during the backward pass",
        "gradient_as_bucket_view": bool(getattr(model, "gradient_as_bucket_view", False)),
        "find_unused_parameters": bool(getattr(model, "find_unused_parameters", False)),
    }


def gather_step_times(device: torch.device, world: int) -> Any:
    """A function giving every rank's value of one float (``all_gather``): the ``ranks`` events."""
    import torch.distributed as dist

    def gather(value: float) -> list[float]:
        mine = torch.tensor([value], dtype=torch.float64, device=device)
        out = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(out, mine)
        return [float(t.item()) for t in out]

    return gather


def run(config: RunConfig, writer: EventWriter, import_started: float) -> None:
    lifecycle.run(config, writer, TorchBackend(config))


class TorchBackend:
    """PyTorch at each point of the lifecycle (``benchtui_runners.lifecycle``): a plain training loop
    on a DataLoader or a pool of device batches, DistributedDataParallel under torchrun."""

    device: TorchDevice  # set by start()

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.rank, self.local_rank, self.world = ranks()
        self.lead = self.local_rank == 0  # each node's local rank 0 sends the node's events
        self.inference = config.task == "inference"
        self.generating = config.task == "generate"
        self.generator: Any = None  # generate: transformers' generate on the run's prompts
        self.prompts: list[Any] = []
        self.record: dict[str, Any] = {}
        self.writer: EventWriter | None = None
        self.memory_format: Any = torch.contiguous_format
        self.loader: Any = None
        self.pool: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.distributed: dict[str, Any] | None = None
        self.model: Any = None
        self.loss_fn: Any = None
        self.train_step: Any = None
        self.amp_dtype: Any = None
        self.step_samples = config.batch_size * self.world
        self.flops_batch = config.batch_size
        self.gather: Any = None
        self.profiler_version = str(torch.__version__)

    def load(self) -> None:
        """torch is imported with this module."""

    def start(self, writer: EventWriter) -> dict[str, Any]:
        config = self.config
        device = _device(config.device)
        if self.world > 1 and device.type == "cuda":  # torchrun's rank on its own GPU of the visible ones
            device = torch.device("cuda", self.local_rank)
        refuse_emulated_bf16(config, device)
        self.device = TorchDevice(device)
        settings = {
            **_settings(config, device),
            **training_record(config),
            "input": input_record(config, device),
        }
        if self.inference:
            settings["inference_path"] = (
                "model(x) in eval mode under torch.inference_mode, every batch's outputs copied to the host"
            )
        if self.generating:
            from benchtui_runners.generate import lengths, torch_record

            lengths(config)  # refused before anything is built where they cannot be generated
            settings["input"] = "prompt batches of random token ids made on the device once, cycled"
            settings.update(optimizer=None, loss=None, shuffle=None)  # nothing is trained
            self.record = torch_record(config, None, device.type)
            settings.update(generation=self.record, compile=self.record["compile"])
        torch.manual_seed(config.seed)
        if device.type == "cuda":
            torch.cuda.set_device(device)
            torch.cuda.reset_peak_memory_stats(device)
        self.distributed = start_group(device, self.world, config) if self.world > 1 else None
        if self.distributed is not None:
            settings["distributed"] = self.distributed
        self.gather = gather_step_times(device, self.world) if self.world > 1 else None
        images = not config.tokens
        if config.channels_last and images:
            self.memory_format = torch.channels_last
        return settings

    def scope(self) -> AbstractContextManager[Any]:
        return lifecycle.nothing()

    def data(self) -> None:
        config, device = self.config, self.device.device
        if self.generating:
            from benchtui_runners.generate import lengths, prompts

            self.prompts = prompts(config, lengths(config)[0])
            return
        torch.manual_seed(config.seed + self.rank)  # each rank its own data; the same model everywhere
        if config.data == "host":
            self.loader = _loader(config, device, self.rank)
        else:
            # Synthetic tensors made on the device: a few distinct batches, cycled (seeded above).
            bs = config.batch_size
            self.pool = [
                (_inputs(config, bs, device, self.memory_format), _labels(config, bs, device))
                for _ in range(min(config.steps_per_epoch, 4))
            ]

    def build(self, writer: EventWriter) -> dict[str, Any] | None:
        config, device, inference = self.config, self.device.device, self.inference
        torch.manual_seed(config.seed)
        if self.generating:
            return self._build_generate(writer)
        if config.model_def:  # a user's own model, from its builder (benchtui_runners.custom)
            model = user.build("torch", config.framework, config)
        else:
            model = build_torch(
                config.model, config.outputs, config.image_size, config.tokens, last_only=inference
            )
        model = model.to(device, memory_format=self.memory_format)
        model.eval() if inference else model.train()
        emit_model(writer, "torch", config.model, config.tokens, model, config.framework)
        self.model = model
        self.loss_fn = _loss(config)
        optimizer = None if inference else _optimizer(config, model.parameters())
        step_fn: Any = model
        if self.distributed is not None:
            from torch.nn.parallel import DistributedDataParallel

            step_fn = DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
            writer.emit("settings", settings={"distributed": {**self.distributed, **ddp_record(step_fn)}})
        # Known once the model and the optimizer are built: how a token model attends, and what in the
        # step waits for the device every step (the how line of every report says it).
        built = {
            "attention": getattr(model, "attention", None),
            "host_sync_per_step": None if inference else step_waits(config.precision, optimizer),
        }
        if any(built.values()):
            writer.emit("settings", settings={k: v for k, v in built.items() if v})
        if config.compile == "on":
            step_fn = torch.compile(step_fn)
        self.device.sync()
        self.amp_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(config.precision)
        self.train_step = _step(step_fn, optimizer, self.loss_fn, self.amp_dtype, device)
        return None

    def _build_generate(self, writer: EventWriter) -> dict[str, Any] | None:
        """Generation: transformers' own model and generate (benchtui_runners.generate)."""
        from benchtui_runners import generate

        config, device = self.config, self.device.device
        prompt_len, new_tokens = generate.lengths(config)
        model = generate.torch_model(config).to(device)
        model.eval()
        emit_model(writer, "torch", config.model, prompt_len + new_tokens, model, config.framework)
        self.model = model
        self.writer = writer
        self.amp_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(config.precision)
        self.generator = generate.TorchGenerator(
            model,
            device,
            self.prompts,
            prompt_len,
            new_tokens,
            self.device.sync,
            config.compile,
            self.amp_dtype,
        )
        self.device.sync()
        record = generate.torch_record(config, model, device.type)
        attention = (
            "torch scaled_dot_product_attention through transformers' 'sdpa' and its mask builder (the static "
            "cache's empty slots are masked)"
        )
        return {"attention": attention, **({"generation": record} if record != self.record else {})}

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """An epoch's batches on the device: the loader's, copied (non-blocking), or the pool's."""
        device, memory_format = self.device.device, self.memory_format
        if self.loader is not None:
            for x, y in self.loader:
                yield (
                    x.to(device, non_blocking=True, memory_format=memory_format),
                    y.to(device, non_blocking=True),
                )
        elif self.pool is not None:
            for i in range(self.config.steps_per_epoch):
                yield self.pool[i % len(self.pool)]

    def stepping(self) -> AbstractContextManager[Any]:
        # Inference: no gradients anywhere (inference_mode also skips version counting), eval mode.
        return torch.inference_mode() if self.inference else lifecycle.nothing()

    def epochs(self, clock: StepClock, epochs: int, epoch_done: lifecycle.EpochDone) -> None:
        if self.generating:
            from benchtui_runners.generate import run_epochs

            assert self.writer is not None
            run_epochs(self.generator, clock, self.config, self.writer, len(self.prompts), epochs, epoch_done)
            return
        # A step's time runs from the previous step's end, so the loader's fetch and the copy to the
        # device are in it, as tf.data's are on the Keras side. Training: each step's loss stays on the
        # device (LossTally), read once the epoch's end has waited for its last step. Data parallel:
        # the lead's own losses (each node's local rank 0, the only rank that sends).
        keep = not self.inference and self.lead
        for epoch in range(1, epochs + 1):
            tally = LossTally() if keep else None
            clock.epoch_begin(epoch)
            for step, (x, y) in enumerate(self.batches(), start=1):
                clock.step_begin()  # the epoch's first: its time to first batch (loader start-up)
                loss = self.train_step(x, y)
                if tally is not None:
                    tally.add(loss)
                clock.step_end(step)
            epoch_done(epoch, tally.read if tally is not None else None)

    def profile_steps(self, window: lifecycle.Window, warmup: int, count: int) -> None:
        from torch.profiler import record_function

        from benchtui_runners.profiling import DATA

        feed = itertools.chain.from_iterable(self.batches() for _ in itertools.count())
        for i in range(warmup + count):
            if i == warmup:
                window.open()
            with record_function(DATA):
                x, y = next(feed)
            self.train_step(x, y)
        window.steps = count
        window.close()

    def capture(self, folder: str) -> Any:
        from benchtui_runners.profiling import TorchCapture

        return TorchCapture(folder, self.device.cuda)

    def release(self) -> None:
        if self.distributed is not None:
            import torch.distributed as dist

            dist.destroy_process_group()

    def count_flops(self) -> dict[str, Any]:
        from benchtui_runners.flops import count_torch

        config, device = self.config, self.device.device
        torch.manual_seed(config.seed + 1)
        bs = config.batch_size
        x, y = _inputs(config, bs, device, self.memory_format), _labels(config, bs, device)
        return count_torch(
            self.model, x, y, self.loss_fn, self.amp_dtype, device.type, forward_only=self.inference
        )


class LossTally:
    """An epoch's step losses, kept on the device: nothing in a step waits for them.

    ``add`` keeps each step's loss (detached: a view, no work queued); every ``FOLD`` steps they are folded
    into a running sum, min and max on the device (a few kernels, queued, never waited for), so an epoch of
    any length holds at most ``FOLD`` of them. ``read``, called once the epoch's end has synchronised the
    device, copies the three numbers to the host in one transfer (the device has nothing left to run)
    and gives the epoch event's ``loss`` (the mean), ``loss_min`` and ``loss_max``. NaN propagates through
    the sum, the min and the max: one NaN step makes all three NaN.
    """

    FOLD = 1024

    def __init__(self) -> None:
        self.pending: list[torch.Tensor] = []
        self.folded: torch.Tensor | None = None  # [sum, min, max] of the steps folded so far
        self.steps = 0

    def add(self, loss: torch.Tensor | None) -> None:
        if loss is None:
            return
        self.pending.append(loss.detach())
        self.steps += 1
        if len(self.pending) >= self.FOLD:
            self._fold()

    def _fold(self) -> None:
        if not self.pending:
            return
        losses = torch.stack([loss.reshape(()) for loss in self.pending]).float()
        part = torch.stack([losses.sum(), losses.min(), losses.max()])
        self.pending = []
        if self.folded is None:
            self.folded = part
        else:
            folded = self.folded
            self.folded = torch.stack(
                [folded[0] + part[0], torch.minimum(folded[1], part[1]), torch.maximum(folded[2], part[2])]
            )

    def read(self) -> dict[str, float]:
        """The epoch's mean, smallest and largest step loss; nothing when no step gave a loss."""
        self._fold()
        if self.folded is None:
            return {}
        total, low, high = self.folded.tolist()  # one copy to the host, after the epoch's wait
        return {"loss": total / self.steps, "loss_min": low, "loss_max": high}


def _step(step_fn: Any, optimizer: Any, loss_fn: Any, amp_dtype: Any, device: torch.device) -> Any:
    """One step on a batch: forward only (no optimizer: inference, returns None), or a training step,
    which returns its loss (detached, on the device: nothing waits for it)."""
    autocast = (
        (lambda: torch.autocast(device.type, dtype=amp_dtype))
        if amp_dtype is not None
        else contextlib.nullcontext
    )
    if optimizer is None:

        def infer(x: torch.Tensor, y: torch.Tensor) -> None:
            with autocast():
                outputs = step_fn(x)
            outputs.float().cpu()  # the answer on the host, as Keras's predict_on_batch returns it

        return infer

    if amp_dtype is None:
        # The plain step: exactly what a hand-written loop does, nothing more per batch.
        def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(step_fn(x), y)
            loss.backward()
            optimizer.step()
            return loss.detach()

        return train_step

    # fp16 needs loss scaling to keep small gradients; bf16 does not. The loss is taken in
    # float32 outside autocast, as the Keras head's float32 outputs are on the other side.
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

    def amp_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            outputs = step_fn(x)
        loss = loss_fn(outputs.float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()  # unscaled

    return amp_step
