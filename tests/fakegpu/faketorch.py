"""PyTorch's CUDA device, faked faithfully on a machine that has none.

A CUDA tensor is a :class:`FakeCudaTensor`: a wrapper tensor subclass holding a CPU tensor
(``_elem``) and a CUDA ordinal (``_index``); ``x.device`` answers ``cuda:N``. Every aten
operator on one reaches ``__torch_dispatch__`` (below autograd, on every thread, called from
C++ as from Python), which

- checks devices as CUDA does: tensors on two devices (the CPU and a GPU, or two GPUs) raise
  CUDA's own error; a 0-dim CPU tensor may stand beside CUDA tensors where CUDA's
  TensorIterator takes it for a scalar; copies cross devices, and index tensors may stay on
  the CPU, as CUDA lets them;
- records every host wait on a device value (``.item()``, ``bool()``, ``.cpu()``,
  ``.tolist()``, a blocking copy, an operator whose value or output shape the host must
  read) with the line that caused it (``fakegpu.record_wait``);
- runs the operator on the CPU tensors and wraps its outputs on the inputs' GPU.

The wrapper's C++ device is PyTorch's PrivateUse1 backend, named ``fakecuda`` and set up as a
Python backend (a device guard that does nothing): a C++ device of CUDA cannot take part in
autograd without a driver (autograd asks the CUDA runtime for the stream of every tensor it
records, and the process aborts), and a C++ device of CPU would make every tensor that C++
builds from a CUDA tensor's options (``at::zeros(sizes, grad.options())``) a CPU tensor. With
its own backend, those land in the fake's factory kernels and stay on the fake GPU, and the
wrapper has its own autocast key.

- Tensors made on a CUDA device (``torch.randn(..., device="cuda")``, ``x.to("cuda")``,
  ``nn.Module.to``) come from Python kernels for the CUDA and PrivateUse1 keys of every
  operator that makes a tensor from nothing (``empty``, ``zeros``, ``arange``, ...).
- Pinned memory: CPU kernels for ``_pin_memory`` and ``is_pinned`` (a copy, remembered as
  pinned while its storage lives), so DataLoader's pin thread and non-blocking copies run.
- Autocast: ``torch.autocast("cuda")`` also turns on autocast for the fake backend, whose
  kernels (one per operator CUDA's autocast has a kernel for) ask CUDA's own compiled autocast
  kernel what it would cast, by running it on stand-in tensors whose C++ device is CUDA
  (:class:`_Probe`), then apply those casts to the real tensors above autograd. CUDA's op lists,
  policies and bans (``binary_cross_entropy``) are CUDA's, not a copy of them.

``LIMITS`` says what is not faithful.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

import fakegpu

#: The PrivateUse1 backend's name: the C++ device of a fake CUDA tensor.
NAME = "fakecuda"
#: What this fake does not make faithful, and why.
LIMITS = (
    "streams and events are recorded, not simulated: work is synchronous on the CPU, so a race "
    "between a non-blocking copy and its use cannot show",
    "backward runs on the calling thread (autograd's device threads would call the Python device "
    "guard during interpreter shutdown)",
    "autocast's cast cache is not kept: a weight used twice in one autocast region is cast twice "
    "(the same values; more work than CUDA does)",
    "out=/resize_/set_ on a fake CUDA tensor that change its shape raise: a wrapper's sizes are fixed",
    "torch.compile and torch.set_default_device('cuda') are not supported",
    "memory counters are constants; tensors are not counted per device",
    "torch.Generator(device='cuda') is a CPU generator (its .device says cpu), and a fake CUDA tensor "
    "has no storage of its own: data_ptr() and untyped_storage() raise",
    "numerics are the CPU kernels': fp16/bf16 results differ from CUDA's in the last bits; TF32 and "
    "cudnn.benchmark change nothing",
)
aten = torch.ops.aten


# -- the tensor ------------------------------------------------------------------------------
class FakeCudaTensor(torch.Tensor):
    """A CUDA tensor on a machine without one: a CPU tensor and a CUDA ordinal."""

    _elem: torch.Tensor
    _index: int

    @staticmethod
    def __new__(cls, elem: torch.Tensor, index: int, requires_grad: bool = False) -> FakeCudaTensor:
        if type(elem) is not torch.Tensor and not isinstance(elem, torch.nn.Parameter):
            raise AssertionError(f"a fake CUDA tensor holds a plain CPU tensor, not {type(elem).__name__}")
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=torch.device(NAME, index),
            requires_grad=requires_grad,
        )
        out._elem = elem
        out._index = index
        return out

    def __init__(self, elem: torch.Tensor, index: int, requires_grad: bool = False) -> None:
        pass

    # What Python sees: a CUDA tensor.
    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", self._index)

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True

    @property
    def is_cpu(self) -> bool:  # type: ignore[override]
        return False

    def get_device(self) -> int:  # type: ignore[override]
        return self._index

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        """As CUDA prints it (``tensor([...], device='cuda:0')``): printing reads the values, a wait."""
        fakegpu.record_wait("copy-to-host", "Tensor.__repr__", f"cuda:{self._index}")
        values, _, dtype = repr(self._elem).partition(", dtype=")
        text = (
            values.removesuffix(")")
            + f", device='cuda:{self._index}'"
            + (f", dtype={dtype[:-1]}" if dtype else "")
        )
        if self.grad_fn is not None:
            text += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            text += ", requires_grad=True"
        return text + ")"

    def __format__(self, spec: str) -> str:
        if self.dim() == 0:
            return format(self.item(), spec)
        return format(repr(self), spec)

    # A traceable wrapper subclass: nn.Module.to swaps parameters in place (tied weights stay tied).
    def __tensor_flatten__(self) -> tuple[list[str], int]:
        return ["_elem"], self._index

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, torch.Tensor], index: int, size: Any, stride: Any) -> Any:
        return FakeCudaTensor(inner["_elem"], index)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        special = _FUNCTION_LEVEL.get(func)
        if special is not None:
            return special(*args, **(kwargs or {}))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return _dispatch(func, args, kwargs or {})


def wrap(elem: torch.Tensor, index: int) -> FakeCudaTensor:
    return FakeCudaTensor(elem, index)


def on_cuda(value: Any) -> bool:
    return isinstance(value, FakeCudaTensor)


# -- Python-level methods C++ would answer wrongly for a wrapper -------------------------------
def _numpy(self: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(self, FakeCudaTensor):
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
            "tensor to host memory first."
        )
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.numpy(self, *args, **kwargs)


def _tolist(self: Any) -> Any:
    if isinstance(self, FakeCudaTensor):
        fakegpu.record_wait("tolist", "Tensor.tolist", f"cuda:{self._index}")
        return self._elem.tolist()
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.tolist(self)


_FUNCTION_LEVEL: dict[Any, Any] = {
    torch.Tensor.numpy: _numpy,
    torch.Tensor.__array__: lambda self, *a, **k: _numpy(self),
    torch.Tensor.tolist: _tolist,
}
#: Tensor methods and torch functions replaced at install (their originals, by name).
_real: dict[str, Any] = {}


def _is_cuda_name(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and value.split(":", 1)[0] == "cuda"


def _cuda_device(device: Any) -> torch.device:
    """A CUDA device with its index (the current device where none is named); raises as CUDA for
    an ordinal that is not visible."""
    return torch.device("cuda", STATE.index_of(device))


def _with_index(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``cuda`` made ``cuda:N`` in a call's device arguments: C++ would ask the CUDA runtime which."""
    args = tuple(_cuda_device(a) if _is_cuda_name(a) else a for a in args)
    if _is_cuda_name(kwargs.get("device")):
        kwargs = {**kwargs, "device": _cuda_device(kwargs["device"])}
    return args, kwargs


