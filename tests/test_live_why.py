"""The live screen's "why" of a profiled session (``--profile``): each framework's breakdown of its
step, the difference and the sentence, as ``show`` prints them, appearing as profiled runs end.

Sessions are written by tests/sessionfactory.py and replayed through the live screen.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchtui.app import make_app
from benchtui.core.model import why
from benchtui.core.store.session import load_session
from benchtui.widgets.why_view import WhyView
from sessionfactory import make_session
from test_live_scaling import until
from test_ui_replay import finished

SHARES_TF = {"conv": 0.5, "norm": 0.2, "elementwise": 0.1, "optimizer": 0.1, "idle": 0.1}
SHARES_TORCH = {"conv": 0.6, "norm": 0.1, "elementwise": 0.1, "optimizer": 0.1, "idle": 0.1}


@pytest.fixture
def profiled(tmp_path: Path) -> Path:
    return make_session(
        tmp_path,
        runs=2,
        gpu=True,
        counters={"available": True, "source": "NVML GPM", "reason": ""},
        gpu_counters={"torch": {"sm_active": 62.0}, "tensorflow": {"sm_active": 48.0}},
        profile={
            ("torch", "resnet50"): {"shares": SHARES_TORCH},
            ("tensorflow", "resnet50"): {"shares": SHARES_TF},
        },
    )


def view(app) -> WhyView:
    return app.screen.query_one(WhyView)


@pytest.mark.asyncio
async def test_the_why_is_the_reports_table_once_the_runs_are_profiled(profiled: Path) -> None:
    app = make_app(replay=profiled, speed=math.inf)
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot, app)
        await until(pilot, lambda: view(app).table is not None)
        shown = view(app)
        assert shown.display
        expected = load_session(profiled).model.why_table("resnet50")
        assert expected is not None and shown.table == expected
        header, rows = shown.rows()
        assert header == why.breakdown(expected)[0]
        # Only the categories someone spends time in, and the timed step last.
        labels = [r[0] for r in rows]
        assert labels[-1] == "Step (timed)"
        assert set(labels[:-1]) == {
            why.CATEGORY_LABELS[c] for c in ("conv", "norm", "elementwise", "optimizer", "idle")
        }
        assert rows == [r for r in why.breakdown(expected)[1] if r[0] in labels]
        assert shown.texts()[0] == expected.text and "normalization" in expected.text
        assert "Why · ResNet50" in str(shown.border_title)
        assert "SM active 62% vs 48%" in expected.counters and shown.texts()[-1] == expected.counters
        # The breakdown is drawn: its rows reach the screen.
        drawn = "\n".join(strip.text for strip in shown.render_lines(shown.region.reset_offset))
        assert "normalization" in drawn and "Step (timed)" in drawn
        # w hides and shows it.
        await pilot.press("w")
        assert not shown.display
        await pilot.press("w")
        assert shown.display


@pytest.mark.asyncio
async def test_before_any_profile_the_view_says_when_it_comes(profiled: Path) -> None:
    app = make_app(replay=profiled, speed=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: bool(view(app).waiting) or view(app).table is not None)
        if view(app).table is None:
            assert view(app).texts() == [view(app).waiting] and "after its timed epochs" in view(app).waiting


@pytest.mark.asyncio
async def test_a_session_without_profile_has_no_why(tmp_path: Path) -> None:
    app = make_app(replay=make_session(tmp_path), speed=math.inf)
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot, app)
        assert not view(app).display and view(app).table is None
        assert app.screen.check_action("toggle_why", ()) is False
