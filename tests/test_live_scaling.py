"""The live screen of a data-parallel session: a line per GPU, the scaling curve as it forms, devices per row.

Sessions are written by tests/sessionfactory.py (4 GPUs in every sample, --scaling runs at 1, 2
and 4 devices) and replayed through the live screen, as ``benchtui replay`` does.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchtui.app import BenchApp, make_app
from benchtui.core import fmt
from benchtui.core.store.session import load_session
from benchtui.screens.live import TICK_S, ScalingView
from benchtui.widgets.results_table import ResultsTable
from benchtui.widgets.spark import BARS
from benchtui.widgets.telemetry import GpuStrips, TelemetryPanel
from benchtui_runners import catalog
from sessionfactory import make_session, read_events
from test_ui_replay import finished
from test_ui_snapshots import until_replayed

GIB = 1024**3
BATCH = 16  # ResNet50's study batch: the per-device batch of these sessions


def gpu_lines(app: BenchApp) -> list[str]:
    """The strips panel's GPU lines as drawn (plain text, runs of spaces as one)."""
    (panel,) = app.screen.query(TelemetryPanel)
    assert isinstance(panel, GpuStrips)
    lines = [" ".join(line.plain.split()) for line in panel._render_lines(panel.size.width)]
    return [line for line in lines if line.startswith("GPU ")]


def figures(gpu: dict[str, Any]) -> str:
    """What a strip ends with for an NVML reading: utilization, memory used of total, power."""
    return (
        f"{gpu['util']} % {gpu['mem_used'] / GIB:.1f}/{gpu['mem_total'] / GIB:.1f} GiB {gpu['power_w']:.0f} W"
    )


def segments(curve: dict[str, Any], form: str) -> list[str]:
    """A curve's points as the scaling line says them: 'long' (units, 95% CI) or 'short'."""
    out = []
    for point in curve["points"]:
        n, rate = point["devices"], fmt.rate(point["images_per_s"])
        if n == 1:
            out.append(f"×1 {rate} img/s")
            continue
        low, high = point["efficiency_ci"]
        eff = f"{point['efficiency']:.0%}"
        out.append(
            f"×{n} {rate} img/s {eff} ({low * 100:.0f}–{high:.0%})"
            if form == "long"
            else f"×{n} {rate} {eff}"
        )
    return out


def scaling_texts(app: BenchApp, width: int | None = None) -> list[str]:
    return [" ".join(text.split()) for text in app.screen.query_one(ScalingView).texts(width)]


def cell(app: BenchApp, key: str, column: str) -> str:
    return app.screen.query_one(ResultsTable).cell_text(key, column)


async def until(pilot, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.01)


@pytest.fixture
def scaling_session(tmp_path: Path) -> Path:
    return make_session(tmp_path, devices=4, scaling=True, gpu=True)


@pytest.mark.asyncio
async def test_one_strip_per_gpu_with_its_figures(scaling_session: Path) -> None:
    app = make_app(replay=scaling_session, speed=math.inf)
    async with app.run_test(size=(120, 35)) as pilot:
        await finished(pilot, app)
        (panel,) = app.screen.query(TelemetryPanel)  # one panel for the four GPUs, not four panels
        assert isinstance(panel, GpuStrips) and panel.gpu_indices == [0, 1, 2, 3]
        assert str(panel.border_title).startswith("GPUs 0–3 · NVIDIA H100 80GB HBM3 · last")
        last = [e for e in read_events(scaling_session) if e["type"] == "gpu"][-1]
        lines = gpu_lines(app)
        assert [line.split(" ●")[0].split()[:2] for line in lines] == [["GPU", str(i)] for i in range(4)]
        for line, gpu in zip(lines, last["gpus"], strict=True):
            assert line.endswith(figures(gpu)), (line, figures(gpu))
        assert not any("●" in line for line in lines)  # between runs no GPU is training
        # Every GPU trained at some point in the last two minutes (at 88-99%): its strip says so.
        assert all(max(BARS.find(c) for c in line) >= 4 for line in lines), lines


