"""The faithful GPU fake (tests/fakegpu), and what it finds in every runner path.

1. The fake itself, in a process of its own (it patches torch for the life of a process): a CUDA
   tensor knows its device and index; mixing devices raises CUDA's error; a call naming a GPU the
   process cannot see raises; CUDA autocast casts as CUDA's own kernels do and bans
   binary_cross_entropy; pinned memory works (DataLoader's pin thread included); every host wait
   on a device value is recorded with the line that caused it.
2. The real runners, under the fake, for every model family, precision and data path: no device
   mix (the run ends with ``done``), and no host wait inside a timed step except the ones named
   here, each with its reason. A wait at a window's or an epoch's edge is the timing rule's.
3. Planted bugs (tests/fakegpu/plants.py, applied in the runner process, no runner code edited): a
   tensor left on the CPU, a per-step ``.item()`` and a GPT-2 forward without an attention mask
   are each caught.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.running.launcher import EXTRA_PATH_ENV
from support import run_runner

FAKEGPU = Path(__file__).resolve().parent / "fakegpu"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
# Two epochs of four steps, one thread; a long window target makes the windows 1, 2, ... steps.
TINY: dict[str, Any] = {
    "image_size": 32,
    "samples": 8,
    "batch_size": 2,
    "epochs": 2,
    "threads": 1,
    "device": "cuda",
    "window_s": 60.0,
    "seq_len": 16,
}
STEPS = 2 * 4


# -- reading what the fake recorded ----------------------------------------------------------------
@dataclass(frozen=True)
class Allowed:
    """A host wait inside a step that a path may have, by design or as a documented exception."""

    reason: str
    match: Callable[[dict[str, Any]], bool]


def frame_in(path: str, function: str) -> Callable[[dict[str, Any]], bool]:
    """A wait whose stack passes through ``function`` in a file whose path ends with ``path``."""

    def match(wait: dict[str, Any]) -> bool:
        return any(f.split(":", 1)[0].endswith(path) and f.endswith(f" {function}") for f in wait["stack"])

    return match


#: amp-fp16: GradScaler.step reads found_inf on the host before the optimizer steps (known, issue 28 (b)).
GRADSCALER = Allowed(
    "amp-fp16: torch.amp.GradScaler.step reads found_inf on the host (.item()) every step",
    frame_in("torch/amp/grad_scaler.py", "_maybe_opt_step"),
)
#: Inference returns every batch's outputs to the host, as Keras's predict_on_batch does.
OUTPUTS_TO_HOST = Allowed(
    "inference: every batch's outputs are copied to the host, by design",
    frame_in("benchtui_runners/torch_runner.py", "infer"),
)
#: tf.keras's model.fit asks every step whether its iterator had data (opt_outputs.has_value()).
TF_HAS_VALUE = Allowed(
    "tf.keras: model.fit reads whether the iterator had data every step (Keras's TF trainer)",
    frame_in("keras/src/backend/tensorflow/trainer.py", "function"),
)
#: tf.function's first call checks its variables are initialised (tracing: the first step only).
TF_FIRST_CALL = Allowed(
    "tf.keras: tf.function's first call checks that its variables are initialised",
    frame_in(
        "tensorflow/python/eager/polymorphic_function/polymorphic_function.py", "_evaluate_var_is_initialized"
    ),
)


#: Keras converts each step's logs to Python numbers in a thread of its own (its callbacks run
#: asynchronously on JAX and torch when none overrides on_train_batch_end): that thread waits, the
#: steps do not.
KERAS_ASYNC_LOGS = Allowed(
    "Keras: each step's logs are read on the host in Keras's callback thread, not in the steps",
    frame_in("keras/src/callbacks/callback_list.py", "_on_train_batch_end"),
)


#: Keras converts the epoch's logs on the host when the epoch ends, before it calls the runner's callback,
#: which is where the clock learns that the epoch's last step has ended: an epoch-edge wait.
KERAS_EPOCH_END = Allowed(
    "Keras: the epoch's logs are read on the host at the epoch's end (before the clock's callback runs)",
    lambda w: frame_in("keras/src/callbacks/callback_list.py", "on_epoch_end")(w) and w["step"] == STEPS // 2,
)


def read_waits(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def step_waits(
    waits: list[dict[str, Any]], allowed: tuple[Allowed, ...] = (), thread: str | None = "MainThread"
) -> list[dict[str, Any]]:
    """The waits inside a timed step that nothing allowed names, on ``thread`` (the one that runs
    the steps; None: any thread)."""
    return [
        w
        for w in waits
        if w["where"] == "step"
        and (thread is None or w["thread"] == thread)
        and not any(a.match(w) for a in allowed)
    ]


def described(waits: list[dict[str, Any]]) -> str:
    seen: dict[tuple[str, str, str], int] = {}
    for w in waits:
        key = (w["kind"], w["what"], w["source"])
        seen[key] = seen.get(key, 0) + 1
    return "; ".join(f"{n}x {kind} {what} at {source}" for (kind, what, source), n in seen.items())


@dataclass
class Faked:
    events: list[dict[str, Any]]
    waits: list[dict[str, Any]]
    calls: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def error(self) -> str:
        return " / ".join(e["message"] for e in self.of("error"))


@pytest.fixture
def faked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Faked]:
    """A real runner, started by the launcher, with the fake (and a plant, if named) in it."""

    def run(
        config: dict[str, Any], fakes: str = "torch", plant: str = "", names: tuple[str, ...] = (H100,)
    ) -> Faked:
        waits, log = tmp_path / "waits.jsonl", tmp_path / "fakegpu.log"
        for path in (waits, log):
            path.unlink(missing_ok=True)
        monkeypatch.setenv(EXTRA_PATH_ENV, str(FAKEGPU))
        monkeypatch.setenv("BENCHTUI_FAKE_GPU", fakes)
        monkeypatch.setenv("BENCHTUI_FAKE_GPU_NAMES", ",".join(names))
        monkeypatch.setenv("BENCHTUI_FAKE_GPU_LOG", str(log))
        monkeypatch.setenv("BENCHTUI_FAKE_GPU_WAITS", str(waits))
        monkeypatch.setenv("BENCHTUI_FAKE_GPU_PLANT", plant)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        events = run_runner({**TINY, **config})
        calls = [line.split(" ", 1)[1] for line in log.read_text().splitlines()] if log.exists() else []
        return Faked(events, read_waits(waits), calls)

    return run


# -- 1. the fake itself ----------------------------------------------------------------------------
# Run under the fake (sitecustomize installs it when torch is imported), two GPUs visible. Each
# check's answer lands in ``out``; a line that must be recorded as a wait ends in "# wait: NAME".
UNIT = r"""
import json, sys, threading
import torch
import fakegpu

