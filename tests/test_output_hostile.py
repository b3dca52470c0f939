"""Output that cannot take what benchtui prints (issue 29, items 9-12), through the real CLI in a subprocess.

A stdout in ASCII or Latin-1 (PYTHONIOENCODING, or the C locale without UTF-8 mode) gets stand-ins for
the characters it cannot encode; a reader that leaves (``| head -1``) ends the command quietly; a closed
stdout or a full one is one line on stderr; an export into a folder that refuses writes is one line; a
lone surrogate (a folder name that is not UTF-8, a string escaped in a JSON file) never stops a writer,
and every file and strict stream gets valid text.
"""

from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchtui.core import fmt
from conftest import ROOT, UNAVAILABLE_RUN
from sessionfactory import make_session

#: What a shell reports for a command its reader left: killed by SIGPIPE.
BROKEN_PIPE = 128 + signal.SIGPIPE
#: The locale's own ASCII: no UTF-8 mode, no coercion to C.UTF-8 (PEP 538/540 would give UTF-8).
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
#: A folder name that is not UTF-8, as a user's can be: Python reads it as a lone surrogate.
NOT_UTF8 = os.fsdecode(b"20260102T030405Z_caf\xe9")


def _cli(
    *args: str,
    env: dict[str, str] | None = None,
    stdout: int | object = subprocess.PIPE,
    stderr: int | object = subprocess.PIPE,
    drop: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[bytes]:
    """The real ``benchtui`` in a fresh process, its output as bytes (they need not be UTF-8)."""
    environ = {k: v for k, v in os.environ.items() if k not in drop and k != "PYTHONIOENCODING"}
    return subprocess.run(
        [sys.executable, "-m", "benchtui", *args],
        stdout=stdout,  # type: ignore[arg-type]
        stderr=stderr,  # type: ignore[arg-type]
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env={**environ, "NO_COLOR": "1", "TERM": "dumb", **(env or {})},
        timeout=120,
        check=False,
    )


def _quiet(result: subprocess.CompletedProcess[bytes]) -> None:
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small sessions to show and compare, and a long one whose per-batch CSV overfills a pipe."""
    path = tmp_path_factory.mktemp("sessions")
    make_session(path, name="plain", runs=2, epochs=2, steps=3)
    make_session(path, name="other", runs=2, epochs=2, steps=3, seed=2)
    make_session(path, name="long", runs=2, epochs=3, steps=300, gpu=False)  # ~370 KB of batches
    return path


def _session(root: Path, name: str) -> str:
    return str(next(p for p in root.iterdir() if p.name.endswith("_" + name)))


def _commands(root: Path) -> dict[str, tuple[str, ...]]:
    plain, other = _session(root, "plain"), _session(root, "other")
    return {
        "show": ("show", plain),
        "md": ("export", plain, "--format", "md"),
        "csv": ("export", plain, "--format", "csv"),
        "json": ("export", plain, "--format", "json"),
        "compare": ("compare", plain, other),
        "sessions": ("sessions", "--sessions-dir", str(root)),
    }


# -- 10. a stdout that cannot encode what benchtui prints -------------------------------------------
def _printing(root: Path) -> dict[str, tuple[str, ...]]:
    return {**_commands(root), "html": ("export", _session(root, "plain"), "--format", "html", "-o", "-")}


@pytest.fixture(scope="module")
def in_utf8(root: Path) -> dict[str, str]:
    """What each command prints on a UTF-8 stdout: what the others must say too."""
    return {
        what: _cli(*args, env={"PYTHONIOENCODING": "utf-8"}).stdout.decode("utf-8")
        for what, args in _printing(root).items()
    }


@pytest.mark.parametrize(
    "env, encoding",
    [
        ({"PYTHONIOENCODING": "ascii"}, "ascii"),
        ({"PYTHONIOENCODING": "latin-1"}, "latin-1"),
        (C_LOCALE, "ascii"),
    ],
    ids=["ascii", "latin-1", "C-locale"],
)
def test_a_stdout_that_cannot_encode_gets_stand_ins(
    root: Path, in_utf8: dict[str, str], env: dict[str, str], encoding: str
) -> None:
    for what, args in _printing(root).items():
        result = _cli(*args, env=env, drop=("LANG", "LC_ALL", "LC_CTYPE"))
        _quiet(result)
        assert result.returncode == 0, (what, result.stderr)
        text, utf8 = result.stdout.decode(encoding), in_utf8[what]  # strict: every byte is the stream's own
        if what == "json":  # as JSON escapes: the same data, exactly
            assert json.loads(text) == json.loads(utf8)
        elif what == "html":  # as character references: the same page
            assert html.unescape(text) == html.unescape(utf8)
        elif what in ("md", "csv"):  # the same document, a stand-in for what the stream lacks
            assert text == utf8.encode(encoding, fmt.FALLBACK).decode(encoding)
            assert "\\u" not in text  # every character they print has a stand-in of its own
        else:  # the terminal's tables: Rich draws their boxes in ASCII itself
            assert "resnet50" in text.lower() and "\\u" not in text and "\\x" not in text, text
        if what == "md" and encoding == "ascii":  # what the report prints most, as a reader expects it
            assert text.startswith("# benchtui - plain\n") and "| Mean epoch - PyTorch |" in text, text


def test_the_stand_ins() -> None:
    cases = {
        "a · b – c — d × e … f ≠ g ≥ h ≤ i → j −1": "a - b - c - d x e ... f != g >= h <= i -> j -1",
        "café ＋ 41 °C": "cafe + 41 degC",
        "日本 \U0001f600 \udce9": "\\u65e5\\u672c \\U0001f600 \\udce9",
    }
    for text, ascii_ in cases.items():
        assert text.encode("ascii", fmt.FALLBACK).decode() == ascii_
    assert "× · é".encode("latin-1", fmt.FALLBACK).decode("latin-1") == "× · é"  # Latin-1 has them
    assert "a \udce9 b".encode("utf-8", fmt.FALLBACK_KEEPING_BYTES) == b"a \xe9 b"  # the byte it stood for
    assert "\ud800".encode("utf-8", fmt.FALLBACK_KEEPING_BYTES) == b"\\ud800"  # none: escaped
    text = "x\U0001f600·\udce9"  # JSON's escapes, a pair above U+FFFF: read back, the same string
    assert json.loads(json.dumps(text, ensure_ascii=False).encode("ascii", fmt.JSON_ESCAPE)) == text


def test_a_headless_run_on_an_ascii_stdout_prints_its_table(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    result = _cli(*UNAVAILABLE_RUN, "--sessions-dir", str(sessions), env={"PYTHONIOENCODING": "ascii"})
    _quiet(result)
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode("ascii")
    assert "PNASNet" in out and "benchtui - " in out, out  # the table, its title's '·' a '-'
    (folder,) = sessions.iterdir()
    assert json.loads((folder / "session.json").read_text())["status"] == "complete"


# -- 11. a reader that leaves, a closed stdout, a full one ---------------------------------------------
def test_head_ends_a_long_export_quietly(root: Path) -> None:
    """``benchtui export S --format csv --per-batch | head -1``: more than a pipe holds, the reader gone."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchtui",
            "export",
            _session(root, "long"),
            "--format",
            "csv",
            "--per-batch",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as head does after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == BROKEN_PIPE
    assert first.count(b",") > 5  # the header
    assert err == b"", err.decode(errors="replace")


def _gone_reader() -> int:
    """The write end of a pipe whose reader has already left: every write fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize("what", ["show", "md", "compare", "sessions", "per-batch", "--version", "--help"])
def test_every_command_ends_quietly_when_its_reader_has_left(root: Path, what: str) -> None:
    commands = {
        **_commands(root),
        "per-batch": ("export", _session(root, "long"), "--format", "csv", "--per-batch"),
        "--version": ("--version",),
        "--help": ("--help",),
    }
    write = _gone_reader()
    try:
        result = _cli(*commands[what], stdout=write)
    finally:
        os.close(write)
    assert result.returncode in (BROKEN_PIPE, 0) if what == "--help" else result.returncode == BROKEN_PIPE
    assert result.stderr == b"", result.stderr.decode(errors="replace")


def _one_line(err: bytes, *words: str) -> None:
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("benchtui: error: "), err
    assert all(w in lines[0] for w in words), lines[0]


@pytest.mark.parametrize("what", ["show", "md", "json", "compare", "sessions"])
def test_a_closed_stdout_is_one_line(root: Path, what: str) -> None:
    """``benchtui show S >&-``: Python gives sys.stdout = None; nothing may be lost without a word."""
    args = _commands(root)[what]
    result = subprocess.run(
        ["bash", "-c", 'exec "$@" >&-', "-", sys.executable, "-m", "benchtui", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    _one_line(result.stderr, "cannot write to stdout", "closed")


@pytest.mark.parametrize("what", ["show", "md", "json", "compare", "sessions", "per-batch", "--version"])
def test_a_full_stdout_is_one_line(root: Path, what: str) -> None:
    commands = {
        **_commands(root),
        "per-batch": ("export", _session(root, "long"), "--format", "csv", "--per-batch"),
        "--version": ("--version",),
    }
    with open("/dev/full", "wb") as full:
        result = _cli(*commands[what], stdout=full)
    assert result.returncode == 2
    _one_line(result.stderr, "cannot write to stdout: No space left on device")


def test_a_headless_run_whose_progress_cannot_be_written_is_saved_as_interrupted(tmp_path: Path) -> None:
    """Its stderr full from the first line: the session stops as if its terminal had closed, and is saved."""
    sessions = tmp_path / "sessions"
    with open("/dev/full", "wb") as full:
        result = _cli(*UNAVAILABLE_RUN, "--sessions-dir", str(sessions), stderr=full)
    assert result.returncode == 2
    (folder,) = sessions.iterdir()
    assert json.loads((folder / "session.json").read_text())["status"] == "interrupted"


def test_a_headless_run_whose_table_cannot_be_written_still_says_where_the_session_is(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with open("/dev/full", "wb") as full:
        result = _cli(*UNAVAILABLE_RUN, "--sessions-dir", str(sessions), stdout=full)
    _quiet(result)
    assert result.returncode == 2
    (folder,) = sessions.iterdir()
    lines = result.stderr.decode().splitlines()
    assert lines[-2:] == [
        f"session complete: {folder}",
        "benchtui: error: cannot write to stdout: No space left on device",
    ], lines
    assert json.loads((folder / "session.json").read_text())["status"] == "complete"


# -- 9. lone surrogates --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def surrogates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session in a folder whose name is not UTF-8, its session.json's name escaping a lone surrogate."""
    root = tmp_path_factory.mktemp("surrogates")
    path = make_session(root, name="plain", runs=1, epochs=2, steps=3, folder=NOT_UTF8)
    meta = json.loads((path / "session.json").read_text())
    meta["name"] = "lone \ud800 surrogate"  # written as the JSON escape \ud800: valid JSON, not valid text
    (path / "session.json").write_text(json.dumps(meta))
    return path


@pytest.mark.parametrize("what", ["show", "md", "json", "sessions"])
def test_a_lone_surrogate_reaches_a_strict_utf8_stdout_as_valid_text(surrogates: Path, what: str) -> None:
    args = {
        "show": ("show", str(surrogates)),
        "md": ("export", str(surrogates), "--format", "md"),
        "json": ("export", str(surrogates), "--format", "json"),
        "sessions": ("sessions", "--sessions-dir", str(surrogates.parent)),
    }[what]
    result = _cli(*args, env={"PYTHONIOENCODING": "utf-8"})  # errors=strict
    _quiet(result)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode("utf-8")  # strict
    if what == "json":  # the JSON escape: read back, the same string as the folder's name
        assert json.loads(text)["session"]["folder"] == NOT_UTF8
    else:
        assert "caf\\udce9" in text, text
