"""Each plan option is declared once (``core.plan.options.OPTIONS``): the parser, the plan's fields, the
limits, the runner's configuration and the plan screen's fields are read from that one table."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from benchtui.cli import build_parser
from benchtui.commands.run import plan_from_args
from benchtui.core.plan import options
from benchtui.core.plan.options import OPTIONS, Option
from benchtui.core.plan.plan import Plan, PlanError
from benchtui_runners.config import RunConfig

#: Plan fields no flag sets as it is: read by code of their own (--models, --batch-size, --devices,
#: --python, --model-*), or set by benchtui (a watch, the trace cap).
NOT_FLAGS = {
    "models",
    "batch_sizes",
    "batch_auto",
    "python",
    "devices",
    "device_ids",
    "trace_cap_mb",
    "custom_models",
    "watch",
    "sweep",
}
#: RunConfig fields that are not an option copied as it is: worked out per run by the plan
#: (``Plan.run_config``), by the resolved plan (where it runs, its threads), or by the engine (a probe).
WORKED_OUT = {
    "framework",
    "model",
    "run_id",
    "nodes",
    "batch_size",
    "replicas",
    "learning_rate",
    "trace_cap_mb",
    "model_def",
    "gpu",
    "gpus",
    "trace_path",
    "mode",
    "probe_steps",
}


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_plan_field_is_an_option_or_said_why_not() -> None:
    plan_fields = {f.name for f in dataclasses.fields(Plan)}
    declared = {o.field for o in OPTIONS if o.field}
    assert declared <= plan_fields, declared - plan_fields
    assert plan_fields - declared == NOT_FLAGS


def test_every_runner_field_comes_from_one_option_or_is_worked_out() -> None:
    config_fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(options.RUNNER_FIELDS) <= config_fields
    runner_defaults = {"node_rank", "rendezvous", "cluster", "rendezvous_id", "window_s", "seed", "momentum"}
    assert config_fields - set(options.RUNNER_FIELDS) - runner_defaults == WORKED_OUT


def test_the_run_parser_has_the_options_in_their_order_and_nothing_else() -> None:
    group = next(g for g in _run_parser()._action_groups if g.title == options.PLAN_GROUP_TITLE)
    flags = [a.option_strings[0] for a in group._group_actions]
    assert flags == [o.flag for o in OPTIONS]


def test_each_option_given_reaches_its_plan_field_and_the_runner() -> None:
    """A value given on the command line is the plan's, and the runner's where the option says so."""
    given = {
        "--image-size": ("64", 64),
        "--samples": ("64", 64),
        "--epochs": ("2", 2),
        "--num-classes": ("10", 10),
        "--seq-len": ("16", 16),
        "--precision": ("amp-bf16", "amp-bf16"),
        "--data": ("host", "host"),
        "--head": ("sigmoid", "sigmoid"),
        "--loader-workers": ("2", 2),
        "--threads": ("3", 3),
        "--memory-limit": ("4096", 4096),
    }
    argv = ["run", "--models", "resnet50", "--batch-size", "8"]
    for flag, (text, _) in given.items():
        argv += [flag, text]
    plan = plan_from_args(build_parser().parse_args(argv))
    config = plan.run_config("torch", "resnet50", "r")
    for flag, (_, value) in given.items():
        option = options.BY_FLAG[flag]
        assert getattr(plan, option.field) == value, flag
        if option.runner:
            assert getattr(config, option.field) == value, flag


def test_limits_and_choices_are_the_tables() -> None:
    assert options.LIMITS["--runs"] == ("runs", 1000)
    assert options.LIMITS["--memory-limit"] == ("memory_limit_mb", 2**24)
    for option in OPTIONS:
        if option.most is not None and option.field:
            plan = Plan(**{option.field: option.most + 1})
            with pytest.raises(PlanError, match=f"{option.flag} must be at most"):
                plan.validate()
        if option.choices:
            with pytest.raises(PlanError, match=f"{option.flag} must be .*, got 'nope'"):
                Plan(**{option.field: "nope"}).validate()


def test_the_plan_screen_labels_are_the_options() -> None:
    from benchtui.screens import plan as screen

    assert screen.CHOICES["timing"] == ("Timing", options.BY_FLAG["--timing"].choices)
    assert list(screen.NUMBERS) == [
        "image_size",
        "seq_len",
        "prompt_len",
        "new_tokens",
        "samples",
        "epochs",
        "runs",
        "threads",
    ]
    assert screen.user_message(PlanError("--num-classes must be a positive whole number, got 0")) == (
        "Classes must be a positive whole number, got 0"
    )


def test_the_shaping_flags_are_the_ones_that_say_what_a_plan_measures() -> None:
    keep = {"--preset", "--device", "--name", "--sessions-dir", "--interval", "--stall-timeout", "--threads"}
    keep |= {"--memory-limit", "--python", "--profile", "--profile-steps"}
    assert {o.flag for o in options.SHAPING} == {o.flag for o in OPTIONS} - keep


def test_an_option_is_one_declaration() -> None:
    """What a new option needs besides its Plan field and its runner code: one row, nothing else."""
    row = Option("--warmup-steps", "epochs", type=int, metavar="N", help="steps before timing", most=99)
    parser = argparse.ArgumentParser()
    row.add_to(parser.add_argument_group("g"))
    assert parser.parse_args(["--warmup-steps", "3"]).warmup_steps == 3
    assert row.name == "warmup_steps"


# -- the plan resolved for this machine: the engine reads it, and never changes the plan ----------------
def test_resolve_puts_the_runs_on_the_placement_with_the_measured_threads() -> None:
    from benchtui.core.plan.devices import place

    plan = Plan(frameworks=["torch", "tensorflow"], models=["resnet50"], device="cpu", devices=2)
    resolved = plan.resolve(place("cpu", [], 2, inherited=None), {"threads": 6})
    config, _ = resolved.run_config("tensorflow", "resnet50", "r", devices=2)
    assert (config.device, config.threads, config.replicas) == ("cpu", 6, 2)
    # PyTorch data parallel is one process per rank: the measured pool shared among them.
    assert resolved.run_config("torch", "resnet50", "r", devices=2)[0].threads == 3
    # --threads is the plan's; the plan itself is the same as before it was resolved.
    assert (
        Plan(threads=2, device="cpu")
        .resolve(place("cpu", [], inherited=None), {"threads": 6})
        .run_config("torch", "resnet50", "r")[0]
        .threads
        == 2
    )
    assert plan.threads == 0 and plan.batch_sizes == {}


def test_resolved_batch_sizes_are_a_copy_the_plan_never_sees() -> None:
    from benchtui.core.plan.devices import place

    plan = Plan(models=["resnet50"], batch_auto=True, batch_sizes={})
    resolved = plan.resolve(place("cpu", [], inherited=None), None, {"torch:resnet50": 8})
    assert resolved.run_config("torch", "resnet50", "r")[0].batch_size == 8
    assert resolved.plan.to_dict()["batch_sizes"]["torch:resnet50"] == 8
    assert plan.batch_sizes == {}


def test_the_engine_searching_batches_leaves_the_plan_as_given(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--batch-size auto: the chosen sizes are the resolved plan's (and the session's record), the runs'
    configurations take them, and the plan the engine was given is as it was."""
    import asyncio
    from pathlib import Path

    from benchtui.core.running.engine import Engine
    from benchtui.core.store.session import SessionFolder, SessionWriter

    plan = Plan.from_dict(
        {"frameworks": ["torch"], "models": ["resnet50"], "device": "cpu", "samples": 64, "batch_auto": True}
    ).validate()
    plan.batch_sizes = {}
    given = plan.to_dict()
    engine = Engine(plan, SessionWriter.create(plan, Path(str(tmp_path))))

    async def probe(framework: str, model: str, batch: int) -> str:
        return "ok" if batch <= 8 else "oom"

    monkeypatch.setattr(engine, "_probe", probe)
    monkeypatch.setattr("benchtui.core.running.engine.catalog.available", lambda fw, m: (True, ""))
    asyncio.run(engine._search_batches())
    assert plan.to_dict() == given  # the engine never changed it
    assert engine._config("torch", "resnet50", "r")[0].batch_size == 8
    assert engine.model.row("torch", "resnet50").batch_size == 8  # the summary's rows say the chosen size
    engine.writer.finish("complete", {})
    recorded = SessionFolder.open(engine.writer.path).read_plan()
    assert recorded.batch_sizes["resnet50"] == 8
