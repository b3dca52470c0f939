"""The GPU path, on a machine without a GPU: every CUDA branch run with the device layer faked.

Runners are real processes over real pipes; only the calls that touch a GPU are replaced
(tests/fakegpu: torch.cuda, tf.config's GPU calls, jax.devices("gpu")), keeping the
frameworks' own argument rules. NVML is the sampler tests' fake. The engine, launcher,
placement, memory policy, refusals and summaries above them are the real code.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model import gpu_peaks
from benchtui.core.plan.devices import place
from benchtui.core.plan.plan import Plan, PlanError
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.running.engine import Engine
from benchtui.core.running.launcher import EXTRA_PATH_ENV
from benchtui.core.running.sampler import Sampler, list_gpus
from benchtui.core.store.session import SessionWriter, list_sessions, load_session
from benchtui_runners.config import RunConfig, is_oom, xla_flags
from sessionfactory import make_session
from support import run_runner
from test_sampler import FakeNVML

FAKEGPU = str(Path(__file__).resolve().parent / "fakegpu")
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
# One thread: two test workers share two cores, and oversubscribed pools slow PyTorch down tenfold.
TINY = {"model": "resnet50", "image_size": 32, "samples": 16, "batch_size": 8, "epochs": 2, "threads": 1}
# Enough steps for windows of several steps to form (24 an epoch, of 2 images); a long window
# target makes them 1, 2, 4, 8, ... steps however slow this machine is at the moment.
STEPS = {"samples": 48, "batch_size": 2, "window_s": 60.0}


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Fake a GPU in runner processes started from here: ``fake_gpu("torch,jax", names=[...])``."""
    log = tmp_path / "fakegpu.log"

    def install(frameworks: str, names: list[str] | None = None) -> Path:
        monkeypatch.setenv(EXTRA_PATH_ENV, FAKEGPU)
        monkeypatch.setenv("BENCHTUI_FAKE_GPU", frameworks)
        monkeypatch.setenv("BENCHTUI_FAKE_GPU_NAMES", ",".join(names or [H100]))
        monkeypatch.setenv("BENCHTUI_FAKE_GPU_LOG", str(log))
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        return log

    return install


def calls(log: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines()] if log.exists() else []


def one(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [e for e in events if e["type"] == kind]
    assert found, f"no {kind} event in {[e['type'] for e in events]}"
    return found[0]


def run_engine(plan: Plan, root: Path, nvml: FakeNVML) -> tuple[str, Path]:
    """A whole session through the real engine, with NVML faked; its status and folder."""
    writer = SessionWriter.create(plan, root)
    engine = Engine(plan, writer, sampler=Sampler(0.05, lambda s: None, nvml=nvml))
    return asyncio.run(engine.run()), writer.path


def tiny_plan(frameworks: list[str], device: str) -> Plan:
    return Plan(
        frameworks=frameworks,
        models=["resnet50"],
        image_size=32,
        samples=16,
        epochs=2,
        runs=1,
        batch_sizes={"resnet50": 8},
        device=device,
    ).validate()


def events_of(folder: Path, kind: str) -> list[dict[str, Any]]:
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("type") == kind]


# -- PyTorch on a GPU (item 1: torch.device("cuda") has no index) ---------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("device", "timing"), [("auto", "window"), ("cuda", "step")])
def test_torch_trains_on_the_gpu_asked_for_without_an_index(fake_gpu, device: str, timing: str) -> None:
    log = fake_gpu("torch")
    events = run_runner({"framework": "torch", **TINY, **STEPS, "device": device, "timing": timing})
    hello, done = one(events, "hello"), one(events, "done")
    assert (
        hello["device"]["type"] == "cuda"
        and hello["device"]["index"] == 0
        and hello["device"]["name"] == H100
    )
    assert "torch.cuda.set_device 0" in calls(log)
    assert done["source"].startswith("torch.cuda.max_memory_allocated") and done["peak_bytes"] == 96 << 20
    windows = [e for e in events if e["type"] == "batch"]
    assert sum(w["steps"] for w in windows) == 48 and all(w["seconds"] > 0 for w in windows)
    assert hello["settings"]["memory_policy"]["counter"].startswith("torch.cuda.max_memory_allocated")
    syncs = [c for c in calls(log) if c.startswith("torch.cuda.synchronize")]
    assert set(syncs) == {"torch.cuda.synchronize 0"}
    # Window timing's waits: test_every_backend_waits_for_the_gpu_once_per_window_never_per_step.
    if timing == "step":  # --timing step: a wait after every step, as asked
        assert len(windows) == 48 and len(syncs) >= 48


