"""Issue 30, the plan's part: defaults a newcomer meets on a busy CPU. The quick preset's duration comes
from the idle cores, a CPU plan's threads are the idle cores (measured once, recorded, said), the quick
preset compares the same network on both sides, ``run`` with no flags is quick without a GPU, presets as
the positional PLAN, a user-level sessions folder, and the smaller items of its section 5."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchtui.cli import build_parser, main
from benchtui.commands.run import plan_from_args
from benchtui.core.plan import devices, threads
from benchtui.core.plan.estimate import cpu_seconds, duration_words, long_cpu_warning, preset_words
from benchtui.core.plan.plan import Plan, from_preset
from benchtui.core.running import engine as engine_module
from benchtui.core.running import sampler
from benchtui.core.running.engine import Engine
from benchtui.core.store import session as session_store
from benchtui.core.store.session import SessionError, SessionWriter
from benchtui_runners import catalog
from sessionfactory import make_session
from support import TINY, benchtui, only_session, read_events


# -- the quick preset's duration comes from the idle cores ---------------------------------------------
def test_the_quick_presets_words_come_from_the_idle_cores() -> None:
    quick = from_preset("quick")
    busy, idle = preset_words("quick", 0.3), preset_words("quick", 2.0)
    for cores, words in ((0.3, busy), (2.0, idle)):
        assert words == f"about {duration_words(cpu_seconds(quick, cores))}", words
        assert re.fullmatch(r"about \d+ minutes?", words), words
    # A machine whose cores others keep busy takes longer than the same machine idle.
    assert cpu_seconds(quick, 0.3) > cpu_seconds(quick, 1.0) > cpu_seconds(quick, 2.0)
    assert busy != idle
    # The long-plan warning points at the quick preset with the same words, not a fixed "two minutes".
    warning = long_cpu_warning(from_preset("study"), cores=0.3)
    assert (
        warning.endswith(f"--preset quick measures both frameworks in {busy}")
        and "two minutes" not in warning
    )


# -- a CPU plan's threads: the idle cores, measured once -----------------------------------------------
class _Times(tuple):  # psutil's scputimes: a tuple of seconds with names
    @property
    def idle(self) -> float:
        return float(self[1])

    @property
    def iowait(self) -> float:
        return 0.0


def _fake_cpus(monkeypatch: pytest.MonkeyPatch, busy: list[float]) -> None:
    """Two readings of len(busy) CPUs one second apart, CPU i busy for busy[i] of that second."""
    readings = iter(
        [
            [_Times((0.0, 0.0)) for _ in busy],
            [_Times((b, 1.0 - b)) for b in busy],
        ]
    )
    monkeypatch.setattr(threads, "_cpu_times", lambda: next(readings))
    monkeypatch.setattr(threads.time, "sleep", lambda s: None)
    monkeypatch.setattr(threads, "usable_cores", lambda: len(busy))
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(len(busy))), raising=False)


@pytest.mark.parametrize(
    ("busy", "idle", "threads_"),
    [
        ([0.0, 0.0], 2.0, 2),  # an idle machine: every core, as before
        ([1.0, 0.8], 0.2, 1),  # the machine: never fewer than one
        ([0.9, 0.5], 0.6, 1),
        ([0.7, 0.7, 0.1, 0.0], 2.5, 3),  # to the nearest core
        ([0.2, 0.1, 0.0, 0.0], 3.7, 4),
    ],
)
def test_the_idle_cores_make_the_threads(
    monkeypatch: pytest.MonkeyPatch, busy: list[float], idle: float, threads_: int
) -> None:
    _fake_cpus(monkeypatch, busy)
    record = threads.measure_idle()
    assert record == {
        "idle_cores": pytest.approx(idle),
        "cores": len(busy),
        "window_s": threads.IDLE_WINDOW_S,
        "threads": threads_,
    }
    words = threads.threads_words(record)
    assert words.startswith(f"threads: {threads_} (the idle cores of {len(busy)}, measured over 1 s")


def test_a_real_busy_process_leaves_fewer_idle_cores() -> None:
    """A stand-in load (a process spinning on one core) is seen: at least half a core fewer idle."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # started and spinning
        record = threads.measure_idle(0.5)
    finally:
        spin.kill()
        spin.wait()
    assert record["idle_cores"] is not None and record["idle_cores"] <= record["cores"] - 0.5, record
    assert 1 <= record["threads"] <= max(1, record["cores"] - 0)


def _engine(tmp_path: Path, **plan: Any) -> Engine:
    values = {"frameworks": ["torch"], "models": ["resnet50"], "device": "cpu", **plan}
    p = Plan.from_dict(values).validate()
    return Engine(p, SessionWriter.create(p, tmp_path))


