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
from typing import Any

import numpy as np
import torch

from benchtui_runners import custom as user
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


def _versions() -> dict[str, Any]:
    versions: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import torchvision

        versions["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    versions["cuda"] = torch.version.cuda
    versions["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return versions


def _device_info(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "type": "cuda",
            "index": device.index,
            "name": props.name,
            "memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
        }
    return {
        "type": "cpu",
        "name": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
    }


def describe(framework: str, device_spec: str) -> dict[str, Any]:
    """Versions and devices, for ``benchtui doctor``."""
    devices = [{"type": "cpu", "name": platform.machine(), "threads": torch.get_num_threads()}]
    if torch.cuda.is_available():
        devices += [_device_info(torch.device("cuda", i)) for i in range(torch.cuda.device_count())]
    gpu = (
        {"sees_gpu": True}
        if torch.cuda.is_available()
        else {"sees_gpu": False, "why": why_no_cuda(_label(framework))}
    )
    return {"versions": _versions(), "devices": devices, "gpu": gpu}


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


def _peak_memory(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        return {
            "peak_bytes": torch.cuda.max_memory_allocated(device),
            "reserved_bytes": torch.cuda.max_memory_reserved(device),
            "source": "torch.cuda.max_memory_allocated (tensors; the allocator reserved reserved_bytes)",
        }
    return {"peak_bytes": peak_rss_bytes(), "source": "process peak RSS (CPU)"}


def _optimizer(config: RunConfig, params: Any) -> Any:
    """The plan's optimizer, or a user's own model's (its definition's ``optimizers``: ``fn(params)``)."""
    own = user.own("optimizers", config.framework, config.model) if config.model_def else None
    if own is not None:
        return user.call(own[0], own[1], params)
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.learning_rate)
    return torch.optim.SGD(params, lr=config.learning_rate, momentum=config.momentum)


def _loss(config: RunConfig) -> Any:
    """The plan's loss, or a user's own model's (its definition's ``losses``: ``fn(outputs, targets)``)."""
    own = user.own("losses", config.framework, config.model) if config.model_def else None
    if own is None:
        return torch_loss(config.head, "tokens" if config.tokens else "image")
    spec, fn = own

    def loss(outputs: Any, targets: Any) -> Any:
        return user.call(spec, fn, outputs, targets)

    return loss


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


def start_group(device: torch.device, world: int) -> dict[str, Any]:
    """Join torchrun's process group (NCCL on GPUs, Gloo on the CPU); what it is, for the record."""
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
    return record


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
    writer.phase("import", "end")
    rank, local_rank, world = ranks()
    device = _device(config.device)
    if world > 1 and device.type == "cuda":
        device = torch.device("cuda", local_rank)  # torchrun's rank on its own GPU of the visible ones
    refuse_emulated_bf16(config, device)
    settings = {
        **_settings(config, device),
        **training_record(config),
        "input": input_record(config, device),
    }
    if config.task == "inference":
        settings["inference_path"] = (
            "model(x) in eval mode under torch.inference_mode, every batch's outputs copied to the host"
        )
    torch.manual_seed(config.seed)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats(device)
    distributed = start_group(device, world) if world > 1 else None
    if distributed is not None:
        settings["distributed"] = distributed
    writer.hello(
        framework=config.framework,
        versions=_versions(),
        device={**_device_info(device), **({"assigned": config.gpu} if config.gpu else {})},
        config=config.to_dict(),
        settings=settings,
        steps_per_epoch=config.steps_per_epoch,
        samples_per_epoch=config.samples_per_epoch,
    )

    images = not config.tokens
    memory_format = torch.channels_last if config.channels_last and images else torch.contiguous_format
    bs, steps = config.batch_size, config.steps_per_epoch
    inference = config.task == "inference"

    loader = pool = None
    if config.mode != "count":
        writer.phase("data", "start")
        torch.manual_seed(config.seed + rank)  # each rank its own data; the same model everywhere
        if config.data == "host":
            loader = _loader(config, device, rank)
        else:
            # Synthetic tensors made on the device: a few distinct batches, cycled (seeded above).
            pool = [
                (_inputs(config, bs, device, memory_format), _labels(config, bs, device))
                for _ in range(min(steps, 4))
            ]
        writer.phase("data", "end")

    writer.phase("build", "start")
    torch.manual_seed(config.seed)
    if config.model_def:  # a user's own model, from its builder (benchtui_runners.custom)
        model = user.build("torch", config.framework, config)
    else:
        model = build_torch(
            config.model, config.outputs, config.image_size, config.tokens, last_only=inference
        )
    model = model.to(device, memory_format=memory_format)
    model.eval() if inference else model.train()
    emit_model(writer, "torch", config.model, config.tokens, model, config.framework)
    loss_fn = _loss(config)
    optimizer = None if inference else _optimizer(config, model.parameters())
    step_fn: Any = model
    if distributed is not None:
        from torch.nn.parallel import DistributedDataParallel

        step_fn = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        writer.emit("settings", settings={"distributed": {**distributed, **ddp_record(step_fn)}})
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
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    writer.phase("build", "end")

    amp_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(config.precision)
    train_step = _step(step_fn, optimizer, loss_fn, amp_dtype, device)

    def batches():  # noqa: ANN202 - a generator of device tensors
        if loader is not None:
            for x, y in loader:
                yield (
                    x.to(device, non_blocking=True, memory_format=memory_format),
                    y.to(device, non_blocking=True),
                )
        elif pool is not None:
            for i in range(steps):
                yield pool[i % len(pool)]

    # One clock for every framework (benchtui_runners.timing): no wait for the device after a
    # step, one per window of steps; a step's time runs from the previous step's end, so the
    # loader's fetch and the copy to the device are in it, as tf.data's are on the Keras side.
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    gather = gather_step_times(device, world) if world > 1 else None
    clock = StepClock(writer, sync, bs * world, config.timing, config.window_s, gather=gather)
    epochs = 0 if config.mode == "count" else config.epochs_to_run
    # Inference: no gradients anywhere (inference_mode also skips version counting), eval mode.
    with torch.inference_mode() if inference else contextlib.nullcontext():
        for epoch in range(1, epochs + 1):
            clock.epoch_begin(epoch)
            for step, (x, y) in enumerate(batches(), start=1):
                clock.step_begin()  # the epoch's first: its time to first batch (loader start-up)
                train_step(x, y)
                clock.step_end(step)
            seconds = clock.epoch_end()
            writer.epoch(epoch, seconds, config.samples_per_epoch, **clock.epoch_fields())
            writer.memory(epoch=epoch, **_peak_memory(device))
        final_memory = _peak_memory(device)  # before counting: its extra step is no part of the run
        if config.profile and config.mode == "train" and epochs:
            # Where step time goes: a few more steps under torch.profiler, after the timed epochs.
            # Every rank runs them (their collectives must meet); rank 0 profiles.
            from torch.profiler import record_function

            from benchtui_runners.profiling import DATA, TorchCapture, profile_run

            def profiled(window: Any, warmup: int, count: int) -> None:
                feed = itertools.chain.from_iterable(batches() for _ in itertools.count())
                for i in range(warmup + count):
                    if i == warmup:
                        window.open()
                    with record_function(DATA):
                        x, y = next(feed)
                    train_step(x, y)
                window.steps = count
                window.close()

            profile_run(
                writer,
                config,
                lambda folder: TorchCapture(folder, device.type == "cuda"),
                sync,
                profiled,
                versions=torch.__version__,
                active=rank == 0,
            )
    if distributed is not None:
        import torch.distributed as dist

        dist.destroy_process_group()
    if config.mode != "probe" and rank == 0:
        # FLOPs of one step, counted after the timed epochs so it warms up nothing timed.
        from benchtui_runners.flops import COUNTED_FORWARD, COUNTED_TRAIN, count_torch, emit_flops

        def count_flops() -> dict[str, Any]:
            torch.manual_seed(config.seed + 1)
            x, y = _inputs(config, bs, device, memory_format), _labels(config, bs, device)
            return count_torch(model, x, y, loss_fn, amp_dtype, device.type, forward_only=inference)

        emit_flops(writer, count_flops, bs, counted=COUNTED_FORWARD if inference else COUNTED_TRAIN)
    writer.done(**final_memory)


def _step(step_fn: Any, optimizer: Any, loss_fn: Any, amp_dtype: Any, device: torch.device) -> Any:
    """One step on a batch: forward only (no optimizer: inference), or a training step."""
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
        def train_step(x: torch.Tensor, y: torch.Tensor) -> None:
            optimizer.zero_grad(set_to_none=True)
            loss_fn(step_fn(x), y).backward()
            optimizer.step()

        return train_step

    # fp16 needs loss scaling to keep small gradients; bf16 does not. The loss is taken in
    # float32 outside autocast, as the Keras head's float32 outputs are on the other side.
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

    def amp_step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            outputs = step_fn(x)
        scaler.scale(loss_fn(outputs.float(), y)).backward()
        scaler.step(optimizer)
        scaler.update()

    return amp_step
