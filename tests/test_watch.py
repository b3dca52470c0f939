"""``benchtui watch``: the live screen and a session without a plan, for telemetry and for a user's own command.

Real subprocesses over real pipes: the CLI in a fresh process, the user's scripts with benchtui's
timing hooks (a plain PyTorch loop with StepTimer, a plain Keras ``model.fit`` with KerasTimer), and
commands that use no hooks at all. The app tests drive the live screen with a script that speaks the
hooks' events without a framework (fast); the hooks' own timing is the slow tests' business.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from csv import DictReader
from pathlib import Path

import pytest

from benchtui.core.model.cell import CellSummary
from benchtui.core.model.session_model import NO_COMMAND, NO_TIMINGS
from benchtui.core.plan.plan import WATCH_RUN, Plan, PlanError, run_order, watch_label, watch_plan
from benchtui.core.reporting.model import wording
from benchtui.core.running.launcher import INHERITED_HOOK_ENV, command_env, runner_root
from benchtui.core.store.session import SessionError, load_session
from benchtui_runners import catalog
from support import ROOT, QuietApp, benchtui, only_session, read_events
from test_ui_live import alive

TORCH_SCRIPT = """
import torch
from benchtui_runners.hooks import StepTimer

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
x, y = torch.randn(24, 16), torch.randint(0, 4, (24,))
timer = StepTimer(batch_size=4)
for epoch in range(2):
    with timer.epoch():
        for i in range(0, 24, 4):
            opt.zero_grad()
            loss_fn(model(x[i : i + 4]), y[i : i + 4]).backward()
            opt.step()
            timer.step()
print("torch script trained")
"""

KERAS_SCRIPT = """
import numpy as np
import keras
from benchtui_runners.hooks import KerasTimer

x = np.random.rand(24, 16).astype("float32")
y = np.random.randint(0, 4, size=(24,))
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[KerasTimer(batch_size=4)])
print("keras script trained")
"""

#: What the hooks send, without a framework (the hooks' module needs one): the live screen's tests.
FAKE_HOOKS = """
import sys, time
from benchtui_runners.protocol import EventWriter

writer = EventWriter.from_env()
writer.hello(framework="torch", versions={"python": "3"}, device={"type": "cpu", "name": "fake"}, config={},
             settings={"batch_size": 4, "timing": "window", "source": "fake hooks"})
writer.phase("first_batch", "start")
step = 0
for epoch in range(1, 1000):
    start = time.perf_counter()
    for step in range(1, 5):
        time.sleep(0.02)
        writer.batch(epoch, step, 0.02, 4)
        if epoch == 1 and step == 1:
            writer.phase("first_batch", "end")
    writer.epoch(epoch, time.perf_counter() - start, 16)
    print("epoch", epoch, flush=True)
    if epoch >= int(sys.argv[1]):
        break
"""

#: A command that starts a grandchild and records both pids, then sleeps: what Ctrl+C must stop whole.
SLEEPER = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open("pids.tmp", "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
os.replace("pids.tmp", "pids")
print("sleeping", flush=True)
time.sleep(300)
"""


def script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def watch(root: Path, *command: str, cwd: Path, env: dict[str, str] | None = None, name: str = ""):
    args = ["watch", "--headless", "--no-nvml", "--sessions-dir", str(root), "--interval", "0.2"]
    args += ["--name", name] if name else []
    return benchtui(*args, "--", *command, cwd=cwd, env=env)


def run_end(events: list[dict]) -> dict:
    (end,) = [e for e in events if e["type"] == "run_end"]
    return end


def meta(session: Path) -> dict:
    return json.loads((session / "session.json").read_text())