def test_the_engine_measures_once_and_every_run_and_probe_gets_the_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[float] = []

    def measured(window_s: float = threads.IDLE_WINDOW_S) -> dict[str, Any]:
        calls.append(window_s)
        return {"idle_cores": 0.6, "cores": 4, "window_s": window_s, "threads": 1}

    monkeypatch.setattr(engine_module, "measure_idle", measured)
    engine = _engine(tmp_path)
    first = asyncio.run(engine.measure_cpu())
    assert asyncio.run(engine.measure_cpu()) is first and len(calls) == 1  # once per session
    assert engine._config("torch", "resnet50", "r")[0].threads == 1  # not the machine's 4 cores
    # PyTorch data parallel on a CPU still divides the pool among its ranks.
    assert engine._config("torch", "resnet50", "r", devices=2)[0].threads == 1
    # --threads, a GPU: not the engine's to choose, nothing measured.
    assert asyncio.run(_engine(tmp_path, threads=3).measure_cpu()) is None
    assert asyncio.run(_engine(tmp_path, device="cuda").measure_cpu()) is None
    assert len(calls) == 1


def test_a_session_without_the_record_still_reads() -> None:
    assert threads.threads_words(None) == "" and threads.threads_words({}) == ""
    assert "could not be measured" in threads.threads_words(
        {"idle_cores": None, "cores": 2, "window_s": 1.0, "threads": 2}
    )


@pytest.mark.slow
def test_a_cpu_run_without_threads_uses_records_and_says_the_idle_cores(tmp_path: Path) -> None:
    """A real PyTorch run on the CPU, no --threads: the plan line says the figure, session.json records
    it, and the runner was given exactly that many threads."""
    assert TINY[-2:] == ["--threads", "1"]
    argv = TINY[:-2]
    out = benchtui(
        "run", "--headless", "--frameworks", "torch", *argv, "--no-nvml", "--sessions-dir", str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    session = only_session(tmp_path)
    record = json.loads((session / "session.json").read_text())["cpu_threads"]
    assert record["window_s"] == threads.IDLE_WINDOW_S and 1 <= record["threads"] <= record["cores"]
    assert f"plan · {threads.threads_words(record)}" in " ".join(out.stderr.split())
    hello = next(e for e in read_events(session) if e["type"] == "hello")
    # What the runner was told, and what PyTorch then had (torch.get_num_threads()).
    assert hello["config"]["threads"] == hello["device"]["threads"] == record["threads"], hello["device"]


# -- 2. defaults a newcomer meets --------------------------------------------------------------------------
def test_the_quick_preset_compares_the_same_network_on_both_sides() -> None:
    quick = from_preset("quick").validate()
    assert quick.models == ["resnet50_v1_5"] and quick.batch_size("resnet50_v1_5") == 16
    # The catalog's "resnet50" differs by side (Keras's v1): its twin is the one the preset runs.
    assert catalog.MODELS["resnet50"].twin == "resnet50_v1_5" and not catalog.MODELS["resnet50_v1_5"].twin


def _plan(*argv: str) -> Plan:
    return plan_from_args(build_parser().parse_args(["run", *argv]))


def test_run_with_no_plan_is_the_apps_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert devices.default_preset(False) == "quick" and devices.default_preset(True) == "study"
    assert (
        devices.default_preset(True, "cpu") == "quick" and devices.default_preset(False, "cuda:0") == "study"
    )
    gpus: tuple[str, ...] = ()
    monkeypatch.setattr(
        sampler,
        "list_gpus",
        lambda use_nvml=True: sampler.GpuList(
            [{"name": n} for n in gpus] if use_nvml else [], "stub", use_nvml
        ),
    )
    assert _plan().preset == "quick" and _plan("--headless").preset == "quick"
    assert _plan("--threads", "1", "--name", "first").preset == "quick"  # where and how: still the default
    gpus = ("NVIDIA H100",)
    assert _plan().preset == "study"  # a GPU: the study, as the app's plan screen starts from
    assert _plan("--device", "cpu").preset == "quick" and _plan("--no-nvml").preset == "quick"
    # Flags that shape a plan of its own keep the help's defaults (the study's protocol), as before.
    assert _plan("--models", "resnet50").preset == "" and _plan("--epochs", "1").image_size == 299


def test_a_preset_as_the_positional_plan() -> None:
    assert _plan("quick").preset == "quick" and _plan("modern-cpu", "--runs", "1").runs == 1
    assert _plan("quick", "--preset", "quick").preset == "quick"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "quik"], "unknown plan 'quik' (did you mean 'quick'?): PLAN names a preset"),
        (["run", "quick", "--preset", "study"], "PLAN quick and --preset study name two plans"),
    ],
)
def test_a_bad_positional_plan_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("benchtui: error: ") and words in err[0], err


