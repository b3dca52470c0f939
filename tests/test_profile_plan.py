"""--profile as a plan option: the flags, their checks, and what each runner is told (and what it is not).

A profiled run's RunConfig carries the steps, the trace cap and a trace path in the session's
traces/ folder; batch-size probes and parameter counts never profile; bad values are one line and
exit 2 with nothing started; plans saved before --profile load without it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.plan.plan import PROFILE_STEPS, TRACE_CAP_MB, Plan, PlanError
from benchtui.core.running import parity as parity_run
from benchtui.core.running.engine import Engine
from benchtui.core.store.session import SessionFolder, SessionWriter, load_session
from support import benchtui
from test_integration import FakeLauncher


def tiny(**overrides: Any) -> Plan:
    values: dict[str, Any] = dict(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=8,
        batch_sizes={"resnet50": 8},
        epochs=1,
        runs=1,
        device="cpu",
    )
    values.update(overrides)
    return Plan(**values)


class RecordingLauncher(FakeLauncher):
    """The stand-in runner, and the configuration every runner process was started with."""

    def __init__(self) -> None:
        self.configs: list[dict[str, Any]] = []

    def command(self, python: str, args: list[str]) -> list[str]:
        self.configs.append(json.loads(args[args.index("--config") + 1]))
        return super().command(python, args)


def test_the_plan_option_defaults_off_and_reaches_the_run_config() -> None:
    plan = Plan()
    assert (plan.profile, plan.profile_steps, plan.trace_cap_mb) == (False, PROFILE_STEPS, TRACE_CAP_MB)
    assert (PROFILE_STEPS, TRACE_CAP_MB) == (5, 200)
    config = (
        tiny(profile=True, profile_steps=12)
        .validate()
        .run_config("torch", "resnet50", "001-torch-resnet50-1")
    )
    assert (config.profile, config.profile_steps, config.trace_cap_mb) == (True, 12, 200)
    assert config.trace_path == ""  # the engine gives the path: it knows the session folder
    assert tiny().run_config("torch", "resnet50", "r").profile is False


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"profile_steps": 0}, "--profile-steps must be a whole number from 1 to 50, got 0"),
        ({"profile_steps": 51}, "--profile-steps must be a whole number from 1 to 50, got 51"),
        ({"profile_steps": True}, "--profile-steps must be a whole number from 1 to 50, got True"),
        ({"profile": "yes"}, "--profile is on or off, got 'yes'"),
        ({"trace_cap_mb": 0}, "the trace cap must be a whole number of MB from 1"),
    ],
)
def test_bad_profile_values_are_refused(values: dict[str, Any], said: str) -> None:
    with pytest.raises(PlanError, match="^" + said.replace("(", r"\(").replace(")", r"\)")):
        tiny(**{"profile": True, **values}).validate()


def test_plans_from_before_profile_load_unchanged_and_a_files_values_are_read_not_trusted() -> None:
    old = tiny().to_dict()
    for key in ("profile", "profile_steps", "trace_cap_mb"):
        del old[key]
    plan = Plan.from_dict(old)
    assert (plan.profile, plan.profile_steps, plan.trace_cap_mb) == (False, 5, 200)
    assert plan.validate().to_dict() == tiny().to_dict()
    kept = Plan.from_dict({**old, "profile": True, "profile_steps": 9, "trace_cap_mb": 50})
    assert (kept.profile, kept.profile_steps, kept.trace_cap_mb) == (True, 9, 50)
    bad = Plan.from_dict({**old, "profile": "yes", "profile_steps": 500, "trace_cap_mb": -1})
    assert (bad.profile, bad.profile_steps, bad.trace_cap_mb) == (False, 5, 200)
    assert Plan.from_dict({**old, "profile": 1, "profile_steps": "7"}).profile_steps == 5
    assert Plan.from_dict({**old, "profile": 1}).profile is False  # a bool, not anything truthy


def test_a_profiled_run_gets_a_trace_path_in_the_sessions_traces_folder_and_probes_never_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = tiny(profile=True, profile_steps=3, batch_auto=True, batch_sizes={}, samples=16).validate()
    monkeypatch.chdir(tmp_path)
    writer = SessionWriter.create(plan, "sessions")  # a relative folder, as --sessions-dir's default is
    launcher = RecordingLauncher()
    assert asyncio.run(Engine(plan, writer, launcher=launcher).run()) == "complete"
    probes = [c for c in launcher.configs if c["mode"] == "probe"]
    (run,) = [c for c in launcher.configs if c["mode"] == "train"]
    assert probes and not any(c["profile"] or c["trace_path"] for c in probes)
    folder = SessionFolder(writer.path)
    assert run["profile"] is True and run["profile_steps"] == 3 and run["trace_cap_mb"] == 200
    assert run["trace_path"] == str(folder.trace_path(run["run_id"]).absolute())
    assert Path(run["trace_path"]).is_absolute()  # the runner starts in the session folder
    assert Path(run["trace_path"]).parent == (writer.path / "traces").absolute()
    assert folder.traces_dir.is_dir() and not any(folder.traces_dir.iterdir())  # the runner adds its file
    assert load_session(writer.path).plan.profile is True  # recorded with the session's plan


def test_a_probe_runs_under_a_smaller_memory_cap_than_the_run_it_chooses(tmp_path: Path) -> None:
    """An address space differs by tens of MB from one process to the next: a probe that just fits under
    --memory-limit must not choose a run that does not (CI, stop 44). Without a cap, none for either."""
    for limit, probed in ((5000, 4750), (0, 0)):
        plan = tiny(batch_auto=True, batch_sizes={}, samples=16, memory_limit_mb=limit).validate()
        launcher = RecordingLauncher()
        writer = SessionWriter.create(plan, tmp_path / str(limit))
        assert asyncio.run(Engine(plan, writer, launcher=launcher).run()) == "complete"
        probes = [c for c in launcher.configs if c["mode"] == "probe"]
        (run,) = [c for c in launcher.configs if c["mode"] == "train"]
        assert probes and {c["memory_limit_mb"] for c in probes} == {probed}
        assert run["memory_limit_mb"] == limit and load_session(writer.path).plan.memory_limit_mb == limit


def test_a_session_without_profile_has_no_traces_folder(tmp_path: Path) -> None:
    plan = tiny().validate()
    writer = SessionWriter.create(plan, tmp_path)
    launcher = RecordingLauncher()
    assert asyncio.run(Engine(plan, writer, launcher=launcher).run()) == "complete"
    ((config),) = launcher.configs
    assert config["profile"] is False and config["trace_path"] == ""
    assert not (writer.path / "traces").exists()


def test_a_parameter_count_never_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, Any]] = []

    async def start_runner(python: str, args: list[str], *rest: Any, **kw: Any) -> Any:
        started.append(json.loads(args[1]))
        raise OSError("stop here: only the configuration is looked at")

    monkeypatch.setattr(parity_run, "start_runner", start_runner)
    with pytest.raises(OSError, match="stop here"):
        asyncio.run(parity_run.count_one(tiny(profile=True), "torch", "resnet50", 64))
    ((config),) = started
    assert config["mode"] == "count" and config["profile"] is False


def test_a_trace_named_by_an_event_stays_in_the_traces_folder(tmp_path: Path) -> None:
    folder = SessionFolder(tmp_path)
    assert folder.trace_file("001-torch-resnet50-1.pt.trace.json.gz") == tmp_path / "traces" / (
        "001-torch-resnet50-1.pt.trace.json.gz"
    )
    for name in ("../session.json", "/etc/passwd", "..", ".", "", "a\\b", "a\0b", None, 3):
        assert folder.trace_file(name) is None, name


SMALL = ["--frameworks", "torch", "--models", "resnet50", "--image-size", "32", "--samples", "16"]
SMALL += ["--batch-size", "8", "--epochs", "1", "--runs", "1", "--device", "cpu", "--no-nvml"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--profile", "--profile-steps", "0"], "--profile-steps must be a whole number from 1 to 50, got 0"),
        (
            ["--profile", "--profile-steps", "51"],
            "--profile-steps must be a whole number from 1 to 50, got 51",
        ),
        (["--profile", "--profile-steps", "many"], "argument --profile-steps: invalid int value: 'many'"),
        (["--profile-steps", "3"], "--profile-steps 3 sets how many steps --profile captures: add --profile"),
        (["--profile=yes"], "argument --profile: ignored explicit argument 'yes'"),
    ],
)
def test_bad_profile_flags_are_one_line_and_exit_2_with_nothing_started(
    tmp_path: Path, args: list[str], said: str
) -> None:
    proc = benchtui("run", "--headless", *SMALL, *args, "--sessions-dir", str(tmp_path / "s"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "s").exists()  # nothing started, nothing written


def test_the_flags_make_the_plan() -> None:
    from benchtui.cli import build_parser
    from benchtui.commands.run import plan_from_args

    def plan_of(*args: str) -> Plan:
        return plan_from_args(build_parser().parse_args(["run", *SMALL, *args]))

    assert plan_of().profile is False
    on = plan_of("--profile")
    assert (on.profile, on.profile_steps) == (True, 5)
    assert plan_of("--profile", "--profile-steps", "20").profile_steps == 20


PROFILING_RUNNER = """
import json, sys, time
from benchtui_runners.protocol import EventWriter
config = json.loads(sys.argv[sys.argv.index("--config") + 1])
writer = EventWriter.from_env()
writer.hello(framework=config["framework"], config=config, steps_per_epoch=1, samples_per_epoch=8)
writer.batch(1, 1, 0.01, 8)
writer.epoch(1, 0.01, 8)
writer.phase("profile", "start")
time.sleep(float(sys.argv[1]))
writer.phase("profile", "end")
writer.done()
"""


class ProfilingLauncher(FakeLauncher):
    """A runner that opens its profile phase and stays in it for ``seconds``."""

    def __init__(self, script: Path, seconds: float) -> None:
        self.script, self.seconds = script, seconds

    def command(self, python: str, args: list[str]) -> list[str]:
        return [python, str(self.script), str(self.seconds), *args]


@pytest.mark.asyncio
async def test_the_live_status_says_profiling_while_the_profile_phase_is_open(tmp_path: Path) -> None:
    from benchtui.app import make_app
    from benchtui.screens.plan import GpuProbe

    script = tmp_path / "profiling_runner.py"
    script.write_text(PROFILING_RUNNER)

    def status() -> str:
        return app.screen.query_one("#status").render().plain

    app = make_app(
        tiny(profile=True),
        autostart=True,
        sessions_dir=str(tmp_path / "s"),
        use_nvml=False,
        launcher=ProfilingLauncher(script, 2.0),
        probe=GpuProbe((), "NVML unavailable: test"),
    )
    async with app.run_test(size=(100, 30)) as pilot:
        seen: list[str] = []
        for _ in range(300):
            if app.engine is not None and app.engine.status not in ("pending", "running"):
                break
            seen.append(status() if app.screen.query("#status") else "")
            await pilot.pause(0.05)
        assert app.engine is not None and app.engine.status == "complete"
        profiling = [s for s in seen if "· profiling" in s]
        assert profiling and profiling[0].startswith("benchtui Run 1 of 1: ResNet50 · PyTorch · profiling · ")
        assert "profiling" not in status()  # the phase closed, the session ended
