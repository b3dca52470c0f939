"""A GPU for machines that have none: each framework's device layer faked at its narrowest point.

Only the calls that touch a GPU are replaced; the frameworks' own argument rules are kept
(``torch.cuda.set_device`` still rejects a device without an index, through torch's own
``_get_device_index``), so a wrong call fails here as it would on a real GPU. The work
itself runs on the CPU:

- torch (faithful; faketorch.py): a CUDA tensor is a tensor subclass that knows its GPU
  (``x.device`` is ``cuda:N``); mixing devices raises CUDA's error; CUDA autocast casts as
  CUDA's own autocast kernels do; pinned memory works; ``torch.cuda``'s device, memory,
  synchronisation, stream and event calls and ``torch.accelerator`` are faked, and a call naming
  a GPU the process cannot see raises CUDA's "invalid device ordinal".
- TensorFlow: ``tf.config``'s GPU list, device details, memory growth and memory info;
  ops placed on ``/GPU:0`` run on the CPU by TensorFlow's soft placement.
- JAX: ``jax.devices("gpu")`` returns GPU-like devices; computation stays on the CPU
  (``jax.block_until_ready`` is logged with how many arrays it waited for).

Every host wait on a device value is recorded (``record_wait``) with the line that caused it
and the step of the run's clock it happened in: torch's ``.item()``/``bool()``/``.cpu()``/
``.tolist()``/blocking copies/operators whose value or shape the host reads, JAX's reads of
an array, TensorFlow's ``.numpy()``, and every synchronisation. ``BENCHTUI_FAKE_GPU_WAITS``
names a file that gets one JSON line per wait.

Like CUDA, the fake honours ``CUDA_VISIBLE_DEVICES``: the GPUs a process sees are the
ones named there (by index or UUID), renumbered from 0. ``BENCHTUI_FAKE_GPU_NAMES`` (comma-separated) names
the machine's GPUs in PCI order (default: one H100). Every faked call that a test wants to
see is logged to the file in ``BENCHTUI_FAKE_GPU_LOG`` (one line per call), if set.
"""

from __future__ import annotations

