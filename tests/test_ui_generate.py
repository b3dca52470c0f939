"""The app with a generate session (issue 34): the live screen's strips of each token window (a replay; a run
going on folds the same events), and the plan screen's task "generate" with its prompt and new tokens."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from textual.widgets import Input, Select, SelectionList, Static

from benchtui.app import make_app
from benchtui.core import fmt
from benchtui.core.model.generation import TokenStep
from benchtui.screens.live import LiveScreen
from benchtui.screens.plan import GpuProbe, PlanScreen
from benchtui.widgets.results_table import ResultsTable
from benchtui.widgets.spark import BARS
from benchtui.widgets.token_strips import TokenStrips, token_values
from sessionfactory import make_session
from test_ui_replay import TINY, finished

NO_GPU = GpuProbe((), "NVML unavailable: test")


def generate_session(root: Path, timing: str | None) -> Path:
    return make_session(
        root,
        frameworks=("torch", "keras-jax"),
        models=("gpt2_mini",),
        epochs=2,
        steps=3,
        batch_size=8,
        timing=timing,
        generate={"prompt_len": 32, "new_tokens": 8, "token_s": {"torch": 0.004, "keras-jax": 0.006}},
    )


def test_token_values_are_each_calls_mean_or_each_tokens_own() -> None:
    window = [TokenStep(1, 1, 8, 32, 5, 0.5, 4.0), TokenStep(2, 1, 8, 32, 5, 0.01, 0.02)]
    assert token_values(window) == ((1.0, 0.005), False, 1)
    step = [
        TokenStep(1, 1, 8, 32, 3, 0.5, 2.0, (1.0, 1.0)),
        TokenStep(2, 1, 8, 32, 3, 0.01, 0.01, (0.004, 0.006)),
    ]
    assert token_values(step) == ((1.0, 1.0, 0.004, 0.006), True, 2)
    assert token_values([]) == ((), False, 0)


@pytest.mark.asyncio
@pytest.mark.parametrize("timing", ["step", None])
async def test_a_replay_draws_each_token_window(tmp_path: Path, timing: str | None) -> None:
    path = generate_session(tmp_path, timing)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot, app)
        assert isinstance(app.screen, LiveScreen)
        strips = app.screen.query_one(TokenStrips)
        assert strips.display
        torch, keras = strips.strips
        assert (torch.framework, keras.framework) == ("torch", "keras-jax")
        per_token = timing == "step"
        # Step timing: 7 later tokens per call, 6 calls; window timing: a value per call.
        assert len(torch.values) == (6 * 7 if per_token else 6) and torch.per_token is per_token
        assert torch.first == len(torch.values) // 2  # the first epoch's calls: its compile
        assert torch.median == pytest.approx(0.004, rel=0.05) and keras.median == pytest.approx(
            0.006, rel=0.05
        )
        lines = strips.texts(120)
        assert lines[0].startswith("PyTorch   r2 4.0") and " ms/token, first " in lines[0]
        assert any(c in BARS for c in lines[1])
        # The table's tok/s: the batch's tokens/s after the first token (the verdict's figure), the summary's.
        table = app.screen.query_one(ResultsTable)
        row = app.replayer.model.row("torch", "gpt2_mini")
        assert row.generation is not None and row.generation.batch_tokens_per_s
        assert table.cell_text("gpt2_mini|torch", "ips") == fmt.rate(row.generation.batch_tokens_per_s)
        assert row.generation.batch_tokens_per_s == pytest.approx(8 / 0.004, rel=0.05)
        what = "each token" if per_token else "each generate call's mean"
        assert f"GPT-2 mini · latency per token, {what} (0–" in str(strips.border_title)


@pytest.mark.asyncio
async def test_a_session_that_does_not_generate_has_no_token_strips() -> None:
    app = make_app(replay=TINY, speed=math.inf)
    async with app.run_test(size=(120, 36)) as pilot:
        await finished(pilot, app)
        assert not app.screen.query_one(TokenStrips).display


@pytest.mark.asyncio
async def test_the_plan_screen_offers_generate_with_its_prompt_and_new_tokens(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        assert not screen.query_one("#setting-prompt_len").display  # train: the sequence length instead
        assert screen.query_one("#setting-seq_len").display
        models = screen.query_one("#models", SelectionList)
        models.deselect_all()
        models.select("gpt2_mini")
        screen.query_one("#task", Select).value = "generate"
        await pilot.pause()
        assert (
            screen.query_one("#setting-prompt_len").display
            and screen.query_one("#setting-new_tokens").display
        )
        assert not screen.query_one("#setting-seq_len").display
        screen.query_one("#prompt_len", Input).value = "64"
        screen.query_one("#new_tokens", Input).value = "32"
        await pilot.pause()
        plan = screen.build_plan()
        assert (plan.task, plan.prompt_len, plan.new_tokens) == ("generate", 64, 32)
        assert "64 samples with a 64-token prompt + 32 new tokens" in str(
            screen.query_one("#preset-help", Static).content
        )
        screen.query_one("#task", Select).value = "train"
        await pilot.pause()
        assert not screen.query_one("#setting-new_tokens").display
