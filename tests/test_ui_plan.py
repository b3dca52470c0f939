"""The plan screen: presets, GPU-aware default, and PlanError shown in place (never a crash)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Checkbox, Input, Select, SelectionList

from benchtui.app import make_app
from benchtui.core.plan.estimate import cpu_seconds, duration_words, preset_words
from benchtui.core.plan.plan import Plan, from_preset
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
        assert plan.models == ["resnet50_v1_5"] and plan.frameworks == ["torch", "tensorflow"]
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
        assert screen.query_one("#models", SelectionList).selected == ["resnet50_v1_5"]
        assert not screen.query_one("#bsf-nasnet_large").display


@pytest.mark.asyncio
async def test_plan_errors_are_shown_on_the_screen(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#models", SelectionList).select("inception_v3")
        screen.query_one("#image_size", Input).value = "32"
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, PlanScreen)
        assert error_text(screen) == "InceptionV3 needs Image size of at least 75, got 32"
        screen.query_one("#image_size", Input).value = ""
        await pilot.press("ctrl+r")
        assert error_text(screen) == "Image size: enter a whole number"
        screen.query_one("#image_size", Input).value = "96"
        for fw in ("torch", "tensorflow"):
            screen.query_one(f"#fw-{fw}", Checkbox).value = False
        await pilot.press("ctrl+r")
        assert error_text(screen) == "no framework chosen"
        screen.query_one("#fw-torch", Checkbox).value = True
        screen.query_one("#bs-resnet50_v1_5", Input).value = "1000"
        await pilot.press("ctrl+r")
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


# -- ticked or not, at a glance ----------------------------------------------------------------------
def box(widget: Checkbox) -> str:
    return widget.render().plain[:3]


@pytest.mark.asyncio
async def test_ticked_and_unticked_boxes_are_unmistakable(tmp_path: Path) -> None:
    """An unticked box is empty and grey, a ticked one holds an X on green: in the checkboxes and in
    the model list, in glyph and in colour (not the same X in two close colours)."""
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        torch, jax = screen.query_one("#fw-torch", Checkbox), screen.query_one("#fw-keras-jax", Checkbox)
        assert (box(torch), box(jax)) == ("▐X▌", "▐ ▌")
        on = torch.get_visual_style("toggle--button").background
        off = jax.get_visual_style("toggle--button").background
        assert on is not None and off is not None
        assert on.hex == app.theme_variables["success"].upper() and off.hex != on.hex
        jax.focus()
        await pilot.press("space")
        assert jax.value and box(jax) == "▐X▌"
        await pilot.press("space")
        assert not jax.value and box(jax) == "▐ ▌"
        models = screen.query_one("#models", SelectionList)
        rows = {models.get_option_at_index(y).value: models.render_line(y).text[:3] for y in range(8)}
        assert rows["resnet50_v1_5"] == "▐X▌"  # the quick preset's model; the others empty
        assert {v for m, v in rows.items() if m != "resnet50_v1_5"} == {"▐ ▌"}
        models.select("inception_v3")
        assert models.render_line(0).text[:3] == "▐X▌"


# -- every setting of the protocol, at 80 columns -----------------------------------------------------
SETTINGS = ("precision", "threads", "order", "channels-last", "task", "compile", "optimizer", "head")


@pytest.mark.asyncio
async def test_precision_threads_order_and_channels_last_reach_the_plan_and_fit_80_columns(
    tmp_path: Path,
) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        form = screen.query_one("#plan-form")
        right = form.content_region.right  # the scroll bar's left edge
        help_text = screen.query_one("#field-help")  # under the settings: what the focused one does
        assert "while it has the focus" in help_text.render().plain
        screen.query_one("#precision").focus()
        await pilot.pause()
        assert help_text.render().plain.startswith("precision: fp32; tf32")
        screen.query_one("#threads").focus()
        await pilot.pause()
        assert help_text.render().plain.startswith("threads: CPU threads")
        for name in SETTINGS:  # each one whole on the form: none cut off on the right
            widget = screen.query_one(f"#{name}")
            assert widget.region.width >= 5 and widget.region.right <= right, (name, widget.region, right)
        plan = screen.build_plan()
        assert (plan.precision, plan.threads, plan.order, plan.channels_last) == (
            "fp32",
            0,
            "interleaved",
            False,
        )
        screen.query_one("#precision", Select).value = "amp-bf16"
        screen.query_one("#order", Select).value = "grouped"
        screen.query_one("#threads", Input).value = "2"
        box = screen.query_one("#channels-last", Checkbox)
        box.focus()
        await pilot.press("space")
        plan = screen.build_plan()
        assert (plan.precision, plan.threads, plan.order, plan.channels_last) == (
            "amp-bf16",
            2,
            "grouped",
            True,
        )
        assert plan.preset == ""  # the quick preset's protocol is fp32, interleaved, the default threads
        # Checked as the command line checks --threads, the error in place, in the form's words.
        screen.query_one("#threads", Input).value = "5000"
        await pilot.press("ctrl+r")
        assert error_text(screen) == "Threads must be at most 4,096, got 5,000"
        screen.query_one("#threads", Input).value = "-1"
        screen.action_start()
        assert error_text(screen).startswith("Threads must be a whole number (0: framework default)")
        assert not list(tmp_path.iterdir()), "nothing was started"
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=16,
        epochs=1,
        runs=1,
        batch_sizes={"resnet50": 8},
        device="cpu",
        precision="tf32",
        threads=3,
        order="grouped",
        channels_last=True,
    )
    app = make_app(plan, sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        screen = app.screen
        built = screen.build_plan()
        assert (built.precision, built.threads, built.order, built.channels_last) == (
            "tf32",
            3,
            "grouped",
            True,
        )
        # Filled whole: the task does not reset the timing a plan chose (as choosing a task does).
        plan.task, plan.timing = "inference", "window"
        screen.fill(plan)
        await pilot.pause()
        built = screen.build_plan()
        assert (built.task, built.timing, built.threads) == ("inference", "window", 3)


# -- the preset's label and hint follow the form ------------------------------------------------------
def long_on(plan: Plan, cores: int) -> str:
    return f"{duration_words(cpu_seconds(plan, cores))} or more on {cores} idle CPU cores"


def preset_text(screen: PlanScreen) -> tuple[object, str]:
    return screen.query_one("#preset", Select).value, screen.query_one("#preset-help").render().plain


@pytest.mark.asyncio
async def test_an_edited_preset_is_custom_with_a_description_of_its_own(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=GpuProbe((), "NVML unavailable: test", cpus=2))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        value, hint = preset_text(screen)
        assert value == "quick" and hint == (
            f"quick: {preset_words('quick', 2)} on 2 idle CPU cores (ResNet50 v1.5, 64 px, 2 runs)"
        )
        screen.query_one("#epochs", Input).value = "5"
        await pilot.pause()
        value, hint = preset_text(screen)
        assert value == Select.NULL
        plan = screen.build_plan()
        assert plan.preset == "" and hint == (
            "custom: 4 runs (2 frameworks × 1 model × 2), 5 epochs of 64 samples at 64 px; "
            f"likely {duration_words(cpu_seconds(plan, 2))} or more on 2 idle CPU cores"
        )
        screen.query_one("#epochs", Input).value = "3"  # back to the preset's values: its name again
        await pilot.pause()
        assert preset_text(screen)[0] == "quick" and screen.build_plan().preset == "quick"
        # A setting the preset leaves at its default is the preset's too.
        screen.query_one("#optimizer", Select).value = "adam"
        await pilot.pause()
        assert preset_text(screen)[0] == Select.NULL and screen.build_plan().preset == ""
        screen.query_one("#optimizer", Select).value = "sgd"
        await pilot.pause()
        assert preset_text(screen)[0] == "quick"
        # Profiling runs after the timed epochs: the protocol is still the preset's.
        screen.query_one("#profile", Checkbox).value = True
        await pilot.pause()
        assert preset_text(screen)[0] == "quick"
        # "custom" chosen by hand: the values stay, no preset is claimed, even by the same values.
        screen.query_one("#preset", Select).value = Select.NULL
        await pilot.pause()
        value, hint = preset_text(screen)
        assert value == Select.NULL and hint.startswith("custom: 4 runs")
        assert screen.build_plan().epochs == 3 and screen.build_plan().preset == ""
        screen.query_one("#runs", Input).value = "3"
        screen.query_one("#runs", Input).value = "2"  # edited back to the preset's values: still custom
        await pilot.pause()
        assert preset_text(screen)[0] == Select.NULL


@pytest.mark.asyncio
async def test_the_long_plan_warning_follows_the_plan_not_the_presets_name(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=GpuProbe((), "NVML unavailable: test", cpus=2))
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#preset", Select).value = "study"
        await pilot.pause()
        value, hint = preset_text(screen)
        assert value == "study" and hint.startswith("study: the 2019 scripts")
        study = from_preset("study")
        assert cpu_seconds(study, 2) > 86400  # the estimate the command line warns with, too
        assert f"No GPU here: on the CPU this plan takes days: likely {long_on(study, 2)}" in hint
        # Cut down to one small model on few samples: the study's description and warning go.
        models = screen.query_one("#models", SelectionList)
        models.deselect_all()
        models.select("resnet50")
        for name, value in (("image_size", "64"), ("samples", "64"), ("epochs", "1"), ("runs", "1")):
            screen.query_one(f"#{name}", Input).value = value
        await pilot.pause()
        value, hint = preset_text(screen)
        assert value == Select.NULL and cpu_seconds(screen.build_plan(), 2) < 3600
        assert hint.startswith(
            "custom: 2 runs (2 frameworks × 1 model × 1), 1 epoch of 64 samples at 64 px; "
        )
        assert hint.endswith(" on 2 idle CPU cores") and "\n" not in hint
        # Large again, by the samples alone: the warning is back, in the plan's own numbers.
        screen.query_one("#samples", Input).value = "100000"
        await pilot.pause()
        hint = preset_text(screen)[1]
        assert hint.startswith(
            "custom: 2 runs (2 frameworks × 1 model × 1), 1 epoch of 100,000 samples at 64 px\n"
        )
        plan = screen.build_plan()
        assert 3600 < cpu_seconds(plan, 2) < 86400
        assert f"No GPU here: on the CPU this plan takes hours: likely {long_on(plan, 2)}" in hint
        assert "study" not in hint


@pytest.mark.asyncio
async def test_the_warning_says_where_the_runs_go(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=GpuProbe(ONE_GPU.names, ONE_GPU.status, cpus=4))
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        screen = app.screen
        value, hint = preset_text(screen)
        assert value == "study" and "\n" not in hint  # hours on one GPU: no warning
        screen.query_one("#device", Select).value = "cpu"
        await pilot.pause()
        value, hint = preset_text(screen)
        assert value == "study"  # the study leaves the device to the machine
        assert f"\nOn the CPU this plan takes days: likely {long_on(screen.build_plan(), 4)}" in hint


# -- snapshots ------------------------------------------------------------------------------------------
def focus_on(selector: str, show: str | None = None):
    """Focus ``selector`` and scroll the form to ``show`` (default: it) at the top, once focus's own scroll (it
    comes after a refresh) has ended: in that order on any machine (the other order failed once under load)."""

    async def run_before(pilot) -> None:
        await pilot.pause()
        widget = pilot.app.screen.query_one(selector)
        widget.focus()
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        target = pilot.app.screen.query_one(show) if show else widget
        pilot.app.screen.query_one("#plan-form").scroll_to_widget(target, animate=False, top=True)
        await pilot.pause()

    return run_before


def test_plan_screen_settings_80x24(snap_compare) -> None:
    """The protocol's settings in two columns on 80, the focused one's help under them, boxes ticked or empty."""
    app = make_app(probe=GpuProbe((), "NVML unavailable: no NVIDIA driver", cpus=2))
    assert snap_compare(app, terminal_size=(80, 24), run_before=focus_on("#precision", show="#settings"))


def test_plan_screen_edited_study_120x35(snap_compare) -> None:
    """The study cut to two models, on a CPU: "custom", its own description, and a warning in its numbers."""

    async def edit(pilot) -> None:
        screen = pilot.app.screen
        screen.query_one("#preset", Select).value = "study"
        await pilot.pause()
        models = screen.query_one("#models", SelectionList)
        models.deselect_all()
        models.select("resnet50")
        models.select("densenet121")
        screen.query_one("#epochs", Input).value = "2"
        await pilot.pause()

    app = make_app(probe=GpuProbe((), "NVML unavailable: no NVIDIA driver", cpus=2))
    assert snap_compare(app, terminal_size=(120, 35), run_before=edit)


# -- keys: where the focus starts, where Tab goes, what starts the plan (issue 30) ---------------------
@pytest.mark.asyncio
async def test_the_focus_starts_on_the_preset_and_tab_reaches_every_control(tmp_path: Path) -> None:
    from textual.widgets import Button

    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert app.focused is screen.query_one("#preset", Select)
        controls = [
            w
            for w in screen.query("Select, Input, Checkbox, SelectionList, Button")
            if w.display and all(a.display for a in w.ancestors_with_self if hasattr(a, "display"))
        ]
        seen = []
        for _ in range(len(controls) + 5):
            await pilot.press("tab")
            seen.append(app.focused)
            if app.focused is controls[0]:
                break
        missing = [w.id for w in controls if w not in seen]
        assert not missing, f"Tab never reaches {missing}"
        assert app.focused is screen.query_one("#preset", Select)  # round the whole form, back to the start
        assert any(isinstance(w, Button) and w.id == "start" for w in seen)


@pytest.mark.asyncio
async def test_enter_in_a_field_never_starts_the_plan_ctrl_r_does_and_the_footer_says_so(
    tmp_path: Path,
) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    started: list[Plan] = []
    app.start_plan = started.append  # type: ignore[method-assign] - the request is what is checked
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        for field in ("#epochs", "#samples", "#threads", "#model-file", "#bs-resnet50_v1_5"):
            screen.query_one(field).focus()
            await pilot.press("enter")
            await pilot.pause()
        assert not started and isinstance(app.screen, PlanScreen)
        shown = {key: b.binding.description for key, b in screen.active_bindings.items() if b.binding.show}
        assert shown.get("ctrl+r") == "Start"
        assert "ctrl+r" in str(screen.query_one("#start").label)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert len(started) == 1 and started[0].preset == "quick"
        screen.query_one("#start").focus()
        await pilot.press("enter")  # on the button, Enter presses it
        await pilot.pause()
        assert len(started) == 2


@pytest.mark.asyncio
async def test_a_validation_error_follows_the_form_and_clears_once_fixed(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        size = screen.query_one("#image_size", Input)
        screen.query_one("#models", SelectionList).select("inception_v3")
        size.value = "32"
        await pilot.press("ctrl+r")
        assert error_text(screen) == "InceptionV3 needs Image size of at least 75, got 32"
        size.value = ""  # half typed: the error says what is wrong now
        await pilot.pause()
        assert error_text(screen) == "Image size: enter a whole number"
        size.value = "80"
        await pilot.pause()
        assert error_text(screen) == ""  # fixed: the error goes without another try
        assert not screen.query_one("#plan-error").display
        size.value = "8"  # a new mistake is not shown before the next try
        await pilot.pause()
        assert error_text(screen) == ""


@pytest.mark.asyncio
async def test_the_estimate_counts_only_the_models_that_can_run_at_the_size(tmp_path: Path) -> None:
    """InceptionV3 needs 75 px: at 64 px it is refused, named, and left out of the runs and the estimate."""
    app = make_app(sessions_dir=str(tmp_path), probe=GpuProbe((), "NVML unavailable: test", cpus=2))
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#models", SelectionList).select("inception_v3")  # quick is at 64 px
        await pilot.pause()
        hint = preset_text(screen)[1]
        able = from_preset("quick")
        able.threads = 0
        assert hint.startswith(
            "custom: 4 runs (2 frameworks × 1 model × 2), 3 epochs of 64 samples at 64 px; "
            "not counted: InceptionV3 needs at least 75 px; "
        )
        assert hint.endswith(f"{duration_words(cpu_seconds(able, 2))} or more on 2 idle CPU cores")


@pytest.mark.asyncio
async def test_the_quick_presets_duration_comes_from_the_idle_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's probe measures the idle cores when the plan screen opens; the quick preset is worded on them."""
    from benchtui.core.plan import threads

    monkeypatch.setattr(
        threads, "measure_idle", lambda *a, **k: {"idle_cores": 0.4, "cores": 2, "threads": 1}
    )
    probe = GpuProbe((), "NVML unavailable: test", cpus=2, measure_idle=True)
    app = make_app(sessions_dir=str(tmp_path), probe=probe)
    async with app.run_test(size=(120, 35)) as pilot:
        deadline = 50
        while "0.4 of 2" not in preset_text(app.screen)[1] and deadline:
            await pilot.pause(0.1)
            deadline -= 1
        assert preset_text(app.screen)[1] == (
            f"quick: {preset_words('quick', 0.4)} with 0.4 of 2 CPU cores idle (ResNet50 v1.5, 64 px, 2 runs)"
        )
        assert preset_words("quick", 0.4) != preset_words("quick", 2)