@pytest.mark.asyncio
async def test_the_run_s_gpus_are_marked_and_its_count_is_in_the_table(scaling_session: Path) -> None:
    app = make_app(replay=scaling_session, speed=40)
    async with app.run_test(size=(120, 35)) as pilot:

        def on_two() -> bool:
            model = app.replayer.model if app.replayer else None
            last = model.gpu_samples[-1] if model and model.gpu_samples else {}
            return last.get("devices") == [0, 1] and last.get("run") is not None

        await until(pilot, on_two)
        assert app.replayer is not None
        app.replayer.pause()
        await pilot.pause(3 * TICK_S)
        model = app.replayer.model
        sample = model.gpu_samples[-1]
        training = sample["devices"]
        assert len(training) > 1  # still a data-parallel run (the replay may have moved on to x4)
        for line in gpu_lines(app):
            index = int(line.split()[1])
            assert ("●" in line) == (index in training), line
            assert line.endswith(figures(sample["gpus"][index]))
        # The table's row has the plan's count (4); while a run at another count trains, the row says so.
        assert model.current is not None
        run = model.runs[model.current]
        d, key = run.spec.devices, f"resnet50|{run.spec.framework}"
        assert cell(app, key, "devices") == f"{d} × {BATCH} = {d * BATCH}"
        status = app.screen.query_one("#status").render().plain
        assert f"· {d} devices · run {run.spec.index} of 2" in status
        other = "resnet50|" + ("tensorflow" if run.spec.framework == "torch" else "torch")
        assert cell(app, other, "devices") == f"4 × {BATCH} = {4 * BATCH}"
        # The scaling line as it forms: the counts done so far, the model's figures for them.
        texts = scaling_texts(app)
        for curve in (c.to_json() for c in model.scaling()):
            (line,) = [t for t in texts if t.startswith(catalog.FRAMEWORK_LABELS[curve["framework"]])]
            done = {"points": [p for p in curve["points"] if p["images_per_s"] is not None]}
            assert " · ".join(segments(done, "long")) in line, line
            assert line.endswith("×4 –")  # not started yet
        assert any("×2 running" in t for t in texts) or d == 4


@pytest.mark.asyncio
async def test_efficiency_line_says_the_model_s_curve(scaling_session: Path) -> None:
    curves = [c.to_json() for c in load_session(scaling_session).model.scaling()]
    assert [c["framework"] for c in curves] == ["torch", "tensorflow"]
    for size, form in (((120, 35), "long"), ((80, 24), "short")):
        app = make_app(replay=scaling_session, speed=math.inf)
        async with app.run_test(size=size) as pilot:
            await finished(pilot, app)
            await pilot.pause(2 * TICK_S)
            view = app.screen.query_one(ScalingView)
            assert view.display
            assert str(view.border_title) == "Scaling · ResNet50 · img/s by devices, efficiency vs 1"
            texts = scaling_texts(app)
            for curve, text in zip(curves, texts, strict=True):
                label = catalog.FRAMEWORK_LABELS[curve["framework"]]
                if form == "long":
                    assert text == f"{label} " + " · ".join(segments(curve, "long"))
                else:  # 80 columns: units once, no intervals (asked at the narrowest form's width)
                    narrow = scaling_texts(app, 50)[texts.index(text)]
                    assert narrow == f"{label} " + " · ".join(segments(curve, "short"))
                    assert len(app.screen.query_one(ScalingView).texts()[texts.index(text)]) <= 78
    torch = " · ".join(segments(curves[0], "short"))
    assert re.fullmatch(r"×1 [\d,]+ img/s · ×2 [\d,]+ 9\d% · ×4 [\d,]+ 9\d%", torch)  # PyTorch 90% efficient


@pytest.mark.asyncio
async def test_results_table_says_devices_and_global_batch(scaling_session: Path) -> None:
    for size, text in (((120, 35), "4 × 16 = 64"), ((80, 24), "4×16")):
        app = make_app(replay=scaling_session, speed=math.inf)
        async with app.run_test(size=size) as pilot:
            await finished(pilot, app)
            table = app.screen.query_one(ResultsTable)
            assert table.columns_shown[:4] == ["model", "framework", "devices", "state"]
            # 80 columns: the devices take the mean epoch's place (a live state such as
            # "epoch 3/3" would otherwise push the table past the edge).
            assert ("epoch" in table.columns_shown) == (size[0] >= 100)
            assert cell(app, "resnet50|torch", "devices") == text
            assert cell(app, "resnet50|tensorflow", "devices") == text
            assert table.virtual_size.width <= size[0]


@pytest.mark.asyncio
async def test_single_gpu_session_looks_as_before(tmp_path: Path) -> None:
    path = make_session(tmp_path, devices=1, gpu=True)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(120, 35)) as pilot:
        await finished(pilot, app)
        panels = list(app.screen.query(TelemetryPanel))
        assert [type(p) for p in panels] == [TelemetryPanel] and panels[0].gpu_index == 0
        assert not app.screen.query_one(ScalingView).display
        assert "devices" not in app.screen.query_one(ResultsTable).columns_shown


@pytest.mark.asyncio
async def test_data_parallel_without_scaling_has_strips_and_no_curve(tmp_path: Path) -> None:
    path = make_session(tmp_path, devices=2, gpu=True, runs=1)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(80, 24)) as pilot:
        await finished(pilot, app)
        assert len(gpu_lines(app)) == 2
        assert not app.screen.query_one(ScalingView).display
        assert cell(app, "resnet50|torch", "devices") == "2×16"