import json
import os
import sys
import threading
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
    import faketorch
    from torch.cuda._utils import _get_device_index

    state = faketorch.STATE
    count, index_of = state.count, state.index_of

    def set_device(device: Any) -> None:
        index = _get_device_index(device)  # raises for torch.device("cuda"): no index
        if index >= 0:
            state.current = index_of(index)
        log(f"torch.cuda.set_device {index}")

    def synchronize(device: Any = None) -> None:
        index = index_of(device)
        log(f"torch.cuda.synchronize {index}")
        record_wait("synchronize", "torch.cuda.synchronize", f"cuda:{index}")

    def get_device_properties(device: Any = None) -> Any:
        index = index_of(device)
        return SimpleNamespace(name=visible_names()[index], total_memory=FAKE_TOTAL_BYTES, major=9, minor=0)

    class Event:
        def __init__(
            self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
        ) -> None:
            self.enable_timing = enable_timing
            self.at: float | None = None
            self.index = state.current

        def record(self, stream: Any = None) -> None:
            self.at = time.perf_counter()  # CPU work is synchronous: recording time is completion time

        def query(self) -> bool:
            return self.at is not None

        def synchronize(self) -> None:
            record_wait("synchronize", "torch.cuda.Event.synchronize", f"cuda:{self.index}")

        def wait(self, stream: Any = None) -> None:
            pass

        def elapsed_time(self, end: Event) -> float:
            if not (self.enable_timing and end.enable_timing):
                raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
            if self.at is None or end.at is None:
                raise RuntimeError("Both events must be recorded before calculating elapsed time.")
            return (end.at - self.at) * 1000.0

    class Stream:
        def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
            self.device_index = index_of(device)
            self.device = torch.device("cuda", self.device_index)

        def synchronize(self) -> None:
            record_wait("synchronize", "torch.cuda.Stream.synchronize", f"cuda:{self.device_index}")

        def query(self) -> bool:
            return True

        def is_capturing(self) -> bool:
            return False

        def wait_stream(self, stream: Any) -> None:
            pass

        def wait_event(self, event: Any) -> None:
            pass

        def record_event(self, event: Any = None) -> Any:
            event = event or Event()
            event.record(self)
            return event

    def memory(name: str, value: int) -> Any:
        def call(device: Any = None) -> int:
            log(f"torch.cuda.{name} {index_of(device)}")
            return value

        return call

    cuda = torch.cuda
    cuda._lazy_init = lambda: None  # torch calls it before making a tensor on CUDA: nothing to start
    cuda.is_available = lambda: count() > 0
    cuda.device_count = count
    cuda.current_device = lambda: state.current
    cuda.set_device = set_device
    cuda.synchronize = synchronize
    cuda.get_device_properties = get_device_properties
    cuda.get_device_name = lambda device=None: get_device_properties(device).name
    cuda.get_device_capability = lambda device=None: (9, 0)
    cuda.is_bf16_supported = lambda including_emulation=True: True
    cuda.Event = Event
    cuda.Stream = Stream
    cuda.current_stream = lambda device=None: Stream(device)
    cuda.default_stream = lambda device=None: Stream(device)

    def exchange_device(device: int) -> int:  # torch.cuda.device(i) as a context
        if device < 0:
            return -1
        before, state.current = state.current, index_of(device)
        return before

    cuda._exchange_device = cuda._maybe_exchange_device = exchange_device
    cuda.reset_peak_memory_stats = memory("reset_peak_memory_stats", 0)
    cuda.max_memory_allocated = memory("max_memory_allocated", FAKE_PEAK_BYTES)
    cuda.max_memory_reserved = memory("max_memory_reserved", FAKE_PEAK_BYTES * 2)
    cuda.memory_allocated = memory("memory_allocated", FAKE_PEAK_BYTES // 2)
    accelerator = torch.accelerator
    accelerator.current_accelerator = lambda check_available=False: (
        torch.device("cuda") if count() > 0 or not check_available else None
    )
    accelerator.device_count = count
    accelerator.current_device_index = lambda: state.current
    accelerator.set_device_index = lambda device: set_device(index_of(device))
    accelerator.synchronize = synchronize
    accelerator.current_stream = lambda device=None: Stream(device)
    cuda.is_current_stream_capturing = lambda: False

    real_generator = torch.Generator

    class Generator(real_generator):  # a generator for a CUDA device draws on the CPU
        def __new__(cls, device: Any = "cpu") -> Any:
            target = torch.device(device)
            if target.type == "cuda":
                index_of(target)
                target = torch.device("cpu")
            return real_generator.__new__(cls, target)

        def __init__(self, device: Any = "cpu") -> None:
            pass

    torch.Generator = Generator
    faketorch.install()
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
    # Host waits: an eager tensor read on the host (.numpy(), np.asarray, float(), bool(), what Keras's
    # logs conversion does). Under the fake every tensor is on the CPU, so every read is recorded, with
    # the tensor's device as TensorFlow names it: a test tells host-made tensors apart by that, or by the line.
    from tensorflow.python.framework import ops

    real_numpy = ops._EagerTensorBase._numpy

    def _numpy(self: Any) -> Any:
        record_wait("numpy", "EagerTensor.numpy", self.device or "?")
        return real_numpy(self)

    ops._EagerTensorBase._numpy = _numpy
    real_sync = tf.test.experimental.sync_devices

    def sync_devices() -> None:  # logged: the runner's wait for the device (one per window)
        log("tf.test.experimental.sync_devices")
        record_wait("synchronize", "tf.test.experimental.sync_devices", "GPU")
        return real_sync()

    tf.test.experimental.sync_devices = sync_devices
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

    # Host waits: an array read on the host. On a GPU every read goes through ArrayImpl._value
    # (np.asarray, .item(), .tolist(), float(), bool(), printing), which keeps the host copy, so only
    # an array's first read waits. On the CPU NumPy reads an array through the buffer protocol,
    # bypassing _value: NumPy's conversion functions are watched too. Every array counts as on the GPU.
    import weakref

    import numpy as np
    from jax._src import array

    already: dict[int, Any] = {}

    def first_read(x: Any, what: str) -> None:
        ref = already.get(id(x))
        if ref is not None and ref() is x:
            return  # JAX kept the host copy of its first read
        record_wait("host-read", what, "gpu")
        key = id(x)
        already[key] = weakref.ref(x, lambda _: already.pop(key, None))

    real_value = array.ArrayImpl._value.fget

    def _value(self: Any) -> Any:
        first_read(self, "jax.Array._value")
        return real_value(self)

    array.ArrayImpl._value = property(_value)

    def watched(name: str) -> Any:
        real = getattr(np, name)

        def convert(x: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(x, array.ArrayImpl):
                first_read(x, f"numpy.{name}(jax.Array)")
            return real(x, *args, **kwargs)

        return convert

    for name in ("asarray", "array", "asanyarray"):
        setattr(np, name, watched(name))
    inside_block = threading.local()

    def block_until_ready(x: Any) -> Any:  # logged: how many arrays a "sync" waited for
        log(f"jax.block_until_ready {len(jax.tree_util.tree_leaves(x))}")
        record_wait("synchronize", "jax.block_until_ready", "gpu")
        inside_block.on = True
        try:
            return real_block(x)
        finally:
            inside_block.on = False

    real_array_block = array.ArrayImpl.block_until_ready

    def array_block(self: Any) -> Any:
        if not getattr(inside_block, "on", False):
            record_wait("synchronize", "jax.Array.block_until_ready", "gpu")
        return real_array_block(self)

    array.ArrayImpl.block_until_ready = array_block
    jax.devices = devices
    jax.block_until_ready = block_until_ready
    log(f"installed jax ({len(gpus)} visible)")


# -- host waits ----------------------------------------------------------------------------
#: Where the run's clock is (benchtui_runners.timing.StepClock, when a runner uses it): "outside"
#: (before the first epoch), "step" (inside a timed step: epoch and step say which), "clock" (the
#: clock's own work: its synchronisation at a window's or an epoch's edge), "between" (between epochs,
#: and after the last).
CLOCK: dict[str, Any] = {"where": "outside", "epoch": 0, "step": 0}
#: Every host wait this process recorded (what BENCHTUI_FAKE_GPU_WAITS receives, one JSON line each).
WAITS: list[dict[str, Any]] = []
_HERE = os.path.dirname(os.path.abspath(__file__))
#: The fake's own files: no frame of theirs is recorded (plants.py's are: a planted bug is a caller).
_FAKE_FILES = tuple(os.path.join(_HERE, f) for f in ("fakegpu.py", "faketorch.py", "sitecustomize.py"))
#: Frameworks' own packages, and wrappers that only re-raise: a wait's ``source`` is the first frame
#: outside them (and the fake).
_FRAMEWORKS = frozenset({"torch", "jax", "jaxlib", "tensorflow", "tf_keras"})
_WRAPPERS = ("keras/src/utils/traceback_utils.py",)


def _internal(path: str) -> bool:
    short = _short(path)
    return short.split("/", 1)[0] in _FRAMEWORKS or short.startswith(_WRAPPERS)


def _short(path: str) -> str:
    """A frame's file as a reader names it: ``transformers/masking_utils.py``,
    ``benchtui_runners/torch_runner.py`` (runners run from a staged copy of the package)."""
    if "/benchtui_runners/" in path:
        return "benchtui_runners/" + path.rsplit("/benchtui_runners/", 1)[1]
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return path


def record_wait(kind: str, what: str, device: str) -> dict[str, Any]:
    """The host waits here for a device value: record it with the line that caused it.

    ``kind``: item | tolist | copy-to-host | blocking-copy-to-device | sync-op | numpy | synchronize;
    ``what``: the call; ``device``: ``cuda:N`` (or the framework's name of the device). The record
    names ``source``, the first frame outside the framework and the fake (the caller's line), ``at``,
    the innermost frame outside the fake (the framework's own line), ``runner``, the innermost frame
    in benchtui_runners, the whole ``stack`` (outermost first, ``path:line function``), and where
    the run's clock was (``CLOCK``).
    """
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_FAKE_FILES):
            frames.append((path, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    source = next((f for f in frames if not _internal(f[0])), None)
    runner = next((f for f in frames if "benchtui_runners" in f[0]), None)

    def where(f: tuple[str, int, str] | None) -> str:
        return f"{_short(f[0])}:{f[1]}" if f else ""

    record = {
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "kind": kind,
        "what": what,
        "device": device,
        "source": where(source),
        "at": where(frames[0] if frames else None),
        "runner": where(runner),
        "stack": [f"{_short(p)}:{line} {name}" for p, line, name in reversed(frames)],
        **CLOCK,
    }
    WAITS.append(record)
    path = os.environ.get("BENCHTUI_FAKE_GPU_WAITS")
    if path:
        line = json.dumps(record) + "\n"
        with _WAITS_LOCK, open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
    return record


_WAITS_LOCK = threading.Lock()


def install_clock(timing: Any) -> None:
    """Follow the runner's clock (benchtui_runners.timing.StepClock) so each wait knows its step."""
    clock = timing.StepClock
    begin, end_step, end_epoch = clock.epoch_begin, clock.step_end, clock.epoch_end

    def epoch_begin(self: Any, epoch: int) -> None:
        CLOCK.update(where="clock", epoch=epoch, step=0)
        begin(self, epoch)
        CLOCK.update(where="step", step=1)

    def step_end(self: Any, step: int) -> None:
        CLOCK.update(where="clock", step=step)
        end_step(self, step)
        CLOCK.update(where="step", step=step + 1)

    def epoch_end(self: Any) -> float:
        CLOCK["where"] = "clock"
        seconds = end_epoch(self)
        CLOCK.update(where="between", step=0)
        return seconds

    clock.epoch_begin, clock.step_end, clock.epoch_end = epoch_begin, step_end, epoch_end


INSTALLERS = {
    "torch": install_torch,
    "tensorflow": install_tensorflow,
    "jax": install_jax,
    "benchtui_runners.timing": install_clock,
}
