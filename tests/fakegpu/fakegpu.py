"""A GPU for machines that have none: each framework's device layer faked at its narrowest point.

Only the calls that touch a GPU are replaced; the frameworks' own argument rules are kept
(``torch.cuda.set_device`` still rejects a device without an index, through torch's own
``_get_device_index``), so a wrong call fails here as it would on a real GPU. The work
itself runs on the CPU:

- torch: ``torch.cuda``'s device, memory, synchronisation and event calls, plus a
  ``TorchFunctionMode`` that places every tensor asked for on ``cuda`` on the CPU (and
  ``torch.Generator`` likewise).
- TensorFlow: ``tf.config``'s GPU list, device details, memory growth and memory info;
  ops placed on ``/GPU:0`` run on the CPU by TensorFlow's soft placement.
- JAX: ``jax.devices("gpu")`` returns GPU-like devices; computation stays on the CPU
  (``jax.block_until_ready`` is logged with how many arrays it waited for).

Like CUDA, the fake honours ``CUDA_VISIBLE_DEVICES``: the GPUs a process sees are the
ones named there (by index or UUID), renumbered from 0. ``BENCHTUI_FAKE_GPU_NAMES`` (comma-separated) names
the machine's GPUs in PCI order (default: one H100). Every faked call that a test wants to
see is logged to the file in ``BENCHTUI_FAKE_GPU_LOG`` (one line per call), if set.
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

FAKE_PEAK_BYTES = 96 << 20
FAKE_TOTAL_BYTES = 80 << 30


def machine_names() -> list[str]:
    raw = os.environ.get("BENCHTUI_FAKE_GPU_NAMES", "NVIDIA H100 80GB HBM3")
    return [n.strip() for n in raw.split(",") if n.strip()]


def machine_uuids() -> list[str]:
    """The machine's GPU UUIDs, in PCI order: ``BENCHTUI_FAKE_GPU_UUIDS``, else the sampler tests' NVML fake's."""
    raw = os.environ.get("BENCHTUI_FAKE_GPU_UUIDS")
    if raw:
        return [u.strip() for u in raw.split(",")]
    return [f"GPU-fake-{i}" for i in range(len(machine_names()))]


def visible_names() -> list[str]:
    """The GPUs this process sees, in CUDA's order after ``CUDA_VISIBLE_DEVICES``: each entry an index
    (PCI order) or a GPU UUID or a unique prefix of one."""
    names = machine_names()
    uuids = machine_uuids()
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return names
    out = []
    for item in raw.split(","):
        item = item.strip()
        matches = [i for i, u in enumerate(uuids) if item.startswith("GPU-") and u.startswith(item)]
        if item.isdigit() and int(item) < len(names):
            out.append(names[int(item)])
        elif len(matches) == 1:
            out.append(names[matches[0]])
        else:
            break  # CUDA stops at the first invalid entry ("" and "-1" hide everything)
    return out


def log(call: str) -> None:
    path = os.environ.get("BENCHTUI_FAKE_GPU_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {call}\n")


