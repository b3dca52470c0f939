"""The command line as a new user meets it (issue #15): repeats and stray sizes refused, a long CPU plan
announced, session ids never cut, ``replay`` of a non-session, what ``compare`` says differs, and models a
framework lacks unavailable from the start."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from benchtui.cli import build_parser, main
from benchtui.commands.run import plan_from_args
from benchtui.core.plan.estimate import long_cpu_warning
from benchtui.core.plan.plan import Plan, PlanError, from_preset
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.terminal import print_comparison
from benchtui.core.running.engine import Engine
from benchtui.core.store.session import SessionWriter, load_session
from sessionfactory import make_session
from support import benchtui, read_events


def _one_error(err: str, *words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("benchtui: error: "), err
    assert all(w in lines[0] for w in words), lines[0]


@pytest.fixture
def quiet_python(tmp_path: Path) -> Path:
    """An 'interpreter' that starts and exits at once: a run that fails in milliseconds, no framework."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def no_real_runs(quiet_python: Path) -> list[str]:
    """Flags that make a plan the code under test should refuse cheap if it is not: no framework starts."""
    return [f"--python={fw}={quiet_python}" for fw in ("torch", "tensorflow")] + ["--runs", "1", "--no-nvml"]


# -- 1. a framework or a model named twice ---------------------------------------------------------
@pytest.mark.parametrize(
    "flags, words",
    [
        (["--frameworks", "torch,torch", "--models", "resnet50"], ("--frameworks", "'torch' twice")),
        (["--models", "resnet50,densenet121,resnet50"], ("--models", "'resnet50' twice")),
        (["--models", "study,study"], ("--models", "'study' twice", "each group once")),
    ],
)
def test_a_repeat_is_refused_before_anything_starts(
    flags: list[str],
    words: tuple[str, ...],
    tmp_path: Path,
    no_real_runs: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sessions = tmp_path / "sessions"
    assert main(["run", "--headless", *flags, *no_real_runs, "--sessions-dir", str(sessions)]) == 2
    _one_error(capsys.readouterr().err, *words)
    assert not sessions.exists()


def test_plan_validation_refuses_repeats_whatever_made_the_plan() -> None:
    with pytest.raises(PlanError, match="--frameworks names 'tensorflow' twice"):
        Plan(frameworks=["tensorflow", "torch", "tensorflow"], models=["resnet50"]).validate()
    with pytest.raises(PlanError, match="--models names 'resnet50' twice"):
        Plan(models=["resnet50", "resnet50"]).validate()
    # A model a group holds and a name gives once more is the group's, once (not a repeat of the user's).
    assert plan_from_args(build_parser().parse_args(["run", "--models", "resnet50,study"])).models[:2] == [
        "resnet50",
        "inception_v3",
    ]


# -- 3. a per-model batch size for a model the plan does not run --------------------------------------
def test_a_batch_size_for_a_model_outside_the_plan_is_refused(
    tmp_path: Path, no_real_runs: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    sessions = tmp_path / "sessions"
    argv = ["run", "--headless", "--models", "resnet50", *no_real_runs, "--sessions-dir", str(sessions)]
    assert main([*argv, "--batch-size", "densenet121=8"]) == 2
    _one_error(capsys.readouterr().err, "--batch-size names densenet121", "add it to --models")
    assert main([*argv, "--batch-size", "torch:densenet121=8"]) == 2
    _one_error(capsys.readouterr().err, "densenet121")
    assert not sessions.exists()


def test_named_batch_sizes_keep_the_presets_other_sizes() -> None:
    def plan(*argv: str) -> Plan:
        made: Plan = plan_from_args(build_parser().parse_args(["run", *argv]))
        return made

    cpu = plan("--preset", "modern-cpu", "--batch-size", "gpt2_mini=4")
    assert cpu.batch_size("gpt2_mini") == 4 and cpu.batch_size("efficientnet_b0") == 8  # the preset's
    assert {plan("--preset", "modern-cpu", "--batch-size", "2").batch_size(m) for m in cpu.models} == {2}
    assert (
        plan("--models", "resnet50,densenet121", "--batch-size", "densenet121=4").batch_size("resnet50") == 16
    )


# -- 2. a plan that takes days on the CPU is announced -----------------------------------------------
def test_the_estimate_tells_days_from_minutes() -> None:
    study = long_cpu_warning(from_preset("study"), cores=2)
    assert "weeks or more" in study and "--preset quick" in study and "(2 cores)" in study
    assert long_cpu_warning(from_preset("quick"), cores=2) == ""
    assert long_cpu_warning(from_preset("modern-cpu"), cores=2) == ""
    assert "days or more" in long_cpu_warning(from_preset("modern"), cores=2)
    one = long_cpu_warning(Plan(models=["resnet50"], threads=1), cores=16)  # --threads 1: one core's pace
    assert "(1 thread)" in one and "days or more" in one
    assert "hours or more" in long_cpu_warning(Plan(models=["resnet50"]), cores=16)


def test_headless_on_the_cpu_warns_of_a_long_plan_and_starts_it_anyway(
    tmp_path: Path, quiet_python: Path
) -> None:
    argv = ["run", "--headless", "--frameworks", "torch", "--models", "resnet50", "--device", "cpu"]
    argv += ["--python", f"torch={quiet_python}", "--sessions-dir", str(tmp_path / "s"), "--no-nvml"]
    long = benchtui(*argv, "--runs", "1", timeout=120)
    first = long.stderr.splitlines()[0]
    assert first.startswith("benchtui: warning: on this CPU") and "likely takes" in first, long.stderr
    assert "--preset quick" in first
    assert "session failed" in long.stderr  # started all the same (its runner is a stand-in that fails)
    short = benchtui(*argv, "--preset", "quick", "--runs", "1", timeout=120)
    assert "warning" not in short.stderr and "session failed" in short.stderr


# -- 4. session ids are never cut ----------------------------------------------------------------------
LONG_DEVICE = "NVIDIA GeForce RTX 4090 Laptop GPU with Max-Q Design"
LONG_NAME = "a benchmark of every model we have against each other, again"


@pytest.mark.parametrize(
    "columns, named_id, table",
    [
        (100, "20261122T101112Z_torch-tensorflow", True),
        # 80 columns leave a table too little room beside a name and a GPU's: a block per session.
        (80, "20261122T101112Z_torch-tensorflow", False),
        # An id too long to leave a table room beside it: a block per session, the id first and whole.
        (80, "20261122T101112Z_a-benchmark-of-every-model-we-have-against-each-other-again", False),
        (100, "20261122T101112Z_a-benchmark-of-every-model-we-have-against-each-other-again", False),
    ],
)
def test_sessions_never_cut_an_id(
    columns: int,
    named_id: str,
    table: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "sessions"
    named = make_session(
        root,
        name=LONG_NAME,
        folder=named_id,
        runs=1,
        epochs=2,
        steps=2,
        meta_extra={"placement": {"kind": "cuda", "gpu": {"name": LONG_DEVICE}}},
    )
    plain = make_session(
        root, name="plain", folder="20261121T000000Z_torch-tensorflow", runs=1, epochs=2, steps=2
    )
    # A session run without --name is labelled with its id.
    meta = json.loads((plain / "session.json").read_text())
    (plain / "session.json").write_text(json.dumps({**meta, "name": plain.name}))
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["sessions", "--sessions-dir", str(root)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), out
    assert lines[0].startswith("Session") == table, out
    for folder in (named, plain):
        assert any(folder.name in line for line in lines), out  # whole, on one line
    assert "…" not in out
    words = out.split()  # wrapped, not cut: every word of the name and the device is there
    for word in (*LONG_NAME.split(), *LONG_DEVICE.split(), "resnet50", "complete"):
        assert word in words, (word, out)


# -- 5. replay of a folder that is not a session --------------------------------------------------------
def test_replay_of_a_non_session_says_so_without_taking_the_terminal(tmp_path: Path) -> None:
    result = benchtui("replay", str(tmp_path), timeout=60)
    assert result.returncode == 2
    _one_error(result.stderr, "is not a benchtui session")
    for stream in (result.stdout, result.stderr):
        assert "\x1b[?1049h" not in stream and "\x1b" not in stream


# -- 6. what compare says differs ---------------------------------------------------------------------
def _edit(path: Path, plan: dict[str, object], host: dict[str, object], threads: int, load: float) -> None:
    meta = json.loads((path / "session.json").read_text())
    meta["plan"].update(plan)
    meta["host"].update(host)
    (path / "session.json").write_text(json.dumps(meta))
    events = []
    for event in read_events(path):
        if event["type"] == "hello" and event["framework"] == "torch":
            event["settings"]["intra_op_threads"] = threads
        if event["type"] == "run_end":
            event["other_cpu_cores"] = load
        events.append(json.dumps(event))
    (path / "events.jsonl").write_text("\n".join(events) + "\n")


def test_compare_names_every_setting_that_changes_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_session(tmp_path, name="a", folder="a", runs=2, epochs=2, steps=4, gpu=False)
    b = make_session(tmp_path, name="b", folder="b", runs=2, epochs=2, steps=4, gpu=False, order="grouped")
    _edit(a, {}, {"cpu_model": "AMD EPYC 7B13", "cpu_count": 2}, threads=2, load=0.1)
    _edit(
        b,
        {"memory_limit_mb": 4096, "threads": 4, "python": {"torch": "/opt/torch-2.6/bin/python"}},
        {"cpu_model": "Intel Xeon Platinum 8480C", "cpu_count": 112},
        threads=4,
        load=1.6,
    )
    differences = compare_sessions(load_session(a), load_session(b)).differences
    for expected in (
        "--order: interleaved vs grouped",  # the flag's name, as the user sets it (issue 30)
        "memory limit: none vs 4,096 MB",
        "PyTorch threads (--threads): 2 threads vs 4 threads",
        "tf.keras threads (--threads): not reported vs 4 threads",
        "PyTorch interpreter: its default environment vs /opt/torch-2.6/bin/python",
        "CPU: AMD EPYC 7B13 (2 cores) vs Intel Xeon Platinum 8480C (112 cores)",
        "other processes' CPU use: 0.1 vs 1.6 cores",
    ):
        assert any(d.startswith(expected) for d in differences), (expected, differences)
    assert not any("tf.keras interpreter" in d for d in differences)
    # The same sessions again: nothing differs (no difference made of noise).
    assert compare_sessions(load_session(a), load_session(a)).differences == []
    print_comparison(compare_sessions(load_session(a), load_session(b)))
    out = capsys.readouterr().out
    assert "The sessions differ in (A vs B):" in out and "  · memory limit: none vs 4,096 MB" in out


def test_compare_leaves_out_a_small_change_of_load(tmp_path: Path) -> None:
    a = make_session(tmp_path, name="a", folder="a", runs=1, epochs=2, steps=2, gpu=False)
    b = make_session(tmp_path, name="b", folder="b", runs=1, epochs=2, steps=2, gpu=False)
    _edit(a, {}, {}, threads=8, load=0.1)
    _edit(b, {}, {}, threads=8, load=0.3)
    assert compare_sessions(load_session(a), load_session(b)).differences == []


# -- 7. a model its framework lacks is unavailable from the start --------------------------------------
def _pnasnet(tmp_path: Path) -> tuple[Engine, Path]:
    plan = Plan(
        frameworks=["torch", "tensorflow"],
        models=["pnasnet_large"],
        image_size=64,
        samples=8,
        batch_sizes={"pnasnet_large": 4},
        epochs=1,
        runs=2,
        device="cpu",
        python={"torch": str(tmp_path / "python")},
    ).validate()
    writer = SessionWriter.create(plan, tmp_path / "sessions")
    return Engine(plan, writer), writer.path


def test_a_model_the_framework_lacks_ends_unavailable_before_any_run(
    tmp_path: Path, quiet_python: Path
) -> None:
    engine, path = _pnasnet(tmp_path)
    asyncio.run(engine.run())
    kinds = [
        (e["type"], e.get("run"), e.get("status")) for e in read_events(path) if e["type"].startswith("run_")
    ]
    first_start = next(i for i, (kind, _, _) in enumerate(kinds) if kind == "run_start")
    # Never queued behind PyTorch's runs: both of tf.keras's end "unavailable" before the first starts.
    assert kinds[:first_start] == [
        ("run_end", "002-tensorflow-pnasnet_large-1", "unavailable"),
        ("run_end", "004-tensorflow-pnasnet_large-2", "unavailable"),
    ]
    assert engine.model.row("tensorflow", "pnasnet_large").status == "unavailable"


def test_a_session_stopped_early_leaves_the_lacking_model_unavailable_not_incomplete(
    tmp_path: Path, quiet_python: Path
) -> None:
    engine, path = _pnasnet(tmp_path)
    engine.cancel()  # Ctrl+C before the first run
    assert asyncio.run(engine.run()) == "interrupted"
    assert engine.model.row("tensorflow", "pnasnet_large").status == "unavailable"
    assert engine.model.row("torch", "pnasnet_large").status == "incomplete"
    assert load_session(path).model.row("tensorflow", "pnasnet_large").status == "unavailable"


def test_the_app_and_commands_take_a_sessions_folder_before_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchtui.app

    make_session(tmp_path, name="here", folder="20260101T000000Z_here")
    opened: list[str | None] = []
    monkeypatch.setattr(benchtui.app, "run_app", lambda plan, **kw: opened.append(kw["sessions_dir"]) or 0)
    assert main(["--sessions-dir", str(tmp_path)]) == 0 and opened == [str(tmp_path)]  # the app's folder
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["--sessions-dir", str(tmp_path), "sessions"]) == 0  # a command that names none
    assert "20260101T000000Z_here" in capsys.readouterr().out
    # A folder that cannot be written is one line before the app takes the terminal.
    (tmp_path / "file").write_text("")
    assert main(["--sessions-dir", str(tmp_path / "file" / "x")]) == 2
    _one_error(capsys.readouterr().err, "cannot write sessions")


def test_compare_of_a_session_with_itself_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_session(tmp_path, name="same", folder="20260101T000000Z_same")
    assert (
        main(["compare", "20260101T000000Z_same", "20260101T000000Z_same", "--sessions-dir", str(tmp_path)])
        == 0
    )
    assert "A and B are the same session (20260101T000000Z_same)" in capsys.readouterr().err
    make_session(tmp_path, name="other", folder="20260102T000000Z_other")
    assert (
        main(["compare", "20260101T000000Z_same", "20260102T000000Z_other", "--sessions-dir", str(tmp_path)])
        == 0
    )
    assert "same session" not in capsys.readouterr().err


def test_one_thread_is_one_thread() -> None:
    from benchtui.core import fmt

    assert (fmt.plural(1, "thread"), fmt.plural(2, "thread")) == ("1 thread", "2 threads")


def test_piped_show_keeps_to_the_columns_the_user_gives() -> None:
    tiny = str(Path(__file__).parent / "data" / "tiny-cpu-session")
    narrow = benchtui("show", tiny, env={"COLUMNS": "80"})
    assert narrow.returncode == 0 and narrow.stdout
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80
    wide = benchtui("show", tiny)  # no COLUMNS: a file gets the tables whole
    assert max(len(line) for line in wide.stdout.splitlines()) > 80


@pytest.mark.parametrize(("epochs", "said"), [(1, True), (2, False)])
def test_one_epoch_says_its_figures_include_the_warm_up(tmp_path: Path, epochs: int, said: bool) -> None:
    from benchtui.core.reporting.model import build_report

    path = make_session(tmp_path, name="one", epochs=epochs, steps=4, runs=1)
    report = build_report(load_session(path))
    assert any("one epoch per run" in n.text for n in report.warnings) == said


def test_compare_gives_the_verdict_the_room_and_marks_a_different_network(tmp_path: Path) -> None:
    from io import StringIO

    from rich.console import Console

    from benchtui.core.model.parity import PARITY_MARK
    from sessionfactory import DENSENET121_NETWORKS, RESNET50_NETWORKS

    nets = {**RESNET50_NETWORKS, **DENSENET121_NETWORKS}
    models = ("resnet50", "densenet121")
    a = make_session(tmp_path, name="a", folder="20260101T000000Z_a", models=models, networks=nets)
    b = make_session(tmp_path, name="b", folder="20260102T000000Z_b", models=models, networks=nets, seed=2)
    out = StringIO()
    print_comparison(compare_sessions(load_session(a), load_session(b)), Console(file=out, width=80))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80  # nothing cut at 80 columns
    # The basis said once, under the table: the verdict's (time per sample), not a column's.
    assert (
        "Times" not in text
        and "A (ms), B (ms): time per sample, from epoch times excluding the first" in text
    )
    assert f"ResNet50 {PARITY_MARK}" in text and f"DenseNet121 {PARITY_MARK}" not in text


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--models", "resnet5"], "unknown model 'resnet5' (did you mean 'resnet50'?)"),
        (["--frameworks", "pytorch"], "unknown framework 'pytorch' (did you mean 'torch'?)"),
        (["--preset", "quik"], "unknown preset 'quik' (did you mean 'quick'?)"),
        (["--models", "xyzzy"], "unknown model 'xyzzy'; choose from"),  # nothing near: no guess
    ],
)
def test_a_near_miss_names_what_was_meant(
    args: list[str], hint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--headless", "--device", "cpu", "--sessions-dir", str(tmp_path), *args]) == 2
    _one_error(capsys.readouterr().err, hint)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("width", [80, 160])
def test_the_parity_table_keeps_its_words_whole_on_a_narrow_terminal(tmp_path: Path, width: int) -> None:
    from io import StringIO

    from rich.console import Console

    from benchtui.core.reporting.model import build_report
    from benchtui.core.reporting.terminal import print_parity_table
    from sessionfactory import DENSENET121_NETWORKS, RESNET50_NETWORKS

    nets = {**RESNET50_NETWORKS, **DENSENET121_NETWORKS}
    path = make_session(tmp_path, models=("resnet50", "densenet121"), networks=nets)
    out = StringIO()
    print_parity_table(build_report(load_session(path)).parity, Console(file=out, width=width))
    text = out.getvalue()
    assert "…" not in text and "Trainable" in text and "25.6M" in text and "keras.applications" in text
    # Narrow, the columns the notes say again (the differences, with numbers) or that repeat (all
    # parameters next to trainable ones) make way; wide, every column is there.
    assert ("Differs by" in text and "Parameters " in text) == (width == 160)
