"""--task generate's plan (issue 34): --prompt-len and --new-tokens, their defaults per model, what the runner
gets (RunConfig), the timing it takes, how the plan is recorded, and what it refuses (one line, exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchtui.core.plan.plan import Plan, PlanError
from benchtui_runners import catalog
from support import benchtui

GENERATE = ["run", "--headless", "--task", "generate", "--frameworks", "torch", "--device", "cpu"]


def parse(*args: str) -> Plan:
    from benchtui.cli import build_parser
    from benchtui.commands.run import plan_from_args

    parser: argparse.ArgumentParser = build_parser()
    plan: Plan = plan_from_args(parser.parse_args(["run", *args]))
    return plan


@pytest.mark.parametrize(
    "args, message",
    [
        (
            [*GENERATE, "--models", "gpt2_mini", "--new-tokens", "0"],
            "--new-tokens must be at least 1, got 0",
        ),
        (
            [*GENERATE, "--models", "gpt2_mini", "--prompt-len", "200", "--new-tokens", "100"],
            "GPT-2 mini has a context of 256 tokens: a prompt of 200 and 100 new tokens (300) is a prompt "
            "longer than the context",
        ),
        (
            [*GENERATE, "--models", "resnet50"],
            "--task generate decodes tokens: ResNet50 takes images, not tokens",
        ),
        (
            ["run", "--headless", "--models", "gpt2_mini", "--prompt-len", "8"],
            "--prompt-len sets the sequences --task generate decodes: add --task generate",
        ),
        (
            [*GENERATE, "--models", "gpt2_mini", "--seq-len", "64"],
            "with --task generate the prompt length is --prompt-len",
        ),
        ([*GENERATE, "--models", "gpt2_mini", "--devices", "2"], "--task generate runs on one device"),
        ([*GENERATE, "--models", "gpt2_mini", "--profile"], "--task generate has no profile"),
        (
            [*GENERATE, "--models", "gpt2_mini", "--batch-size", "auto"],
            "with --task generate give the sequences per call (--batch-size N)",
        ),
        (
            [*GENERATE, "--models", "gpt2_mini", "--sweep", "devices=1,2"],
            "--task generate runs on one device: drop --sweep devices",
        ),
    ],
)
def test_what_generate_cannot_do_is_one_line_and_exit_2_with_nothing_started(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = benchtui(*args, "--sessions-dir", str(tmp_path), timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchtui: error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, no session written


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "generate", "--models", "gpt2", "--prompt-len", "0"], "--prompt-len must be at least 1"),
        (["--models", "gpt2", "--new-tokens", "4"], "--new-tokens sets the sequences --task generate"),
        (["--task", "generate", "--models", "gpt2", "--nodes", "2"], "drop --nodes"),
        (["--task", "generate", "--models", "gpt2", "--devices", "2", "--scaling"], "drop --scaling"),
        (
            ["--task", "generate", "--models", "gpt2", "--sweep", "seq-len=64,128"],
            "--sweep seq-len cannot go with --task generate",
        ),
        (["--task", "generate", "--models", "gpt2", "--sweep", "batch=auto,8"], "--sweep batch auto"),
        (["--task", "generate", "--models", "gpt2", "--best"], "--best searches each framework's largest"),
        (
            ["--task", "generate", "--models", "gpt2", "--prompt-len", "1000", "--new-tokens", "25"],
            "GPT-2 small has a context of 1,024 tokens: a prompt of 1,000 and 25 new tokens (1,025)",
        ),
        (
            ["--task", "generate", "--models", "gpt2_mini", "--prompt-len", "250"],
            None,  # the new tokens fill what the context leaves: 6
        ),
        (["--task", "generate", "--models", "gpt2", "--prompt-len", "1024"], "a prompt of 1,024 and 1 new"),
    ],
)
def test_refusals_read_as_the_command_line_reads_them(args: list[str], message: str | None) -> None:
    if message is None:
        assert parse(*args).generate_lengths("gpt2_mini") == (250, 6)
        return
    with pytest.raises(PlanError) as caught:
        parse(*args)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_defaults_are_128_and_128_where_the_context_holds_them_else_half_of_it_each() -> None:
    plan = Plan(task="generate", models=["gpt2", "gpt2_mini"], batch_sizes={"gpt2": 1, "gpt2_mini": 1})
    assert plan.validate().generate_lengths("gpt2") == (128, 128)
    assert plan.generate_lengths("gpt2_mini") == (128, 128)  # a context of 256 holds both
    name = "tiny_gpt_gen"
    catalog.register(
        {"name": name, "input": "tokens", "vocab": 50, "seq_len": 64, "builders": {"torch": "m:f"}}
    )
    try:
        assert catalog.MODELS[name].context == 64
        assert plan.generate_lengths(name) == (32, 32)  # P = N = context // 2
        assert Plan(task="generate", new_tokens=8).generate_lengths(name) == (56, 8)
        assert Plan(task="generate", prompt_len=60).generate_lengths(name) == (60, 4)
        assert Plan(task="generate", prompt_len=5, new_tokens=7).generate_lengths(name) == (5, 7)
    finally:
        catalog.MODELS.pop(name, None)
    assert Plan(task="inference").generate_lengths("gpt2") == (0, 0)


def test_the_runner_gets_the_lengths_and_generate_times_windows_unless_told() -> None:
    plan = parse("--task", "generate", "--models", "gpt2_mini", "--batch-size", "8", "--samples", "64")
    assert (plan.task, plan.timing, plan.prompt_len, plan.new_tokens) == ("generate", "window", 0, 0)
    config = plan.run_config("torch", "gpt2_mini", "r")
    assert (config.task, config.prompt_len, config.new_tokens, config.timing) == (
        "generate",
        128,
        128,
        "window",
    )
    assert config.batch_size == 8 and config.samples == 64  # sequences per call, sequences per epoch
    plan = parse(
        "--task",
        "generate",
        "--models",
        "gpt2",
        "--prompt-len",
        "32",
        "--new-tokens",
        "16",
        "--timing",
        "step",
    )
    config = plan.run_config("tensorflow", "gpt2", "r")
    assert (config.prompt_len, config.new_tokens, config.timing) == (32, 16, "step")
    # Another task: the runner's lengths stay 0, whatever it is.
    config = parse("--models", "gpt2", "--task", "inference").run_config("torch", "gpt2", "r")
    assert (config.prompt_len, config.new_tokens) == (0, 0)


def test_the_plan_records_the_lengths_only_when_it_generates() -> None:
    assert "prompt_len" not in Plan().to_dict() and "new_tokens" not in Plan().to_dict()
    plan = Plan(task="generate", models=["gpt2"], prompt_len=64, new_tokens=32)
    data = plan.to_dict()
    assert (data["prompt_len"], data["new_tokens"]) == (64, 32)
    again = Plan.from_dict(data)
    assert (again.task, again.prompt_len, again.new_tokens) == ("generate", 64, 32)
    # A hand edit is read, never trusted: anything else is the default.
    hostile = Plan.from_dict({**data, "prompt_len": "many", "new_tokens": -4})
    assert (hostile.prompt_len, hostile.new_tokens) == (0, 0)
    with pytest.raises(PlanError, match="--prompt-len must be a positive whole number"):
        Plan(task="generate", models=["gpt2"], prompt_len=-1).validate()


def test_the_cpu_estimate_counts_a_generated_sequence_s_tokens_and_window_timing_s_second_prefill() -> None:
    from benchtui.core.plan.estimate import sample_gflops

    step = Plan(task="generate", models=["gpt2"], prompt_len=128, new_tokens=128, timing="step")
    window = Plan(task="generate", models=["gpt2"], prompt_len=128, new_tokens=128, timing="window")
    forward = Plan(task="inference", models=["gpt2"], seq_len=256)
    assert sample_gflops(step, "gpt2") == pytest.approx(sample_gflops(forward, "gpt2"))  # 256 tokens, once
    assert sample_gflops(window, "gpt2") == pytest.approx(
        1.5 * sample_gflops(step, "gpt2")
    )  # + 128 prefilled


def test_a_long_generate_plan_on_a_cpu_is_told_a_small_generate_plan_not_the_training_preset() -> None:
    """The long-plan warning's advice for --task generate is a generate plan that a CPU finishes in minutes
    (the quick preset trains ResNet50, which answers another question); the advice itself is not long."""
    from benchtui.core.plan.estimate import QUICK_GENERATE, cpu_seconds, long_cpu_warning

    plan = Plan(frameworks=["torch", "keras-jax"], models=["gpt2_mini"], task="generate")
    warning = long_cpu_warning(plan, cores=2)
    assert QUICK_GENERATE in warning and "--preset quick" not in warning, warning
    small = parse("--task", "generate", "--frameworks", "torch,keras-jax", *QUICK_GENERATE.split())
    assert cpu_seconds(small, 2) < 180 and long_cpu_warning(small, cores=2) == ""
    training = Plan(frameworks=["torch", "tensorflow"], models=["gpt2_mini"])
    assert "--preset quick" in long_cpu_warning(training, cores=2)