# -- Keras backends on a GPU: memory policy, XLA autotuning, host data, counters ----------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "framework, fake, device, allocator, counter",
    [
        ("tensorflow", "tensorflow", "cuda:0", "memory growth", "tf get_memory_info peak"),
        ("keras-jax", "jax", "cuda:0", "no preallocation", "jax memory_stats peak_bytes_in_use"),
        # A runner started by hand with two GPUs visible, on the second (item 5).
        ("keras-torch", "torch", "cuda:1", "default caching allocator", "torch.cuda.max_memory_allocated"),
    ],
)
def test_keras_backends_train_on_the_gpu_with_an_explicit_memory_policy(
    fake_gpu,
    framework: str,
    fake: str,
    device: str,
    allocator: str,
    counter: str,
) -> None:
    log = fake_gpu(fake, names=[A100, H100] if device == "cuda:1" else [H100])
    config = {
        "framework": framework,
        **TINY,
        **STEPS,
        "device": device,
        "cudnn_autotune": False,
        "data": "host",
    }
    events = run_runner(config)
    hello, done = one(events, "hello"), one(events, "done")
    assert hello["device"]["type"] == "cuda" and hello["device"]["name"] == H100
    policy = hello["settings"]["memory_policy"]
    assert policy["allocator"].startswith(allocator), policy
    assert hello["settings"]["xla_gpu_autotune"] == "off"  # --no-cudnn-autotune reaches XLA (item 7)
    assert policy["env"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert policy["env"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert done["source"] == counter and done["peak_bytes"] == 96 << 20
    seen = calls(log)
    if framework == "tensorflow":
        assert "tf.set_memory_growth /physical_device:GPU:0 True" in seen  # item 3
        # Host data is made on the host, explicitly, and nothing runs under a GPU scope (item 8).
        scopes = [c.split(" ", 1)[1] for c in seen if c.startswith("tf.device")]
        assert "/CPU:0" in scopes and not [d for d in scopes if "gpu" in d.lower()], scopes
        assert hello["settings"]["host_data"] == "in host memory (tensors on /CPU:0)"
    windows = [e for e in events if e["type"] == "batch"]
    assert sum(w["steps"] for w in windows) == 48
    if framework == "keras-torch":  # the run's GPU, not the current device 0 (item 5)
        assert {c for c in seen if c.startswith(("torch.cuda.synchronize", "torch.cuda.max_memory"))} == {
            "torch.cuda.synchronize 1",
            "torch.cuda.max_memory_allocated 1",
        }
    if framework == "keras-jax":
        # Every sync waits for what the step wrote, never for nothing (item 8): the whole model state,
        # hundreds of arrays (inside model.fit, Keras keeps it in a TrackedDict JAX sees as one leaf).
        waits = [int(c.split()[-1]) for c in seen if c.startswith("jax.block_until_ready")]
        assert waits and min(waits) >= 100, waits


#: Each backend's wait for the device, as the fake logs it (benchtui_runners.lifecycle: one per window).
DEVICE_WAIT = {
    "torch": "torch.cuda.synchronize",
    "tensorflow": "tf.test.experimental.sync_devices",
    "keras-jax": "jax.block_until_ready",
    "keras-torch": "torch.cuda.synchronize",
}


@pytest.mark.slow
@pytest.mark.parametrize("framework", list(DEVICE_WAIT))
def test_every_backend_waits_for_the_gpu_once_per_window_never_per_step(fake_gpu, framework: str) -> None:
    """The one lifecycle's clock on every backend: a wait as each epoch begins, one per window of
    steps, and the backend's own few (after the build, for a pool of device batches): never one per step."""
    log = fake_gpu({"keras-jax": "jax", "keras-torch": "torch"}.get(framework, framework))
    events = run_runner({"framework": framework, **TINY, **STEPS, "device": "cuda", "data": "host"})
    assert one(events, "hello")["device"]["type"] == "cuda"
    windows = [e for e in events if e["type"] == "batch"]
    epochs = [e for e in events if e["type"] == "epoch"]
    assert sum(w["steps"] for w in windows) == 48 and len(epochs) == 2
    waits = [c for c in calls(log) if c.startswith(DEVICE_WAIT[framework])]
    assert len(windows) + len(epochs) <= len(waits) <= len(windows) + 2 * len(epochs) + 2 < 48, (
        len(windows),
        len(waits),
    )


# -- the launcher's one device, and energy per image ------------------------------------------------
@pytest.mark.slow
def test_the_launcher_gives_each_runner_exactly_the_chosen_gpu(fake_gpu, tmp_path: Path) -> None:
    log = fake_gpu("torch", names=[A100, H100])
    status, folder = run_engine(
        tiny_plan(["torch"], "cuda:1"), tmp_path, FakeNVML(count=2, names=[A100, H100])
    )
    assert status == "complete"
    meta = json.loads((folder / "session.json").read_text())
    assert meta["placement"]["gpu"]["index"] == 1 and meta["placement"]["gpu"]["uuid"] == "GPU-fake-1"
    assert meta["placement"]["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}
    (hello,) = events_of(folder, "hello")
    # The runner saw NVML's GPU 1 (the H100) as its only device, cuda:0.
    assert hello["device"]["name"] == H100 and hello["device"]["index"] == 0
    assert hello["device"]["assigned"]["index"] == 1 and hello["config"]["device"] == "cuda:0"
    assert hello["settings"]["memory_policy"]["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert {c.split()[-1] for c in calls(log) if c.startswith("torch.cuda.")} == {"0"}
    energy = events_of(folder, "energy")
    assert [e["epoch"] for e in energy] == [0, 1, 2]
    (row,) = json.loads((folder / "summary.json").read_text())["rows"]
    # The fake GPU draws a steady 300 W: joules per image = 300 x epoch-2 seconds / 16 images.
    expected = 300 * row["mean_epoch_excl_first_s"] / 16
    assert row["joules_per_image"] == pytest.approx(expected, rel=0.5)
    assert row["device_kind"] == "cuda"
    assert [s["device"] for s in list_sessions(tmp_path)] == [H100]


# -- no silent fallback (item 2) ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_framework_that_cannot_see_the_gpu_fails_with_the_fix_and_never_trains_on_the_cpu(
    fake_gpu,
    tmp_path: Path,
) -> None:
    fake_gpu("torch")  # JAX here is the CPU-only build, as the keras-jax extra installs it
    status, folder = run_engine(tiny_plan(["torch", "keras-jax"], "auto"), tmp_path, FakeNVML(names=[H100]))
    summary = json.loads((folder / "summary.json").read_text())
    rows = {r["framework"]: r for r in summary["rows"]}
    assert status == "failed"
    assert rows["torch"]["status"] == "ok" and rows["torch"]["device_kind"] == "cuda"
    assert rows["keras-jax"]["status"] == "failed"
    reason = rows["keras-jax"]["reason"]
    assert reason.startswith("Keras/JAX sees no GPU") and "jax[cuda13]" in reason and "\n" not in reason
    assert not [e for e in events_of(folder, "batch") if "keras-jax" in e["run"]]  # not one CPU step
    assert summary["ratios"] == []


# -- a ratio across device kinds is refused everywhere ------------------------------------------------
def test_a_ratio_between_a_gpu_and_a_cpu_run_is_refused_in_every_view(tmp_path: Path) -> None:
    from benchtui.widgets.comparison import Series, ratio_line

    placement = {"kind": "cuda", "runner_device": "cuda:0", "gpu": {"index": 0, "name": H100}, "env": {}}
    mixed = make_session(
        tmp_path, name="mixed", cpu_frameworks=("tensorflow",), meta_extra={"placement": placement}
    )
    loaded = load_session(mixed)
    summary = loaded.model.summary()
    assert summary["ratios"] == []
    (refused,) = summary["refused_ratios"]
    assert refused["devices"] == {"torch": ["cuda"], "tensorflow": ["cpu"]}
    for row in summary["rows"]:
        assert any("no ratio between PyTorch and tf.keras" in w["message"] for w in row["warnings"])
    assert {s["name"]: s["device"] for s in list_sessions(tmp_path)}[mixed.name] == "mixed: cpu/cuda"
    runs = {r.spec.framework: r for r in loaded.model.runs.values()}
    line = ratio_line([Series(fw, run, [0.05], 0.05) for fw, run in runs.items()]).plain
    assert "different devices" in line and "faster" not in line
    # Between sessions: a GPU session against a CPU one.
    gpu = make_session(tmp_path, name="gpu", folder="gpu")
    cpu = make_session(tmp_path, name="cpu", folder="cpu", gpu=False)
    cmp = compare_sessions(gpu, cpu)
    assert all(r.ratio is None and "different devices" in r.note for r in cmp.rows)
    assert any(d.startswith("GPUs:") for d in cmp.differences)
    # The same kind on both sides still compares.
    assert all(
        r.ratio is not None
        for r in compare_sessions(gpu, make_session(tmp_path, name="g2", folder="g2")).rows
    )


# -- choosing the device ------------------------------------------------------------------------------
GPUS = [
    {"index": 0, "name": A100, "uuid": "GPU-a", "pci_bus_id": "0:1", "mig_mode": "disabled"},
    {"index": 1, "name": H100, "uuid": "GPU-b", "pci_bus_id": "0:2", "mig_mode": "disabled"},
]


@pytest.mark.parametrize(
    "device, gpus, kind, runner_device, visible",
    [
        ("auto", GPUS, "cuda", "cuda:0", "0"),
        ("cuda", GPUS, "cuda", "cuda:0", "0"),
        ("cuda:1", GPUS, "cuda", "cuda:0", "1"),
        ("auto", [], "cpu", "cpu", None),
        ("cpu", GPUS, "cpu", "cpu", ""),  # a CPU plan hides the GPUs from every framework
    ],
)
def test_placement(device: str, gpus: list, kind: str, runner_device: str, visible: str | None) -> None:
    placement = place(device, gpus, inherited=None)  # nothing inherited: NVML's list as it is
    assert (placement.kind, placement.runner_device) == (kind, runner_device)
    assert placement.env.get("CUDA_VISIBLE_DEVICES") == visible
    if kind == "cuda":
        assert placement.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert placement.gpu["uuid"] == gpus[int(visible)]["uuid"]


def test_placement_refuses_a_gpu_the_machine_does_not_have() -> None:
    with pytest.raises(PlanError, match=r"--device cuda:2: NVML sees 2 GPU\(s\)"):
        place("cuda:2", GPUS, inherited=None)


def test_a_plan_config_goes_out_on_the_placement_device() -> None:
    engine = Engine(tiny_plan(["torch"], "auto"), writer=None)  # type: ignore[arg-type]
    engine.placement = place("cuda:1", GPUS, inherited=None)
    config, env = engine._config("torch", "resnet50", "r1")
    assert config.device == "cuda:0" and config.gpu["name"] == H100
    assert env["CUDA_VISIBLE_DEVICES"] == "1"  # the chosen GPU, by its NVML index
    assert RunConfig.from_json(json.dumps(config.to_dict())).gpu == config.gpu
    # On a GPU each framework keeps its own thread pool; on a CPU all get the same one: the cores
    # this process may use (TensorFlow would size its own per logical core, PyTorch per physical one).
    assert config.threads == 0
    engine.placement = place("cpu", GPUS, inherited=None)
    assert engine._config("torch", "resnet50", "r1")[0].threads == len(os.sched_getaffinity(0))
    engine.plan.threads = 1
    assert engine._config("tensorflow", "resnet50", "r1")[0].threads == 1  # the plan's, when it says


# -- the smaller items -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: Unable to find a valid cuDNN algorithm to run convolution",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 123 bytes",
    ],
)
def test_gpu_out_of_memory_in_all_its_spellings(message: str) -> None:
    assert is_oom(RuntimeError(message))
    assert not is_oom(RuntimeError("Expected a torch.device with a specified index"))


def test_no_cudnn_autotune_reaches_xla(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert xla_flags(False) == "--xla_force_host_platform_device_count=2 --xla_gpu_autotune_level=0"
    assert xla_flags(True) == "--xla_force_host_platform_device_count=2"


@pytest.mark.parametrize(
    "name, label",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", None),  # a slice: a seventh of the SMs
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", None),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", None),  # a laptop part: another power budget
        ("Quadro RTX 5000 with Max-Q Design", None),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ],
)
def test_gpu_peaks_never_match_a_slice_or_a_laptop_part_to_the_full_card(
    name: str, label: str | None
) -> None:
    entry = gpu_peaks.lookup(name)
    assert (entry.label if entry else None) == label


