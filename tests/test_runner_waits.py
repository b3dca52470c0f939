"""No step of the PyTorch runner waits for the device, and what waits anyway is said (issue 28 §3).

A step waits for the device when Python reads a value that the device computes: ``bool(t)``,
``t.item()``, ``t.tolist()``, or a C++ op that sizes its output by a device value (``nonzero``,
``masked_select``, boolean indexing, ...). On a GPU each such read empties the queue the
host was filling ahead of the device, every step: the "no per-step wait" rule of DESIGN.md.

``HostReads`` counts them on CPU tensors, in-process, with the runner's own builders and step
functions: a ``TorchFunctionMode`` sees the Python reads (``Tensor.__bool__``, ``item``,
``tolist``, ``numpy``, ``cpu``, ...) under every grad mode, and a ``TorchDispatchMode`` the
reads made in C++ (``aten._local_scalar_dense``, ``aten.item``, ``aten.is_nonzero`` and the ops
that size their output on the host). The dispatch half sees nothing under
``torch.inference_mode`` (inference tensors skip the Python dispatch key), so the inference
cases step under ``no_grad`` for it as well. A read of a tensor that PyTorch keeps on the host
on purpose on a GPU run (an optimizer's ``step`` counter, unless capturable or fused) is no
wait and is not counted.

The bf16 refusal is tested with ``torch.cuda``'s capability calls monkeypatched: the GPU fake
(tests/fakegpu) reports compute capability 9.0 for every GPU and cannot be told otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from dataclasses import dataclass, field
from typing import Any

import pytest

from benchtui_runners.config import DeviceMissing, RunConfig
from support import Recorder

#: Frames that are the detector's or torch's plumbing, never where a read was asked for.
_PLUMBING = (
    "torch/overrides.py",
    "torch/utils/_python_dispatch.py",
    "torch/_compile.py",
    "torch/_dynamo/",
    "test_runner_waits.py",
)


def _where() -> str:
    """``file:line code`` of the innermost frame that is not plumbing: where the read was asked for."""
    for frame in reversed(traceback.extract_stack()):
        name = frame.filename.replace("\\", "/")
        if not any(part in name for part in _PLUMBING):
            short = name.split("site-packages/")[-1].split("runners/")[-1]
            return f"{short}:{frame.lineno} {(frame.line or '').strip()}"
    return "?"


@dataclass
class Read:
    what: str  # "Tensor.__bool__", "aten._local_scalar_dense.default", ...
    where: str  # file:line code

    def __str__(self) -> str:
        return f"{self.what} at {self.where}"


@dataclass
class HostReads:
    """Counts host reads of tensor values while entered (``with HostReads(...) as reads``).

    ``host_resident``: tensors PyTorch keeps on the host on a GPU run, whose reads are no wait.
    ``reads`` holds each read once (a Python read is not counted again by the dispatch half).
    """

    host_resident: list[Any] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    _inside: int = 0
    _modes: list[Any] = field(default_factory=list)

    def _resident(self, tensor: Any) -> bool:
        import torch

        if not isinstance(tensor, torch.Tensor):
            return False
        for t in self.host_resident:
            if tensor is t or (tensor.device == t.device and tensor.data_ptr() == t.data_ptr()):
                return True
        return False

    def __enter__(self) -> HostReads:
        function_mode, dispatch_mode = _mode_classes()
        self._modes = [function_mode(self), dispatch_mode(self)]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        self._modes = []


@functools.cache
def _mode_classes() -> tuple[type, type]:
    """The two torch modes, made when first needed (importing this module imports no torch)."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    methods = {
        "__bool__",
        "item",
        "tolist",
        "numpy",
        "__int__",
        "__float__",
        "__index__",
        "__complex__",
        "cpu",
    }
    aten = torch.ops.aten
    # Ops that hand a device value to the host, or size their output by one (a wait on CUDA).
    reading = {
        aten._local_scalar_dense.default,
        aten.item.default,
        aten.is_nonzero.default,
        aten.equal.default,
        aten.nonzero.default,
        aten.masked_select.default,
        aten._unique2.default,
        aten.unique_dim.default,
        aten.unique_consecutive.default,
    }

    class Functions(TorchFunctionMode):
        def __init__(self, counter: HostReads) -> None:
            super().__init__()
            self.counter = counter

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = getattr(func, "__name__", "")
            counted = name in methods and args and not self.counter._resident(args[0])
            if counted:
                self.counter.reads.append(Read(f"Tensor.{name}", _where()))
                self.counter._inside += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                if counted:
                    self.counter._inside -= 1

    class Dispatch(TorchDispatchMode):
        def __init__(self, counter: HostReads) -> None:
            super().__init__()
            self.counter = counter

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            reads = func in reading
            if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
                reads = True
            if func in (aten.index.Tensor, aten.index_put.default, aten.index_put_.default):
                indices = args[1] if len(args) > 1 else []
                reads = any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)
            if reads and not self.counter._inside and not (args and self.counter._resident(args[0])):
                self.counter.reads.append(Read(str(func), _where()))
            return func(*args, **kwargs)

    return Functions, Dispatch