out = {}


def check(fn):
    try:
        out[fn.__name__] = fn()
    except Exception as exc:  # noqa: BLE001
        out[fn.__name__] = {"raised": f"{type(exc).__name__}: {exc}"}


def raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


@check
def device():
    x = torch.randn(2, 3, device="cuda")
    layer = torch.nn.Linear(3, 4).to("cuda")
    torch.cuda.set_device(1)
    current = torch.zeros(2, device="cuda")
    torch.cuda.set_device(0)
    return {
        "x": str(x.device), "is_cuda": x.is_cuda, "index": x.get_device(), "weight": str(layer.weight.device),
        "output": str(layer(x).device), "cuda1": str(torch.ones(1, device="cuda:1").device),
        "current_device_1": str(current.device), "moved_1": str(x.to("cuda:1").device),
        "cpu": str(x.cpu().device), "same_is_self": x.to("cuda:0") is x, "tensor": str(torch.tensor([1.0], device="cuda").device),
        "arange": [str(torch.arange(4, device="cuda").device), torch.arange(4, device="cuda").shape[0]],
        "numpy": raised(x.numpy),
        "repr": repr(torch.zeros(2, device="cuda:1", dtype=torch.float16)), "type": x.type(),
    }


@check
def mixing():
    c0, c1, cpu = torch.randn(3, device="cuda:0"), torch.randn(3, device="cuda:1"), torch.randn(3)
    layer = torch.nn.Linear(3, 2).to("cuda")
    return {
        "cuda_plus_cpu": raised(lambda: c0 + cpu),
        "cuda0_plus_cuda1": raised(lambda: c0 + c1),
        "cpu_input_to_cuda_layer": raised(lambda: layer(cpu)),
        "cat": raised(lambda: torch.cat([c0, cpu])),
        "cuda_times_cpu_scalar": raised(lambda: c0 * torch.tensor(2.0)),
        "index_with_cpu_indices": raised(lambda: c0[torch.tensor([0, 2])]),
        "copy_across": raised(lambda: c1.copy_(c0)),
    }


