"""The GPU samples read beside the load (``reporting.ahead``): the same digest, the same html, and the export's
own pass whenever the child fails. Each case runs in a fresh process: a fork is taken only where the process
has one thread, and a test worker has more."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """The hand-made GPU session (two GPUs, 25 samples), copied: a fork is asked for at any size below."""
    path = tmp_path / "gpu-session"
    shutil.copytree(DATA / "gpu-session", path)
    return path


def _run(code: str, path: Path, *args: str) -> dict:
    """``code`` in a fresh Python (``path`` and ``args`` given), which prints one json line; its temporary
    files in a folder of its own (what the child leaves behind is looked for there)."""
    tmp = path.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    prelude = textwrap.dedent(
        """
        import json, os, sys, tempfile, threading
        from pathlib import Path
        from benchtui.core.reporting import ahead
        from benchtui.core.reporting.model.telemetry import read_digest
        from benchtui.core.store.session import SessionFolder
        path = Path(sys.argv[1])
        def leftovers():
            return sorted(p.name for p in Path(tempfile.gettempdir()).glob("benchtui-ahead-*"))
        before = leftovers()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code), str(path), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_digest_read_beside_the_load_is_the_one_read_here(session: Path) -> None:
    out = _run(
        """
        pending = ahead.Ahead.start(path, min_bytes=0)
        got = pending.result()
        folder = SessionFolder(path)
        here = read_digest(folder, folder.read_plan())
        try:
            os.waitpid(pending.pid, 0)
            reaped = False
        except ChildProcessError:
            reaped = True
        print(json.dumps({"same": got == here, "lines": got.lines is not None and len(got.lines.xs),
                          "reaped": reaped, "left": leftovers() != before, "again": pending.result() is None}))
        """,
        session,
    )
    assert out == {"same": True, "lines": 25, "reaped": True, "left": False, "again": True}


@pytest.mark.parametrize(
    "how",
    [
        "ahead.read_digest = lambda folder, plan: 1 / 0",  # an error in the child
        "ahead.read_digest = lambda folder, plan: 'not a digest'",  # what comes back is not one
        "kill",  # the child killed while it reads
    ],
)
def test_a_child_that_fails_gives_none_and_leaves_nothing(session: Path, how: str) -> None:
    out = _run(
        f"""
        import signal
        import time
        how = {how!r}
        if how != "kill":
            exec(how)
        else:
            ahead.read_digest = lambda folder, plan: time.sleep(30)
        pending = ahead.Ahead.start(path, min_bytes=0)
        if how == "kill":
            os.kill(pending.pid, signal.SIGKILL)
        print(json.dumps({{"result": repr(pending.result()), "left": leftovers() != before}}))
        """,
        session,
    )
    assert out == {"result": "None", "left": False}


def test_closing_stops_the_child_and_removes_its_file(session: Path) -> None:
    out = _run(
        """
        import time
        real = ahead.read_digest
        def slow(folder, plan):
            time.sleep(30)
            return real(folder, plan)
        ahead.read_digest = slow
        pending = ahead.Ahead.start(path, min_bytes=0)
        started = time.monotonic()
        pending.close()
        try:
            os.kill(pending.pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        print(json.dumps({"alive": alive, "left": leftovers() != before, "fast": time.monotonic() - started < 5,
                          "result": repr(pending.result())}))
        """,
        session,
    )
    assert out == {"alive": False, "left": False, "fast": True, "result": "None"}


def test_no_fork_where_it_is_not_safe_or_not_worth_it(session: Path) -> None:
    out = _run(
        """
        small = ahead.Ahead.start(path)  # 25 samples: under AHEAD_MIN_BYTES
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait)
        thread.start()
        threaded = ahead.Ahead.start(path, min_bytes=0)  # a second thread: a fork copies only this one
        stop.set()
        thread.join()
        gone = ahead.Ahead.start(path / "nowhere", min_bytes=0)
        print(json.dumps([small is None, threaded is None, gone is None]))
        """,
        session,
    )
    assert out == [True, True, True]


def _export(session: Path, out: Path, setup: str) -> str:
    """``benchtui export SESSION --format html`` in a fresh process, after ``setup``; the html written."""
    code = textwrap.dedent(setup) + textwrap.dedent(
        """
        from benchtui import cli
        sys.argv = ["benchtui", "export", str(path), "--format", "html", "-o", sys.argv[2]]
        try:
            cli.entry()
        except SystemExit as exc:
            print(json.dumps({"code": exc.code, "left": leftovers() != before}))
        """
    )
    assert _run(code, session, str(out)) == {"code": 0, "left": False}
    return out.read_text()


def test_the_html_is_the_same_with_the_samples_read_beside_the_load_or_not(
    session: Path, tmp_path: Path
) -> None:
    alone = _export(session, tmp_path / "alone.html", "ahead.AHEAD_MIN_BYTES = 1 << 60")
    beside = _export(
        session,
        tmp_path / "beside.html",
        """
        ahead.AHEAD_MIN_BYTES = 0
        start = ahead.Ahead.start
        def started(*args, **kwargs):
            got = start(*args, **kwargs)
            assert got is not None  # the fork was taken
            return got
        ahead.Ahead.start = started
        """,
    )
    failed = _export(
        session,
        tmp_path / "failed.html",
        """
        ahead.AHEAD_MIN_BYTES = 0
        ahead.read_digest = lambda folder, plan: 1 / 0
        """,
    )
    assert "GPU utilization over time" in alone
    assert beside == alone
    assert failed == alone


def test_a_load_that_fails_stops_the_child_at_once(session: Path) -> None:
    """The export says why in one line, exits 2, and does not wait for the samples' pass it no longer needs."""
    (session / "session.json").write_text("{ not json")
    out = _run(
        """
        import time
        ahead.AHEAD_MIN_BYTES = 0
        ahead.read_digest = lambda folder, plan: time.sleep(30)
        from benchtui import cli
        sys.argv = ["benchtui", "export", str(path), "--format", "html", "-o", str(path / "r.html")]
        started = time.monotonic()
        try:
            cli.entry()
        except SystemExit as exc:
            print(json.dumps({"code": exc.code, "fast": time.monotonic() - started < 10,
                              "left": leftovers() != before}))
        """,
        session,
    )
    assert out == {"code": 2, "fast": True, "left": False}
