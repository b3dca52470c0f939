"""The GPU acceptance script on the CPU at tiny sizes: the budgeted check (what a lent GPU runs
first) and the full protocol, every step it will run on a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_acceptance  # noqa: E402

FULL_STEPS = [
    "doctor",
    "study protocol, study batch",
    "study protocol, largest batch",
    "fp32",
    "tf32",
    "amp-bf16",
    "compile (fp32)",
    "harness overhead",
]  # on a GPU also the modern preset and --profile, and with several GPUs the scaling session


def acceptance(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "benchmarks/gpu_acceptance.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def without_jax(tmp_path: Path) -> dict[str, str]:
    """The runners' environment of a machine without JAX: a ``jax`` that fails to import, first on
    the runners' path (BENCHTUI_RUNNER_PYTHONPATH, as on a GPU machine that lacks a package)."""
    import os

    shim = tmp_path / "nojax" / "jax"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'jax\'", name="jax")\n')
    extra = [
        str(shim.parent),
        *filter(None, os.environ.get("BENCHTUI_RUNNER_PYTHONPATH", "").split(os.pathsep)),
    ]
    return {**os.environ, "BENCHTUI_RUNNER_PYTHONPATH": os.pathsep.join(extra)}


@pytest.mark.slow
def test_budgeted_check_skips_a_missing_framework_and_stops_within_its_budget(tmp_path: Path) -> None:
    out = tmp_path / "quick"
    budget = 120
    started = time.monotonic()
    proc = acceptance(
        [
            "--device",
            "cpu",
            "--small",
            "--budget",
            str(budget),
            "--frameworks",
            "torch,keras-jax",
            "--out",
            str(out),
        ],
        env=without_jax(tmp_path),
    )
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Within its budget, by its own report and by the clock (the interpreter's start and exit aside).
    result = json.loads((out / "acceptance-cpu.json").read_text())
    assert result["elapsed_s"] <= budget - 5
    assert wall <= budget + 10
    # The missing framework: said once with its reason, left out of every step, never a failure.
    assert "No module named 'jax'" in result["missing"]["keras-jax"]
    steps = {s["key"]: s for s in result["steps"]}
    wanted = {s.key: s.frameworks for s in gpu_acceptance.quick_steps("cpu", True, ["torch", "keras-jax"])}
    assert list(steps) == list(wanted)
    assert steps["overhead-keras"]["status"] == "skipped"
    assert "No module named 'jax'" in steps["overhead-keras"]["reason"]
    ran = [s for s in result["steps"] if s.get("rows")]
    assert ran, result["steps"]
    for step in ran:
        assert ("keras-jax" in step["skipped_frameworks"]) == ("keras-jax" in wanted[step["key"]])
        assert {r["framework"] for r in step["rows"]} == {"torch"}
        assert step["status"] in ("ok", "stopped (budget)")
        assert "--frameworks torch " in step["command"]
    assert steps["doctor"]["status"] == "ok" and any(
        "keras-jax" in line for line in steps["doctor"]["output"]
    )
    # The budget: the steps that did not fit were not started, and say so.
    late = [s for s in result["steps"] if s["status"] == "not started"]
    assert late and all("the budget" in s["reason"] for s in late)
    assert all(s["status"] != "failed" for s in result["steps"])
    # One markdown, one json, one archive of the sessions (nothing else left unpacked).
    md = (out / "acceptance-cpu.md").read_text()
    assert "keras-jax cannot run here: " in md and "not started" in md and f"of a {budget} s budget" in md
    for step in ran:  # which steps fit depends on the machine: each that ran is there with its command
        assert f"## {step['label']}" in md and step["command"] in md and f"--name {step['key']} " in md
    with tarfile.open(out / "sessions.tar.gz") as tar:
        names = tar.getnames()
    for step in ran:
        assert f"sessions/{step['session']}/summary.json" in names
    assert sorted(p.name for p in out.iterdir()) == [
        "acceptance-cpu.json",
        "acceptance-cpu.md",
        "sessions.tar.gz",
    ]


@pytest.mark.slow
def test_a_step_at_the_budget_is_stopped_and_keeps_its_session(tmp_path: Path) -> None:
    """The step running when the budget ends gets Ctrl+C: its session ends 'interrupted' with what it
    finished, within the grace period, and nothing of it is left running."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    plan = ["run", "--headless", "--sessions-dir", str(sessions), "--frameworks", "torch"]
    plan += ["--models", "resnet50_v1_5", "--device", "cpu", "--image-size", "32", "--samples", "32"]
    plan += ["--batch-size", "8", "--epochs", "1000", "--runs", "2", "--threads", "1"]
    started = time.monotonic()
    code, _, _, stopped = gpu_acceptance.run_bounded(
        gpu_acceptance.benchtui_cmd(plan), 20, gpu_acceptance.child_env()
    )
    assert stopped and code == 130
    assert time.monotonic() - started <= 20 + gpu_acceptance.STOP_GRACE_S
    (folder,) = list(sessions.iterdir())
    meta = json.loads((folder / "session.json").read_text())
    assert meta["status"] == "interrupted"
    runner_pids = [
        json.loads(line)["pid"]
        for line in (folder / "events.jsonl").read_text().splitlines()
        if '"run_start"' in line
    ]
    assert runner_pids
    time.sleep(1)
    for pid in runner_pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_budget_and_arguments_are_checked() -> None:
    for args in (
        ["--budget", "10"],
        ["--frameworks", "torch,torch"],
        ["--frameworks", "caffe"],
        ["--steps", "nope", "--budget", "60"],
    ):
        proc = acceptance(args, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_a_step_starts_only_when_its_usual_duration_fits() -> None:
    clock = gpu_acceptance.Clock(time.monotonic(), gpu_acceptance.RESERVE_S + 30)
    step = gpu_acceptance.Step("x", "x", ["torch"], ["--models", "resnet50"], estimate_s=60)
    result = gpu_acceptance.run_step(step, clock, Path("/nonexistent"), {}, {})
    assert result["status"] == "not started" and "about 60 s needed" in result["reason"]
    missing = gpu_acceptance.run_step(
        step, clock, Path("/nonexistent"), {"torch": "No module named 'torch'"}, {}
    )
    assert missing["status"] == "skipped" and "No module named 'torch'" in missing["reason"]
    gpt = gpu_acceptance.Step("g", "g", ["torch", "keras-jax"], [], estimate_s=1, model="gpt2")
    both = gpu_acceptance.run_step(
        gpt,
        clock,
        Path("/nonexistent"),
        {},
        {
            ("gpt2", "torch"): "No module named 'transformers'",
            ("gpt2", "keras-jax"): "No module named 'keras_hub'",
        },
    )
    assert both["status"] == "skipped" and "transformers" in both["reason"] and "keras_hub" in both["reason"]


def test_memory_and_gpu_conditions_from_the_samples(tmp_path: Path) -> None:
    """NVML's figure for a run: its process's memory, or where NVML hides pids the card's memory
    above its level between runs; the SM clock range and the throttle reasons' shares."""
    from types import SimpleNamespace

    def sample(
        run: str | None, used: int, proc: int | None, clock: int, throttle: list[str]
    ) -> dict[str, object]:
        gpu = {"mem_used": used, "proc_mem": proc, "other_procs": 0, "sm_clock_mhz": clock}
        return {
            "type": "gpu",
            "run": run,
            "gpus": [{**gpu, "power_w": 300.0, "temp_c": 50, "throttle": throttle}],
        }

    run = SimpleNamespace(
        status="ok", spec=SimpleNamespace(run_id="r1"), peak_bytes=4 << 30, memory_source="counter"
    )
    events = [sample(None, 1 << 30, None, 345, ["gpu_idle"])]
    events += [sample("r1", 6 << 30, None, 1980, []), sample("r1", 7 << 30, None, 1755, ["sw_power_cap"])]
    loaded = SimpleNamespace(events=events, model=SimpleNamespace(runs={"r1": run}))
    (mem,) = gpu_acceptance.memory_check(loaded)
    assert mem["nvml_bytes"] == 6 << 30 and "above its level between runs" in mem["nvml_source"]
    assert mem["nvml_over_counter"] == 1.5
    gpu = gpu_acceptance.gpu_conditions(loaded)
    assert gpu["sm_clock_mhz"] == [1755, 1867.5, 1980] and gpu["throttle_share"] == {"sw_power_cap": 0.5}
    # With the runner's own process memory, that is the figure.
    events[1]["gpus"][0]["proc_mem"] = 5 << 30  # type: ignore[index]
    (mem,) = gpu_acceptance.memory_check(loaded)
    assert mem["nvml_bytes"] == 5 << 30 and mem["nvml_source"] == "NVML, the runner's process"


@pytest.mark.slow
def test_full_protocol_runs_every_step_and_writes_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "acceptance"
    proc = acceptance(["--device", "cpu", "--small", "--out", str(out), "--keep-sessions"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "acceptance-cpu.json").read_text())
    assert [s["label"] for s in result["steps"]] == FULL_STEPS
    for step in result["steps"]:
        assert step["status"] == "ok", step
        if not step.get("session"):
            continue
        # Small sizes: both frameworks in the batch search and in fp32, PyTorch alone elsewhere.
        both = step["key"] in ("study-auto", "fp32")
        assert {r["framework"] for r in step["rows"]} == ({"torch", "keras-jax"} if both else {"torch"})
        assert all(r["status"] == "ok" and r["device_kind"] == "cpu" for r in step["rows"]), step["rows"]
        assert step["placement"]["kind"] == "cpu" and not step["refused"]
        assert bool(step["ratios"]) == both  # one framework: nothing to compare
        assert (out / "sessions" / step["session"] / "summary.json").is_file()
    steps = {s["key"]: s for s in result["steps"]}
    assert {r["batch_size"] for r in steps["study-auto"]["rows"]} == {16}  # the largest batch allowed
    assert any("doctor" in line for line in steps["doctor"]["output"])
    assert any("harness overhead" in line for line in steps["overhead"]["output"])
    md = (out / "acceptance-cpu.md").read_text()
    for heading in (f"## {label}" for label in FULL_STEPS):
        assert heading in md
    assert "## Commands" in md
    assert "benchtui run --headless" in md and "--batch-size auto" in md and "--compile" in md
    assert "--name study " in md  # commands a person can paste


def test_generation_runs_on_a_gpu_only_at_batch_1_and_8() -> None:
    """Issue 34: GPT-2 small generating 128 tokens after a 128-token prompt, PyTorch against Keras/JAX, at
    batch 1 and 8, in both the budgeted check and the full protocol; never on a CPU (the runners' own tests
    generate there with a tiny GPT)."""
    pair = ["torch", "keras-jax"]
    for steps in (
        gpu_acceptance.quick_steps("cuda", False, pair),
        gpu_acceptance.full_steps("cuda", False, pair, 1),
    ):
        made = {s.key: s for s in steps if s.key.startswith("generate")}
        assert sorted(made) == ["generate-b1", "generate-b8"]
        for batch, step in (("1", made["generate-b1"]), ("8", made["generate-b8"])):
            plan = " ".join(step.plan)
            assert "--models gpt2 " in plan and "--task generate --prompt-len 128 --new-tokens 128" in plan
            assert f"--batch-size {batch} " in plan and step.frameworks == pair and step.model == "gpt2"
    for device, small in (("cpu", True), ("cpu", False), ("cuda", True)):
        assert not [
            s for s in gpu_acceptance.quick_steps(device, small, pair) if s.key.startswith("generate")
        ]
        assert not [
            s for s in gpu_acceptance.full_steps(device, small, pair, 1) if s.key.startswith("generate")
        ]
    row = {
        "framework": "torch",
        "generation": {
            "sequences": 8,
            "prompt_len": 128,
            "new_tokens": 128,
            "batch_tokens_per_s": 1234.5,
            "tokens_per_s": 154.3,
            "first_token_s": 0.0123,
            "first_token_p99_s": 0.015,
            "token_s": 0.0065,
            "token_p99_s": 0.007,
            "per_token": False,
            "compile_s": 12.3,
            "cache_bytes_per_token": 73728,
            "tokens": 128,
            "decode_steps": 128,
        },
    }
    assert gpu_acceptance.generation_line(row) == (
        "- torch, generation (batch 8, prompt 128, 128 new): 1234.5 tokens/s after the first token for the batch "
        "(154.3 per sequence); time to first token 12.30 ms (p99 15.00 ms); a later token 6.50 ms (p99 7.00 ms, "
        "per step); compile 12.3 s; cache 72 KiB per token; 128 tokens and 128 decode steps counted per call"
    )
    assert gpu_acceptance.generation_line({"framework": "torch"}) == ""


def test_the_report_of_a_real_gpu_generate_step_says_what_was_not_counted_and_each_warning_once() -> None:
    """What the H200 run of 2026-11-26 (docs/gpu-acceptance/2026-11-26-h200-generate.json) made of its
    generate steps: Keras/JAX counts no decode steps under --timing window, which the report printed as
    "None decode steps", and the model's parity note (on both rows) came twice."""
    result = json.loads((ROOT / "docs" / "gpu-acceptance" / "2026-11-26-h200-generate.json").read_text())
    text = gpu_acceptance.markdown(result)
    assert "None" not in text
    assert "128 tokens and 128 decode steps counted per call" in text  # PyTorch counts both
    assert "128 tokens counted per call; decode steps not counted (--timing step counts them)" in text
    parity = "the frameworks do not generate the same way: prefill differs"
    assert text.count(f"- torch, keras-jax: GPT-2 small: {parity}") == 2  # once in each generate step
    assert text.count(parity) == 2


def test_a_python_without_the_parents_modules_gets_one_line_not_a_traceback() -> None:
    """The lent GPU machine lacked msgspec (2026-11-26): the check died in a traceback before its first step.
    ``-S``: no site-packages, as a Python without benchtui's dependencies."""
    out = subprocess.run(
        [sys.executable, "-S", "benchmarks/gpu_acceptance.py", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("gpu_acceptance: benchtui needs the module ")
    assert "benchmarks/fetch-gpu-wheels" in out.stderr