@check
def wrong_index():
    return {
        "synchronize": raised(lambda: torch.cuda.synchronize(2)),
        "max_memory_allocated": raised(lambda: torch.cuda.max_memory_allocated(5)),
        "memory_of_cpu": raised(lambda: torch.cuda.max_memory_allocated("cpu")),
        "set_device_without_index": raised(lambda: torch.cuda.set_device(torch.device("cuda"))),
        "tensor_on_cuda_7": raised(lambda: torch.zeros(1, device="cuda:7")),
        "synchronize_1": raised(lambda: torch.cuda.synchronize(1)),
    }


@check
def autocast():
    a = torch.randn(4, 8, device="cuda")
    w = torch.randn(8, 3, device="cuda", requires_grad=True)
    labels = torch.rand(4, 3, device="cuda")
    result = {}
    with torch.autocast("cuda", dtype=torch.float16):
        y = a @ w
        result["matmul"] = str(y.dtype)
        result["linear"] = str(torch.nn.functional.linear(a, w.t()).dtype)
        result["conv2d"] = str(torch.nn.Conv2d(3, 4, 3).to("cuda")(torch.randn(1, 3, 8, 8, device="cuda")).dtype)
        result["softmax"] = str(torch.softmax(y, -1).dtype)
        result["layer_norm"] = str(torch.nn.functional.layer_norm(y, (3,)).dtype)
        result["relu"] = str(torch.relu(y).dtype)
        result["bce"] = raised(lambda: torch.nn.functional.binary_cross_entropy(torch.sigmoid(y.float()), labels))
        result["bce_with_logits"] = str(torch.nn.functional.binary_cross_entropy_with_logits(y, labels).dtype)
        with torch.autocast("cuda", enabled=False):
            result["disabled_inside"] = str((a @ w).dtype)
    y.float().sum().backward()
    result["grad"] = [str(w.grad.dtype), str(w.grad.device)]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        result["bf16_matmul"] = str((a @ w).dtype)
    result["after"] = str((a @ w).dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result["cpu_autocast_on_cpu"] = str((torch.randn(2, 2) @ torch.randn(2, 2)).dtype)
    return result


@check
def pinned():
    pinned = torch.randn(4).pin_memory()
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(8, 3)), batch_size=2, num_workers=1, pin_memory=True
    )
    batches = [b for (b,) in loader]
    before = len(fakegpu.WAITS)
    moved = [b.to("cuda", non_blocking=True) for b in batches]
    return {
        "pinned": pinned.is_pinned(), "pageable": torch.randn(4).is_pinned(),
        "loader_batches_pinned": [b.is_pinned() for b in batches],
        "moved": [str(m.device) for m in moved], "waits_for_non_blocking_copies": len(fakegpu.WAITS) - before,
        "cuda_tensor_pinned": torch.zeros(1, device="cuda").is_pinned(),
        "pin_a_cuda_tensor": raised(lambda: torch.zeros(1, device="cuda").pin_memory()),
    }


@check
def waits():
    x = torch.randn(4, device="cuda")
    del fakegpu.WAITS[:]
    x.sum().item()  # wait: item
    bool(x[0] > 0)  # wait: bool
    float(x.max())  # wait: float
    x.cpu()  # wait: cpu
    x.tolist()  # wait: tolist
    x[x > 0]  # wait: mask
    torch.nonzero(x)  # wait: nonzero
    torch.ones(3).to("cuda")  # wait: blocking-to-device
    torch.tensor(2.0, device="cuda")  # wait: scalar-to-device
    torch.empty(4).copy_(x)  # wait: copy-to-pageable
    torch.cuda.synchronize()  # wait: synchronize
    x.to("cpu", non_blocking=True)
    torch.empty(4).pin_memory().copy_(x, non_blocking=True)
    torch.ones(3).pin_memory().to("cuda", non_blocking=True)
    x * 2 + 1
    return [[w["kind"], w["what"], w["source"], w["device"]] for w in fakegpu.WAITS]