def _host_resident_steps(optimizer: Any) -> list[Any]:
    """The optimizer's ``step`` counters that PyTorch keeps on the host on a GPU run.

    torch.optim's Adam (and the others) make ``state["step"]`` a CPU tensor unless ``capturable``
    or ``fused`` (``torch.tensor(0.0, dtype=_get_scalar_dtype())`` in ``_init_group``), so that
    reading it for the bias correction (``_get_value(step)``) waits for nothing.
    """
    if optimizer is None:
        return []
    out = []
    for group in optimizer.param_groups:
        if group.get("capturable") or group.get("fused"):
            continue
        for p in group["params"]:
            step = optimizer.state.get(p, {}).get("step")
            if step is not None and hasattr(step, "data_ptr"):
                out.append(step)
    return out


# -- the detector sees what it must, and only that ------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("grad", ["enabled", "no_grad", "inference_mode"])
def test_the_detector_sees_python_and_cpp_reads_under_every_grad_mode(grad: str) -> None:
    torch = pytest.importorskip("torch")
    context = {
        "enabled": contextlib.nullcontext,
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
    }
    with context[grad]():
        t = torch.arange(6.0)
        kept = torch.tensor(3.0)
        with HostReads(host_resident=[kept]) as seen:
            if (t > 2).any():  # Tensor.__bool__
                pass
            t.sum().item()
            t.tolist()
            float(kept)  # kept on the host by design: no wait
            kept.item()
            t * 2  # device work only
        python = [r.what for r in seen.reads]
        assert python == ["Tensor.__bool__", "Tensor.item", "Tensor.tolist"], seen.reads
        assert "test_runner_waits.py" not in seen.reads[0].where  # the detector's own frames are skipped

        with HostReads() as seen:
            torch.nonzero(t > 2)  # a C++ op that sizes its output on the host
            t[t > 2]  # boolean indexing: the same
        if grad != "inference_mode":  # the dispatch half is blind there (see the module's docstring)
            assert len(seen.reads) == 2 and all(r.what.startswith("aten.") for r in seen.reads), seen.reads


# -- every model family, training and inference: no wait after the first step ---------------------
def _tiny(model: str, **overrides: Any) -> RunConfig:
    base: dict[str, Any] = {
        "framework": "torch",
        "model": model,
        "image_size": 32,
        "batch_size": 2,
        "samples": 4,
        "num_classes": 10,
        "seq_len": 16,
        "device": "cpu",
        "threads": 1,
    }
    return RunConfig(**{**base, **overrides})


def _steps(config: RunConfig, steps: int = 3) -> tuple[list[list[Read]], Any]:
    """Host reads of each of ``steps`` steps, taken with the runner's own model, step and data
    functions, under the grad mode of the run (inference: ``inference_mode``, and ``no_grad`` for
    the dispatch half); and the optimizer."""
    import torch

    from benchtui_runners import torch_runner as runner
    from benchtui_runners.models import build_torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    inference = config.task == "inference"
    model = build_torch(config.model, config.outputs, config.image_size, config.tokens, last_only=inference)
    model.eval() if inference else model.train()
    optimizer = None if inference else runner._optimizer(config, model.parameters())
    amp = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(config.precision)
    step = runner._step(model, optimizer, runner._loss(config), amp, torch.device("cpu"))
    x = runner._inputs(config, config.batch_size, "cpu", torch.contiguous_format)
    y = runner._labels(config, config.batch_size, "cpu")
    out: list[list[Read]] = []
    modes = [torch.inference_mode, torch.no_grad] if inference else [contextlib.nullcontext]
    for _ in range(steps):
        reads: list[Read] = []
        for mode in modes:
            with mode(), HostReads(host_resident=_host_resident_steps(optimizer)) as seen:
                step(x, y)
            reads += [r for r in seen.reads if r not in reads]
        out.append(reads)
    return out, optimizer


