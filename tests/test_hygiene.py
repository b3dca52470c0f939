"""Hostile text in a session folder (a runner's error, a plan's name, a hand-edited session.json, a
linked log) reaches no terminal, spreadsheet, Markdown table or HTML report as it is."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import random
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.app import App, ComposeResult

from benchtui.core import fmt
from benchtui.core.reporting import terminal
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.csvfile import csv_value
from benchtui.core.reporting.files import export_session, read_tail
from benchtui.core.reporting.markdown import md_escape, table_lines
from benchtui.core.reporting.model import Table, build_report
from benchtui.core.store.session import load_session
from benchtui.widgets.log_pane import RunLog, open_log, shown_lines
from sessionfactory import make_session
from support import UNAVAILABLE_RUN, benchtui

#: What must never reach a terminal from a session: C0 controls but newline, DEL, C1, bidi overrides.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# Output captured, never a terminal, and no colour asked for: whatever ESC is left came from a session.
PLAIN = {"TTY_COMPATIBLE": "0", "NO_COLOR": "1", "TERM": "dumb"}

NAME = "plan \x1b[2J\x1b]0;pwned\x07 [red]name[/] \x9b31mred\u202eevil"
REASON = "RuntimeError: \x1b[2J\x1b[31mboom\x1b[0m \x07\x08[bold]x[/] | half\nsecond line"
FORMULA = "=cmd|' /C calc'!A0 \x1b]0;title\x07"
GPU_NAME = "H100 | fake\n| cell \x1b[5m"
FOLDER = "20260102T030405Z_evil\x1b]0;t\x07[red]x"
SECRET = "SECRET-MARKER-7c1e"


def _hostile(root: Path) -> Path:
    """A finished session with control characters, markup, a formula and table breakers in its text."""
    return make_session(
        root,
        name=NAME,
        models=("resnet50", "densenet121"),
        runs=2,
        epochs=2,
        steps=4,
        fail={
            ("tensorflow", "resnet50", 2): {"message": REASON, "epoch": 1},
            ("torch", "densenet121", 1): {"message": FORMULA, "epoch": 1},
        },
        folder=FOLDER,
        meta_extra={
            "gpus": [{"index": 0, "name": GPU_NAME, "memory_total": 80 * 2**30, "driver": "550\x1b[2J"}],
            "host": {"hostname": "host\x1b]0;x\x07|a\nb", "platform": "Linux"},
        },
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hygiene") / "sessions"
    _hostile(root)
    make_session(root, name="plain", models=("resnet50", "densenet121"), runs=2, epochs=2, steps=4)
    return root


@pytest.fixture(scope="module")
def hostile(root: Path) -> Path:
    return root / FOLDER


def _safe(text: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in UNSAFE.findall(text)})
    assert not found, f"control characters in the output: {found}"


# -- clean() -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a\x1b[2Jb", "ab"),  # CSI: clear screen
        ("a\x1b[38;2;255;0;0mred\x1b[0m", "ared"),  # CSI with parameters
        ("x\x1b]0;title\x07y", "xy"),  # OSC window title, ended by BEL
        ("x\x1b]8;;http://e.vil\x1b\\link\x1b]8;;\x1b\\y", "xlinky"),  # OSC 8 hyperlink, ended by ST
        ("x\x1bP1$r\x1b\\y", "xy"),  # DCS
        ("x\x1b(By", "xy"),  # ESC with an intermediate
        ("x\x1b7y\x1bc", "xy"),  # save cursor, full reset
        ("x\x9b2Jy", "xy"),  # C1 CSI
        ("x\x9d0;t\x9cy", "xy"),  # C1 OSC ended by C1 ST
        ("bell\x07 back\x08 del\x7f nul\x00", "bell back del nul"),
        ("a\rb", "a b"),
        ("one\ntwo\r\nthree\u2028four", "one two three four"),
        ("tab\there", "tab here"),
        ("bidi \u202eevil\u202c \u2066iso\u2069", "bidi evil iso"),
        ("unterminated \x1b]0;the rest", "unterminated "),
        ("dangling\x1b", "dangling"),
        ("en–dash × µs ✓", "en–dash × µs ✓"),
    ],
)
def test_clean_removes_controls_and_whole_sequences(raw: str, expected: str) -> None:
    assert fmt.clean(raw) == expected


def test_clean_keeps_lines_and_tabs_when_asked_and_is_free_on_plain_text() -> None:
    assert fmt.clean("a\x1b[1mb\r\nc\td\re\x07", one_line=False) == "ab\nc\td\ne"
    plain = "ResNet50 · PyTorch: 1.23× faster"
    assert fmt.clean(plain) is plain
    assert fmt.clean(3) == "3" and fmt.clean(None) == "None"
    tree = fmt.clean_tree({"a\x1b[2J": ["x\x07", 1, None, {"k": "\x9b1m"}], "n": 2.5})
    assert tree == {"a": ["x", 1, None, {"k": ""}], "n": 2.5}


def test_clean_leaves_nothing_unsafe_in_random_text() -> None:
    rng = random.Random(7)
    alphabet = "ab[]/\\;0123 \x1b\x07\x9b\x9c\x9d\x90\x1b\\\n\r\t\x00\x7f\u202e\u2066é–"
    for _ in range(3000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        out = fmt.clean(raw)
        assert not UNSAFE.search(out) and "\n" not in out, repr(raw)
        assert fmt.clean(out) == out  # idempotent: cleaning twice changes nothing
        multi = fmt.clean(raw, one_line=False)
        assert not UNSAFE.search(multi.replace("\t", "")), repr(raw)


# -- the report model and the terminal writer ---------------------------------------------------
def _strings(value: Any) -> list[str]:
    """Every string inside ``value``: dataclasses, mappings and sequences opened."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def test_report_text_is_clean_and_its_summary_raw(hostile: Path) -> None:
    report = build_report(load_session(hostile))
    shown = [report.title, report.folder, report.status, report.facts, report.environment, report.rows]
    shown += [report.problems, report.warnings, report.ratios, report.side_by_side, report.figure_tables]
    shown += [report.warmup, report.efficiency, report.efficiency_methods, report.peak_sources]
    _safe("".join(_strings(shown)))
    assert "RuntimeError: boom [bold]x[/] | half second line" in {p.reason for p in report.problems}
    assert any("H100 | fake | cell" in text for _, text in report.environment)
    assert report.title == fmt.clean(NAME) and report.folder == fmt.clean(FOLDER)
    raw = {r.reason for r in report.summary.rows if r.reason}
    assert REASON in raw  # the data as recorded: only what is shown is cleaned