def start_headless(root: Path, cwd: Path, *command: str) -> subprocess.Popen[str]:
    args = ["watch", "--headless", "--no-nvml", "--sessions-dir", str(root), "--interval", "0.1"]
    return subprocess.Popen(
        [sys.executable, "-m", "benchtui", *args, *(["--", *command] if command else [])],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# -- the plan, the catalog, the environment ---------------------------------------------------------
def test_a_watch_plan_has_one_run_and_reads_back_the_same(tmp_path: Path) -> None:
    plan = watch_plan(["/usr/bin/python3", "/somewhere/train.py", "--lr", "0.1"], str(tmp_path), name="w")
    (spec,) = run_order(plan)
    assert (spec.run_id, spec.framework, spec.model) == (WATCH_RUN, catalog.WATCH_FRAMEWORK, "watch")
    assert plan.stall_timeout == -1  # a script may print nothing for hours
    assert catalog.MODELS["watch"].label == "python3 train.py --lr 0.1" == watch_label(plan.watch)
    data = plan.to_dict()
    assert data["watch"] == {
        "command": ["/usr/bin/python3", "/somewhere/train.py", "--lr", "0.1"],
        "cwd": str(tmp_path),
    }
    assert data["batch_sizes"] == {}  # no placeholder batch: only what the hooks say
    again = Plan.from_dict(json.loads(json.dumps(data)))
    assert again.watch == plan.watch and run_order(again) == run_order(plan)
    assert watch_label({"command": []}) == "telemetry"
    assert watch_label({"command": ["python", "-c", "print('a b')"]}) == "python -c \"print('a b')\""
    # Read defensively: a hand edit cannot make a watch plan crash a view.
    odd = Plan.from_dict({**data, "watch": {"command": "python x.py", "cwd": 3}})
    assert odd.watch == {"command": [], "cwd": "3"}
    assert (
        Plan.from_dict({**data, "watch": ["x"], "frameworks": ["torch"], "models": ["resnet50"]}).watch == {}
    )


def test_watch_is_never_a_model_a_plan_can_name() -> None:
    assert "watch" in catalog.MODELS and "watch" in catalog.BUILTIN_MODELS
    assert "watch" not in catalog.MODEL_ORDER
    assert all("watch" not in group for group in catalog.MODEL_GROUPS.values())
    assert catalog.WATCH_FRAMEWORK not in catalog.FRAMEWORKS
    with pytest.raises(PlanError, match="benchtui watch"):
        Plan(models=["watch"]).validate()
    with pytest.raises(PlanError, match="unknown framework"):
        Plan(frameworks=[catalog.WATCH_FRAMEWORK]).validate()
    with pytest.raises(PlanError) as unknown:
        Plan(models=["nope"]).validate()
    assert "watch" not in str(unknown.value).split("choose from")[1]
    with pytest.raises(ValueError, match="taken"):
        catalog.check_definition({"name": "watch", "builders": {"torch": "m:f"}})


def test_tensor_models_count_samples_not_images_nor_tokens() -> None:
    words = wording([CellSummary.from_json({"kind": "tensor", "task": "train"})])
    assert (words.plural, words.tokens) == ("samples", False)
    assert wording(
        [CellSummary.from_json({"kind": "tensor"}), CellSummary.from_json({"kind": "tokens"})]
    ).tokens
    assert wording([CellSummary.from_json({"kind": "image"})]).plural == "images"


def test_the_command_keeps_the_users_environment_and_finds_the_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchtui.core.provenance import RUNNER_PACKAGE
    from benchtui_runners import hooks

    monkeypatch.setenv("PYTHONPATH", "/users/own/path")
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    monkeypatch.setenv("BENCHTUI_HOOKS_PID", "1")  # an outer watch's: never inherited
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    env = command_env(7)
    assert env["BENCHTUI_EVENT_FD"] == "7"
    assert env["PYTHONPATH"] == os.pathsep.join([str(runner_root(RUNNER_PACKAGE)), "/users/own/path"])
    assert env["KERAS_BACKEND"] == "jax" and "PYTHONSAFEPATH" not in env
    assert hooks.OWNER_ENV in INHERITED_HOOK_ENV and hooks.OWNER_ENV not in env


def test_the_telemetry_of_a_watch_is_summed_up_per_gpu() -> None:
    from benchtui.core.reporting.model import telemetry_facts

    def sample(t: float, util: int, mem: int, own: int) -> dict:
        gpu = {"index": 0, "util": util, "mem_used": mem, "power_w": 200.0, "proc_mem": own}
        return {
            "type": "gpu",
            "t": t,
            "run": WATCH_RUN,
            "gpus": [gpu, {"index": 1, "lost": True}],
            "host": {"cpu_percent": 150.0, "rss": 2**30, "system_busy_cores": 1.5},
        }

    facts = dict(
        telemetry_facts([sample(10.0, 80, 4 * 2**30, 3 * 2**30), sample(12.0, 100, 5 * 2**30, 2**30)], True)
    )
    assert facts["Over the run"].startswith("2 samples over 2.0 s, the command's CPU 1.50 cores mean")
    assert "1.0 GiB peak" in facts["Over the run"]
    assert facts["GPU 0 over the run"] == (
        "utilization 90% mean, memory 5.0 GiB peak, the command's 3.0 GiB peak, power 200 W mean"
    )
    assert facts["GPU 1 over the run"] == "no reading"
    assert "command" not in dict(telemetry_facts([sample(1.0, 1, 1, 1)], False))["Over the run"]
    assert telemetry_facts([], False) == [("Over the run", "no sample was recorded")]


def test_a_session_checks_that_only_a_watch_names_the_watch_model_or_the_command_framework(
    tmp_path: Path,
) -> None:
    from benchtui.core.store.session import SessionWriter

    writer = SessionWriter.create(watch_plan([], str(tmp_path)), tmp_path / "s")
    writer.finish("complete", {})
    assert load_session(writer.path).plan.frameworks == [catalog.WATCH_FRAMEWORK]
    for key, value in (("models", ["watch"]), ("frameworks", [catalog.WATCH_FRAMEWORK])):
        data = meta(writer.path)
        data["plan"]["watch"] = {}
        data["plan"]["frameworks"], data["plan"]["models"] = ["torch"], ["resnet50"]
        data["plan"][key] = value
        (writer.path / "session.json").write_text(json.dumps(data))
        with pytest.raises(SessionError, match="unknown to this benchtui"):
            load_session(writer.path)


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["no-such-command-benchtui", "./not-here.sh"])
def test_a_command_that_does_not_exist_is_one_line_and_no_session(
    tmp_path: Path, sessions_root: Path, command: str
) -> None:
    result = watch(sessions_root, command, "--flag", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("benchtui: error: "), result.stderr
    assert command in result.stderr
    assert list(sessions_root.iterdir()) == []


# -- commands without hooks ------------------------------------------------------------------------------
def test_a_command_without_hooks_records_its_telemetry_its_output_and_says_there_are_no_timings(
    tmp_path: Path, sessions_root: Path
) -> None:
    code = (
        "import os, time, benchtui_runners.hooks as hooks;"
        "print('cwd', os.getcwd()); print('path', os.environ['PYTHONPATH']);"
        "print('backend', os.environ.get('KERAS_BACKEND')); print('safe', 'PYTHONSAFEPATH' in os.environ);"
        "print('hooks', hooks.active(), flush=True); time.sleep(2.0)"
    )
    env = {"PYTHONPATH": "/users/own/path", "KERAS_BACKEND": "jax"}
    result = watch(sessions_root, sys.executable, "-c", code, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    session = only_session(sessions_root)
    assert meta(session)["status"] == "complete"
    events = read_events(session)
    samples = [e for e in events if e["type"] == "gpu" and e["run"] == WATCH_RUN]
    assert len(samples) >= 3 and any(s["host"]["rss"] for s in samples)  # the command's own memory
    assert run_end(events)["status"] == "ok" and run_end(events)["returncode"] == 0
    assert not [e for e in events if e["type"] in ("batch", "epoch", "hello")]
    log = (session / "logs" / f"{WATCH_RUN}.log").read_text()
    assert f"cwd {tmp_path}\n" in log  # the user's folder, not the session's
    assert "path " + os.pathsep.join([str(runner_root_for_tests()), "/users/own/path"]) in log
    assert "backend jax" in log and "safe False" in log and "hooks True" in log
    # Every view says it plainly: no timings, telemetry only, and never a zero as a time.
    assert NO_TIMINGS in " ".join(result.stdout.split())
    show = benchtui("show", str(session))
    assert show.returncode == 0 and "no timings" in show.stdout and "0.000" not in show.stdout
    assert "python -c" in show.stdout  # the run is labelled by its command
    assert (
        "Over the run:" in show.stdout
        and "the command's CPU" in show.stdout
        and f"Folder: {tmp_path}" in show.stdout
    )
    md = benchtui("export", str(session), "--format", "md")
    assert md.returncode == 0 and "no timings" in md.stdout and "telemetry only" in md.stdout
    data = json.loads(benchtui("export", str(session), "--format", "json").stdout)
    (row,) = data["rows"]
    assert row["reason"] == NO_TIMINGS and row["mean_epoch_s"] is None and row["batch_size"] is None
    assert data["watch"]["command"][:2] == [sys.executable, "-c"]
    csv = benchtui("export", str(session), "--format", "csv")
    assert csv.returncode == 0 and "no timings" in csv.stdout
    (record,) = list(DictReader(io.StringIO(csv.stdout)))
    assert record["model_label"] == watch_label(
        {"command": ["python", "-c", code]}
    )  # read back from the plan
    html = benchtui("export", str(session), "--format", "html", "-o", str(tmp_path / "r.html"))
    assert html.returncode == 0 and "no timings" in (tmp_path / "r.html").read_text()
    listed = benchtui("sessions", "--sessions-dir", str(sessions_root))
    assert listed.returncode == 0 and "watch: python -c" in listed.stdout


def runner_root_for_tests() -> Path:
    from benchtui.core.provenance import RUNNER_PACKAGE

    return runner_root(RUNNER_PACKAGE)


def test_a_command_that_fails_fails_the_run_with_its_exit_code_and_keeps_its_output(
    tmp_path: Path, sessions_root: Path
) -> None:
    code = "import sys; print('about to fail', flush=True); sys.exit(3)"
    result = watch(sessions_root, sys.executable, "-c", code, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    session = only_session(sessions_root)
    assert meta(session)["status"] == "failed"
    end = run_end(read_events(session))
    # Its last line of output says why, beside its exit code (it timed nothing: that is all there is).
    assert (end["status"], end["reason"], end["returncode"]) == (
        "failed",
        "exited with code 3: about to fail",
        3,
    )
    assert "about to fail" in (session / "logs" / f"{WATCH_RUN}.log").read_text()
    assert "exited with code 3" in result.stderr
    assert benchtui("show", str(session)).returncode == 0


def test_a_command_that_crashes_before_any_hook_says_its_last_stderr_line(
    tmp_path: Path, sessions_root: Path
) -> None:
    """A script that fails at its first import: the run's reason is its error as it printed it (the last
    line of its traceback on stderr), in the session and on the progress line, not only an exit code."""
    (tmp_path / "train.py").write_text("import sys\nprint('starting', flush=True)\nimport mynets_not_here\n")
    result = watch(sessions_root, sys.executable, "train.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    end = run_end(read_events(only_session(sessions_root)))
    said = "ModuleNotFoundError: No module named 'mynets_not_here'"
    assert end["reason"] == f"exited with code 1: {said}", end
    assert f"exited with code 1: {said}" in " ".join(result.stderr.split())
    # it crashed before it could reach a hook: nothing suggests it does not use them
    assert "timing hooks" not in result.stderr and "ended before it sent a batch" in result.stderr


# -- Ctrl+C ------------------------------------------------------------------------------------------------
def test_ctrl_c_stops_the_commands_whole_process_group_and_finishes_the_session(
    tmp_path: Path, sessions_root: Path
) -> None:
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    proc = start_headless(sessions_root, tmp_path, sys.executable, str(sleeper))
    pids: list[int] = []
    try:
        wait_for(lambda: (tmp_path / "pids").exists(), timeout=30)
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        assert all(alive(p) for p in pids)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not any(alive(p) for p in pids), timeout=5)
        left = [p for p in pids if alive(p)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        for pid in pids:  # never left to the next test, whatever happened
            with contextlib.suppress(ProcessLookupError):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    assert not left, "the command and its grandchild are gone"
    assert proc.returncode == 1, err  # the command did not exit 0
    session = only_session(sessions_root)
    assert meta(session)["status"] == "incomplete" and meta(session)["finished"]
    end = run_end(read_events(session))
    assert end["status"] == "stopped" and "stopped by the user" in end["reason"]
    loaded = load_session(session)
    assert loaded.warnings == [] and loaded.model.runs[WATCH_RUN].status == "stopped"
    assert "sleeping" in (session / "logs" / f"{WATCH_RUN}.log").read_text()
    assert benchtui("show", str(session)).returncode == 0


def test_a_training_stopped_with_ctrl_c_keeps_the_figures_it_measured(
    tmp_path: Path, sessions_root: Path
) -> None:
    fake = script(tmp_path, "fake_hooks.py", FAKE_HOOKS)
    proc = start_headless(sessions_root, tmp_path, sys.executable, str(fake), "999")
    try:
        wait_for(lambda: any(sessions_root.glob("*/events.jsonl")), timeout=30)
        (events_path,) = sessions_root.glob("*/events.jsonl")
        wait_for(lambda: events_path.read_text().count('"type":"epoch"') >= 3, timeout=30)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert proc.returncode == 1, err
    session = only_session(sessions_root)
    loaded = load_session(session)
    row = loaded.model.row("torch", "watch")
    assert row.status == "incomplete" and "stopped by the user" in row.reason
    assert row.runs == 1 and row.mean_epoch_s > 0 and row.images_per_s > 0 and row.epochs >= 3
    compare = benchtui("compare", str(session), str(session))
    assert compare.returncode == 0, compare.stderr
    line = next(x for x in compare.stdout.splitlines() if "fake_hooks.py" in x)
    assert "1.000" in line and "has no" not in line


def test_telemetry_only_runs_until_ctrl_c_and_ends_complete(tmp_path: Path, sessions_root: Path) -> None:
    proc = start_headless(sessions_root, tmp_path)
    try:
        wait_for(lambda: any(sessions_root.glob("*/events.jsonl")), timeout=30)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert proc.returncode == 0, err
    session = only_session(sessions_root)
    assert meta(session)["status"] == "complete"
    events = read_events(session)
    assert len([e for e in events if e["type"] == "gpu" and e["run"] == WATCH_RUN]) >= 5
    assert run_end(events)["status"] == "ok"
    assert NO_COMMAND in " ".join(out.split())
    loaded = load_session(session)
    assert loaded.plan.watch == {"command": [], "cwd": str(tmp_path)}
    show = benchtui("show", str(session))
    assert show.returncode == 0 and "telemetry" in show.stdout


# -- real frameworks with benchtui's hooks -----------------------------------------------------------------
@pytest.mark.slow
def test_a_pytorch_loop_with_the_step_timer_streams_its_batches_and_reports_like_any_session(
    tmp_path: Path, sessions_root: Path
) -> None:
    train = script(tmp_path, "train_torch.py", TORCH_SCRIPT)
    sessions = []
    for name in ("a", "b"):
        result = watch(sessions_root, sys.executable, train.name, cwd=tmp_path, name=name)
        assert result.returncode == 0, result.stderr
        assert "epoch 2" in result.stderr  # each epoch as it ends
        sessions.append(next(p for p in sessions_root.iterdir() if p.name.endswith(f"_{name}")))
    session = sessions[0]
    events = read_events(session)
    mine = [e for e in events if e.get("run") == WATCH_RUN]
    assert [e["epoch"] for e in mine if e["type"] == "epoch"] == [1, 2]
    batches = [e for e in mine if e["type"] == "batch"]
    assert sum(e["steps"] for e in batches) == 12 and {e["samples"] for e in batches} == {4}
    assert run_end(events)["status"] == "ok"
    plan = meta(session)["plan"]
    assert plan["frameworks"] == ["torch"] and plan["batch_sizes"] == {"watch": 4}
    loaded = load_session(session)
    assert loaded.model.runs[WATCH_RUN].spec.framework == "torch" and not loaded.warnings
    row = loaded.model.row("torch", "watch")
    assert row.status == "ok" and row.epochs == 2 and row.images_per_s > 0 and not row.reason
    assert "torch script trained" in (session / "logs" / f"{WATCH_RUN}.log").read_text()

    show = benchtui("show", str(session))
    assert show.returncode == 0 and "python train_torch.py" in show.stdout and "PyTorch" in show.stdout
    figure = f"{row.mean_epoch_s:.3f}"
    for fmt in ("md", "json", "csv"):
        out = benchtui("export", str(session), "--format", fmt)
        assert out.returncode == 0 and "train_torch.py" in out.stdout, fmt
        assert "samples/s" in out.stdout or fmt != "md"
    assert figure in benchtui("export", str(session), "--format", "md").stdout
    data = json.loads(benchtui("export", str(session), "--format", "json").stdout)
    assert data["rows"][0]["framework"] == "torch" and data["rows"][0]["mean_epoch_s"] == pytest.approx(
        row.mean_epoch_s
    )
    html = benchtui("export", str(session), "--format", "html")
    assert html.returncode == 0 and "train_torch.py" in (session / "report.html").read_text()
    compare = benchtui("compare", str(sessions[0]), str(sessions[1]))
    assert compare.returncode == 0, compare.stderr
    line = next(x for x in compare.stdout.splitlines() if "train_torch.py" in x)
    assert "PyTorch" in line and "has no" not in line  # cell by cell: both sessions have it
    assert "B/A" in compare.stdout


@pytest.mark.slow
def test_a_keras_fit_with_the_callback_streams_its_batches(tmp_path: Path, sessions_root: Path) -> None:
    train = script(tmp_path, "train_keras.py", KERAS_SCRIPT)
    result = watch(
        sessions_root, sys.executable, str(train), cwd=tmp_path, env={"KERAS_BACKEND": "tensorflow"}
    )
    assert result.returncode == 0, result.stderr
    session = only_session(sessions_root)
    events = read_events(session)
    (hello,) = [e for e in events if e["type"] == "hello"]
    assert hello["framework"] == "tensorflow" and hello["run"] == WATCH_RUN
    assert [e["epoch"] for e in events if e["type"] == "epoch"] == [1, 2]
    assert sum(e["steps"] for e in events if e["type"] == "batch") == 12
    assert meta(session)["plan"]["frameworks"] == ["tensorflow"]
    show = benchtui("show", str(session))
    assert show.returncode == 0 and "tf.keras" in show.stdout and "train_keras.py" in show.stdout


# -- the app ---------------------------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_live_screen_shows_a_watched_commands_run_and_its_batches_and_s_stops_it(
    tmp_path: Path,
    quiet_app: QuietApp,
) -> None:
    from benchtui.widgets.results_table import ResultsTable
    from test_ui_live import wait_for as pilot_wait

    fake = script(tmp_path, "fake_hooks.py", FAKE_HOOKS)
    plan = watch_plan([sys.executable, str(fake), "999"], str(tmp_path))
    app = quiet_app(plan, sessions_dir=tmp_path / "s")

    def cell(column: str) -> str:
        table = app.screen.query_one(ResultsTable)
        return table.cell_text("watch|torch", column) if "watch|torch" in table._shown else ""

    async with app.run_test(size=(120, 36)) as pilot:
        await pilot_wait(pilot, lambda: cell("state").startswith("epoch 2"), timeout=60)
        table = app.screen.query_one(ResultsTable)
        assert "watch|command" not in table._shown  # the row moved to the framework the hooks named
        assert cell("model") == "python fake_hooks.py 999" and cell("framework") == "PyTorch"
        assert cell("ips") not in ("", "–") and cell("batch") not in ("", "–")
        status = app.screen.query_one("#status").render()
        assert "Watching" in str(status) and "s stops the command" in str(status)
        assert app.screen.check_action("stop_run", ()) is True
        assert (
            app.screen.check_action("pause", ()) is False
            and app.screen.check_action("skip_model", ()) is False
        )
        pid = app.engine.current.pid  # type: ignore[union-attr]
        await pilot.press("s")
        await pilot_wait(pilot, lambda: not app.runs_going, timeout=20)
        assert not alive(pid)
        assert cell("state") == "stopped" and app.session_status == "incomplete"
        assert app.screen.check_action("new_plan", ()) is False  # a watch has no plan to go back to
        await pilot.press("q")
    assert app.exit_code == 1
    session = only_session(tmp_path / "s")
    assert meta(session)["plan"]["frameworks"] == ["torch"]
    assert run_end(read_events(session))["status"] == "stopped"


@pytest.mark.asyncio
async def test_the_live_screen_ends_a_telemetry_watch_on_quit_without_asking(
    tmp_path: Path, quiet_app: QuietApp
) -> None:
    from benchtui.screens.confirm import ConfirmScreen
    from test_ui_live import wait_for as pilot_wait

    app = quiet_app(watch_plan([], str(tmp_path), interval=0.1), sessions_dir=tmp_path / "s")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot_wait(pilot, lambda: app.engine is not None and len(app.engine.model.gpu_samples) >= 3)
        assert "telemetry only" in str(app.screen.query_one("#status").render())
        await pilot.press("q")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot_wait(pilot, lambda: not app.is_running, timeout=20)
    assert app.exit_code == 0
    session = only_session(tmp_path / "s")
    assert meta(session)["status"] == "complete"
    assert run_end(read_events(session))["status"] == "ok"


def test_the_watch_command_imports_no_framework() -> None:
    code = (
        "import sys, benchtui.commands.watch, benchtui.core.running.watch, benchtui.core.running.headless;"
        "bad = [m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