def test_no_peak_for_a_run_on_a_mig_enabled_gpu() -> None:
    from benchtui.core.model.efficiency import run_peak
    from benchtui.core.model.session_model import RunState
    from benchtui.core.plan.plan import RunSpec

    run = RunState(RunSpec("r", "torch", "resnet50", 1), 2)
    run.hello = {"device": {"type": "cuda", "name": H100}, "settings": {"precision": "fp32"}}
    assert run_peak(run) is not None
    run.hello["device"]["assigned"] = {"index": 0, "mig_mode": "enabled"}
    assert run_peak(run) is None


def test_doctor_names_the_fix_for_each_framework_that_cannot_see_the_gpu() -> None:
    from benchtui.core.running.doctor import verdicts

    results = [
        {"ok": True, "gpu": {"sees_gpu": True}},
        {"ok": True, "gpu": {"sees_gpu": False, "why": "tf.keras sees no GPU: ...; install 'benchtui[gpu]'"}},
        {"ok": False, "reason": "No module named 'jax'"},
    ]
    rows = verdicts(["torch", "tensorflow", "keras-jax"], results, GPUS)
    assert [r["gpu"] for r in rows] == ["sees it", "no GPU", ""]
    assert "benchtui[gpu]" in rows[1]["fix"] and "benchtui envs create keras-jax" in rows[2]["fix"]
    assert [r["gpu"] for r in verdicts(["torch"], results[:1], [])] == [
        ""
    ]  # no GPU on the machine: no verdict