print(json.dumps(out))
"""


def run_under_fake(
    script: Path, env: dict[str, str], drop: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run a check script with the fake on its path and none of the caller's fake settings; it must pass."""
    env = {**os.environ, "PYTHONPATH": str(FAKEGPU), **env}
    for name in (*drop, "BENCHTUI_FAKE_GPU_LOG", "BENCHTUI_FAKE_GPU_WAITS", "BENCHTUI_FAKE_GPU_PLANT"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def unit(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    script = tmp_path_factory.mktemp("unit") / "unit_checks.py"
    script.write_text(UNIT)
    env = {"BENCHTUI_FAKE_GPU": "torch", "BENCHTUI_FAKE_GPU_NAMES": f"{A100},{H100}", "OMP_NUM_THREADS": "1"}
    done = run_under_fake(script, env, drop=("CUDA_VISIBLE_DEVICES",))
    return json.loads(done.stdout.splitlines()[-1]), script


def test_a_cuda_tensor_knows_its_device_and_index(unit: tuple[dict[str, Any], Path]) -> None:
    got = unit[0]["device"]
    assert got["x"] == "cuda:0" and got["is_cuda"] is True and got["index"] == 0, got
    assert got["weight"] == got["output"] == "cuda:0"  # nn.Module.to, and what the layer makes
    assert got["cuda1"] == got["current_device_1"] == got["moved_1"] == "cuda:1"  # torch.cuda.set_device(1)
    assert got["cpu"] == "cpu" and got["same_is_self"] is True  # .to() of a tensor already there is itself
    assert got["tensor"] == "cuda:0" and got["arange"] == ["cuda:0", 4]
    assert got["numpy"] == (
        "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
        "to host memory first."
    )
    assert got["type"] == "torch.cuda.FloatTensor"
    assert got["repr"] == "tensor([0., 0.], device='cuda:1', dtype=torch.float16)"


def test_mixing_devices_raises_as_cuda_does(unit: tuple[dict[str, Any], Path]) -> None:
    got = unit[0]["mixing"]
    assert got["cuda_plus_cpu"] == (
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
        "cuda:0 and cpu!"
    )
    assert got["cuda0_plus_cuda1"].endswith("found at least two devices, cuda:0 and cuda:1!")
    assert got["cpu_input_to_cuda_layer"].startswith(
        "RuntimeError: Expected all tensors to be on the same device, but got mat1 is on cpu, different from "
        "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)"
    ), got
    assert got["cat"] is not None and "same device" in got["cat"]
    # What CUDA allows: a 0-dim CPU tensor as a scalar, CPU indices, copies between devices.
    assert got["cuda_times_cpu_scalar"] is None
    assert got["index_with_cpu_indices"] is None and got["copy_across"] is None


def test_a_call_on_a_gpu_that_is_not_visible_raises(unit: tuple[dict[str, Any], Path]) -> None:
    got = unit[0]["wrong_index"]
    assert got["synchronize"] == "RuntimeError: CUDA error: invalid device ordinal 2 (fake: 2 visible)"
    assert (
        got["max_memory_allocated"] == "RuntimeError: CUDA error: invalid device ordinal 5 (fake: 2 visible)"
    )
    assert got["tensor_on_cuda_7"] == "RuntimeError: CUDA error: invalid device ordinal 7 (fake: 2 visible)"
    assert got["memory_of_cpu"] == "ValueError: Expected a cuda device, but got: cpu"
    assert got["set_device_without_index"] is not None  # torch's own rule: a device with an index
    assert got["synchronize_1"] is None


def test_cuda_autocast_casts_as_cudas_own_kernels_and_bans_binary_cross_entropy(
    unit: tuple[dict[str, Any], Path],
) -> None:
    got = unit[0]["autocast"]
    assert got["matmul"] == got["linear"] == got["conv2d"] == got["relu"] == "torch.float16", got
    # CUDA's fp32 policies (softmax sets its output dtype; layer_norm and the logits loss run in fp32).
    assert got["softmax"] == got["layer_norm"] == got["bce_with_logits"] == "torch.float32", got
    assert (got["bce"] or "").startswith(
        "RuntimeError: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast."
    )
    assert got["disabled_inside"] == got["after"] == "torch.float32"
    assert got["grad"] == ["torch.float32", "cuda:0"]  # the weight's gradient, in its own dtype
    assert got["bf16_matmul"] == "torch.bfloat16"
    assert got["cpu_autocast_on_cpu"] == "torch.bfloat16"  # CPU autocast on CPU tensors is untouched


def test_pinned_memory_works_and_non_blocking_copies_from_it_do_not_wait(
    unit: tuple[dict[str, Any], Path],
) -> None:
    got = unit[0]["pinned"]
    assert got["pinned"] is True and got["pageable"] is False
    assert got["loader_batches_pinned"] == [True] * 4  # DataLoader's pin thread, under the fake
    assert got["moved"] == ["cuda:0"] * 4 and got["waits_for_non_blocking_copies"] == 0
    assert got["cuda_tensor_pinned"] is False
    assert got["pin_a_cuda_tensor"] == (
        "RuntimeError: cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned"
    )


def test_every_host_wait_is_recorded_with_the_line_that_caused_it(unit: tuple[dict[str, Any], Path]) -> None:
    got, script = unit[0]["waits"], unit[1]
    lines = {
        line.split("# wait: ")[1]: f"{script}:{number}"
        for number, line in enumerate(UNIT.splitlines(), start=1)
        if "# wait: " in line
    }
    expected = [
        ["item", "aten._local_scalar_dense", lines["item"], "cuda:0"],
        ["item", "aten._local_scalar_dense", lines["bool"], "cuda:0"],
        ["item", "aten._local_scalar_dense", lines["float"], "cuda:0"],
        ["copy-to-host", "Tensor.to(cpu)", lines["cpu"], "cuda:0"],
        ["tolist", "Tensor.tolist", lines["tolist"], "cuda:0"],
        ["sync-op", "aten.index.Tensor", lines["mask"], "cuda:0"],
        ["sync-op", "aten.nonzero", lines["nonzero"], "cuda:0"],
        ["blocking-copy-to-device", "Tensor.copy_", lines["blocking-to-device"], "cuda:0"],
        ["blocking-copy-to-device", "Tensor.copy_", lines["scalar-to-device"], "cuda:0"],
        ["copy-to-host", "Tensor.copy_", lines["copy-to-pageable"], "cuda:0"],
        ["synchronize", "torch.cuda.synchronize", lines["synchronize"], "cuda:0"],
    ]
    # Non-blocking copies to the host (into pinned memory), from pinned memory to the GPU, and device
    # work: no wait.
    assert got == expected


JAX_TF = r"""
import json
import jax, jax.numpy as jnp, numpy as np
import tensorflow as tf
import fakegpu

x = jnp.arange(4.0) * 2
np.asarray(x)  # wait: jax-asarray
np.asarray(x)  # JAX keeps the host copy: no second wait
float(jnp.sum(x))  # wait: jax-float
jax.block_until_ready(x)  # wait: jax-block
t = tf.constant([1.0, 2.0]) * 2
t.numpy()  # wait: tf-numpy
bool(tf.reduce_all(t > 0))  # wait: tf-bool
tf.test.experimental.sync_devices()  # wait: tf-sync
print(json.dumps([[w["kind"], w["what"], w["source"]] for w in fakegpu.WAITS]))
"""


@pytest.mark.slow
def test_jax_and_tensorflow_host_reads_are_recorded_with_their_line(tmp_path: Path) -> None:
    script = tmp_path / "jax_tf_checks.py"
    script.write_text(JAX_TF)
    done = run_under_fake(script, {"BENCHTUI_FAKE_GPU": "jax,tensorflow"})
    lines = {
        line.split("# wait: ")[1]: f"{script}:{number}"
        for number, line in enumerate(JAX_TF.splitlines(), start=1)
        if "# wait: " in line
    }
    assert json.loads(done.stdout.splitlines()[-1]) == [
        ["host-read", "numpy.asarray(jax.Array)", lines["jax-asarray"]],
        ["host-read", "jax.Array._value", lines["jax-float"]],
        ["synchronize", "jax.block_until_ready", lines["jax-block"]],
        ["numpy", "EagerTensor.numpy", lines["tf-numpy"]],
        ["numpy", "EagerTensor.numpy", lines["tf-bool"]],
        ["synchronize", "tf.test.experimental.sync_devices", lines["tf-sync"]],
    ]


# -- 2. every runner path, under the fake ----------------------------------------------------------
def assert_clean(run: Faked, allowed: tuple[Allowed, ...] = (), background: tuple[Allowed, ...] = ()) -> None:
    """The run trained on the fake GPU with no device mix, and waited for the device only where the
    timing rule does (or where ``allowed`` says why); another thread waited only as ``background`` says."""
    assert not run.of("error"), run.error()
    assert run.of("done"), [e["type"] for e in run.events]
    (hello,) = run.of("hello")
    assert hello["device"]["type"] == "cuda" and hello["device"]["index"] == 0
    assert sum(w["steps"] for w in run.of("batch")) == STEPS
    # The fake followed the run's clock (its synchronisations are the clock's own) ...
    assert {w["where"] for w in run.waits if w["kind"] == "synchronize"} >= {"clock"}
    # ... and saw no other wait inside a step.
    inside = step_waits(run.waits, allowed)
    assert not inside, described(inside)
    elsewhere = step_waits(run.waits, allowed + background, thread=None)
    assert not elsewhere, described(elsewhere)


STUDY = {"head": "sigmoid", "optimizer": "adam", "learning_rate": 1e-4, "shuffle": True}


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, precision, data, extra",
    [
        # ("resnet50", "fp32", "device"): test_every_backend_waits_only_where_its_settings_say
        ("resnet50", "amp-fp16", "host", STUDY),  # the study preset's path: pinned DataLoader, BCE, Adam
        ("resnet50", "amp-bf16", "device", {}),
        ("vit_ti_16", "fp32", "host", {}),
        ("vit_ti_16", "amp-fp16", "device", {}),
        ("gpt2_mini", "fp32", "host", {}),
        ("gpt2_mini", "amp-bf16", "device", {}),
        ("gpt2_mini", "amp-fp16", "host", {}),
    ],
)
def test_pytorch_paths_mix_no_devices_and_wait_for_nothing_inside_a_step(
    faked: Callable[..., Faked], model: str, precision: str, data: str, extra: dict[str, Any]
) -> None:
    run = faked({"framework": "torch", "model": model, "precision": precision, "data": data, **extra})
    assert_clean(run, allowed=(GRADSCALER,) if precision == "amp-fp16" else ())
    if data == "host":  # every batch pinned, by DataLoader's pin thread
        pins = [c for c in run.calls if c.startswith("torch.pin_memory")]
        assert len(pins) == 2 * STEPS and all(p.endswith("(_pin_memory_loop)") for p in pins), pins[:3]
    if precision != "fp32":  # mixed precision ran in mixed precision
        low = precision.split("-")[1].replace("fp", "float").replace("bf", "bfloat")
        casts = [c for c in run.calls if c.startswith("torch.autocast") and c.endswith(f" {low}")]
        assert casts, run.calls[-5:]


@pytest.mark.slow
def test_pytorch_inference_waits_only_for_its_outputs(faked: Callable[..., Faked]) -> None:
    run = faked({"framework": "torch", "model": "resnet50", "task": "inference", "precision": "amp-bf16"})
    assert_clean(run, allowed=(OUTPUTS_TO_HOST,))
    outputs = [w for w in step_waits(run.waits) if OUTPUTS_TO_HOST.match(w)]
    assert len(outputs) == STEPS and {w["kind"] for w in outputs} == {"copy-to-host"}


#: Keras 3.15's torch backend waits every step in Keras's own code (issue 28 finding, recorded in
#: the run's host_sync_per_step): blocking copies of Python numbers to the GPU (convert_to_tensor, from
#: keras/src/losses/loss.py reduce_values' ops.shape and keras/src/metrics/reduction_metrics.py's
#: scalars) and, with SGD, .item() of the learning rate (torch._foreach_add_(..., alpha=-learning_rate)).
KERAS_TORCH_COPIES = Allowed(
    "Keras on torch: Python numbers copied to the GPU with blocking copies every step",
    frame_in("keras/src/backend/torch/core.py", "convert_to_tensor"),
)
KERAS_TORCH_SGD_LR = Allowed(
    "Keras on torch: SGD reads its learning rate on the host every step",
    frame_in("keras/src/backend/torch/optimizers/torch_sgd.py", "_parallel_update_step"),
)


#: Every backend, on the one lifecycle: (framework, fakes, data, the waits inside a step it may make).
#: Each allowed wait but Keras's own at an epoch's end is one the run's settings declare
#: (``host_sync_per_step``), so every report's how line says it.
EVERY_BACKEND = [
    ("torch", "torch", "device", ()),
    ("keras-jax", "jax", "device", (KERAS_EPOCH_END,)),
    ("tensorflow", "tensorflow", "host", (KERAS_EPOCH_END, TF_HAS_VALUE, TF_FIRST_CALL)),
    ("keras-torch", "torch", "device", (KERAS_EPOCH_END, KERAS_TORCH_COPIES, KERAS_TORCH_SGD_LR)),
]


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "fakes", "data", "allowed"), EVERY_BACKEND)
def test_every_backend_waits_only_where_its_settings_say(
    faked: Callable[..., Faked], framework: str, fakes: str, data: str, allowed: tuple[Allowed, ...]
) -> None:
    """No device mix, the clock's waits and no other inside a step but what the framework itself
    makes: what the run records as its ``host_sync_per_step``, or nothing, on every backend."""
    run = faked(
        {
            "framework": framework,
            "model": "resnet50",
            "data": data,
            "device": "cuda:0",
            "cudnn_autotune": False,
        },
        fakes=fakes,
    )
    assert_clean(run, allowed=allowed, background=(KERAS_ASYNC_LOGS,))
    (hello,) = run.of("hello")
    settings = {**hello["settings"], **{k: v for e in run.of("settings") for k, v in e["settings"].items()}}
    declared = settings.get("host_sync_per_step")
    inside = step_waits(run.waits, (KERAS_EPOCH_END,))
    # A backend that waits inside its steps says so, and one that says nothing waits for nothing.
    assert bool(inside) == bool(declared), (declared, described(inside))
    if framework == "tensorflow":  # tf.keras's own per-step read is there, and it is the only one
        assert len([w for w in run.waits if w["where"] == "step" and TF_HAS_VALUE.match(w)]) >= STEPS
    if framework == "keras-torch":  # Keras's torch backend waits every step in Keras's own code
        assert any(KERAS_TORCH_COPIES.match(w) for w in inside) and any(
            KERAS_TORCH_SGD_LR.match(w) for w in inside
        )
        assert "blocking copies" in declared and "learning rate" in declared