def _to(self: Any, *args: Any, **kwargs: Any) -> Any:
    """``Tensor.to``, as CUDA: a tensor already where and what it is asked to be is returned itself."""
    args, kwargs = _with_index(args, kwargs)
    if not isinstance(self, FakeCudaTensor):
        return _real["to"](self, *args, **kwargs)
    copy = bool(kwargs.pop("copy", False))
    device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    same_format = memory_format in (None, torch.preserve_format) or self.is_contiguous(
        memory_format=memory_format
    )
    if device is not None and device.type == "cuda" and device.index == self._index:
        device = None
    if device is None and dtype in (None, self.dtype) and same_format and not copy:
        return self
    return aten._to_copy.default(
        self,
        dtype=dtype,
        device=device,
        non_blocking=non_blocking,
        **({} if memory_format is None else {"memory_format": memory_format}),
    )


def _cuda(
    self: Any, device: Any = None, non_blocking: bool = False, memory_format: Any = torch.preserve_format
) -> Any:
    return _to(self, _cuda_device(device), non_blocking=non_blocking, memory_format=memory_format)


def _cpu(self: Any, memory_format: Any = torch.preserve_format) -> Any:
    if isinstance(self, FakeCudaTensor):
        return _to(self, torch.device("cpu"), memory_format=memory_format)
    return _real["cpu"](self, memory_format=memory_format)