def test_terminal_writer_cleans_a_raw_summary(
    hostile: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of a headless run prints the engine's summary, not a report: the writer cleans it too."""
    for name, value in PLAIN.items():
        monkeypatch.setenv(name, value)
    summary = load_session(hostile).model.summary()
    summary["rows"][0]["model"] = "resnet50\x1b[2J[red]"
    summary["frameworks"]["torch"]["settings"]["compile"] = "eager\x1b]0;t\x07"
    terminal.print_result(build_report(load_session(hostile), summary), "title \x1b]0;t\x07[/]")
    out = capsys.readouterr().out
    _safe(out)
    assert "boom" in out and "[bold]x[/]" in out and "resnet50[red]" in out  # markup printed, not read
    assert "title [/]" in out and "how: PyTorch: eager;" in out
    cmp = compare_sessions(hostile, hostile)
    cmp.differences.append("GPUs: \x1b[2Jevil [red]x")
    cmp.rows[0].note = "note \x9b2J"
    buf = io.StringIO()
    terminal.print_comparison(cmp, Console(file=buf, width=200, force_terminal=False, color_system=None))
    _safe(buf.getvalue())
    assert "evil [red]x" in buf.getvalue()


def test_comparison_text_is_clean(root: Path, hostile: Path) -> None:
    plain = next(p for p in root.iterdir() if p.name.endswith("_plain"))
    cmp = compare_sessions(plain, hostile)
    verdicts = [v.to_json() for v in (*cmp.verdicts_a, *cmp.verdicts_b)]
    _safe("".join(_strings([cmp.differences, [r.note for r in cmp.rows], verdicts])))
    assert any("H100 | fake | cell" in d for d in cmp.differences)  # GPU names from session.json


def test_sessions_screen_summary_is_clean(hostile: Path) -> None:
    from benchtui.screens.sessions import summary_view

    buf = io.StringIO()
    Console(file=buf, width=200, force_terminal=False, color_system=None).print(summary_view(hostile, 200))
    _safe(buf.getvalue())
    assert "boom" in buf.getvalue()


# -- the CLI: show, sessions, compare, export to stdout, a headless run ---------------------------
def test_show_sessions_and_compare_print_no_control_characters(root: Path, hostile: Path) -> None:
    plain = next(p for p in root.iterdir() if p.name.endswith("_plain"))
    for args in (
        ("show", str(hostile)),
        ("sessions", "--sessions-dir", str(root)),
        ("compare", str(plain), str(hostile), "--fail-above", "1"),
        ("compare", str(hostile), str(plain)),
    ):
        result = benchtui(*args, env=PLAIN, timeout=120)
        assert result.returncode in (0, 1), result.stderr
        _safe(result.stdout)
        _safe(result.stderr)
        assert "Traceback" not in result.stderr
        if args[0] == "show":  # the text is there, cleaned; markup in it printed as it is
            assert "RuntimeError: boom [bold]x[/] | half second line" in result.stdout
            assert "=cmd|' /C calc'!A0" in result.stdout
            assert "evil[red]x" in result.stdout
        if args[0] == "sessions":
            assert "plan  [red]name[/] redevil" in result.stdout
        if args[0] == "compare":
            assert "H100 | fake | cell" in result.stdout  # the GPUs differ, said without the ESC


def test_exports_to_stdout_print_no_control_characters(hostile: Path) -> None:
    for fmt_ in ("md", "csv", "json"):
        result = benchtui("export", str(hostile), "--format", fmt_, env=PLAIN, timeout=120)
        assert result.returncode == 0, result.stderr
        _safe(result.stdout)
    data = json.loads(result.stdout)  # escapes in JSON, the data as recorded
    assert data["session"]["name"] == NAME
    assert any(r.get("reason") == REASON for r in data["rows"])


def test_headless_run_into_a_folder_with_escapes(tmp_path: Path) -> None:
    """A real headless run (an unavailable cell, no framework starts) into a sessions folder whose
    name holds an escape and markup: its progress and table are clean. (``--name`` itself refuses
    control characters, so a hostile name is tested through session.json above.)"""
    sessions = tmp_path / "s\x1b[2Jdir[red]"
    name = "[red]name[/]"
    result = benchtui(
        *UNAVAILABLE_RUN,
        "--name",
        name,
        "--sessions-dir",
        str(sessions),
        env=PLAIN,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    _safe(result.stdout)
    _safe(result.stderr)
    assert "sdir[red]" in result.stderr  # the folder, said without its ESC, its brackets printed
    assert "unavailable" in result.stderr
    (folder,) = sessions.iterdir()
    assert json.loads((folder / "session.json").read_text())["name"] == name  # recorded as given


# -- CSV ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("\t=1+1", "' =1+1"),
        ("\r=1+1", "' =1+1"),
        ("  =1+1", "'  =1+1"),
        ("＝1+1", "'＝1+1"),
        ("-1.5", "-1.5"),  # a string that is a plain number stays one
        ("+3e-5", "+3e-5"),
        ("ok \x1b[2Jdone", "ok done"),
        (-1.5, "-1.5"),
        (-3, -3),
        (True, True),
        (None, ""),
    ],
)
def test_csv_value(value: Any, cell: Any) -> None:
    assert csv_value(value) == cell