#: (model, task, optimizer, precision): a CNN, a vision transformer and GPT-2, training and inference.
CASES = [
    ("resnet50", "train", "sgd", "fp32"),
    ("resnet50", "train", "adam", "fp32"),
    ("resnet50", "train", "sgd", "amp-bf16"),
    ("resnet50", "inference", "sgd", "fp32"),
    ("vit_ti_16", "train", "sgd", "fp32"),
    ("vit_ti_16", "inference", "sgd", "fp32"),
    ("gpt2_mini", "train", "adam", "fp32"),
    ("gpt2_mini", "train", "sgd", "amp-bf16"),
    ("gpt2_mini", "inference", "sgd", "fp32"),
    ("gpt2_mini", "inference", "sgd", "amp-bf16"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "task", "optimizer", "precision"), CASES)
def test_no_step_after_the_first_reads_a_device_value(
    model: str, task: str, optimizer: str, precision: str
) -> None:
    pytest.importorskip("torch")
    if model.startswith("gpt2"):
        pytest.importorskip("transformers")
    config = _tiny(model, task=task, optimizer=optimizer, precision=precision)
    per_step, _ = _steps(config)
    later = [r for reads in per_step[1:] for r in reads]
    if task == "inference":
        # The answer, copied to the host (as Keras's predict_on_batch returns it): the one wait, by design.
        answer = [r for r in later if r.what == "Tensor.cpu" and "outputs.float().cpu()" in r.where]
        assert len(answer) == len(per_step) - 1, later
        later = [r for r in later if r not in answer]
    assert later == [], "\n".join(map(str, later))


@pytest.mark.slow
def test_gpt2_attends_causally_through_sdpa_without_a_mask_and_reads_nothing() -> None:
    """The fix of the GPT-2 wait: transformers' own SDPA attention under a name with no mask
    builder. The stock 'sdpa' reads a device value at every forward (with no mask the packed-
    sequence check; with a mask of ones ``fast_all``); the model built here reads none, gives
    the stock model's logits exactly, and is causal."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from benchtui_runners.models import SDPA_WITHOUT_MASK, TORCH_GPT2_ATTENTION, build_torch

    torch.manual_seed(0)
    model = build_torch("gpt2_mini", 0, seq_len=16).eval()
    assert model.lm.config._attn_implementation == SDPA_WITHOUT_MASK
    assert model.attention == TORCH_GPT2_ATTENTION
    stock = build_torch("gpt2_mini", 0, seq_len=16).eval()
    stock.lm.set_attn_implementation("sdpa")
    stock.load_state_dict(model.state_dict())
    x = torch.randint(0, 1000, (2, 16))
    with torch.no_grad():
        ours = model(x)
        for kwargs in ({}, {"attention_mask": torch.ones_like(x)}):
            with HostReads() as seen:
                theirs = stock.lm(input_ids=x, use_cache=False, **kwargs).logits
            assert [r for r in seen.reads if "masking_utils.py" in r.where], "the stock path no longer reads"
            assert torch.equal(ours, theirs)
        with HostReads() as seen:
            model(x)
        assert seen.reads == [], seen.reads
        changed = x.clone()
        changed[:, -1] = (changed[:, -1] + 1) % 1000  # a later token changes no earlier position
        assert torch.equal(model(changed)[:, :-1], ours[:, :-1])


# -- amp-fp16: PyTorch's GradScaler waits every step, and the run says so --------------------------
@pytest.mark.slow
def test_amp_fp16_waits_once_a_step_in_gradscaler_and_a_fused_optimizer_does_not() -> None:
    torch = pytest.importorskip("torch")
    from benchtui_runners import torch_runner

    per_step, optimizer = _steps(_tiny("resnet50", precision="amp-fp16"))
    for reads in per_step[1:]:
        assert len(reads) == 1 and "grad_scaler.py" in reads[0].where, reads
    assert torch_runner.step_waits("amp-fp16", optimizer) == torch_runner.GRADSCALER_SYNC
    assert torch_runner.step_waits("amp-bf16", optimizer) is None  # no loss scaling
    assert torch_runner.step_waits("fp32", optimizer) is None
    assert torch_runner.step_waits("amp-fp16", None) is None  # inference

    # An optimizer that takes found_inf on the device (fused) skips on the device: no read.
    model = torch.nn.Linear(4, 2)
    fused = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
    assert torch_runner.step_waits("amp-fp16", fused) is None
    scaler = torch.amp.GradScaler("cpu")
    counts = []
    for _ in range(3):
        with HostReads(host_resident=_host_resident_steps(fused)) as seen:
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(torch.ones(2, 4))
            scaler.scale(out.float().sum()).backward()
            scaler.step(fused)
            scaler.update()
        counts.append(len(seen.reads))
    assert counts[1:] == [0, 0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "precision", "data"),
    [("gpt2_mini", "fp32", "host"), ("resnet50", "amp-fp16", "device"), ("resnet50", "amp-bf16", "device")],
)
def test_a_whole_run_waits_only_where_its_settings_say(
    model: str, precision: str, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's own loop, in-process (loader or device pool, copies, step, clock): the reads
    between the end of the first step and the end of the epoch are exactly what the run records
    as its ``host_sync_per_step``, and a token model records how it attends."""
    pytest.importorskip("torch")
    if model.startswith("gpt2"):
        pytest.importorskip("transformers")
    from benchtui_runners import lifecycle, torch_runner
    from benchtui_runners.timing import StepClock

    seen = HostReads()

    class Watched(StepClock):
        def step_end(self, step: int) -> None:
            super().step_end(step)
            if step == 1 and self.epoch == 1:
                seen.__enter__()

        def epoch_end(self) -> float:
            if seen._modes:
                seen.__exit__(None, None, None)
            return super().epoch_end()

    monkeypatch.setattr(lifecycle, "StepClock", Watched)
    config = _tiny(model, precision=precision, data=data, samples=8, epochs=1, loader_workers=0, mode="train")
    recorder = Recorder()
    try:
        torch_runner.run(config, recorder.writer, 0.0)
    finally:
        if seen._modes:
            seen.__exit__(None, None, None)
    settings = recorder.settings()
    steps = config.steps_per_epoch - 1
    assert steps >= 2
    if precision == "amp-fp16":
        assert settings["host_sync_per_step"] == torch_runner.GRADSCALER_SYNC
        assert len(seen.reads) == steps and all("grad_scaler.py" in r.where for r in seen.reads), seen.reads
    else:
        assert "host_sync_per_step" not in settings
        assert seen.reads == [], "\n".join(map(str, seen.reads))
    if model.startswith("gpt2"):
        from benchtui_runners.models import TORCH_GPT2_ATTENTION

        assert settings["attention"] == TORCH_GPT2_ATTENTION


