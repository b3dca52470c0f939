"""A plan as a grid of settings: ``--sweep AXIS=V1,V2`` and ``--best`` on the command line, what a sweep cannot
go with (one line, exit 2), the runs it makes, each framework's best settings per device, the batch search
per point, the size said before it starts, and the plan's record in session.json."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from benchtui.cli import main
from benchtui.core.plan import sweep
from benchtui.core.plan.devices import Placement, place
from benchtui.core.plan.estimate import sweep_words
from benchtui.core.plan.plan import Plan, PlanError, run_order
from benchtui.core.plan.sweep import NO_POINT, Point
from support import benchtui

#: A small CPU plan every refusal starts from: only the flag under test is wrong.
BASE = [
    "run",
    "--headless",
    "--device",
    "cpu",
    "--frameworks",
    "torch,tensorflow",
    "--models",
    "resnet50_v1_5",
]
BASE += ["--samples", "64", "--image-size", "32"]


def _refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> str:
    """The one line the real command line says for ``args``, checked: exit 2, nothing started."""
    code = main([*BASE, *args, "--sessions-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchtui: error: "), err
    assert list(tmp_path.iterdir()) == []  # nothing started, no session written
    return lines[0].removeprefix("benchtui: error: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", "bach=4,8"], "--sweep: unknown axis 'bach' (did you mean 'batch'?)"),
        (["--sweep", "batch="], "--sweep batch has no values"),
        (["--sweep", "batch"], "--sweep takes AXIS=V1,V2"),
        (
            ["--sweep", "precision=fp32,fp8"],
            "--sweep precision takes fp32, tf32, amp-fp16, amp-bf16, got 'fp8'",
        ),
        (["--sweep", "batch=0,4"], "--sweep batch takes whole numbers from 1 or auto, got '0'"),
        (["--sweep", "batch=4,04"], "--sweep batch gives 4 twice"),
        (["--sweep", "batch=4", "--sweep", "batch=8"], "--sweep gives batch twice"),
        (["--sweep", "batch=8,128"], "--sweep batch 128 is larger than --samples 64"),
        (
            ["--sweep", "batch=20,40", "--devices", "2"],
            "--sweep batch 40 on 2 devices (80) is larger than --samples 64",
        ),
        (["--sweep", "batch=4,8", "--runs", "1000", "--models", "all"], "runs (at most 10,000)"),
        (
            ["--sweep", "batch=4,8", "--batch-size", "4"],
            "--sweep batch sets the batch size: drop --batch-size",
        ),
        (["--sweep", "batch=4,8", "--devices", "2", "--global-batch", "8"], "--global-batch fixes the batch"),
        (["--sweep", "batch=auto,8", "--devices", "2"], "--sweep batch auto searches one device"),
        (
            ["--sweep", "precision=fp32,amp-bf16", "--precision", "fp32"],
            "--sweep precision sets the precision: drop --precision",
        ),
        (["--sweep", "compile=off,on", "--compile"], "--sweep compile sets the compiler: drop --compile"),
        (["--sweep", "channels-last=off,on", "--channels-last"], "drop --channels-last"),
        (
            ["--sweep", "data=device,host", "--data", "host"],
            "--sweep data sets where the data is: drop --data",
        ),
        (
            ["--sweep", "seq-len=32,64"],
            "--sweep seq-len sets tokens per sample: none of the plan's models takes tokens",
        ),
        (
            ["--sweep", "seq-len=64,512", "--models", "gpt2_mini"],
            "GPT-2 mini has a context of 256 tokens: --sweep seq-len 512",
        ),
        (["--sweep", "seq-len=32,64", "--models", "gpt2_mini", "--seq-len", "32"], "drop --seq-len"),
        (
            ["--sweep", "channels-last=off,on", "--frameworks", "tensorflow,keras-jax"],
            "it is PyTorch's layout",
        ),
        (
            ["--sweep", "channels-last=off,on", "--models", "gpt2_mini"],
            "none of the plan's models takes images",
        ),
        (
            ["--sweep", "devices=1,2", "--sweep", "batch=4,8"],
            "--sweep devices is a scaling session and goes alone",
        ),
        (["--sweep", "devices=1,2", "--devices", "2"], "--sweep devices sets the devices: drop --devices"),
        (["--sweep", "devices=1,2", "--scaling"], "--sweep devices is the scaling session: drop --scaling"),
        (
            ["--best", "--precision", "amp-fp16"],
            "--best chooses the precision per framework: drop --precision",
        ),
        (["--best", "--compile"], "--best chooses the compiler per framework: drop --compile"),
        (
            ["--best", "--channels-last"],
            "--best chooses the memory layout per framework: drop --channels-last",
        ),
        (
            ["--best", "--sweep", "precision=fp32,tf32"],
            "--best chooses precision, compile and channels-last per",
        ),
        (
            ["--best", "--sweep", "batch=4,8"],
            "--best chooses each framework's largest batch: drop --sweep batch",
        ),
        (
            ["--best", "--sweep", "settings=same,best"],
            "--best is --sweep settings=same,best: give one of them",
        ),
        (["--best", "--devices", "2"], "--best searches the largest batch on one device"),
        (["--best", "--scaling", "--devices", "2"], "--best searches the largest batch on one device"),
        (
            ["--sweep", "settings=best", "--global-batch", "8"],
            "--best searches each framework's largest batch",
        ),
    ],
)
def test_a_sweep_it_cannot_run_is_refused_in_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert message in _refused(capsys, tmp_path, *args)


def test_a_refusal_in_a_fresh_process_is_one_line_and_no_traceback(tmp_path: Path) -> None:
    result = benchtui(*BASE, "--sweep", "batch=8,128", "--sessions-dir", str(tmp_path), timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "benchtui: error: --sweep batch 128 is larger than --samples 64"
    assert "Traceback" not in result.stderr and list(tmp_path.iterdir()) == []


def _plan(*args: str) -> Plan:
    from benchtui.cli import build_parser
    from benchtui.commands.run import plan_from_args

    plan: Plan = plan_from_args(build_parser().parse_args([*BASE, *args]))
    return plan


def test_sweeps_become_the_plans_grid_and_its_runs_interleave_frameworks_and_points() -> None:
    plan = _plan("--sweep", "batch=4,8", "--sweep", "channels_last=off,ON", "--runs", "2")
    assert plan.sweep == {"batch": ["4", "8"], "channels-last": ["off", "on"]}
    assert [p.key for p in plan.points()] == [
        "batch=4,channels-last=off",
        "batch=4,channels-last=on",
        "batch=8,channels-last=off",
        "batch=8,channels-last=on",
    ]
    ids = [s.run_id for s in run_order(plan)]
    # tf.keras is channels-last at every setting: its channels-last=on cells read the off points' runs.
    assert ids[:6] == [
        "001-torch-resnet50_v1_5-batch4_channels-last-off-1",
        "002-tensorflow-resnet50_v1_5-batch4_channels-last-off-1",
        "003-torch-resnet50_v1_5-batch4_channels-last-on-1",
        "004-torch-resnet50_v1_5-batch8_channels-last-off-1",
        "005-tensorflow-resnet50_v1_5-batch8_channels-last-off-1",
        "006-torch-resnet50_v1_5-batch8_channels-last-on-1",
    ]
    assert len(ids) == plan.run_count() == 12 and ids[6].endswith("-2")
    at = plan.at(Point.from_key("batch=8,channels-last=on"), "torch", "resnet50_v1_5")
    assert at.batch_size("resnet50_v1_5", "torch") == 8 and at.channels_last


def test_best_is_the_settings_axis_and_a_devices_sweep_is_a_scaling_session() -> None:
    best = _plan("--best")
    assert best.sweep == {"settings": ["same", "best"]}
    assert [s.run_id for s in run_order(best)][:2] == [
        "001-torch-resnet50_v1_5-settings-same-1",
        "002-tensorflow-resnet50_v1_5-settings-same-1",
    ]
    scaling = _plan("--sweep", "devices=1,2,3")
    assert (scaling.devices, scaling.scaling, scaling.device_counts()) == (3, True, [1, 2, 3])
    assert scaling.points() == [NO_POINT]  # no point axis: the rows are the scaling session's, as before
    assert {s.devices for s in run_order(scaling)} == {1, 2, 3}
    inference = _plan("--task", "inference", "--sweep", "batch=1,4,16")  # its latency/throughput curve
    assert inference.sweep == {"batch": ["1", "4", "16"]} and inference.run_count() == 18


AMPERE = {"index": 0, "name": "NVIDIA A100", "capability": "8.0"}
TURING = {"index": 0, "name": "Tesla T4", "capability": "7.5"}
PASCAL = {"index": 0, "name": "Tesla P100", "capability": "6.0"}
UNKNOWN = {"index": 0, "name": "a GPU NVML did not describe"}


@pytest.mark.parametrize(
    ("framework", "gpu", "precision", "compile_", "channels_last"),
    [
        ("torch", None, "fp32", "on", True),
        ("torch", AMPERE, "amp-bf16", "on", True),
        ("torch", TURING, "amp-fp16", "on", True),
        ("torch", PASCAL, "fp32", "on", False),
        ("torch", UNKNOWN, "amp-fp16", "on", True),
        ("tensorflow", None, "fp32", "default", None),
        ("tensorflow", AMPERE, "amp-fp16", "on", None),
        ("tensorflow", TURING, "amp-fp16", "on", None),
        ("tensorflow", PASCAL, "fp32", "on", None),
        ("keras-jax", None, "fp32", "default", None),
        ("keras-jax", AMPERE, "amp-fp16", "default", None),
        ("keras-jax", TURING, "amp-fp16", "default", None),
        ("keras-jax", PASCAL, "fp32", "default", None),
        ("keras-torch", None, "fp32", "default", None),
        ("keras-torch", AMPERE, "amp-bf16", "default", None),
        ("keras-torch", TURING, "amp-fp16", "default", None),
        ("keras-torch", PASCAL, "fp32", "default", None),
        ("keras-torch", UNKNOWN, "amp-fp16", "default", None),
    ],
)
def test_best_settings_per_framework_and_device(
    framework: str, gpu: dict[str, Any] | None, precision: str, compile_: str, channels_last: bool | None
) -> None:
    best = sweep.best_settings(framework, "resnet50", gpu)
    assert best["precision"] == precision and best["compile"] == compile_
    assert best.get("channels_last") == channels_last  # PyTorch's only: Keras is NHWC at every setting
    assert best["batch_auto"] and best["batch_policy"] == "per-framework"


def test_best_settings_leave_channels_last_off_for_a_token_model_and_read_nvmls_tuple() -> None:
    assert sweep.best_settings("torch", "gpt2_mini", AMPERE)["channels_last"] is False
    assert (
        sweep.capability({"capability": [8, 6]}) == (8, 6) and sweep.capability({"capability": "x"}) is None
    )
    assert sweep.best_settings("mxnet", "resnet50", None) == {}


def test_the_best_point_runs_with_each_frameworks_settings_on_the_sessions_gpu() -> None:
    plan = _plan("--best", "--batch-size", "8")
    best, same = Point.from_key("settings=best"), Point.from_key("settings=same")
    on_gpu = plan.resolve(
        Placement("cuda", "cuda:0", dict(AMPERE)),
        point_batches={("torch", "resnet50_v1_5", "settings=best"): 24},
    )
    torch, _ = on_gpu.run_config("torch", "resnet50_v1_5", "r", 1, best)
    tf, _ = on_gpu.run_config("tensorflow", "resnet50_v1_5", "r", 1, best)
    assert (torch.precision, torch.compile, torch.channels_last, torch.batch_size) == (
        "amp-bf16",
        "on",
        True,
        24,
    )
    assert (tf.precision, tf.compile, tf.channels_last) == ("amp-fp16", "on", False)
    plain, _ = on_gpu.run_config("torch", "resnet50_v1_5", "r", 1, same)
    assert (plain.precision, plain.compile, plain.channels_last, plain.batch_size) == (
        "fp32",
        "default",
        False,
        8,
    )
    on_cpu = plan.resolve(place("cpu", []))
    assert on_cpu.run_config("torch", "resnet50_v1_5", "r", 1, best)[0].precision == "fp32"
    words = sweep.settings_words(plan, best, "torch", "resnet50_v1_5", AMPERE)
    assert words == "amp-bf16, compile on, channels-last on, batch auto"
    assert (
        sweep.settings_words(plan, best, "tensorflow", "resnet50_v1_5", None)
        == "fp32, compile default, batch auto"
    )
    assert (
        sweep.settings_words(plan, same, "torch", "resnet50_v1_5", None)
        == "fp32, compile default, channels-last off, batch 8"
    )


def test_the_batch_search_runs_per_point_under_its_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An auto batch at sweep points: each point searched with its own precision (amp fits twice the batch
    here), its choice recorded with the point and given to the point's runs; a fixed point is not searched."""
    from benchtui.core.running.engine import Engine
    from benchtui.core.store.session import SessionWriter

    plan = _plan("--sweep", "batch=auto,4", "--sweep", "precision=fp32,amp-bf16", "--frameworks", "torch")
    engine = Engine(plan, SessionWriter.create(plan, tmp_path))
    asked: list[tuple[str, int, str]] = []

    async def probe(framework: str, model: str, batch: int, point: Point = NO_POINT) -> str:
        asked.append((framework, batch, point.key))
        fits = 32 if engine.resolved.at(point, framework, model).precision == "amp-bf16" else 16
        return "ok" if batch <= fits else "oom"

    monkeypatch.setattr(engine, "_probe", probe)
    assert [(m, p.key, fws) for m, p, fws in engine.searches()] == [
        ("resnet50_v1_5", "batch=auto,precision=fp32", ["torch"]),
        ("resnet50_v1_5", "batch=auto,precision=amp-bf16", ["torch"]),
    ]
    asyncio.run(engine._search_batches())
    assert {p for _, _, p in asked} == {"batch=auto,precision=fp32", "batch=auto,precision=amp-bf16"}
    engine.writer.finish("complete", {})
    choices = [json.loads(line) for line in (engine.writer.path / "events.jsonl").read_text().splitlines()]
    choices = [e for e in choices if e.get("type") == "batch_choice"]
    assert [(e["point"], e["chosen"]) for e in choices] == [
        ("batch=auto,precision=fp32", {"torch": 16}),
        ("batch=auto,precision=amp-bf16", {"torch": 32}),
    ]
    sizes = {
        s.point.key: engine.resolved.run_config("torch", s.model, s.run_id, 1, s.point)[0].batch_size
        for s in engine.specs
    }
    assert sizes == {
        "batch=auto,precision=fp32": 16,
        "batch=auto,precision=amp-bf16": 32,
        "batch=4,precision=fp32": 4,
        "batch=4,precision=amp-bf16": 4,
    }
    assert plan.sweep == {"batch": ["auto", "4"], "precision": ["fp32", "amp-bf16"]}  # the plan as given


