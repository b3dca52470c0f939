"""The GPU acceptance run: everything the GPU path promises, measured in one command.

Whoever has an NVIDIA GPU runs it and commits what it wrote under docs/gpu-acceptance/:

    python benchmarks/gpu_acceptance.py --budget 420      # what fits in 7 minutes, most telling first
    python benchmarks/gpu_acceptance.py                   # the full protocol (about an hour)
    python benchmarks/gpu_acceptance.py --device cpu --small --budget 120   # the same steps, tiny (tests)

It runs from a checkout with no install (``PYTHONPATH=tui:runners``; the runners' extra packages
through ``BENCHTUI_RUNNER_PYTHONPATH``) on a machine whose Python already holds the frameworks. A
framework, or a model's package (transformers, keras-hub), that does not import in the runners'
environment is skipped with its reason in the report, never a failure of the whole check.

With ``--budget SECONDS`` (the quick check) the steps run in the order of what they prove, each a
real ``benchtui`` command in a fresh process, and a step starts only when its usual duration fits
in what is left; the one that is running when the budget ends is stopped (Ctrl+C: the session keeps
its finished runs, marked interrupted), and the report is written before the budget is out:

 1. ``benchtui doctor``: what each framework sees.
 2. ResNet50 v1.5 at 224 px, PyTorch against Keras/JAX, fp32, 2 runs: the first answer.
 3. The same at amp-bf16 (how people train on such a GPU).
 4. GPT-2 small, one training step size at a short sequence (the transformer path).
 5. Inference at batch 1: latency p50/p99.
 6. ``--compile``: torch.compile against XLA.
 7. amp-fp16 on PyTorch (its GradScaler waits for the GPU every step) against its amp-bf16.
 8. ``--batch-size auto`` for PyTorch (probes in fresh processes, OOM recovered from).
 9. ``--profile`` once: where each framework's step goes.
10. Harness overhead: the PyTorch runner against a bare loop, Keras/JAX's against a plain
    ``model.fit`` (benchmarks/overhead.py).
11. Generation (``--task generate``, on a GPU only): GPT-2 small, a 128-token prompt and 128 new tokens,
    at batch 1 and batch 8: transformers' generate (static cache) against keras-hub's (XLA), tokens per
    second after the first token and the time to the first token.

Every session step also gives: NVML's memory of the runner's process against the framework's own
peak counter (or, where NVML hides pids, the card's memory above its idle level), joules per image,
and the GPU's SM clock, power, temperature and throttle reasons during the runs.

It writes ``<out>/acceptance-<device>.md`` (the figures and the exact commands),
``<out>/acceptance-<device>.json`` (every figure) and ``<out>/sessions.tar.gz`` (every session it
made; ``--keep-sessions`` also leaves them unpacked in ``<out>/sessions/``).
Exit code: 0 when every step that ran succeeded (steps left out for the budget or for a missing
framework are said, not failed), 1 otherwise, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners")]

# A lent GPU machine may lack a wheel the parent needs (msgspec, on 2026-11-26): one line, not a traceback.
try:
    from benchtui.core.store.session import load_session
except ModuleNotFoundError as exc:
    sys.exit(
        f"gpu_acceptance: benchtui needs the module {exc.name}, which this Python lacks: carry its wheel "
        "(benchmarks/fetch-gpu-wheels puts every one the lent GPU machine lacks into .gpu/whl)"
    )

#: What a framework's runner imports, and what each model family adds (checked in the runners' environment).
FRAMEWORK_MODULES = {
    "torch": ["torch", "torchvision"],
    "keras-jax": ["jax", "keras"],
    "tensorflow": ["tensorflow", "keras"],
    "keras-torch": ["torch", "keras"],
}
MODEL_MODULES = {"gpt2": {"torch": ["transformers"], "keras": ["keras_hub"]}}
#: Seconds kept back at the end for stopping a step and writing the report.
RESERVE_S = 25.0
#: Seconds a step stopped at the budget gets to end its session before it is killed.
STOP_GRACE_S = 15.0


@dataclass
class Step:
    """One step of the check: a headless session (``plan``), or another command (``command``)."""

    key: str
    label: str
    frameworks: list[str]
    plan: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)  # not a session: the doctor's or overhead.py's arguments
    estimate_s: float = 0.0  # its usual duration here (the budget starts a step only when this fits)
    model: str = ""  # whose packages the step needs beyond the frameworks'
    note: str = ""


# -- the steps -----------------------------------------------------------------------------------
def quick_steps(device: str, small: bool, pair: list[str]) -> list[Step]:
    """The budgeted check, in the order of what it proves. ``pair``: PyTorch and the Keras side."""
    torch_only = [f for f in pair if f == "torch"]
    if small:  # a CPU, tiny: the test suite (two workers share two cores, oversubscribed pools crawl)
        image, samples, batch, runs, extra = "32", "32", "8", "1", ["--threads", "1"]
        seq, tok_batch, tok_samples, gpt, infer_samples = "16", "4", "8", "gpt2_mini", "16"
        est = {"doctor": 20, "fp32": 60, "amp-bf16": 25, "gpt2": 60, "infer": 60, "compile": 90}
        est |= {"fp16": 25, "auto": 60, "profile": 70, "overhead-torch": 40, "overhead-keras": 60}
    else:
        image, samples, batch, runs, extra = "224", "2048", "64", "2", []
        seq, tok_batch, tok_samples, gpt, infer_samples = "128", "8", "512", "gpt2", "256"
        # Seconds on one H200 (docs/gpu-acceptance/): a PyTorch run of these takes about 15 s, a
        # Keras/JAX run about 35 s (import, XLA compile and autotuning in its first epoch).
        est = {"doctor": 15, "fp32": 110, "amp-bf16": 100, "gpt2": 60, "infer": 50, "compile": 110}
        est |= {"fp16": 25, "auto": 75, "profile": 80, "overhead-torch": 40, "overhead-keras": 75}
    resnet = ["--models", "resnet50_v1_5", "--device", device, "--image-size", image, *extra]
    train = [*resnet, "--samples", samples, "--epochs", "3", "--runs", runs, "--batch-size", batch]
    one = [*resnet, "--samples", samples, "--epochs", "3", "--runs", "1", "--batch-size", batch]
    overhead = ["--device", device, "--model", "resnet50_v1_5", "--image-size", image]
    overhead += ["--batch-size", batch, "--pairs", "1"]
    overhead += (
        ["--steps", "4", "--epochs", "2", "--threads", "1"] if small else ["--steps", "30", "--epochs", "3"]
    )
    keras_side = [f for f in pair if f != "torch"]
    steps = [
        Step(
            "doctor",
            "doctor",
            [],
            command=["doctor", *([] if small else ["--fresh"])],
            estimate_s=est["doctor"],
        ),
        Step("fp32", "ResNet50 v1.5, fp32", pair, [*train, "--precision", "fp32"], estimate_s=est["fp32"]),
        Step(
            "amp-bf16",
            "ResNet50 v1.5, amp-bf16",
            pair,
            [*train, "--precision", "amp-bf16"],
            estimate_s=est["amp-bf16"],
        ),
        Step(
            "gpt2",
            f"{'GPT-2 mini' if small else 'GPT-2 small'}, {seq} tokens",
            pair,
            ["--models", gpt, "--device", device, "--seq-len", seq, "--batch-size", tok_batch]
            + ["--samples", tok_samples, "--epochs", "2", "--runs", "1", "--precision", "amp-bf16", *extra],
            estimate_s=est["gpt2"],
            model="gpt2",
        ),
        Step(
            "infer",
            "ResNet50 v1.5, inference at batch 1",
            pair,
            [*resnet, "--task", "inference", "--batch-size", "1", "--samples", infer_samples]
            + ["--epochs", "2", "--runs", "1"],
            estimate_s=est["infer"],
        ),
        Step(
            "compile",
            "ResNet50 v1.5, --compile (fp32)",
            pair,
            [*one, "--precision", "fp32", "--compile"],
            estimate_s=est["compile"],
        ),
        Step(
            "fp16",
            "ResNet50 v1.5, amp-fp16 (PyTorch's GradScaler)",
            torch_only,
            [*one, "--precision", "amp-fp16"],
            estimate_s=est["fp16"],
            note="set beside PyTorch's amp-bf16 row: the same tensor-core speed, plus GradScaler's wait for the "
            "GPU at every step (found_inf read by .item()) and its unscale",
        ),
        Step(
            "auto",
            "ResNet50 v1.5, --batch-size auto (PyTorch)",
            torch_only,
            [*resnet, "--samples", samples, "--epochs", "2", "--runs", "1", "--batch-size", "auto"]
            + ["--max-batch-size", "16" if small else "128"],
            estimate_s=est["auto"],
        ),
        Step(
            "profile",
            "ResNet50 v1.5, --profile (fp32)",
            pair,
            [*one, "--precision", "fp32", "--profile"],
            estimate_s=est["profile"],
        ),
        Step(
            "overhead-torch",
            "harness overhead, PyTorch (against a bare loop)",
            torch_only,
            command=[*overhead, "--frameworks", "torch"],
            estimate_s=est["overhead-torch"],
        ),
        Step(
            "overhead-keras",
            "harness overhead, Keras (against a plain model.fit)",
            keras_side,
            command=[*overhead, "--frameworks", ",".join(keras_side)],
            estimate_s=est["overhead-keras"],
        ),
    ]
    return [*steps, *generate_steps(device, small, pair)]


#: Generation's sizes (issue 34): GPT-2 small, a 128-token prompt, 128 new tokens; batch 1 and a serving batch.
GENERATE_BATCHES = ("1", "8")


def generate_steps(device: str, small: bool, pair: list[str]) -> list[Step]:
    """Generation at batch 1 and batch 8, PyTorch against the Keras side: on a GPU only (on a CPU, and in
    the tests, the runners' own tests generate with a tiny GPT: tests/test_generate_runners.py).

    Each call generates 128 tokens, one at a time: about 1-2 s per step at batch 1 on an H100 (transformers'
    Python loop per token; keras-hub's XLA loop), so 8 steps per epoch, 2 epochs (the first holds each
    side's compile of its decode loop), 1 run."""
    if small or device != "cuda":
        return []
    common = ["--models", "gpt2", "--device", device, "--task", "generate", "--prompt-len", "128"]
    common += ["--new-tokens", "128", "--epochs", "2", "--runs", "1"]
    return [
        Step(
            f"generate-b{batch}",
            f"GPT-2 small, generation at batch {batch} (128-token prompt, 128 new tokens)",
            pair,
            [*common, "--batch-size", batch, "--samples", str(8 * int(batch))],
            estimate_s=150,
            model="gpt2",
        )
        for batch in GENERATE_BATCHES
    ]


def full_steps(device: str, small: bool, pair: list[str], gpus: int) -> list[Step]:
    """The whole protocol (about an hour on one GPU): the study's sizes, every setting, today's networks."""
    size = (
        {"image": 32, "samples": 32, "epochs": 2, "runs": 1, "batch": "8", "m_samples": 16, "m_epochs": 2}
        if small
        else {
            "image": 299,
            "samples": 10000,
            "epochs": 5,
            "runs": 3,
            "batch": "16",
            "m_samples": 2000,
            "m_epochs": 3,
        }
    )
    base = ["--models", "resnet50", "--device", device, "--image-size", str(size["image"])]
    if small:
        base += ["--threads", "1"]
    study = ["--preset", "study", *base, "--samples", str(size["samples"]), "--epochs", str(size["epochs"])]
    study += ["--runs", str(size["runs"])]
    matrix = [*base, "--samples", str(size["m_samples"]), "--epochs", str(size["m_epochs"]), "--runs", "1"]
    matrix += ["--batch-size", size["batch"]]
    # At small sizes (a CPU) the settings past fp32 run on PyTorch alone: Keras/JAX's part of each
    # would be its XLA compile again, minutes for nothing new.
    others = [f for f in pair if f == "torch"] if small else pair
    steps = [
        Step("doctor", "doctor", [], command=["doctor", *([] if small else ["--fresh"])]),
        Step("study", "study protocol, study batch", others, [*study, "--batch-size", size["batch"]]),
        Step(
            "study-auto",
            "study protocol, largest batch",
            pair,
            [*study, "--batch-size", "auto", *(["--max-batch-size", "16"] if small else [])],
        ),
        Step("fp32", "fp32", pair, [*matrix, "--precision", "fp32"]),
        Step("tf32", "tf32", others, [*matrix, "--precision", "tf32"]),
        Step("amp-bf16", "amp-bf16", others, [*matrix, "--precision", "amp-bf16"]),
        Step("compile", "compile (fp32)", others, [*matrix, "--precision", "fp32", "--compile"]),
    ]
    if not small:  # the tests train today's networks, tiny, in tests/test_workloads.py
        modern = ["--preset", "modern", "--device", device]
        steps += [
            Step("modern", "modern preset", pair, modern, model="gpt2"),
            Step(
                "modern-infer",
                "modern preset, inference at batch 1",
                pair,
                [*modern, "--task", "inference", "--batch-size", "1"],
                model="gpt2",
            ),
            Step("profile", "why (--profile, fp32)", pair, [*matrix, "--precision", "fp32", "--profile"]),
        ]
    if gpus >= 2:
        steps.append(
            Step(
                "scaling",
                f"data parallel, 1 to {gpus} GPUs",
                pair,
                [*matrix, "--devices", str(gpus), "--scaling"],
            )
        )
    overhead = ["--device", device]
    overhead += (
        [
            "--frameworks",
            "torch",
            "--image-size",
            "32",
            "--batch-size",
            "8",
            "--steps",
            "4",
            "--epochs",
            "2",
            "--pairs",
            "1",
        ]
        if small
        else [
            "--frameworks",
            ",".join(pair),
            "--image-size",
            "224",
            "--batch-size",
            "64",
            "--steps",
            "50",
            "--epochs",
            "4",
            "--pairs",
            "4",
        ]
    )
    steps.append(Step("overhead", "harness overhead", pair, command=overhead))
    return [*steps, *generate_steps(device, small, pair)]


# -- running a step within the budget ------------------------------------------------------------
@dataclass
class Clock:
    """The budget: when the check started and when it must have stopped its last step."""

    started: float
    budget: float | None

    def left(self) -> float:
        """Seconds a step may still use (the reserve for stopping and writing kept back)."""
        if self.budget is None:
            return float("inf")
        return self.started + self.budget - RESERVE_S - time.monotonic()


def run_bounded(
    cmd: list[str], limit: float, env: dict[str, str] | None = None
) -> tuple[int, str, str, bool]:
    """Run ``cmd`` for at most ``limit`` seconds: (exit code, stdout, stderr, stopped at the limit).

    At the limit its process group gets Ctrl+C (a benchtui session stops its runner and keeps
    what it recorded, marked interrupted), then SIGKILL after a grace period.
    """
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    stopped = False
    try:
        out, err = proc.communicate(timeout=None if limit == float("inf") else max(limit, 1.0))
    except subprocess.TimeoutExpired:
        stopped = True
        _signal_group(proc, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            out, err = proc.communicate()
    return proc.returncode, out or "", err or "", stopped


def _signal_group(proc: subprocess.Popen[str], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def benchtui_cmd(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "benchtui", *args]


def child_env() -> dict[str, str]:
    """The check's own environment for its commands, with the checkout importable without an install."""
    env = {**os.environ, "COLUMNS": "160"}  # Rich tables as wide as a terminal would show them
    path = [str(ROOT / "tui"), str(ROOT / "runners")]
    env["PYTHONPATH"] = os.pathsep.join([*path, *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def runner_env() -> dict[str, str]:
    """What a runner process gets: the runner package and BENCHTUI_RUNNER_PYTHONPATH, nothing of the parent's."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    extra = os.environ.get("BENCHTUI_RUNNER_PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "runners"), *filter(None, extra.split(os.pathsep))])
    env["CUDA_VISIBLE_DEVICES"] = ""  # importing is all this asks: no GPU memory taken
    return env


def start_imports(
    modules_by_key: dict[str, list[str]], backend: dict[str, str]
) -> Callable[[], dict[str, str]]:
    """Ask, at once and in the background, whether each key's modules import in the runners'
    environment; the function returned waits and gives, per key, why not ('' when they do)."""
    procs = {}
    for key, modules in modules_by_key.items():
        env = runner_env()
        if key in backend:
            env["KERAS_BACKEND"] = backend[key]
        code = "".join(f"import {m}\n" for m in modules)
        procs[key] = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    return lambda: _import_answers(procs)


def _import_answers(procs: dict[str, subprocess.Popen[str]]) -> dict[str, str]:
    out = {}
    for key, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out[key] = "its import did not finish within 300 s"
            continue
        lines = [line for line in err.strip().splitlines() if line.strip()]
        out[key] = (
            "" if proc.returncode == 0 else (lines[-1] if lines else f"import exited with {proc.returncode}")
        )
    return out


def availability(frameworks: list[str]) -> Callable[[], tuple[dict[str, str], dict[tuple[str, str], str]]]:
    """Why each framework, and each (model, framework) whose packages go further, cannot run ('' = it
    can): asked in the background; the function returned waits for the answers."""
    backends = {"keras-jax": "jax", "tensorflow": "tensorflow", "keras-torch": "torch"}
    wanted: dict[str, list[str]] = {fw: FRAMEWORK_MODULES[fw] for fw in frameworks}
    for model, per_side in MODEL_MODULES.items():
        for fw in frameworks:
            side = "torch" if fw == "torch" else "keras"
            wanted[f"{model}/{fw}"] = [*FRAMEWORK_MODULES[fw], *per_side[side]]
    answers = start_imports(
        wanted, {k: backends[k.split("/")[-1]] for k in wanted if k.split("/")[-1] in backends}
    )
    return lambda: _split(frameworks, answers())


def _split(frameworks: list[str], found: dict[str, str]) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    fw_reasons = {fw: found[fw] for fw in frameworks}
    model_reasons = {}
    for key, reason in found.items():
        if "/" in key:
            model, fw = key.split("/")
            model_reasons[(model, fw)] = reason
    return fw_reasons, model_reasons


def run_step(
    step: Step,
    clock: Clock,
    sessions: Path,
    fw_missing: dict[str, str],
    model_missing: dict[tuple[str, str], str],
) -> dict[str, Any]:
    """Run one step if it fits what is left of the budget; what it measured, or why it did not run."""
    out: dict[str, Any] = {"key": step.key, "label": step.label, "estimate_s": step.estimate_s}
    if step.note:
        out["note"] = step.note
    skipped = {fw: fw_missing[fw] for fw in step.frameworks if fw_missing.get(fw)}
    if step.model:
        skipped |= {
            fw: f"{step.model}: {r}"
            for fw in step.frameworks
            if (r := model_missing.get((step.model, fw))) and fw not in skipped
        }
    frameworks = [fw for fw in step.frameworks if fw not in skipped]
    out["skipped_frameworks"] = skipped
    if step.frameworks and not frameworks:
        out["status"] = "skipped"
        out["reason"] = "; ".join(f"{fw}: {why}" for fw, why in skipped.items()) or "no framework to run"
        return out
    left = clock.left()
    if step.estimate_s and left < step.estimate_s:
        out["status"] = "not started"
        out["reason"] = f"the budget: about {step.estimate_s:.0f} s needed, {max(left, 0):.0f} s left"
        return out
    if step.key == "doctor":
        return {**out, **_run_command("benchtui", benchtui_cmd(step.command), step.command, left)}
    if step.command:  # the harness overhead, on the frameworks that are here
        args = list(step.command)
        args[args.index("--frameworks") + 1] = ",".join(frameworks)
        script = [sys.executable, str(ROOT / "benchmarks" / "overhead.py")]
        return {**out, **_run_command("python benchmarks/overhead.py", [*script, *args], args, left)}
    return {**out, **_run_session(step, frameworks, sessions, left)}


def _ran(shown: str, args: list[str], code: int, started: float, stopped: bool) -> dict[str, Any]:
    """What every step that ran reports: its command as a person would type it, exit, time, status."""
    return {
        "command": f"{shown} {shlex.join(args)}",
        "exit": code,
        "seconds": round(time.monotonic() - started, 1),
        "status": "stopped (budget)" if stopped else ("ok" if code == 0 else "failed"),
    }


def _run_command(shown: str, cmd: list[str], args: list[str], limit: float) -> dict[str, Any]:
    """A command that is not a session (the doctor, the overhead script): its output is its figures."""
    started = time.monotonic()
    code, stdout, stderr, stopped = run_bounded(cmd, limit, child_env())
    lines = stdout.strip().splitlines()
    return {**_ran(shown, args, code, started, stopped), "output": lines or stderr.strip().splitlines()[-3:]}


def _run_session(step: Step, frameworks: list[str], sessions: Path, limit: float) -> dict[str, Any]:
    """One headless session; its rows, verdicts, memory and GPU figures."""
    before = set(sessions.iterdir())
    args = [
        "run",
        "--headless",
        "--sessions-dir",
        str(sessions),
        "--name",
        step.key,
        "--frameworks",
        ",".join(frameworks),
        *step.plan,
    ]
    started = time.monotonic()
    code, stdout, stderr, stopped = run_bounded(benchtui_cmd(args), limit, child_env())
    made = [p for p in sessions.iterdir() if p.is_dir() and p not in before]
    folder = max(made, key=lambda p: p.stat().st_mtime) if made else None
    out = {**_ran("benchtui", args, code, started, stopped), "session": folder.name if folder else None}
    if folder is None:
        lines = (stderr or stdout).strip().splitlines()
        out["error"] = lines[-1] if lines else f"exit {code}, no session"
        return out
    try:
        loaded = load_session(folder, keep_events=True)
    except Exception as exc:  # a session that cannot load is this step's failure, said
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["status"] = "failed"
        return out
    summary = loaded.model.summary()
    out["rows"] = [{k: row.get(k) for k in ROW_KEYS} for row in summary["rows"]]
    for row, full in zip(out["rows"], summary["rows"], strict=True):
        row["warnings"] = [
            w.get("message") if isinstance(w, dict) else str(w) for w in full.get("warnings") or []
        ]
        if full.get("generation"):  # a generate cell's figures (issue 34)
            row["generation"] = full["generation"]
    out["ratios"] = [r["text"] for r in summary["ratios"]]
    out["refused"] = [r["text"] for r in summary.get("refused_ratios") or []]
    out["how"] = {fw: (info.get("settings") or {}) for fw, info in (summary.get("frameworks") or {}).items()}
    out["placement"] = loaded.meta.get("placement")
    out["session_status"] = loaded.meta.get("status")
    out["memory"] = memory_check(loaded)
    out["gpu"] = gpu_conditions(loaded)
    if code != 0 and not stopped:
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        out["error"] = lines[-1] if lines else f"exit {code}"
    return out


ROW_KEYS = (
    "framework",
    "model",
    "batch_size",
    "status",
    "reason",
    "runs",
    "mean_epoch_s",
    "first_epoch_s",
    "mean_epoch_excl_first_s",
    "build_s",
    "images_per_s",
    "images_per_s_ci",
    "peak_memory_bytes",
    "memory_source",
    "joules_per_image",
    "device_kind",
    "achieved_tflops",
    "peak_fraction",
    "task",
    "tokens_per_s",
    "latency_p50_s",
    "latency_p99_s",
    "other_cpu_cores",
)


# -- what the sessions say beyond their tables -----------------------------------------------------
def _run_samples(loaded: Any) -> tuple[dict[str, list[dict[str, Any]]], list[int]]:
    """Per run, the NVML records of its GPU samples; and the card's memory in use while no run was on."""
    per_run: dict[str, list[dict[str, Any]]] = {}
    idle: list[int] = []
    for sample in loaded.events:
        if sample.get("type") != "gpu":
            continue
        run = sample.get("run")
        for gpu in sample.get("gpus") or []:
            if run:
                per_run.setdefault(run, []).append(gpu)
            elif isinstance(gpu.get("mem_used"), int):
                idle.append(gpu["mem_used"])
    return per_run, idle


def memory_check(loaded: Any) -> list[dict[str, Any]]:
    """Per run: the framework's peak counter against the most NVML saw the runner's process hold.

    Where NVML cannot match the runner's pid (a container that shows the host's pids), the card's
    memory in use above its level between runs stands in, when NVML saw no other process on it.
    """
    per_run, idle = _run_samples(loaded)
    floor = min(idle) if idle else None
    out = []
    for run in loaded.model.runs.values():
        if run.status != "ok":
            continue
        samples = per_run.get(run.spec.run_id, [])
        procs = [g["proc_mem"] for g in samples if isinstance(g.get("proc_mem"), int)]
        used = [g["mem_used"] for g in samples if isinstance(g.get("mem_used"), int)]
        others = any((g.get("other_procs") or 0) > 0 for g in samples)
        nvml, source = (max(procs), "NVML, the runner's process") if procs else (None, "")
        if nvml is None and used and floor is not None and not others:
            nvml, source = max(used) - floor, "NVML, the card's memory above its level between runs"
        out.append(
            {
                "run": run.spec.run_id,
                "framework_peak_bytes": run.peak_bytes,
                "counter": run.memory_source,
                "nvml_bytes": nvml,
                "nvml_source": source,
                "nvml_over_counter": (nvml / run.peak_bytes) if nvml and run.peak_bytes else None,
            }
        )
    return out


def gpu_conditions(loaded: Any) -> dict[str, Any]:
    """The GPU during the runs: SM clock, power, temperature, and the throttle reasons NVML gave."""
    per_run, _ = _run_samples(loaded)
    samples = [g for run in per_run.values() for g in run]
    clocks = [g["sm_clock_mhz"] for g in samples if isinstance(g.get("sm_clock_mhz"), (int, float))]
    power = [g["power_w"] for g in samples if isinstance(g.get("power_w"), (int, float))]
    temps = [g["temp_c"] for g in samples if isinstance(g.get("temp_c"), (int, float))]
    reasons: dict[str, int] = {}
    for g in samples:
        for name in g.get("throttle") or []:
            reasons[name] = reasons.get(name, 0) + 1
    return {
        "samples": len(samples),
        "sm_clock_mhz": [min(clocks), statistics.median(clocks), max(clocks)] if clocks else None,
        "power_w_max": max(power) if power else None,
        "temp_c_max": max(temps) if temps else None,
        "throttle_share": {k: round(v / len(samples), 3) for k, v in sorted(reasons.items())}
        if samples
        else {},
    }


# -- the report -----------------------------------------------------------------------------------
def gib(value: Any) -> str:
    return "–" if not isinstance(value, (int, float)) else f"{value / 2**30:.2f} GiB"


def num(value: Any, fmt: str = ".3f") -> str:
    return "–" if not isinstance(value, (int, float)) else format(value, fmt)


def _row_line(r: dict[str, Any]) -> str:
    p50, p99 = r.get("latency_p50_s"), r.get("latency_p99_s")
    inference = r.get("task") == "inference" and p50 is not None and p99 is not None
    latency = f"{p50 * 1e3:.2f} / {p99 * 1e3:.2f}" if inference else "–"
    peak = r.get("peak_fraction")
    tflops = num(r.get("achieved_tflops"), ".3g") + (
        f" ({peak:.0%})" if isinstance(peak, (int, float)) else ""
    )
    return (
        f"| {r['model']} | {r['framework']} | {r['batch_size']} | {r['status']} | {num(r['mean_epoch_s'])} | "
        f"{num(r['first_epoch_s'])} | {num(r['mean_epoch_excl_first_s'])} | {num(r['build_s'])} | "
        f"{num(r['images_per_s'], '.1f')} | {num(r.get('tokens_per_s'), '.0f')} | {latency} | {tflops} | "
        f"{gib(r['peak_memory_bytes'])} | {num(r['joules_per_image'])} |"
    )


def generation_line(row: dict[str, Any]) -> str:
    """A generate row's figures in one line (empty for other rows)."""
    g = row.get("generation")
    if not isinstance(g, dict):
        return ""

    def ms(value: Any) -> str:
        return "–" if not isinstance(value, (int, float)) else f"{value * 1e3:.2f} ms"

    cache = g.get("cache_bytes_per_token")
    cache_text = f"{cache / 1024:.0f} KiB" if isinstance(cache, (int, float)) else "–"
    return (
        f"- {row['framework']}, generation (batch {g.get('sequences')}, prompt {g.get('prompt_len')}, "
        f"{g.get('new_tokens')} new): {num(g.get('batch_tokens_per_s'), '.1f')} tokens/s after the first token "
        f"for the batch ({num(g.get('tokens_per_s'), '.1f')} per sequence); time to first token "
        f"{ms(g.get('first_token_s'))} (p99 {ms(g.get('first_token_p99_s'))}); a later token "
        f"{ms(g.get('token_s'))} (p99 {ms(g.get('token_p99_s'))}, {'per token' if g.get('per_token') else 'per step'}); "
        f"compile {num(g.get('compile_s'), '.1f')} s; cache {cache_text} per token; "
        f"{counted(g.get('tokens'), g.get('decode_steps'))}"
    )


def counted(tokens: Any, steps: Any) -> str:
    """What a runner counted per generate call: both, or which it did not count (a runner counts decode
    steps only where it can see them: keras-hub's loop runs inside one compiled call under --timing window)."""
    counts = [
        f"{n} {what}" for n, what in ((tokens, "tokens"), (steps, "decode steps")) if isinstance(n, int)
    ]
    missing = [what for n, what in ((tokens, "tokens"), (steps, "decode steps")) if not isinstance(n, int)]
    said = f"{' and '.join(counts)} counted per call" if counts else "nothing counted per call"
    return said + (
        f"; {' and '.join(missing)} not counted (--timing step counts them)" if counts and missing else ""
    )


def step_markdown(step: dict[str, Any]) -> list[str]:
    lines = [f"## {step['label']}", ""]
    if step.get("command"):
        lines += [f"`{step['command']}`", ""]
    said = f"**{step['status']}**"
    if step.get("seconds") is not None:
        said += f" in {step['seconds']} s (exit {step['exit']})"
    if step.get("reason"):
        said += f": {step['reason']}"
    if step.get("session"):
        said += f" · session `{step['session']}`"
    lines += [said, ""]
    for fw, why in (step.get("skipped_frameworks") or {}).items():
        lines += [f"- {fw} left out: {why}"]
    if step.get("skipped_frameworks"):
        lines.append("")
    if step.get("error"):
        lines += [f"error: {step['error']}", ""]
    if step.get("note"):
        lines += [step["note"][0].upper() + step["note"][1:] + ".", ""]
    if step.get("output"):
        return [*lines, "```", *step["output"], "```", ""]
    if not step.get("rows"):
        return lines
    lines += [
        "| model | framework | batch | status | mean epoch (s) | first (s) | excl. first (s) | build (s)"
        " | samples/s | tokens/s | latency p50 / p99 (ms) | TFLOP/s (% peak) | peak memory | J/sample |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row_line(r) for r in step["rows"]),
        "",
    ]
    lines += [f"- {t}" for t in step["ratios"] + step["refused"]]
    lines += [line for r in step["rows"] if (line := generation_line(r))]
    said: dict[str, list[str]] = {}  # a warning on several rows (a model's parity note) is said once
    for r in step["rows"]:
        for w in r.get("warnings") or []:
            said.setdefault(w, []).append(r["framework"])
    lines += [f"- {', '.join(dict.fromkeys(fws))}: {w}" for w, fws in said.items()]
    mem = [m for m in step.get("memory") or [] if m["nvml_bytes"]]
    if mem:
        lines += ["", "Memory, NVML against the framework's own peak counter:", ""]
        lines += [
            f"- {m['run']}: {m['nvml_source']} {gib(m['nvml_bytes'])}; {m['counter']}: "
            f"{gib(m['framework_peak_bytes'])} ({num(m['nvml_over_counter'], '.2f')}×)"
            for m in mem
        ]
    elif step.get("memory") is not None:
        lines += ["", "Memory: NVML gave no figure for the runners (no GPU, or other processes on the card)."]
    gpu = step.get("gpu") or {}
    if gpu.get("sm_clock_mhz"):
        lo, mid, hi = gpu["sm_clock_mhz"]
        throttle = ", ".join(f"{k} {v:.0%}" for k, v in gpu["throttle_share"].items()) or "none"
        lines += [
            "",
            f"GPU during the runs ({gpu['samples']} samples): SM clock {lo:.0f}–{hi:.0f} MHz (median {mid:.0f}), "
            f"power up to {num(gpu['power_w_max'], '.0f')} W, up to {num(gpu['temp_c_max'], '.0f')} °C; "
            f"throttle reasons (share of samples): {throttle}.",
        ]
    return [*lines, ""]


def cross_step_notes(steps: dict[str, dict[str, Any]]) -> list[str]:
    """Figures that need two steps: torch.compile against eager, amp-fp16 against amp-bf16 (PyTorch)."""

    def rate(key: str, fw: str) -> float | None:
        for r in steps.get(key, {}).get("rows") or []:
            if r["framework"] == fw and r["status"] == "ok":
                return r.get("images_per_s")
        return None

    out = []
    for fw in ("torch", "keras-jax", "tensorflow", "keras-torch"):
        eager, compiled = rate("fp32", fw), rate("compile", fw)
        if eager and compiled:
            out.append(
                f"- {fw}: --compile {compiled:.1f} img/s against the default's {eager:.1f} img/s (fp32): {compiled / eager:.2f}×"
            )
    fp16, bf16 = rate("fp16", "torch"), rate("amp-bf16", "torch")
    if fp16 and bf16:
        out.append(
            f"- PyTorch amp-fp16 (GradScaler) {fp16:.1f} img/s against amp-bf16 {bf16:.1f} img/s: {fp16 / bf16:.2f}× "
            "(one run against the bf16 step's runs; the same tensor-core rate, so the gap is mostly the scaler's "
            "per-step wait and unscale)"
        )
    return ["## Across steps (different sessions: no CI)", "", *out, ""] if out else []


def markdown(result: dict[str, Any]) -> str:
    budget = result.get("budget_s")
    ran = [s for s in result["steps"] if s.get("seconds") is not None]
    left_out = [s for s in result["steps"] if s["status"] in ("not started", "skipped")]
    lines = [
        f"# GPU acceptance run: {result['device_label']}",
        "",
        f"{result['date']} · {result['host']} · `--device {result['device']}`"
        + (" · small sizes (a check of the steps, not a measurement)" if result["small"] else ""),
        "",
        f"{len(ran)} of {len(result['steps'])} steps ran in {result['elapsed_s']:.0f} s"
        + (
            f" of a {budget:.0f} s budget (the report written {budget - result['elapsed_s']:.0f} s before its end)"
            if budget
            else ""
        )
        + (
            f"; left out: {', '.join(s['label'] + ' (' + s['status'] + ')' for s in left_out)}"
            if left_out
            else ""
        )
        + ".",
        "",
    ]
    if result.get("machine"):
        lines += ["```", *result["machine"], "```", ""]
    for fw, why in result["missing"].items():
        lines.append(f"- {fw} cannot run here: {why}")
    if result["missing"]:
        lines.append("")
    for step in result["steps"]:
        lines += step_markdown(step)
    lines += cross_step_notes({s["key"]: s for s in result["steps"]})
    lines += [
        "## Commands",
        "",
        "```",
        *(s["command"] for s in result["steps"] if s.get("command")),
        "```",
        "",
    ]
    return "\n".join(lines)


# -- the machine --------------------------------------------------------------------------------
def nvidia_smi(*args: str) -> list[str]:
    try:
        listed = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return listed.stdout.strip().splitlines() if listed.returncode == 0 else []


def archive(folders: list[Path], target: Path) -> None:
    """The sessions this check made, in one archive that unpacks into sessions/."""
    with tarfile.open(target, "w:gz") as tar:
        for folder in folders:
            tar.add(folder, arcname=f"sessions/{folder.name}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cuda (default) or cpu")
    p.add_argument("--small", action="store_true", help="tiny sizes: checks every step in minutes")
    p.add_argument(
        "--budget", type=float, metavar="SECONDS", help="the quick check: stop cleanly within SECONDS"
    )
    p.add_argument(
        "--frameworks", default="torch,keras-jax", help="PyTorch and the Keras side it is compared with"
    )
    p.add_argument("--steps", help="only these steps, by key (see --list)")
    p.add_argument("--list", action="store_true", help="the steps, and stop")
    p.add_argument(
        "--out", default=str(ROOT / "docs" / "gpu-acceptance"), help="where the report and archive go"
    )
    p.add_argument(
        "--keep-sessions", action="store_true", help="also leave the sessions unpacked in OUT/sessions"
    )
    args = p.parse_args(argv)
    pair = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    if args.budget is not None and args.budget < 2 * RESERVE_S:
        p.error(f"--budget must be at least {2 * RESERVE_S:.0f} seconds")
    if not pair or any(f not in FRAMEWORK_MODULES for f in pair) or len(set(pair)) != len(pair):
        p.error(f"--frameworks: names among {', '.join(FRAMEWORK_MODULES)}, each once")
    gpus = len([line for line in nvidia_smi("-L") if line.startswith("GPU ")]) if args.device == "cuda" else 0
    steps = (
        quick_steps(args.device, args.small, pair)
        if args.budget is not None
        else full_steps(args.device, args.small, pair, gpus)
    )
    if args.list:
        for s in steps:
            print(f"{s.key:16} {s.label}" + (f" (about {s.estimate_s:.0f} s)" if s.estimate_s else ""))
        return 0
    if args.steps:
        keys = [k.strip() for k in args.steps.split(",") if k.strip()]
        unknown = [k for k in keys if k not in {s.key for s in steps}]
        if unknown:
            p.error(f"--steps: unknown {', '.join(unknown)} (see --list)")
        steps = [s for s in steps if s.key in keys]
    clock = Clock(time.monotonic(), args.budget)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sessions = (
        out / "sessions"
    )  # what this check makes there is archived, then removed unless --keep-sessions
    sessions.mkdir(exist_ok=True)
    answers: Callable[[], tuple[dict[str, str], dict[tuple[str, str], str]]] | None = availability(pair)
    results: list[dict[str, Any]] = []
    fw_missing: dict[str, str] = {}
    model_missing: dict[tuple[str, str], str] = {}
    for step in steps:
        if step.key != "doctor" and answers is not None:
            fw_missing, model_missing = answers()
            answers = None
        result = run_step(step, clock, sessions, fw_missing, model_missing)
        results.append(result)
        print(
            f"{time.monotonic() - clock.started:6.0f} s  {step.label}: {result['status']}"
            + (f" ({result['reason']})" if result.get("reason") else ""),
            flush=True,
        )
    if answers is not None:  # only the doctor ran
        fw_missing, model_missing = answers()
    gpus_seen = [s["placement"]["gpu"]["name"] for s in results if (s.get("placement") or {}).get("gpu")]
    elapsed = time.monotonic() - clock.started
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": f"{platform.node()} ({platform.machine()}, Python {platform.python_version()})",
        "machine": nvidia_smi(
            "--query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm", "--format=csv"
        )
        if args.device == "cuda"
        else [],
        "device": args.device,
        "device_label": gpus_seen[0] if gpus_seen else args.device,
        "small": args.small,
        "budget_s": args.budget,
        "elapsed_s": round(elapsed, 1),
        "missing": {fw: why for fw, why in fw_missing.items() if why},
        "missing_models": {f"{m}/{fw}": why for (m, fw), why in model_missing.items() if why},
        "steps": results,
    }
    made = [sessions / r["session"] for r in results if r.get("session")]
    archive(made, out / "sessions.tar.gz")
    if not args.keep_sessions:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            sessions.rmdir()  # only when nothing else is in it
    (out / f"acceptance-{args.device}.json").write_text(json.dumps(result, indent=2, default=str))
    (out / f"acceptance-{args.device}.md").write_text(markdown(result))
    failed = [s["label"] for s in results if s["status"] == "failed"]
    print(
        f"{'some steps FAILED: ' + ', '.join(failed) if failed else 'every step that ran passed'}: "
        f"{out / f'acceptance-{args.device}.md'} ({elapsed:.0f} s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