def test_keras_says_what_waits_every_step_on_each_backend() -> None:
    """tf.keras floats each step's logs on the main thread; Keras on torch copies numbers to the device,
    reads SGD's learning rate and decides loss scaling with a Python ``if``; Keras on JAX waits for
    nothing; inference waits for its answer everywhere."""
    from benchtui_runners import keras_runner

    def waits(backend: str, **overrides: Any) -> str | None:
        config = RunConfig(**{"framework": "x", "model": "resnet50", **overrides})
        return keras_runner.step_waits(config, backend)

    assert waits("tensorflow") == waits("tensorflow", precision="amp-fp16") == keras_runner.TF_LOGS_SYNC
    assert waits("jax") is None and waits("jax", precision="amp-fp16") is None
    # Keras on torch: blocking copies of Python numbers every step, SGD's learning rate read on the
    # host, and under fp16 the loss scale's Python if (seen under the faithful GPU fake).
    copies, sgd, scale = (
        keras_runner.TORCH_BACKEND_SYNC,
        keras_runner.TORCH_SGD_SYNC,
        keras_runner.TORCH_LOSS_SCALE_SYNC,
    )
    assert waits("torch") == waits("torch", precision="amp-bf16") == f"{copies}; {sgd}"
    assert waits("torch", optimizer="adam") == copies
    assert waits("torch", precision="amp-fp16") == f"{copies}; {sgd}; {scale}"
    assert waits("tensorflow", task="inference") is None