def _new_tensor(
    self: Any, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Any:
    if isinstance(self, FakeCudaTensor):
        device = self.device if device is None else device
        dtype = dtype or self.dtype
    return torch.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


def _made(name: str) -> Any:
    """``torch.tensor``/``as_tensor``/``asarray`` on a CUDA device: made on the host, then copied
    there as CUDA copies it (from pageable memory, blocking: a wait for the device)."""
    real = _real[name]

    def make(data: Any, *args: Any, device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Any:
        if not _is_cuda_name(device):
            extra = {"requires_grad": True} if requires_grad else {}
            return real(data, *args, device=device, **kwargs, **extra)
        target = _cuda_device(device)
        host = data if isinstance(data, FakeCudaTensor) and name != "tensor" else real(data, *args, **kwargs)
        out = _to(host, target)
        return out.requires_grad_() if requires_grad else out

    make.__name__ = make.__qualname__ = name
    make.__doc__ = real.__doc__
    return make


def _type(self: Any, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    if isinstance(self, FakeCudaTensor) and dtype is None:
        return _real["type"](self._elem).replace("torch.", "torch.cuda.", 1)
    return _real["type"](self, dtype, non_blocking, **kwargs)


# -- CUDA's device rules -----------------------------------------------------------------------
def _no_check_ops() -> frozenset[str]:
    """Operators whose CUDA kernels skip the generated device check (``device_check: NoCheck`` in
    native_functions.yaml): TensorIterator's rule holds there (a 0-dim CPU tensor is a scalar)."""
    import torchgen

    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged/ATen/native/native_functions.yaml")
    names: set[str] = set()
    current = ""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("- func:"):
                current = line[len("- func:") :].strip().split("(", 1)[0]
            elif "device_check: NoCheck" in line and current:
                names.add(current)
    return frozenset(names)


NO_CHECK = _no_check_ops()
#: Operators whose index tensors may stay on the CPU (CUDA moves them).
CPU_INDICES = frozenset({"index.Tensor", "index.Tensor_out", "index_put_", "index_put", "_index_put_impl_"})
#: Operators whose value or output shape the host must read: CUDA waits for them.
WAIT_TAGS = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)


@functools.lru_cache(maxsize=8192)
def _op_name(func: Any) -> str:
    base = func._schema.name.split("::", 1)[1]
    return base if func._overloadname == "default" else f"{base}.{func._overloadname}"


@functools.lru_cache(maxsize=8192)
def _arg_names(func: Any) -> tuple[str, ...]:
    return tuple(a.name for a in func._schema.arguments)


def _where(t: torch.Tensor) -> str:
    return f"cuda:{t._index}" if isinstance(t, FakeCudaTensor) else str(t.device)


def _collect(value: Any, arg: str, out: list[tuple[str, torch.Tensor]]) -> None:
    if isinstance(value, torch.Tensor):
        out.append((arg, value))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, arg, out)


def check_devices(func: Any, args: tuple, kwargs: dict) -> int | None:
    """CUDA's device rule for one operator; the GPU its outputs go to (None: no CUDA input)."""
    found: list[tuple[str, torch.Tensor]] = []
    names = _arg_names(func)
    for i, value in enumerate(args):
        _collect(value, names[i] if i < len(names) else f"arg{i}", found)
    for key, value in kwargs.items():
        _collect(value, key, found)
    index = next((t._index for _, t in found if isinstance(t, FakeCudaTensor)), None)
    if index is None:
        return None
    name = _op_name(func)
    tensor_iterator = name in NO_CHECK
    first = found[0][1]
    for arg, t in found:
        if isinstance(t, FakeCudaTensor):
            if t._index == index:
                continue
        elif tensor_iterator and t.dim() == 0 and t.device.type == "cpu":
            continue  # a CPU scalar, as TensorIterator takes it
        elif name in CPU_INDICES and arg == "indices" and t.device.type == "cpu":
            continue
        if tensor_iterator:
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{_where(first)} and {_where(t)}!"
            )
        other = _where(first) if _where(first) != _where(t) else f"cuda:{index}"
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but got {arg} is on {_where(t)}, different "
            f"from other tensors on {other} (when checking argument in method "
            f"wrapper_CUDA_{name.replace('.', '_')})"
        )
    return index


