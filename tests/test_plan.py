"""Plans: defaults are the study's, bad input is one clear line and exit 2, run order."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import benchtui

from benchtui.core.plan.plan import Plan, PlanError, from_preset, run_order
from benchtui_runners import catalog


def test_defaults_are_the_study_protocol_with_study_batch_sizes() -> None:
    plan = Plan()
    assert (plan.image_size, plan.samples, plan.epochs, plan.runs, plan.device) == (299, 10000, 5, 3, "auto")
    assert plan.models == list(catalog.MODELS) and plan.frameworks == ["torch", "tensorflow"]
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
    ],
)
def test_validation_messages(change: dict, message: str) -> None:
    plan = Plan(**{"models": ["resnet50"], **change})
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(".", r"\.")):
        plan.validate()


def test_presets() -> None:
    study = from_preset("study").validate()
    assert study.data == "host" and study.order == "grouped" and study.samples == 10000
    quick = from_preset("quick").validate()
    assert quick.image_size < 100 and quick.samples <= 128
    with pytest.raises(PlanError, match="unknown preset"):
        from_preset("nope")


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--headless", "--frameworks", "torch,mxnet"], "unknown framework 'mxnet'"),
        (["run", "--headless", "--models", "vgg16"], "unknown model 'vgg16'"),
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