# -- the how line says it -----------------------------------------------------------------------
def test_the_how_line_and_the_live_settings_line_say_what_waits_every_step() -> None:
    from types import SimpleNamespace

    from benchtui.core.reporting.model import how_it_ran
    from benchtui.widgets.comparison import Series, settings_line

    scaler = "GradScaler.step reads found_inf (.item()) every step, to skip the update after an overflow"
    torch_settings = {"compile": "eager", "intra_op_threads": 8, "host_sync_per_step": scaler}
    jax_settings = {"compile": "xla (jax.jit) (Keras's default, jit_compile='auto')", "intra_op_threads": 8}
    lines = how_it_ran({"torch": {"settings": torch_settings}, "keras-jax": {"settings": jax_settings}})
    assert lines[0] == f"PyTorch: eager; 8 threads; waits for the device every step: {scaler}"
    assert "waits" not in lines[1]

    def series(framework: str, settings: dict[str, Any]) -> Any:
        run = SimpleNamespace(hello={"settings": settings, "device": {"type": "cuda"}})
        return Series(framework, run)  # type: ignore[arg-type]

    live = settings_line([series("torch", torch_settings), series("keras-jax", jax_settings)]).plain
    assert live == "PyTorch eager, waits every step · Keras/JAX xla"


# -- amp-bf16 before Ampere: refused with one line, on both sides ----------------------------------
@pytest.mark.parametrize(
    ("capability", "refused"), [((7, 0), True), ((7, 5), True), ((8, 0), False), ((9, 0), False)]
)
def test_bf16_refusal_by_compute_capability(capability: tuple[int, int], refused: bool) -> None:
    from benchtui_runners.models import bf16_refusal

    text = bf16_refusal("PyTorch", "Tesla T4", capability)
    if not refused:
        assert text is None
        return
    assert text is not None and "\n" not in text
    assert text.startswith(f"amp-bf16 refused: Tesla T4 (compute capability {capability[0]}.{capability[1]})")
    assert "PyTorch would emulate it" in text and "amp-fp16" in text
    assert bf16_refusal("PyTorch", "?", None) is None  # unknown: not refused on a guess


@pytest.mark.slow
@pytest.mark.parametrize("capability", [(7, 5), (8, 6)])
def test_the_torch_runner_refuses_amp_bf16_on_a_pre_ampere_gpu(
    capability: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner, in-process, on a GPU that reports ``capability``: refused before anything starts,
    whatever ``is_bf16_supported()`` says (it counts emulation by default)."""
    torch = pytest.importorskip("torch")
    from benchtui_runners import torch_runner

    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    reached: list[str] = []
    monkeypatch.setattr(torch_runner, "_settings", lambda *a: reached.append("settings") or {})
    config = _tiny("resnet50", device="cuda", precision="amp-bf16")
    recorder = Recorder()
    if capability < (8, 0):
        with pytest.raises(DeviceMissing, match=r"^amp-bf16 refused: Tesla T4 \(compute capability 7\.5\)"):
            torch_runner.run(config, recorder.writer, 0.0)
        assert reached == [] and [t for t, _ in recorder.events] == ["phase"]  # nothing started
    else:
        torch_runner.refuse_emulated_bf16(config, torch.device("cuda", 0))  # runs natively: no refusal
    torch_runner.refuse_emulated_bf16(
        _tiny("resnet50", device="cuda", precision="amp-fp16"), torch.device("cuda", 0)
    )
    torch_runner.refuse_emulated_bf16(config, torch.device("cpu"))  # the CPU has no compute capability


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_the_keras_runner_refuses_amp_bf16_on_a_pre_ampere_gpu(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each backend's capability (TensorFlow's and torch's a tuple, JAX's a string) reaches the run's
    device record, and amp-bf16 is refused below 8.0 as on the PyTorch side."""
    from benchtui_runners import keras_runner

    raw = {"tensorflow": (7, 0), "jax": "7.0", "torch": (7, 0)}[backend]
    gpu = {"type": "cuda", "index": 0, "name": "Tesla V100-SXM2-16GB", **keras_runner._capability(raw)}
    monkeypatch.setenv("KERAS_BACKEND", backend)
    monkeypatch.setattr(keras_runner, "_gpus", lambda: [gpu])
    name, info = keras_runner._resolve_device("cuda")
    assert name == "gpu:0" and info["capability"] == "7.0"
    config = RunConfig(framework="x", model="resnet50", device="cuda", precision="amp-bf16")
    with pytest.raises(
        DeviceMissing, match=r"^amp-bf16 refused: Tesla V100-SXM2-16GB \(compute capability 7\.0\)"
    ):
        keras_runner.refuse_emulated_bf16(config, backend, info)
    keras_runner.refuse_emulated_bf16(config, backend, {**info, "capability": "8.0"})
    keras_runner.refuse_emulated_bf16(config, backend, {k: v for k, v in info.items() if k != "capability"})
    config.precision = "amp-fp16"
    keras_runner.refuse_emulated_bf16(config, backend, info)