# -- the dispatch ------------------------------------------------------------------------------
def _unwrap(value: Any) -> Any:
    if isinstance(value, FakeCudaTensor):
        return value._elem
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _waits(func: Any, name: str, args: tuple, kwargs: dict) -> bool:
    """Whether CUDA's kernel for this call makes the host wait (its value or output shape)."""
    if not any(tag in func.tags for tag in WAIT_TAGS):
        return False
    if name.startswith("index.Tensor"):  # only a boolean mask makes the host wait (for nonzero)
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in indices)
    if name == "repeat_interleave.Tensor":
        return kwargs.get("output_size") is None
    return name not in ("one_hot", "allclose", "item")  # composite: the wait is in what they call


@functools.lru_cache(maxsize=8192)
def _written(func: Any) -> tuple[tuple[int, str], ...]:
    return tuple(
        (i, a.name)
        for i, a in enumerate(func._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    )


def _dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    special = _SPECIAL.get(func)
    if special is not None:
        return special(func, args, kwargs)
    index = check_devices(func, args, kwargs)
    if index is None:  # only plain tensors reached here (a fake CUDA tensor in a list)
        return func(*args, **kwargs)
    name = _op_name(func)
    if _waits(func, name, args, kwargs):
        fakegpu.record_wait("sync-op", f"aten.{name}", f"cuda:{index}")
    written: dict[int, FakeCudaTensor] = {}
    for i, arg in _written(func):
        value = args[i] if i < len(args) else kwargs.get(arg)
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(t, FakeCudaTensor):
                written[id(t._elem)] = t
    out = func(*_unwrap(args), **_unwrap(kwargs))
    return _rewrap(out, index, written, name)


def _rewrap(out: Any, index: int, written: dict[int, FakeCudaTensor], name: str) -> Any:
    if isinstance(out, torch.Tensor):
        mine = written.get(id(out))
        if mine is not None:  # in place or out=: the tensor written to, itself
            if mine.shape != out.shape or mine.stride() != out.stride():
                raise RuntimeError(
                    f"fake GPU: aten.{name} changed the shape of a fake CUDA tensor in place "
                    f"({tuple(mine.shape)} -> {tuple(out.shape)}), which a wrapper tensor cannot follow"
                )
            return mine
        return out if isinstance(out, FakeCudaTensor) else wrap(out, index)
    if isinstance(out, (list, tuple)):
        return type(out)(_rewrap(o, index, written, name) for o in out)
    return out


def _target(device: Any) -> tuple[str, int | None]:
    """Where a ``device=`` argument puts a tensor: ("cuda", N), ("cpu", None) or ("none", None)."""
    if device is None:
        return "none", None
    device = torch.device(device)
    if device.type == "cuda":
        return "cuda", STATE.index_of(device)
    if device.type == NAME:  # C++ passing a fake CUDA tensor's own options
        return "cuda", device.index or 0
    return device.type, None


def _like(func: Any, args: tuple, kwargs: dict) -> Any:
    """``new_*``/``*_like``: on the input's GPU unless a device is named."""
    index = check_devices(func, args, kwargs)
    kind, named = _target(kwargs.get("device"))
    if kind == "cuda":
        index = named
    elif kind != "none":
        index = None
    out = func(*_unwrap(args), **{**_unwrap(kwargs), "device": torch.device("cpu")})
    return out if index is None else wrap(out, index)


def _local_scalar_dense(func: Any, args: tuple, kwargs: dict) -> Any:
    (self,) = args
    fakegpu.record_wait("item", "aten._local_scalar_dense", f"cuda:{self._index}")
    return func(self._elem)


def _copy(func: Any, args: tuple, kwargs: dict) -> Any:
    """``dst.copy_(src, non_blocking)``: between any devices; the host waits where CUDA's copy does."""
    dst, src = args[0], args[1]
    non_blocking = bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
    if on_cuda(src) and not on_cuda(dst):
        if not (non_blocking and is_pinned_cpu(dst)):  # into pageable memory, or blocking
            fakegpu.record_wait("copy-to-host", "Tensor.copy_", f"cuda:{src._index}")
    elif on_cuda(dst) and not on_cuda(src) and not non_blocking:
        # cudaMemcpyAsync then cudaStreamSynchronize: a blocking copy waits for the device.
        fakegpu.record_wait("blocking-copy-to-device", "Tensor.copy_", f"cuda:{dst._index}")
    func(_unwrap(dst), _unwrap(src), non_blocking)
    return dst


def _to_copy(func: Any, args: tuple, kwargs: dict) -> Any:
    """``_to_copy`` of a fake CUDA tensor: ``.to``, ``.cpu()``, ``.float()``, ..."""
    (self,) = args
    kind, index = _target(kwargs.get("device"))
    non_blocking = bool(kwargs.get("non_blocking", False))
    cpu_kwargs = {k: v for k, v in kwargs.items() if k != "non_blocking"}
    if "device" in cpu_kwargs:
        cpu_kwargs["device"] = torch.device("cpu")
    if kind == "cpu":
        # To the host: a blocking copy waits; a non-blocking one lands in pinned memory (CUDA's rule),
        # and is only safe to read after a synchronisation.
        if not non_blocking:
            fakegpu.record_wait("copy-to-host", "Tensor.to(cpu)", f"cuda:{self._index}")
        out = func(self._elem, **cpu_kwargs)
        return pin(out) if non_blocking else out
    return wrap(func(self._elem, **cpu_kwargs), self._index if index is None else index)


def _pin_memory_of_cuda(func: Any, args: tuple, kwargs: dict) -> Any:
    raise RuntimeError(f"cannot pin '{_type(args[0])}' only dense CPU tensors can be pinned")


def _record_stream(func: Any, args: tuple, kwargs: dict) -> None:
    return None


_SPECIAL: dict[Any, Any] = {
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.copy_.default: _copy,
    aten._to_copy.default: _to_copy,
    aten._pin_memory.default: _pin_memory_of_cuda,
    aten.is_pinned.default: lambda func, args, kwargs: False,
    aten.record_stream.default: _record_stream,
}
for _op in (
    aten.empty_like.default,
    aten.zeros_like.default,
    aten.ones_like.default,
    aten.full_like.default,
    aten.rand_like.default,
    aten.randn_like.default,
    aten.randint_like.default,
    aten.randint_like.low_dtype,
    aten.new_empty.default,
    aten.new_empty_strided.default,
    aten.new_zeros.default,
    aten.new_ones.default,
    aten.new_full.default,
):
    _SPECIAL[_op] = _like


# -- pinned memory -----------------------------------------------------------------------------
_pinned: dict[int, StorageWeakRef] = {}
_pinned_lock = threading.Lock()


def pin(t: torch.Tensor) -> torch.Tensor:
    """Remember a CPU tensor's memory as pinned (page-locked), as cudaHostAlloc would have made it."""
    storage = t.untyped_storage()
    with _pinned_lock:
        for ptr in [p for p, ref in _pinned.items() if ref.expired()]:
            del _pinned[ptr]
        _pinned[storage.data_ptr()] = StorageWeakRef(storage)
    return t


def is_pinned_cpu(t: torch.Tensor) -> bool:
    if isinstance(t, FakeCudaTensor) or t.device.type != "cpu" or t.layout != torch.strided:
        return False
    storage = t.untyped_storage()
    with _pinned_lock:
        ref = _pinned.get(storage.data_ptr())
        return ref is not None and not ref.expired() and ref.cdata == storage._cdata


def _pin_memory_cpu(self: torch.Tensor, device: Any = None) -> torch.Tensor:
    if device is not None and torch.device(device).type not in ("cuda", NAME):
        raise RuntimeError(f"pin_memory: expected a CUDA device, got {device}")
    out = torch.empty_strided(self.size(), self.stride(), dtype=self.dtype, device="cpu")
    out.copy_(self)
    fakegpu.log(f"torch.pin_memory {threading.current_thread().name}")
    return pin(out)


def _is_pinned_cpu(self: torch.Tensor, device: Any = None) -> bool:
    return is_pinned_cpu(self)


# -- tensors made on a CUDA device -------------------------------------------------------------
#: Operators that make a tensor from nothing: their CUDA (and fake backend) kernels run on the CPU.
FACTORIES = (
    "empty.memory_format", "empty_strided", "empty_permuted", "zeros", "ones", "full", "scalar_tensor",
    "rand", "rand.generator", "randn", "randn.generator", "randint", "randint.generator", "randint.low",
    "randint.low_generator", "randperm", "randperm.generator", "normal.float_float", "arange",
    "arange.start", "arange.start_step", "range", "range.step", "linspace", "logspace", "eye", "eye.m",
    "tril_indices", "triu_indices", "_efficientzerotensor", "fft_fftfreq", "fft_rfftfreq",
    "bartlett_window", "bartlett_window.periodic", "blackman_window", "blackman_window.periodic",
    "hamming_window", "hamming_window.periodic", "hamming_window.periodic_alpha",
    "hamming_window.periodic_alpha_beta", "hann_window", "hann_window.periodic", "kaiser_window",
    "kaiser_window.beta", "kaiser_window.periodic",
)  # fmt: skip


def _factory(func: Any) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        _, index = _target(kwargs.get("device"))
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):
            out = func(*args, **{**kwargs, "device": torch.device("cpu"), "pin_memory": False})
        return wrap(out, index if index is not None else STATE.current)

    return kernel