@pytest.mark.asyncio
async def test_many_gpus_are_capped_on_a_short_terminal(tmp_path: Path) -> None:
    path = make_session(tmp_path, devices=8, gpu=True, runs=1, epochs=2)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(80, 24)) as pilot:
        await finished(pilot, app)
        (panel,) = app.screen.query(TelemetryPanel)
        lines = [line.plain for line in panel._render_lines(panel.size.width)]
        assert [line.split()[1] for line in lines[:3]] == ["0", "1", "2"]
        assert lines[3].startswith("+5 more (GPUs 3–7): util ")
        await pilot.resize_terminal(120, 40)  # room for all eight
        await pilot.pause(2 * TICK_S)
        assert len(gpu_lines(app)) == 8


def test_capped_strips_keep_the_run_s_gpus() -> None:
    gpus = [
        {"index": i, "util": 90 if i in (5, 6) else 1, "mem_used": GIB, "mem_total": 80 * GIB}
        for i in range(8)
    ]
    panel = GpuStrips(list(range(8)), max_strips=4)
    panel.samples = [{"type": "gpu", "run": "r", "gpus": gpus, "devices": [5, 6], "watched": 5}]
    panel.training = [5, 6]
    assert panel.shown() == ([0, 5, 6], [1, 2, 3, 4, 7])
    lines = [line.plain for line in panel._render_lines(80)]
    assert [line.split()[1] for line in lines[:3]] == ["0", "5", "6"]
    assert lines[3] == "+5 more (GPUs 1, 2, 3, 4, 7): util 1 %"


def test_strips_say_what_is_wrong_once() -> None:
    ok = {"util": 95, "mem_used": GIB, "mem_total": 80 * GIB, "power_w": 300.0}
    gpus: list[dict[str, Any]] = [
        {**ok, "throttle": ["gpu_idle"]},
        {**ok, "throttle": ["hw_thermal_slowdown"], "other_procs": 1, "other_mem": GIB},
        {"lost": True},
        {**ok, "throttle": ["hw_thermal_slowdown"]},
    ]
    panel = GpuStrips([0, 1, 2, 3])
    panel.samples = [{"type": "gpu", "run": "r", "gpus": gpus, "devices": [0, 1, 2, 3], "watched": 0}]
    lines = [" ".join(line.plain.split()) for line in panel._render_lines(80)]
    assert lines[2].startswith("GPU 2") and lines[2].endswith(" lost")
    assert lines[5:] == [
        "GPU 2 lost: NVML no longer answers; N/A",
        "other processes on GPU 1 (1, 1.0 GiB): the run shares them",
        "GPUs 1, 3 clocks held back: hw_thermal_slowdown",
    ]


# -- snapshots ----------------------------------------------------------------------------------


@pytest.fixture
def relative_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The scaling session, named relative to the working folder: the screen shows no tmp path."""
    make_session(tmp_path, devices=4, scaling=True, gpu=True, folder="scaling")
    monkeypatch.chdir(tmp_path)
    return Path("scaling")


def cut_in_the_x2_runs(path: Path) -> Path:
    """The session as it stood in its first 2-device run (events after it dropped, then interrupted)."""
    lines = (path / "events.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    in_run = [
        k
        for k, line in enumerate(lines)
        if (event := json.loads(line))["type"] == "gpu" and event.get("devices") == [0, 1] and event["run"]
    ]
    (path / "events.jsonl").write_text("".join(lines[: in_run[9] + 1]), encoding="utf-8")  # its 10th sample
    meta = json.loads((path / "session.json").read_text(encoding="utf-8"))
    meta["status"] = "interrupted"
    (path / "session.json").write_text(json.dumps(meta), encoding="utf-8")
    (path / "summary.json").unlink()
    return path


def test_scaling_session_80x24(snap_compare, relative_session: Path) -> None:
    app = make_app(replay=relative_session, speed=math.inf)
    assert snap_compare(app, terminal_size=(80, 24), run_before=until_replayed)


def test_scaling_session_120x35(snap_compare, relative_session: Path) -> None:
    app = make_app(replay=relative_session, speed=math.inf)
    assert snap_compare(app, terminal_size=(120, 35), run_before=until_replayed)


def test_scaling_session_cut_in_a_2_device_run_120x35(snap_compare, relative_session: Path) -> None:
    app = make_app(replay=cut_in_the_x2_runs(relative_session), speed=math.inf)
    assert snap_compare(app, terminal_size=(120, 35), run_before=until_replayed)
