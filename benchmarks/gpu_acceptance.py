"""The GPU acceptance run: everything the GPU path promises, measured in one command.

Whoever first has an NVIDIA GPU runs it and commits what it wrote under docs/:

    python benchmarks/gpu_acceptance.py                  # the full protocol on the GPU (about an hour)
    python benchmarks/gpu_acceptance.py --device cpu --small   # the same steps, tiny, on a CPU (the test suite)

Steps, each a real ``benchtui`` command in a fresh process:

1. ``benchtui doctor``: what each framework sees, and the fix when one cannot see the GPU.
2. The study's protocol for ResNet50 on PyTorch and Keras/JAX (299 px, 10,000 samples,
   5 epochs, 3 runs) with the study's batch, then with ``--batch-size auto``.
3. The settings that change the answer: fp32, tf32, amp-bf16 and ``--compile`` (fp32).
4. Harness overhead: the PyTorch runner against a bare hand-written loop, Keras/JAX's against a
   plain model.fit (benchmarks/overhead.py).
5. Memory: the runner's GPU memory as NVML saw it against the framework's own peak counter.

It writes ``<out>/acceptance-<device>.md`` (the figures and the commands) and
``acceptance-<device>.json``, and copies every session folder it made to ``<out>/sessions/``.
Exit code: 0 when every step ran and every run succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners")]

from benchtui.core.store.session import load_session  # noqa: E402

FRAMEWORKS = "torch,keras-jax"
FULL = {
    "image": 299,
    "samples": 10000,
    "epochs": 5,
    "runs": 3,
    "batch": "16",
    "matrix_samples": 2000,
    "matrix_epochs": 3,
}
SMALL = {
    "image": 32,
    "samples": 32,
    "epochs": 2,
    "runs": 1,
    "batch": "8",
    "matrix_samples": 16,
    "matrix_epochs": 2,
}


def benchtui(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "benchtui", *args]
    env = {**os.environ, "COLUMNS": "160"}  # Rich tables as wide as a terminal would show them
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL, env=env
    )


def newest_session(root: Path, before: set[Path]) -> Path | None:
    made = [p for p in root.iterdir() if p.is_dir() and p not in before]
    return max(made, key=lambda p: p.stat().st_mtime) if made else None


def run_plan(label: str, plan: list[str], sessions: Path, timeout: float, log: list[str]) -> dict[str, Any]:
    """One headless session; its rows, ratios and memory figures."""
    before = set(sessions.iterdir())
    args = ["run", "--headless", "--sessions-dir", str(sessions), "--name", label, *plan]
    log.append("benchtui " + shlex.join(args))
    started = time.monotonic()
    proc = benchtui(args, timeout)
    folder = newest_session(sessions, before)
    out: dict[str, Any] = {
        "label": label,
        "command": "benchtui " + shlex.join(args),
        "exit": proc.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "session": folder.name if folder else None,
    }
    if folder is None:
        out["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        return out
    loaded = load_session(folder, keep_events=True)
    summary = loaded.model.summary()
    out["rows"] = [
        {
            k: row.get(k)
            for k in (
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
            )
        }
        for row in summary["rows"]
    ]
    out["ratios"] = [r["text"] for r in summary["ratios"]]
    out["refused"] = [r["text"] for r in summary.get("refused_ratios") or []]
    out["placement"] = loaded.meta.get("placement")
    out["memory"] = memory_check(loaded)
    return out


def memory_check(loaded: Any) -> list[dict[str, Any]]:
    """Per run: the framework's peak counter against the most NVML saw the runner's process hold."""
    seen: dict[str, int] = {}
    for sample in loaded.events:
        if sample.get("type") != "gpu":
            continue
        run = sample.get("run")
        for gpu in sample.get("gpus") or []:
            used = gpu.get("proc_mem")
            if run and isinstance(used, int):
                seen[run] = max(seen.get(run, 0), used)
    out = []
    for run in loaded.model.runs.values():
        if run.status != "ok":
            continue
        nvml = seen.get(run.spec.run_id)
        out.append(
            {
                "run": run.spec.run_id,
                "framework_peak_bytes": run.peak_bytes,
                "counter": run.memory_source,
                "nvml_process_bytes": nvml,
                "nvml_over_counter": (nvml / run.peak_bytes) if nvml and run.peak_bytes else None,
            }
        )
    return out


def overhead(device: str, small: bool, timeout: float, log: list[str]) -> dict[str, Any]:
    args = ["--device", device]
    args += (
        ["--frameworks", "torch", "--image-size", "32", "--batch-size", "8", "--steps", "4", "--epochs", "2"]
        + ["--pairs", "1"]
        if small
        else ["--frameworks", "torch,keras-jax", "--image-size", "224", "--batch-size", "64", "--steps", "50"]
        + ["--epochs", "4", "--pairs", "4"]
    )
    cmd = [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), *args]
    log.append("python benchmarks/overhead.py " + shlex.join(args))
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL
    )
    return {
        "exit": proc.returncode,
        "output": proc.stdout.strip().splitlines()[-4:] or proc.stderr.strip().splitlines()[-3:],
    }


def gib(value: Any) -> str:
    return "–" if not isinstance(value, (int, float)) else f"{value / 2**30:.2f} GiB"


def num(value: Any, fmt: str = ".3f") -> str:
    return "–" if not isinstance(value, (int, float)) else format(value, fmt)


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# GPU acceptance run: {result['device_label']}",
        "",
        f"{result['date']} · {result['host']} · `--device {result['device']}`"
        + (" · small sizes (a check of the steps, not a measurement)" if result["small"] else ""),
        "",
        "## Doctor",
        "",
        "```",
        *result["doctor"],
        "```",
        "",
    ]
    for step in result["sessions"]:
        lines += [
            f"## {step['label']}",
            "",
            f"`{step['command']}` (exit {step['exit']}, {step['seconds']} s,"
            f" session `{step.get('session')}`)",
            "",
        ]
        if step.get("error"):
            lines += [f"failed: {step['error']}", ""]
            continue
        lines += [
            "| model | framework | batch | status | mean epoch (s) | first (s) | excl. first (s) | build (s)"
            " | samples/s | tokens/s | latency p50 / p99 (ms) | peak memory | J/sample |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in step["rows"]:
            p50, p99 = r.get("latency_p50_s"), r.get("latency_p99_s")
            latency = f"{p50 * 1e3:.2f} / {p99 * 1e3:.2f}" if p50 is not None and p99 is not None else "–"
            lines.append(
                f"| {r['model']} | {r['framework']} | {r['batch_size']} | {r['status']} | {num(r['mean_epoch_s'])} | "
                f"{num(r['first_epoch_s'])} | {num(r['mean_epoch_excl_first_s'])} | {num(r['build_s'])} | "
                f"{num(r['images_per_s'], '.1f')} | {num(r.get('tokens_per_s'), '.0f')} | {latency} | "
                f"{gib(r['peak_memory_bytes'])} | {num(r['joules_per_image'])} |"
            )
        lines += [""] + [f"- {t}" for t in step["ratios"] + step["refused"]]
        mem = [m for m in step["memory"] if m["nvml_process_bytes"]]
        if mem:
            lines += ["", "Memory, NVML (the process) against the framework's counter:", ""]
            lines += [
                f"- {m['run']}: NVML {gib(m['nvml_process_bytes'])}, {m['counter']} {gib(m['framework_peak_bytes'])}"
                f" ({num(m['nvml_over_counter'], '.2f')}×)"
                for m in mem
            ]
        else:
            lines += [
                "",
                "Memory: NVML saw no per-process GPU memory (no GPU, or a container that hides pids).",
            ]
        lines.append("")
    lines += [
        "## Harness overhead",
        "",
        "```",
        *result["overhead"]["output"],
        "```",
        "",
        "## Commands",
        "",
        "```",
        *result["commands"],
        "```",
        "",
    ]
    return "\n".join(lines)


def gpu_count() -> int:
    """GPUs on this machine, as nvidia-smi lists them (0 without it)."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--small", action="store_true", help="tiny sizes: checks every step in minutes")
    p.add_argument(
        "--out", default=str(ROOT / "docs" / "gpu-acceptance"), help="where figures and sessions go"
    )
    p.add_argument("--timeout", type=float, default=6 * 3600, help="seconds allowed per step")
    args = p.parse_args(argv)
    size = SMALL if args.small else FULL
    out = Path(args.out)
    sessions = out / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    commands: list[str] = []
    # On a GPU every framework is asked afresh; the small check may use what the doctor kept.
    ask = ["doctor"] if args.small else ["doctor", "--fresh"]
    doctor = benchtui(ask, args.timeout)
    commands.append("benchtui " + " ".join(ask))
    base = ["--models", "resnet50", "--device", args.device, "--image-size", str(size["image"])]
    if args.small:  # the test suite: two workers share two cores, oversubscribed pools crawl
        base += ["--threads", "1"]
    # The study's scripts (the preset: Adam, sigmoid head, host data, loaders), on ResNet50.
    study = [
        "--preset",
        "study",
        *base,
        *("--samples", str(size["samples"]), "--epochs", str(size["epochs"]), "--runs", str(size["runs"])),
    ]
    matrix = [
        *base,
        *("--samples", str(size["matrix_samples"]), "--epochs", str(size["matrix_epochs"])),
        *("--runs", "1", "--batch-size", size["batch"]),
    ]
    # At small sizes (the test suite, on a CPU) the study's batch and the settings past fp32 are
    # checked on PyTorch alone: Keras/JAX's part of each would be its XLA compile again, minutes of
    # CI for nothing new (its study protocol runs in the batch-search step, its fp32 in "fp32").
    others = "torch" if args.small else FRAMEWORKS
    steps: list[tuple[str, list[str]]] = [
        ("study protocol, study batch", [*study, "--frameworks", others, "--batch-size", size["batch"]]),
        (
            "study protocol, largest batch",
            [*study, "--frameworks", FRAMEWORKS, "--batch-size", "auto"]
            + (["--max-batch-size", "16"] if args.small else []),
        ),
        ("fp32", [*matrix, "--frameworks", FRAMEWORKS, "--precision", "fp32"]),
        ("tf32", [*matrix, "--frameworks", others, "--precision", "tf32"]),
        ("amp-bf16", [*matrix, "--frameworks", others, "--precision", "amp-bf16"]),
        ("compile (fp32)", [*matrix, "--frameworks", others, "--precision", "fp32", "--compile"]),
    ]
    # Today's networks: the modern preset (EfficientNetB0, ConvNeXtTiny, ViT-B/16, GPT-2 small), for
    # training and for inference at batch 1 (latency). Not at small sizes: the test suite trains and
    # infers the same models, tiny, in tests/test_workloads.py.
    if not args.small:
        modern = ["--preset", "modern", "--frameworks", FRAMEWORKS, "--device", args.device]
        steps += [
            ("modern preset", modern),
            ("modern preset, inference at batch 1", [*modern, "--task", "inference", "--batch-size", "1"]),
        ]
    # Why: where each framework's step goes, from its own profiler (CUDA activity on the GPU), the
    # fp32 matrix again with --profile. Not at small sizes: tests/test_profile_runners.py profiles tiny runs.
    if not args.small:
        steps.append(
            (
                "why (--profile, fp32)",
                [*matrix, "--frameworks", FRAMEWORKS, "--precision", "fp32", "--profile"],
            )
        )
    # Several GPUs: the scaling session for ResNet50 (1, 2, 4 ... every GPU), each framework's own engine.
    count = gpu_count() if args.device == "cuda" and not args.small else 0
    if count >= 2:
        steps.append(
            (
                f"data parallel, 1 to {count} GPUs",
                [*matrix, "--frameworks", "torch,tensorflow,keras-jax", "--devices", str(count), "--scaling"],
            )
        )
    results = [run_plan(label, plan, sessions, args.timeout, commands) for label, plan in steps]
    over = overhead(args.device, args.small, args.timeout, commands)
    gpus = [r["placement"]["gpu"]["name"] for r in results if (r.get("placement") or {}).get("gpu")]
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": f"{platform.node()} ({platform.machine()}, Python {platform.python_version()})",
        "device": args.device,
        "device_label": gpus[0] if gpus else args.device,
        "small": args.small,
        "doctor": doctor.stdout.strip().splitlines(),
        "sessions": results,
        "overhead": over,
        "commands": commands,
    }
    (out / f"acceptance-{args.device}.json").write_text(json.dumps(result, indent=2, default=str))
    (out / f"acceptance-{args.device}.md").write_text(markdown(result))
    ok = doctor.returncode == 0 and over["exit"] == 0 and all(r["exit"] == 0 for r in results)
    print(f"{'all steps passed' if ok else 'some steps FAILED'}: {out / f'acceptance-{args.device}.md'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