# -- the sessions folder: ./sessions where it exists, else the user's -----------------------------------
def test_the_sessions_folder_is_the_users_where_there_is_no_local_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"XDG_DATA_HOME": str(data)}
    env_no = {k: v for k, v in os.environ.items() if k != "BENCHTUI_SESSIONS_DIR"}
    monkeypatch.setattr(os, "environ", {**env_no, **env})
    monkeypatch.chdir(elsewhere)
    users = data / "benchtui" / "sessions"
    assert session_store.sessions_dir() == users
    # None yet: the absolute path looked in, and why there.
    empty = benchtui("sessions", cwd=elsewhere, env=env)
    assert empty.returncode == 0
    assert (
        empty.stderr.strip()
        == f"no sessions in {users} (the user's folder: there is no ./sessions in {elsewhere})"
    )
    make_session(users, folder="20261125T235953Z_tiny1", gpu=False)
    listed = benchtui("sessions", cwd=elsewhere, env=env)
    assert "20261125T235953Z_tiny1" in listed.stdout, listed
    # A project's own ./sessions wins where it exists; --sessions-dir and BENCHTUI_SESSIONS_DIR win over both.
    (elsewhere / "sessions").mkdir()
    assert session_store.sessions_dir() == Path("sessions")
    local = benchtui("sessions", cwd=elsewhere, env=env)
    assert local.stderr.strip() == f"no sessions in {elsewhere / 'sessions'}"
    assert session_store.sessions_dir(tmp_path / "x") == tmp_path / "x"
    os.environ["BENCHTUI_SESSIONS_DIR"] = str(tmp_path / "y")
    assert session_store.sessions_dir() == tmp_path / "y"


def test_the_tests_never_write_the_users_folder() -> None:
    assert not str(session_store.user_sessions_dir()).startswith(str(Path.home() / ".local"))


# -- 5. smaller --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [6, 7])
def test_a_prefix_that_matches_many_says_the_count_it_lists(tmp_path: Path, count: int) -> None:
    for i in range(count):
        (tmp_path / f"20261125T23{i:02d}00Z_tiny1").mkdir()
    with pytest.raises(SessionError) as caught:
        session_store.resolve_session("20261125T23", tmp_path)
    message = str(caught.value)
    named = re.search(r"\((.*)\)", message)
    assert named is not None
    listed = [n for n in named.group(1).split(", ") if n.startswith("2026")]
    more = re.search(r" and (\d+) more", message)
    assert f"matches {count} sessions" in message
    assert len(listed) + (int(more.group(1)) if more else 0) == count, message


def test_the_started_time_is_the_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The id's stamp and session.json's "started" come from one instant: never a second apart."""
    monkeypatch.setattr(session_store, "_utc_now", lambda: "2026-11-25T23:59:54+00:00")  # a second later
    writer = SessionWriter.create(from_preset("quick"), tmp_path)
    writer.finish("complete", {})
    info = session_store.list_sessions(tmp_path)[0]
    stamp = info["name"].partition("_")[0]
    assert info["started"].replace("-", "").replace(":", "").replace(" ", "T") + "Z" == stamp, info


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        # One size for every model: said without naming a model the user did not choose.
        (["run", "--headless", "--batch-size", "0"], "--batch-size must be a positive whole number, got 0"),
        (
            ["run", "--models", "resnet50", "--batch-size", "-2"],
            "--batch-size must be a positive whole number, got -2",
        ),
        (["run", "--models", "resnet50", "--batch-size", "resnet50=0"], "--batch-size for resnet50 must be"),
        # An unknown flag gets the nearest the command has, as a mistyped model name does.
        (
            ["run", "--headless", "--modles", "resnet50"],
            "unrecognized arguments: --modles (did you mean '--models'?)",
        ),
        (["run", "--treads=1"], "unrecognized arguments: --treads=1 (did you mean '--threads'?)"),
        (["sessions", "--sesions-dir", "x"], "--sesions-dir (did you mean '--sessions-dir'?) x"),
        (["show", "a", "b"], "unrecognized arguments: b"),
    ],
)
def test_bad_flags_are_one_line_naming_only_what_the_user_wrote(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    assert main([*argv, "--no-nvml"] if argv[0] == "run" else argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("benchtui: error: ") and line in err[0], err
    assert "inception_v3" not in err[0]


def test_a_commands_last_line_is_its_last_line_of_text() -> None:
    from benchtui.core.running.launcher import LAST_LINE_CHARS, LogCopy

    assert (
        LogCopy(recent=b"Traceback\n  File x\nValueError: bad \x1b[31mthing\x1b[0m\n\n").last_line
        == "ValueError: bad thing"
    )  # a colour's escape sequence removed whole
    assert LogCopy(recent=b"epoch 1  10%\repoch 1  20%\r").last_line == "epoch 1 20%"
    assert LogCopy(recent=b"\xff\xfe oops\n").last_line.endswith("oops") and LogCopy().last_line == ""
    assert len(LogCopy(recent=b"x" * 1000).last_line) == LAST_LINE_CHARS