# -- autocast ----------------------------------------------------------------------------------
class _Captured(Exception):
    """Raised from inside CUDA's autocast kernel when it calls the operator: the call it makes."""

    def __init__(self, func: Any, args: tuple, kwargs: dict) -> None:
        super().__init__(func)
        self.func, self.args, self.kwargs = func, args, kwargs


class _Probe(torch.Tensor):
    """What CUDA's autocast kernel is given in place of a fake CUDA tensor: a tensor whose C++ device
    is CUDA (so the kernel finds it eligible, as it would the real one), with no data."""

    @staticmethod
    def __new__(cls, origin: FakeCudaTensor, dtype: torch.dtype) -> _Probe:
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            origin.size(),
            strides=origin.stride(),
            dtype=dtype,
            device=torch.device("cuda", origin._index),
        )
        out._origin = origin
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is aten.to.dtype and isinstance(args[0], _Probe):  # autocast's cast of an argument
            dtype = args[1] if len(args) > 1 else kwargs["dtype"]
            return _Probe(args[0]._origin, dtype)
        raise _Captured(func, args, kwargs)  # the operator as CUDA's kernel calls it


def _probe(value: Any) -> Any:
    if isinstance(value, FakeCudaTensor):
        return _Probe(value, value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_probe(v) for v in value)
    if isinstance(value, dict):
        return {k: _probe(v) for k, v in value.items()}
    return value