def test_sweep_words_say_the_size_and_the_cpus_duration() -> None:
    plan = _plan("--sweep", "batch=4,8", "--sweep", "channels-last=off,on", "--runs", "2", "--epochs", "2")
    words = sweep_words(plan, 2.0)
    assert words.startswith(
        "4 points × 2 frameworks × 2 runs = 12 runs (tf.keras shares its channels-last points), about "
    )
    assert sweep_words(plan, 2.0, gpu=True) == (
        "4 points × 2 frameworks × 2 runs = 12 runs (tf.keras shares its channels-last points)"
    )
    assert "and the batch searches before them" in sweep_words(_plan("--best"), 2.0)
    assert sweep_words(_plan("--sweep", "devices=1,2"), 2.0, gpu=True) == (
        "2 device counts × 2 frameworks × 3 runs = 12 runs"
    )
    assert sweep_words(_plan(), 2.0) == ""
    # A longer duration for a sweep of more runs: the estimate counts each point's runs.
    more = _plan("--sweep", "batch=4,8", "--sweep", "channels-last=off,on", "--runs", "8", "--epochs", "40")
    assert "hour" in sweep_words(more, 2.0) or "minutes" in sweep_words(more, 2.0)


def test_a_sweeps_plan_round_trips_through_session_json_and_an_old_plan_loads_unchanged(
    tmp_path: Path,
) -> None:
    from benchtui.core.store.session import SessionFolder, SessionWriter

    plan = _plan("--sweep", "data=device,host", "--best")
    writer = SessionWriter.create(plan, tmp_path)
    writer.finish("complete", {})
    recorded = SessionFolder.open(writer.path).read_plan()
    assert recorded.sweep == {"data": ["device", "host"], "settings": ["same", "best"]}
    assert [s.run_id for s in run_order(recorded)] == [s.run_id for s in run_order(plan)]
    old = _plan().to_dict()
    assert "sweep" not in old  # a plan without a sweep is recorded as before sweeps were
    assert Plan.from_dict(old).sweep == {} and Plan.from_dict(old).to_dict() == old
    # A hand-edited sweep this version would refuse is none: one point, as an old session.
    assert Plan.from_dict({**old, "sweep": {"bach": ["4"]}}).sweep == {}


def test_validate_refuses_a_programs_plan_with_a_sweep_it_cannot_read() -> None:
    plan = Plan(frameworks=["torch"], models=["resnet50_v1_5"], image_size=32, samples=64)
    plan.sweep = {"batch": "4,8"}  # type: ignore[dict-item]
    with pytest.raises(PlanError, match="map each axis to a list"):
        plan.validate()
    plan.sweep = {"batch": ["4", "08"]}
    assert plan.validate().sweep == {"batch": ["4", "8"]}  # as --sweep keeps it
    plan.sweep, plan.devices = {"devices": ["1", "2"]}, 4
    with pytest.raises(PlanError, match="--sweep devices runs up to 2 devices"):
        plan.validate()