# -- torch ---------------------------------------------------------------------------------
def install_torch(torch: Any) -> None:
    from torch.cuda._utils import _get_device_index
    from torch.overrides import TorchFunctionMode

    state = {"current": 0}

    def count() -> int:
        return len(visible_names())

    def index_of(device: Any, optional: bool = True) -> int:
        index = _get_device_index(device, optional=optional)  # torch's own rule
        if index < 0:
            index = state["current"]
        if index >= count():
            raise RuntimeError(f"CUDA error: invalid device ordinal {index} (fake: {count()} visible)")
        return index

    def set_device(device: Any) -> None:
        index = _get_device_index(device)  # raises for torch.device("cuda"): no index
        if index >= 0:
            state["current"] = index_of(index)
        log(f"torch.cuda.set_device {index}")

    def synchronize(device: Any = None) -> None:
        log(f"torch.cuda.synchronize {index_of(device)}")

    def get_device_properties(device: Any = None) -> Any:
        index = index_of(device)
        return SimpleNamespace(name=visible_names()[index], total_memory=FAKE_TOTAL_BYTES, major=9, minor=0)

    class Event:
        def __init__(
            self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
        ) -> None:
            self.enable_timing = enable_timing
            self.at: float | None = None

        def record(self, stream: Any = None) -> None:
            self.at = time.perf_counter()  # CPU work is synchronous: recording time is completion time

        def query(self) -> bool:
            return self.at is not None

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Event) -> float:
            if not (self.enable_timing and end.enable_timing):
                raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
            if self.at is None or end.at is None:
                raise RuntimeError("Both events must be recorded before calculating elapsed time.")
            return (end.at - self.at) * 1000.0

    def memory(name: str, value: int) -> Any:
        def call(device: Any = None) -> int:
            log(f"torch.cuda.{name} {index_of(device)}")
            return value

        return call

    cuda = torch.cuda
    cuda.is_available = lambda: count() > 0
    cuda.device_count = count
    cuda.current_device = lambda: state["current"]
    cuda.set_device = set_device
    cuda.synchronize = synchronize
    cuda.get_device_properties = get_device_properties
    cuda.get_device_name = lambda device=None: get_device_properties(device).name
    cuda.get_device_capability = lambda device=None: (9, 0)
    cuda.is_bf16_supported = lambda including_emulation=True: True
    cuda.Event = Event
    cuda.reset_peak_memory_stats = memory("reset_peak_memory_stats", 0)
    cuda.max_memory_allocated = memory("max_memory_allocated", FAKE_PEAK_BYTES)
    cuda.max_memory_reserved = memory("max_memory_reserved", FAKE_PEAK_BYTES * 2)
    cuda.memory_allocated = memory("memory_allocated", FAKE_PEAK_BYTES // 2)

    def to_cpu(value: Any) -> Any:
        if isinstance(value, torch.device) and value.type == "cuda":
            index_of(value)
            return torch.device("cpu")
        if isinstance(value, str) and value.startswith("cuda"):
            index_of(torch.device(value))
            return "cpu"
        return value

    class CudaOnCpu(TorchFunctionMode):
        """Tensors asked for on a CUDA device are made on the CPU; everything else is untouched."""

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if func is torch.device:  # naming a CUDA device is fine; placing a tensor there is not
                return func(*args, **(kwargs or {}))
            kwargs = {k: to_cpu(v) for k, v in (kwargs or {}).items()}
            args = tuple(to_cpu(a) for a in args)
            if getattr(func, "__name__", "") == "cuda":  # Tensor.cuda()
                return args[0]
            return func(*args, **kwargs)

    real_generator = torch.Generator

    class Generator(real_generator):  # a generator for a CUDA device draws on the CPU
        def __new__(cls, device: Any = "cpu") -> Any:
            return real_generator.__new__(cls, to_cpu(device))

        def __init__(self, device: Any = "cpu") -> None:
            pass

    torch.Generator = Generator
    CudaOnCpu().__enter__()  # for the life of the process
    log(f"installed torch ({count()} visible)")


# -- TensorFlow ------------------------------------------------------------------------------
def install_tensorflow(tf: Any) -> None:
    from tensorflow.python.eager import context

    config = tf.config
    real_list = config.list_physical_devices
    real_details = config.experimental.get_device_details
    real_growth = config.experimental.set_memory_growth
    fakes = [
        config.PhysicalDevice(name=f"/physical_device:GPU:{i}", device_type="GPU")
        for i in range(len(visible_names()))
    ]

    def list_physical_devices(device_type: str | None = None) -> list[Any]:
        real = real_list(device_type) if device_type not in ("GPU", "gpu") else []
        return real + (fakes if device_type in (None, "GPU", "gpu") else [])

    def get_device_details(device: Any) -> dict[str, Any]:
        if device in fakes:
            return {"device_name": visible_names()[fakes.index(device)], "compute_capability": (9, 0)}
        return real_details(device)

    def set_memory_growth(device: Any, enable: bool) -> None:
        if device not in fakes:
            return real_growth(device, enable)
        if context.context()._context_handle is not None:  # TF's own rule: only before the runtime starts
            raise RuntimeError("Physical devices cannot be modified after being initialized")
        log(f"tf.set_memory_growth {device.name} {enable}")

    def get_memory_info(device: str) -> dict[str, int]:
        kind, _, index = device.upper().rpartition(":")
        if kind != "GPU" or not index.isdigit() or int(index) >= len(fakes):
            raise ValueError(f"No matching devices found for '{device}'")
        log(f"tf.get_memory_info {device}")
        return {"current": FAKE_PEAK_BYTES // 2, "peak": FAKE_PEAK_BYTES}

    real_device = tf.device

    def device(name: Any) -> Any:  # logged: a test can see which device scopes a run entered
        log(f"tf.device {name}")
        return real_device(name)

    tf.device = device
    config.list_physical_devices = list_physical_devices
    config.experimental.list_physical_devices = list_physical_devices
    config.experimental.get_device_details = get_device_details
    config.experimental.set_memory_growth = set_memory_growth
    config.experimental.get_memory_info = get_memory_info
    tf.test.is_built_with_cuda = lambda: True
    log(f"installed tensorflow ({len(fakes)} visible)")


# -- JAX -------------------------------------------------------------------------------------
class FakeJaxGpu:
    platform = "gpu"

    def __init__(self, index: int, name: str) -> None:
        self.id = index
        self.device_kind = name

    def memory_stats(self) -> dict[str, int]:
        log(f"jax.memory_stats {self.id}")
        return {"bytes_in_use": FAKE_PEAK_BYTES // 2, "peak_bytes_in_use": FAKE_PEAK_BYTES}


def install_jax(jax: Any) -> None:
    real_devices = jax.devices
    gpus = [FakeJaxGpu(i, name) for i, name in enumerate(visible_names())]

    started: list[bool] = []

    def devices(backend: Any = None) -> list[Any]:
        if backend in ("gpu", "cuda"):
            if not started:  # JAX's GPU client starts here, and reads its memory policy as it does
                started.append(True)
                prealloc = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true (unset)")
                log(f"jax.gpu_client_start preallocate={prealloc}")
            if not gpus:
                raise RuntimeError(
                    f"Unknown backend: '{backend}' requested, but no platforms that are instances of gpu are present."
                )
            return list(gpus)
        return real_devices(backend)

    real_block = jax.block_until_ready

    def block_until_ready(x: Any) -> Any:  # logged: how many arrays a "sync" waited for
        log(f"jax.block_until_ready {len(jax.tree_util.tree_leaves(x))}")
        return real_block(x)

    jax.devices = devices
    jax.block_until_ready = block_until_ready
    log(f"installed jax ({len(gpus)} visible)")


INSTALLERS = {"torch": install_torch, "tensorflow": install_tensorflow, "jax": install_jax}


# -- host waits ------------------------------------------------------------------------------
def record_wait(kind: str, what: str, index: int) -> None:
    path = os.environ.get("BENCHTUI_FAKE_GPU_WAITS")
    import sys
    frame = sys._getframe(1)
    source = "?"
    while frame is not None:
        f = frame.f_code.co_filename
        if "/torch/" not in f and "/fakegpu/" not in f:
            source = f"{f}:{frame.f_lineno}"
            break
        frame = frame.f_back
    WAITS.append((kind, what, index, source))
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {kind} {what} cuda:{index} {source}\n")


WAITS: list = []