def test_csv_cells_are_neutralised(hostile: Path, tmp_path: Path) -> None:
    for per_batch in (False, True):
        path = export_session(hostile, "csv", tmp_path / f"out{per_batch}.csv", per_batch=per_batch)
        text = path.read_text(encoding="utf-8")
        _safe(text.replace("\n", ""))
        rows = list(csv.DictReader(io.StringIO(text)))
        assert rows
        for row in rows:
            for key, cell in row.items():
                if cell[:1] in ("=", "+", "-", "@"):
                    assert re.fullmatch(r"[+-]?[\d.]+(e[+-]?\d+)?", cell), (key, cell)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "outFalse.csv").read_text(encoding="utf-8"))))
    reasons = {r["reason"] for r in rows}
    assert "'=cmd|' /C calc'!A0 " in reasons
    assert "RuntimeError: boom [bold]x[/] | half second line" in reasons


# -- Markdown -------------------------------------------------------------------------------------
def _cells(line: str) -> int:
    """The cells of a Markdown table row: pipes not escaped by a backslash, less one."""
    return re.sub(r"\\.", "", line).count("|") - 1


def test_markdown_tables_keep_their_columns(hostile: Path, tmp_path: Path) -> None:
    md = export_session(hostile, "md", tmp_path / "out.md").read_text(encoding="utf-8")
    _safe(md.replace("\n", ""))
    tables = re.findall(r"(?:^\|.*\n)+", md, flags=re.MULTILINE)
    assert len(tables) >= 6
    for table in tables:
        lines = table.splitlines()
        widths = {_cells(line) for line in lines}
        assert widths == {_cells(lines[0])}, table
    failures = md.split("## Failures and gaps")[1]
    assert "RuntimeError: boom [bold]x[/] \\| half second line" in failures
    env = md.split("## Environment")[1]
    assert "H100 \\| fake \\| cell" in env and "host\\|a b" in env
    assert md_escape("a\x1b[2Jb|c\nd") == "ab\\|c d"
    # A backslash before a pipe is escaped too, or "\\|" would end the cell at the pipe.
    assert table_lines(Table("t", ["x"], [["a\\|b"]], ["l"]))[2] == "| a\\\\\\|b |"


