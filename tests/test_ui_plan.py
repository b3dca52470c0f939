"""The plan screen: presets, GPU-aware default, and PlanError shown in place (never a crash)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Checkbox, Input, Select, SelectionList

from benchtui.app import make_app
from benchtui.core.plan.plan import Plan
from benchtui.screens.plan import GpuProbe, PlanScreen

NO_GPU = GpuProbe((), "NVML unavailable: test")
ONE_GPU = GpuProbe(("NVIDIA H100 80GB HBM3",), "NVML: 1 GPU(s)")


def error_text(screen: PlanScreen) -> str:
    error = screen.query_one("#plan-error")
    return error.render().plain if error.display else ""


@pytest.mark.asyncio
async def test_quick_preset_is_the_default_without_a_gpu(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        assert screen.query_one("#preset", Select).value == "quick"
        plan = screen.build_plan()
        assert plan.models == ["resnet50"] and plan.frameworks == ["torch", "tensorflow"]
        assert plan.image_size == 64 and plan.preset == "quick"


@pytest.mark.asyncio
async def test_study_preset_is_the_default_with_a_gpu_and_cuda_devices_are_offered(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=ONE_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#preset", Select).value == "study"
        plan = screen.build_plan()
        assert plan.image_size == 299 and len(plan.models) == 7 and plan.data == "host"
        assert plan.batch_sizes["inception_v3"] == 32
        device = screen.query_one("#device", Select)
        device.value = "cuda:0"
        assert screen.build_plan().device == "cuda:0"


@pytest.mark.asyncio
async def test_choosing_a_preset_fills_the_form(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#preset", Select).value = "study"
        await pilot.pause()
        assert screen.query_one("#image_size", Input).value == "299"
        assert len(screen.query_one("#models", SelectionList).selected) == 7
        assert screen.query_one("#bsf-nasnet_large").display  # batch fields follow the chosen models
        screen.query_one("#preset", Select).value = "quick"
        await pilot.pause()
        assert screen.query_one("#models", SelectionList).selected == ["resnet50"]
        assert not screen.query_one("#bsf-nasnet_large").display


@pytest.mark.asyncio
async def test_plan_errors_are_shown_on_the_screen(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#models", SelectionList).select("inception_v3")
        screen.query_one("#image_size", Input).value = "32"
        await pilot.press("enter")
        assert isinstance(app.screen, PlanScreen)
        assert error_text(screen) == "InceptionV3 needs Image size of at least 75, got 32"
        screen.query_one("#image_size", Input).value = ""
        await pilot.press("enter")
        assert error_text(screen) == "Image size: enter a whole number"
        screen.query_one("#image_size", Input).value = "96"
        for fw in ("torch", "tensorflow"):
            screen.query_one(f"#fw-{fw}", Checkbox).value = False
        await pilot.press("enter")
        assert error_text(screen) == "no framework chosen"
        screen.query_one("#fw-torch", Checkbox).value = True
        screen.query_one("#bs-resnet50", Input).value = "1000"
        await pilot.press("enter")
        assert "larger than Samples 64" in error_text(screen)
        assert not list(tmp_path.iterdir()), "nothing was started"


@pytest.mark.asyncio
async def test_the_protocol_drop_downs_follow_the_preset_and_reach_the_plan(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        choice = {f: screen.query_one(f"#{f}", Select) for f in ("compile", "timing", "optimizer", "head")}
        # Parity defaults for the quick plan; the study preset sets the study's optimizer and head.
        assert {f: s.value for f, s in choice.items()} == {
            "compile": "default",
            "timing": "window",
            "optimizer": "sgd",
            "head": "softmax",
        }
        screen.query_one("#preset", Select).value = "study"
        await pilot.pause()
        assert (choice["optimizer"].value, choice["head"].value) == ("adam", "sigmoid")
        study = screen.build_plan()
        assert study.preset == "study"
        assert (study.optimizer, study.lr, study.head) == ("adam", 1e-4, "sigmoid")
        # Edited: the plan takes the choices, each optimizer its own default learning rate, and
        # the session no longer claims the study's protocol.
        choice["optimizer"].value, choice["compile"].value, choice["timing"].value = "sgd", "off", "step"
        edited = screen.build_plan()
        assert (edited.optimizer, edited.lr, edited.compile, edited.timing) == ("sgd", 0.01, "off", "step")
        assert edited.head == "sigmoid" and edited.preset == ""


@pytest.mark.asyncio
async def test_a_plan_passed_in_fills_the_form(tmp_path: Path) -> None:
    plan = Plan(
        frameworks=["torch"],
        models=["densenet121"],
        image_size=48,
        samples=32,
        epochs=2,
        runs=1,
        batch_sizes={"densenet121": 4},
        device="cpu",
        data="host",
    )
    app = make_app(plan, sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        built = app.screen.build_plan()
        assert built.frameworks == ["torch"] and built.models == ["densenet121"]
        assert (built.image_size, built.samples, built.epochs, built.runs) == (48, 32, 2, 1)
        assert built.batch_sizes == {"densenet121": 4} and built.device == "cpu" and built.data == "host"


@pytest.mark.asyncio
async def test_enter_inside_a_drop_down_picks_an_option_not_the_plan(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#data", Select).focus()
        await pilot.press("enter")  # opens the drop-down
        await pilot.press("down", "enter")  # picks "host"
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        assert screen.query_one("#data", Select).value == "host"
        assert not list(tmp_path.iterdir())


@pytest.mark.asyncio
async def test_the_profile_checkbox_reaches_the_plan_and_a_plan_fills_it(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        box = screen.query_one("#profile", Checkbox)
        assert str(box.label) == "Profile (where step time goes)" and box.value is False
        assert screen.build_plan().profile is False
        box.focus()
        await pilot.press("space")  # as a user ticks it
        assert box.value is True
        plan = screen.build_plan()
        assert plan.profile is True and plan.preset == "quick"  # a run option, not a change of protocol
        screen.query_one("#preset", Select).value = "study"  # a preset fills the whole form
        await pilot.pause()
        assert box.value is False and screen.build_plan().profile is False
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=16,
        epochs=1,
        runs=1,
        batch_sizes={"resnet50": 8},
        device="cpu",
        profile=True,
        profile_steps=7,
    )
    app = make_app(plan, sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#profile", Checkbox).value is True
        assert "7 steps of each run" in screen.query_one("#profile-help").render().plain
        built = screen.build_plan()
        assert (built.profile, built.profile_steps) == (True, 7)
        assert not list(tmp_path.iterdir())
