"""Plans: defaults are the study's, bad input is one clear line and exit 2, run order."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchtui.core.plan.plan import Plan, PlanError, from_preset, run_order
from benchtui_runners import catalog
from support import benchtui


def test_defaults_are_the_study_protocol_with_study_batch_sizes() -> None:
    plan = Plan()
    assert (plan.image_size, plan.samples, plan.epochs, plan.runs, plan.device) == (299, 10000, 5, 3, "auto")
    assert plan.models == catalog.STUDY_MODELS and plan.frameworks == ["torch", "tensorflow"]
    expected = {
        "densenet121": 12,
        "densenet169": 8,
        "inception_v3": 32,
        "inception_resnet_v2": 12,
        "resnet50": 16,
        "nasnet_large": 4,
        "pnasnet_large": 4,
    }
    assert {m: plan.batch_size(m) for m in plan.models} == expected


def test_interleaved_order_alternates_frameworks() -> None:
    plan = Plan(models=["resnet50"], runs=2, order="interleaved")
    assert [(s.framework, s.index) for s in run_order(plan)] == [
        ("torch", 1),
        ("tensorflow", 1),
        ("torch", 2),
        ("tensorflow", 2),
    ]
    plan.order = "grouped"
    assert [(s.framework, s.index) for s in run_order(plan)] == [
        ("torch", 1),
        ("torch", 2),
        ("tensorflow", 1),
        ("tensorflow", 2),
    ]
    assert len({s.run_id for s in run_order(Plan())}) == 7 * 2 * 3


@pytest.mark.parametrize(
    "change, message",
    [
        ({"frameworks": ["mxnet"]}, "unknown framework 'mxnet'"),
        ({"models": ["vgg"]}, "unknown model 'vgg'"),
        ({"samples": 0}, "--samples must be a positive"),
        ({"epochs": -1}, "--epochs must be a positive"),
        ({"samples": 4}, "larger than --samples 4"),
        ({"image_size": 40, "models": ["inception_v3"]}, "needs --image-size of at least 75"),
        ({"device": "gpu"}, "--device must be auto, cpu, cuda or cuda:N"),
        ({"data": "disk"}, "--data must be device or host"),
        ({"precision": "fp8"}, "--precision must be one of"),
        ({"order": "random"}, "--order must be"),
        ({"task": "serve"}, "--task must be one of train, inference"),
        ({"models": ["gpt2_mini"], "seq_len": 257}, "GPT-2 mini has a context of 256 tokens"),
        ({"models": ["vit_ti_16"], "image_size": 8}, "ViT-Ti/16 needs --image-size of at least 16"),
        ({"models": ["vit_ti_16"], "image_size": 72}, "a multiple of 16, got 72"),
    ],
)
def test_validation_messages(change: dict, message: str) -> None:
    plan = Plan(**{"models": ["resnet50"], **change})
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(".", r"\.")):
        plan.validate()


def test_model_groups_expand_in_place_without_repeats() -> None:
    from benchtui.core.plan.plan import models_named

    assert models_named(["study"]) == catalog.STUDY_MODELS
    assert models_named(["resnet50", "study"])[:2] == ["resnet50", "inception_v3"]
    assert models_named(["all", "study"]) == catalog.MODEL_ORDER  # groups that overlap: each model once
    with pytest.raises(PlanError, match="names 'study' twice"):  # a name given twice is a slip: said
        models_named(["study", "study"])
    assert models_named(["all"]) == catalog.MODEL_ORDER
    modern = models_named(["modern"])
    assert {"efficientnet_b0", "convnext_tiny", "vit_b_16", "gpt2", "resnet50_v1_5"} <= set(modern)
    assert not set(modern) & set(catalog.STUDY_MODELS)


def test_a_token_model_ignores_the_image_size_and_takes_its_context_by_default() -> None:
    plan = Plan(models=["gpt2"], image_size=8, batch_sizes={"gpt2": 2}).validate()
    config = plan.run_config("torch", "gpt2", "r")
    assert config.tokens == 1024 and config.outputs == 50257
    plan.seq_len = 128
    assert plan.validate().run_config("tensorflow", "gpt2", "r").tokens == 128
    assert Plan(models=["resnet50"], seq_len=128).run_config("torch", "resnet50", "r").tokens == 0


def test_inference_on_the_command_line_times_every_batch_unless_told(tmp_path: Path) -> None:
    import argparse

    from benchtui.cli import build_parser
    from benchtui.commands.run import plan_from_args

    parser: argparse.ArgumentParser = build_parser()
    plan = plan_from_args(parser.parse_args(["run", "--task", "inference", "--models", "resnet50"]))
    assert (plan.task, plan.timing) == ("inference", "step")
    assert plan.run_config("torch", "resnet50", "r").task == "inference"
    plan = plan_from_args(parser.parse_args(["run", "--task", "inference", "--timing", "window"]))
    assert plan.timing == "window"
    assert plan_from_args(parser.parse_args(["run"])).timing == "window"


def test_presets() -> None:
    study = from_preset("study").validate()
    assert study.data == "host" and study.order == "grouped" and study.samples == 10000
    quick = from_preset("quick").validate()
    assert quick.image_size < 100 and quick.samples <= 128
    for name in ("modern", "modern-cpu"):
        plan = from_preset(name).validate()
        assert [catalog.MODELS[m].kind for m in plan.models].count("tokens") == 1
        assert any(catalog.MODELS[m].patch_size for m in plan.models)  # a vision transformer
    assert from_preset("modern").models == ["efficientnet_b0", "convnext_tiny", "vit_b_16", "gpt2"]
    with pytest.raises(PlanError, match="unknown preset"):
        from_preset("nope")


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--headless", "--frameworks", "torch,mxnet"], "unknown framework 'mxnet'"),
        (["run", "--headless", "--models", "vgg19"], "unknown model 'vgg19'"),
        (
            ["run", "--headless", "--models", "gpt2", "--seq-len", "2048"],
            "GPT-2 small has a context of 1,024 tokens: --seq-len 2,048 is longer",
        ),
        (
            ["run", "--headless", "--models", "vit_b_16", "--image-size", "40"],
            "ViT-B/16 cuts images into 16-pixel patches: --image-size must be a multiple of 16, got 40",
        ),
        (
            ["run", "--headless", "--models", "efficientnet_b0", "--image-size", "16"],
            "EfficientNetB0 needs --image-size of at least 32, got 16",
        ),
        (
            ["run", "--headless", "--models", "resnet50", "--task", "serve"],
            "--task must be one of train, inference",
        ),
        (["run", "--headless", "--models", "gpt2", "--seq-len", "-1"], "--seq-len must be a positive"),
        (["run", "--headless", "--samples", "-3"], "--samples must be a positive"),
        (
            ["run", "--headless", "--models", "resnet50", "--samples", "8", "--batch-size", "16"],
            "larger than --samples",
        ),
        (["run", "--headless", "--models", "resnet50", "--device", "cuda:7"], "--device cuda:7"),
        (["run", "--headless", "--models", "resnet50", "--device", "tpu"], "--device must be"),
        (["run", "--headless", "--epochs", "two"], "invalid int value"),
        (["run", "--headless", "--python", "torch=/no/such/python"], "no executable interpreter"),
        (["run", "--headless", "--batch-size", "resnet50=x"], "--batch-size must be"),
        (["show", "no-such-session"], "no session 'no-such-session'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_with_nothing_started(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = benchtui(*args, "--sessions-dir", str(tmp_path), timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchtui: error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, no session written


def test_a_preset_edited_on_the_plan_screen_is_no_longer_claimed() -> None:
    from benchtui.screens.plan import matches_preset, preset_hint

    quick = from_preset("quick")
    assert matches_preset(quick, "quick")
    quick.epochs = 2
    assert not matches_preset(quick, "quick")
    assert "takes days" in preset_hint("study", gpu=False) and "takes days" not in preset_hint(
        "study", gpu=True
    )