# -- 3. planted bugs are caught --------------------------------------------------------------------
@pytest.mark.slow
def test_a_planted_tensor_left_on_the_cpu_fails_the_run_with_cudas_error(faked: Callable[..., Faked]) -> None:
    run = faked({"framework": "torch", "model": "resnet50"}, plant="labels-on-cpu")
    assert not run.of("done")
    assert run.error().startswith(
        "RuntimeError: Expected all tensors to be on the same device, but got target is on cpu, different from "
        "other tensors on cuda:0"
    ), run.error()


@pytest.mark.slow
def test_a_planted_item_per_step_is_caught_at_its_line(faked: Callable[..., Faked]) -> None:
    run = faked({"framework": "torch", "model": "resnet50"}, plant="item-per-step")
    assert run.of("done"), run.error()
    inside = step_waits(run.waits)
    plants = (FAKEGPU / "plants.py").read_text().splitlines()
    line = next(n for n, text in enumerate(plants, 1) if "= value.item()" in text)
    assert [w["source"] for w in inside] == [f"{FAKEGPU}/plants.py:{line}"] * STEPS
    assert [(w["epoch"], w["step"]) for w in inside] == [(e, s) for e in (1, 2) for s in (1, 2, 3, 4)]
    assert all(
        w["kind"] == "item" and w["runner"].startswith("benchtui_runners/torch_runner.py:") for w in inside
    )


@pytest.mark.slow
def test_a_planted_gpt2_forward_without_attention_mask_is_caught(faked: Callable[..., Faked]) -> None:
    run = faked({"framework": "torch", "model": "gpt2_mini"}, plant="gpt2-no-mask")
    assert run.of("done"), run.error()
    inside = step_waits(run.waits)
    assert len(inside) == STEPS and {w["source"].rsplit(":", 1)[0] for w in inside} == {
        "transformers/masking_utils.py"
    }, described(inside)