@pytest.mark.slow
@pytest.mark.parametrize(
    "framework, fix",
    [("keras-jax", "'benchtui[gpu]' (jax[cuda13])"), ("tensorflow", "benchtui envs create --gpu tensorflow")],
)
def test_runner_doctor_says_why_a_framework_sees_no_gpu(framework: str, fix: str) -> None:
    from benchtui.core.running.doctor import probe

    info = asyncio.run(
        probe(framework)
    )  # this machine: no GPU, CPU-only JAX, TensorFlow without CUDA libraries
    assert info["ok"], info
    why = info["gpu"]["why"]
    assert info["gpu"]["sees_gpu"] is False and fix in why, why
    assert "tensorflow[and-cuda]" not in why or "own" in why  # never beside CUDA 13 frameworks


@pytest.mark.slow
def test_doctor_probes_under_the_runs_memory_policy_so_jax_takes_nothing_up_front(
    fake_gpu,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every framework is probed at once: JAX must not preallocate 75% of the GPU while the others
    start beside it, nor TensorFlow map it all. A user's own setting still wins."""
    from benchtui.core.running.doctor import probe

    log = fake_gpu("jax")
    for name in ("XLA_PYTHON_CLIENT_PREALLOCATE", "TF_FORCE_GPU_ALLOW_GROWTH"):
        monkeypatch.delenv(name, raising=False)
    info = asyncio.run(probe("keras-jax"))
    assert info["ok"] and info["gpu"]["sees_gpu"], info
    assert "jax.gpu_client_start preallocate=false" in calls(log)
    assert info["memory_env"] == {
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    }
    tf = asyncio.run(probe("tensorflow"))  # TensorFlow reads its variable when its runtime starts
    assert tf["ok"] and tf["memory_env"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true", tf
    log.unlink()
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    mine = asyncio.run(probe("keras-jax"))
    assert "jax.gpu_client_start preallocate=true" in calls(log)
    assert mine["memory_env"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"


# -- one environment per framework -----------------------------------------------------------------------
def test_framework_environments_are_used_without_a_python_flag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BENCHTUI_ENVS", str(tmp_path))
    plan = Plan()
    assert plan.python_for("tensorflow") == sys.executable
    python = tmp_path / "tensorflow" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    assert plan.python_for("tensorflow") == str(python)
    assert plan.python_for("torch") == sys.executable
    plan.python["tensorflow"] = "/elsewhere/python"
    assert plan.python_for("tensorflow") == "/elsewhere/python"  # --python still wins


def test_envs_create_prints_the_gpu_installs(tmp_path: Path) -> None:
    env = {**os.environ, "BENCHTUI_ENVS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "benchtui", "envs", "create", "--gpu", "--dry-run", "tensorflow", "keras-jax"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "tensorflow[and-cuda]>=2.16" in out.stdout and "jax[cuda13]>=0.7.2" in out.stdout
    assert out.stdout.count("keras-hub>=0.20") == 2  # the ViTs and GPT-2 in each Keras environment
    assert str(tmp_path / "tensorflow") in out.stdout and not (tmp_path / "tensorflow").exists()
    bad = subprocess.run(
        [sys.executable, "-m", "benchtui", "envs", "create", "mxnet"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown framework 'mxnet'" in bad.stderr


@pytest.mark.slow
def test_doctor_on_a_gpu_machine_says_which_framework_sees_it_and_the_fix(
    fake_gpu,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchtui.commands.setup import cmd_doctor
    from benchtui.core.running import doctor

    fake_gpu("torch")  # PyTorch sees the GPU; TensorFlow and JAX here are the CPU builds
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(doctor, "list_gpus", lambda: list_gpus(nvml=FakeNVML()))
    assert cmd_doctor() == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "sees it" in rows["torch"] and "sees it" in rows["keras-torch"]
    assert "no GPU" in rows["tensorflow"] and "no GPU" in rows["keras-jax"]
    assert "✗ tf.keras sees no GPU" in out and "benchtui envs create --gpu tensorflow" in out
    assert "✗ Keras/JAX sees no GPU" in out and "benchtui envs create --gpu keras-jax" in out
    assert "GPU 0: Fake H200, driver 560.1, 00000000:01:00.0" in out
