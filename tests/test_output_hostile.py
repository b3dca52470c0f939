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
import textwrap
from pathlib import Path

import pytest

from benchtui.core import fmt
from sessionfactory import make_session
from support import ROOT, UNAVAILABLE_RUN

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


@pytest.mark.long
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


# -- 12. an export into a folder that refuses writes ------------------------------------------------
#: A read-only file system, at the narrowest boundary: every call that would create, replace or remove a
#: file under the folder fails with EROFS, as the kernel answers on a read-only mount (tests run as root
#: here, where a folder's mode stops nothing, and no read-only mount can be made without privileges).
READ_ONLY_SHIM = textwrap.dedent(
    """
    import builtins, errno, io, os, sys
    folder = os.path.realpath(sys.argv.pop(1))

    def inside(path):
        return isinstance(path, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(path)).startswith(
            folder + os.sep
        )

    def refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    def guard(real, writes):
        def call(path, *args, **kwargs):
            if inside(path) and writes(*args, **kwargs):
                refuse(path)
            return real(path, *args, **kwargs)
        return call

    def open_writes(mode="r", *args, **kwargs):
        return any(c in mode for c in "wax+")

    def os_open_writes(flags, *args, **kwargs):
        return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))

    builtins.open = io.open = guard(io.open, open_writes)
    os.open = guard(os.open, os_open_writes)
    os.unlink = os.remove = guard(os.unlink, lambda *a, **k: True)
    os.replace = os.rename = guard(os.replace, lambda *a, **k: True)
    from benchtui.cli import entry
    sys.argv[0] = "benchtui"
    entry()
    """
)


@pytest.mark.parametrize("format_", ["md", "csv", "json", "html"])
def test_an_export_into_a_read_only_folder_is_one_line(root: Path, tmp_path: Path, format_: str) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    target = folder / f"out.{format_}"
    args = ("export", _session(root, "plain"), "--format", format_, "-o", str(target))
    result = subprocess.run(
        [sys.executable, "-c", READ_ONLY_SHIM, str(folder), *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    _one_line(result.stderr, f"cannot write {target}", "Read-only file system")
    assert list(folder.iterdir()) == []


def _without_root_s_pass() -> list[str]:
    """A prefix that runs a command without root's licence to pass permissions (CAP_DAC_OVERRIDE), so a
    folder's mode stops it as it stops a user; none needed for a user, and a skip where none can be had."""
    if os.geteuid() != 0:
        return []
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-dac_override"]
    try:
        subprocess.run([*drop, "true"], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("root here, and setpriv cannot drop its licence to pass permissions")
    return drop


def test_an_export_into_a_folder_without_permission_is_one_line(root: Path, tmp_path: Path) -> None:
    """A real refusal from the kernel (EACCES), for the write and for the cleanup's removal alike."""
    folder = tmp_path / "no-entry"
    folder.mkdir()
    folder.chmod(0o444)  # not even searchable: creating and removing a name in it both fail
    target = folder / "out.md"
    try:
        result = subprocess.run(
            [*_without_root_s_pass(), sys.executable, "-m", "benchtui", "export", _session(root, "plain")]
            + ["--format", "md", "-o", str(target)],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        folder.chmod(0o755)
    assert result.returncode == 2, result.stderr
    _one_line(result.stderr, f"cannot write {target}", "Permission denied")
    assert list(folder.iterdir()) == []


def test_the_temporary_file_of_an_export_never_follows_a_link(root: Path, tmp_path: Path) -> None:
    """A session folder comes from anyone, and an html export goes into it by default: a link planted
    where the export's temporary file would be (its name once known: the process id) is never followed."""
    session = Path(_session(root, "plain"))
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    script = textwrap.dedent(
        f"""
        import os, sys
        link = os.path.join({str(session)!r}, f".report.html.tmp{{os.getpid()}}")
        os.symlink({str(victim)!r}, link)
        from benchtui.cli import main
        try:
            code = main(["export", {str(session)!r}, "--format", "html"])
        finally:
            if os.path.lexists(link):
                os.unlink(link)
        sys.exit(code)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, cwd=ROOT, timeout=120, check=False
    )
    _quiet(result)
    assert result.returncode == 0, result.stderr
    report = session / "report.html"
    try:
        assert victim.read_text() == "mine\n"
        assert not report.is_symlink()
        assert report.read_text(encoding="utf-8").lower().startswith("<!doctype html>")
    finally:
        report.unlink()


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


@pytest.mark.parametrize("format_", ["md", "csv", "json", "html"])
def test_a_lone_surrogate_never_stops_an_export_to_a_file(
    surrogates: Path, tmp_path: Path, format_: str
) -> None:
    target = tmp_path / f"out.{format_}"
    result = _cli("export", str(surrogates), "--format", format_, "-o", str(target))
    _quiet(result)
    assert result.returncode == 0, result.stderr
    text = target.read_bytes().decode("utf-8")  # strict: the file is UTF-8
    if format_ == "json":  # the JSON escape: read back, the same string as the folder's name
        assert json.loads(text)["session"]["folder"] == NOT_UTF8
    if format_ in ("md", "html"):
        assert "caf\\udce9" in text  # the byte the folder's name holds, said


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