def _real_of(value: Any) -> Any:
    """A probe's real tensor, cast as the probe was (above autograd: the cast is recorded)."""
    if isinstance(value, _Probe):
        origin = value._origin
        return origin if value.dtype == origin.dtype else origin.to(value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_real_of(v) for v in value)
    if isinstance(value, dict):
        return {k: _real_of(v) for k, v in value.items()}
    return value


_AUTOCAST_CUDA = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)
_NO_FAKE_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


_logged_casts: set[tuple[str, torch.dtype]] = set()


def _log_casts(func: Any, args: tuple) -> None:
    """Log, once per operator and dtype, that CUDA's autocast cast an operator's inputs (a test sees
    that a mixed-precision run ran in mixed precision)."""
    flat: list[Any] = []
    _collect(args, "", flat)  # type: ignore[arg-type]
    for _, t in flat:
        if (
            isinstance(t, _Probe)
            and t.dtype != t._origin.dtype
            and (_op_name(func), t.dtype) not in _logged_casts
        ):
            _logged_casts.add((_op_name(func), t.dtype))
            fakegpu.log(f"torch.autocast aten.{_op_name(func)} {str(t.dtype).replace('torch.', '')}")


def _autocast_kernel(func: Any) -> Any:
    """The fake backend's autocast kernel for one operator: CUDA's autocast kernel is run on probes
    (below autograd, so a composite operator reaches the probes whole), and the call it makes, with
    its casts and any dtype it sets, is made on the real tensors."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        call = (func, args, kwargs)
        if torch.is_autocast_enabled("cuda"):
            try:
                with (
                    torch._C._ExcludeDispatchKeyGuard(_NO_FAKE_AUTOCAST),
                    torch._C._AutoDispatchBelowADInplaceOrView(),
                ):
                    func.redispatch(_AUTOCAST_CUDA, *_probe(args), **_probe(kwargs))
            except _Captured as captured:
                call = (captured.func, _real_of(captured.args), _real_of(captured.kwargs))
                _log_casts(func, captured.args)
        with torch._C._ExcludeDispatchKeyGuard(_NO_FAKE_AUTOCAST):
            return call[0](*call[1], **call[2])

    return kernel


def _mirror_autocast() -> None:
    """``torch.autocast("cuda")`` turns the fake backend's autocast on and off with CUDA's."""
    from torch.amp.autocast_mode import autocast

    real_enter, real_exit = autocast.__enter__, autocast.__exit__

    def __enter__(self: Any) -> Any:
        out = real_enter(self)
        if self.device == "cuda":
            self._fake_before = (torch.is_autocast_enabled(NAME), torch.get_autocast_dtype(NAME))
            torch.set_autocast_enabled(NAME, torch.is_autocast_enabled("cuda"))
            torch.set_autocast_dtype(NAME, torch.get_autocast_dtype("cuda"))
        return out

    def __exit__(self: Any, *exc: Any) -> Any:
        if self.device == "cuda" and hasattr(self, "_fake_before"):
            enabled, dtype = self._fake_before
            torch.set_autocast_enabled(NAME, enabled)
            torch.set_autocast_dtype(NAME, dtype)
        return real_exit(self, *exc)

    autocast.__enter__, autocast.__exit__ = __enter__, __exit__


# -- state and installation --------------------------------------------------------------------
class _State:
    """The visible GPUs and the current device."""

    def __init__(self) -> None:
        self.current = 0

    def count(self) -> int:
        return len(fakegpu.visible_names())

    def index_of(self, device: Any, optional: bool = True) -> int:
        from torch.cuda._utils import _get_device_index

        if isinstance(device, torch.device) and device.type == NAME:
            device = torch.device("cuda", device.index or 0)
        index = _get_device_index(device, optional=optional)  # torch's own rule
        if index < 0:
            index = self.current
        if index >= self.count():
            raise RuntimeError(f"CUDA error: invalid device ordinal {index} (fake: {self.count()} visible)")
        return index


STATE = _State()
_libraries: list[Any] = []


def _overload(name: str) -> Any:
    base, _, overload = name.partition(".")
    return getattr(getattr(aten, base), overload or "default")


def install() -> None:
    """Set the fake backend up and register its kernels (once per process)."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(rename=NAME)
    # Autograd would run a fake CUDA tensor's backward on a device thread, which calls the Python
    # device guard while the interpreter shuts down (the process aborts at exit): the caller's thread.
    torch._C._set_multithreading_enabled(False)
    lib = torch.library.Library("aten", "IMPL")
    for name in FACTORIES:
        func = _overload(name)
        for key in ("CUDA", "PrivateUse1"):
            lib.impl(name, _factory(func), key)
    lib.impl("_pin_memory", _pin_memory_cpu, "CPU")
    lib.impl("is_pinned", _is_pinned_cpu, "CPU")
    for name in torch._C._dispatch_get_all_op_names():
        if name.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(name, "AutocastCUDA"):
            lib.impl(
                name[len("aten::") :],
                _autocast_kernel(_overload(name[len("aten::") :])),
                "AutocastPrivateUse1",
            )
    everything = torch.library.Library("_", "IMPL")
    everything.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    _libraries.extend((lib, everything))
    _mirror_autocast()
    for name, owner, fake in (
        ("to", torch.Tensor, _to),
        ("cuda", torch.Tensor, _cuda),
        ("cpu", torch.Tensor, _cpu),
        ("new_tensor", torch.Tensor, _new_tensor),
        ("type", torch.Tensor, _type),
    ):
        _real[name] = getattr(owner, name)
        setattr(owner, name, fake)
    for name in ("tensor", "as_tensor", "asarray"):
        _real[name] = getattr(torch, name)
        setattr(torch, name, _made(name))
    # Foreach kernels are CUDA's default for plain tensors; fake CUDA tensors stand in for them.
    from torch.optim import optimizer

    if FakeCudaTensor not in optimizer._foreach_supported_types:
        optimizer._foreach_supported_types.append(FakeCudaTensor)