# -- HTML: logs are read only as regular files inside the session folder, and only their end -------
def _failed_log(session: Path) -> Path:
    loaded = load_session(session)
    rid = next(rid for rid, run in loaded.model.runs.items() if run.status == "failed")
    return loaded.folder.log_path(rid)


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return _hostile(tmp_path / "sessions")


def _html(session: Path, tmp_path: Path) -> str:
    return export_session(session, "html", tmp_path / "report.html").read_text(encoding="utf-8")


def test_html_is_clean_and_shows_the_log(session: Path, tmp_path: Path) -> None:
    _failed_log(session).write_text("Traceback\n\x1b[31mRuntimeError\x1b[0m: the end\n", encoding="utf-8")
    html = _html(session, tmp_path)
    _safe(html.replace("\n", ""))
    assert "RuntimeError: the end" in html


def test_html_never_follows_a_linked_log(session: Path, tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text(f"root:{SECRET}:19000:0:99999:7:::\n", encoding="utf-8")
    log = _failed_log(session)
    log.unlink()
    log.symlink_to(secret)
    html = _html(session, tmp_path)
    assert SECRET not in html and "(no log)" in html


def test_html_never_reads_through_a_linked_logs_folder(session: Path, tmp_path: Path) -> None:
    log = _failed_log(session)
    elsewhere = tmp_path / "elsewhere"
    (session / "logs").rename(elsewhere)
    (elsewhere / log.name).write_text(SECRET, encoding="utf-8")
    (session / "logs").symlink_to(elsewhere, target_is_directory=True)
    html = _html(session, tmp_path)
    assert SECRET not in html


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_html_export_does_not_wait_on_a_fifo_log(session: Path, tmp_path: Path) -> None:
    log = _failed_log(session)
    log.unlink()
    os.mkfifo(log)
    # In a process of its own: a reader blocked on the FIFO would hang this test, not fail it.
    result = benchtui("export", str(session), "--format", "html", "-o", str(tmp_path / "r.html"), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "(no log)" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_html_caps_a_huge_log_and_says_so(session: Path, tmp_path: Path) -> None:
    log = _failed_log(session)
    with open(log, "w", encoding="utf-8") as fh:
        fh.write("FIRST-LINE-MARKER\n")
        fh.write(("x" * 99 + "\n") * 50_000)  # 5 MB
        fh.write("LAST-LINE-MARKER\n")
    html = _html(session, tmp_path)
    assert "LAST-LINE-MARKER" in html and "FIRST-LINE-MARKER" not in html
    assert "cut: the log is 4.8 MiB" in html
    assert len(html) < 1_000_000


def test_read_tail(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    (folder / "logs").mkdir(parents=True)
    log = folder / "logs" / "a.log"
    log.write_bytes(b"0123456789")
    tail = read_tail(folder, log, 4)
    assert tail is not None and tail.data == b"6789" and tail.cut and tail.size == 10
    whole = read_tail(folder, log, 100)
    assert whole is not None and whole.data == b"0123456789" and not whole.cut
    outside = tmp_path / "outside.log"
    outside.write_text(SECRET)
    assert read_tail(folder, folder / "logs" / ".." / ".." / "outside.log", 100) is None
    (folder / "logs" / "link.log").symlink_to(outside)
    assert read_tail(folder, folder / "logs" / "link.log", 100) is None
    (folder / "logs" / "inner.log").symlink_to(log)  # a link, even to a file inside
    assert read_tail(folder, folder / "logs" / "inner.log", 100) is None
    assert read_tail(folder, folder / "logs", 100) is None  # a folder
    assert read_tail(folder, folder / "logs" / "missing.log", 100) is None


# -- the app: the log pane and the sessions screen ------------------------------------------------
def test_shown_lines() -> None:
    assert shown_lines(["a\x1b[2Jb\tc", "x\x1b]0;t\x07y", "p\u2028q"]) == ["ab\tc", "xy", "p", "q"]


class _LogApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RunLog()


@pytest.mark.asyncio
async def test_log_pane_shows_no_escape_from_a_runner(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"epoch 1 \x1b[2J\x1b]0;pwned\x07done\n\x1b[31mred\x1b[0m\tcell\npartial \x1b[")
    app = _LogApp()
    async with app.run_test() as pilot:
        pane = app.query_one(RunLog)
        pane.follow(log, "run \x1b[2J")
        pane.poll()
        with open(log, "ab") as fh:
            fh.write(b"5mblink\n")  # the sequence cut across two reads is removed whole
        pane.poll()
        await pilot.pause()
        assert list(pane.lines) == ["epoch 1 done", "red\tcell", "partial blink"]
        assert "\x1b" not in str(pane.border_title)


@pytest.mark.asyncio
async def test_log_pane_reads_no_link(tmp_path: Path) -> None:
    """A replayed session's log can be a link to a secret, or its logs/ folder a link."""
    secret = tmp_path / "shadow"
    secret.write_text(f"{SECRET}\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "link.log").symlink_to(secret)
    (tmp_path / "linked").symlink_to(tmp_path / "logs", target_is_directory=True)
    (tmp_path / "logs" / "real.log").write_text(f"{SECRET}\n")
    app = _LogApp()
    async with app.run_test() as pilot:
        pane = app.query_one(RunLog)
        for path in (tmp_path / "logs" / "link.log", tmp_path / "linked" / "real.log"):
            pane.follow(path, path.name)
            pane.poll()
            await pilot.pause()
            assert not any(SECRET in line for line in pane.lines), path
        pane.follow(tmp_path / "logs" / "real.log", "real")  # the same file, not through a link
        pane.poll()
        await pilot.pause()
        assert SECRET in list(pane.lines)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_log_pane_does_not_wait_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "run.log"
    os.mkfifo(fifo)
    found: list[object] = []
    # A daemon thread: an open that blocks fails this test instead of hanging the run.
    opener = threading.Thread(target=lambda: found.append(open_log(fifo)), daemon=True)
    opener.start()
    opener.join(10)
    assert found == [None]


@pytest.mark.asyncio
async def test_sessions_screen_lists_hostile_sessions_as_text(root: Path) -> None:
    from rich.text import Text
    from textual.widgets import DataTable

    from benchtui.screens.sessions import SessionsScreen

    class _App(App[None]):
        def on_mount(self) -> None:
            self.push_screen(SessionsScreen(str(root)))

    app = _App()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        cells = [c for i in range(table.row_count) for c in table.get_row_at(i)]
        assert cells and all(isinstance(c, Text) for c in cells)  # a str cell would be read as markup
        _safe("".join(c.plain for c in cells))
        assert any("[red]name[/]" in c.plain for c in cells)
