"""How long a big session takes to show, export, compare and replay, and how much memory each takes.

    .venv/bin/python benchmarks/views.py --dir DIR [--before TREE] [--repeat 3] [--only show,html]

``--dir`` holds a session built by ``benchmarks/load_session.py --dir DIR`` (about a million events).
Each view runs as ``benchtui ...`` in a fresh process: its wall time and its peak resident memory
(``ru_maxrss`` of that child, from ``os.wait4``). With ``--before TREE`` (a ``git worktree`` of an
older commit) the same command runs from that tree's ``tui/`` too, alternating with this one, and a
ratio before/after is printed per view with the spread of the repeats and the machine's load.
The exports go to a temporary folder (never into the session). "compare copy" compares the session with
the same files under another folder (two loads, as two sessions are); "compare self" names it twice.
Replay: the seconds from ``make_app(replay=..., speed=--speed)`` (a headless ``run_test``; the imports
before it are a constant and not counted) to the live screen's first redraw (``LiveScreen.tick``) with a
recorded event on it. ``--finish`` first gives the session summary.json and its summary cache, as a
session its writer finished has (load_session.py builds it without). Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
TARGET_MB = 300.0
CSV_TARGET_MB = 100.0

#: The replay's first draw, measured inside the child: it prints the seconds to it, or "never".
REPLAY_CHILD = r"""
import asyncio, sys, time
t0 = time.perf_counter()
from benchtui.app import make_app
from benchtui.screens.live import LiveScreen
from pathlib import Path

drawn = []
tick = LiveScreen.tick

def first_tick(self):  # the live screen's redraw from the model: the first with a recorded event on it
    tick(self)
    if not drawn and self.model.events > 0:
        drawn.append(time.perf_counter())

LiveScreen.tick = first_tick

async def main():
    t1 = time.perf_counter()
    app = make_app(replay=Path(sys.argv[1]), speed=float(sys.argv[2]), use_nvml=False)
    async with app.run_test(size=(160, 50)) as pilot:
        while not drawn and time.perf_counter() - t0 < 120:
            await asyncio.sleep(0.005)
        print(f"{drawn[0] - t0:.3f} {drawn[0] - t1:.3f}" if drawn else "never")
        app.exit()

asyncio.run(main())
"""


def views(session: Path, out: Path) -> dict[str, list[str]]:
    """Each view's command line after ``python -m benchtui``."""
    s = str(session)
    return {
        "show": ["show", s],
        "md": ["export", s, "--format", "md", "-o", str(out / "s.md")],
        "csv": ["export", s, "--format", "csv", "-o", str(out / "s.csv")],
        "per-batch csv": ["export", s, "--format", "csv", "--per-batch", "-o", str(out / "b.csv")],
        "json": ["export", s, "--format", "json", "-o", str(out / "s.json")],
        "html": ["export", s, "--format", "html", "-o", str(out / "r.html")],
        "bencher": ["export", s, "--format", "bencher", "-o", str(out / "t.json")],
        "gab": ["export", s, "--format", "gab-throughput", "-o", str(out / "g.json")],
        "compare self": ["compare", s, s],
        "compare copy": ["compare", s, str(out / "copy" / session.name)],
    }


def finish(session: Path) -> str:
    """Give the session what a finished one has: summary.json as the writer writes it, then the summary cache
    a load adds (``LoadedSession.summary``, issue 35), where this code has one. Says what it did."""
    sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners")]
    import json

    from benchtui.core.store.session import load_session

    done = []
    if not (session / "summary.json").exists():
        loaded = load_session(session)
        (session / "summary.json").write_text(json.dumps(loaded.model.summary()), encoding="utf-8")
        done.append("summary.json written")
    loaded = load_session(session)
    if hasattr(loaded, "summary") and loaded.folder.cached_summary() is None:
        loaded.summary()
        done.append("cache written")
    cached = hasattr(loaded.folder, "cached_summary") and loaded.folder.cached_summary() is not None
    return ", ".join(done) + f"{'; ' if done else ''}cache {'holds' if cached else 'absent'}"


def run_one(tree: Path, argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit status) of ``python -m benchtui argv`` from ``tree``'s tui/."""
    env = dict(os.environ, PYTHONPATH=f"{tree / 'tui'}{os.pathsep}{tree / 'runners'}")
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        sys.stderr.write(f"{tree}: {' '.join(argv[:4])}: exit {proc.returncode}: {err.decode()[-400:]}\n")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def replay_argv(session: Path) -> list[str]:
    return ["-c", REPLAY_CHILD, str(session)]


def run_replay(tree: Path, session: Path, speed: float) -> tuple[float, float, int]:
    """The replay's seconds to its first draw (as the child measured it), its peak RSS, its exit status."""
    env = dict(os.environ, PYTHONPATH=f"{tree / 'tui'}{os.pathsep}{tree / 'runners'}")
    proc = subprocess.Popen(
        [sys.executable, *replay_argv(session), str(speed)],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate()
    text = out.decode().strip().splitlines()
    try:
        first = float(text[-1].split()[1])  # from the app's start (the imports before it: a constant)
    except (IndexError, ValueError):
        sys.stderr.write(f"{tree}: replay: {err.decode()[-400:]}\n")
        first = float("nan")
    return first, float("nan"), proc.returncode


def spread(values: list[float]) -> str:
    values = [v for v in values if v == v]
    if not values:
        return "n/a"
    med = statistics.median(values)
    return f"{med:6.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, required=True, help="where load_session.py --dir built the session"
    )
    parser.add_argument("--before", type=Path, help="a worktree of the older code, run beside this one")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--only", help="comma-separated views (show, md, csv, per-batch csv, json, html, ...)"
    )
    parser.add_argument("--no-replay", action="store_true")
    parser.add_argument("--speed", type=float, default=1.0, help="the replay's speed (default 1)")
    parser.add_argument(
        "--finish",
        action="store_true",
        help="first give the session summary.json and its cache, as a finished one has",
    )
    args = parser.parse_args()

    sessions = sorted(args.dir.glob("*_bench-1m"))
    if not sessions:
        print(
            f"no *_bench-1m session in {args.dir}: build one with benchmarks/load_session.py --dir",
            file=sys.stderr,
        )
        return 2
    session = sessions[0]
    with open(session / "events.jsonl", "rb") as fh:
        lines = sum(1 for _ in fh)
    trees = {"after": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    print(f"session {session.name}: {lines:,} events; load average {os.getloadavg()}")
    if args.finish:
        print(f"finished: {finish(session)}")
    print(f"summary.json: {'yes' if (session / 'summary.json').exists() else 'none'}")
    out = Path(tempfile.mkdtemp(prefix="views-"))
    try:
        # B of "compare copy": the same files under another folder (hard links: no copy of 160 MB).
        shutil.copytree(session, out / "copy" / session.name, copy_function=os.link)
        table = views(session, out)
        if args.only:
            wanted = {w.strip() for w in args.only.split(",")}
            table = {k: v for k, v in table.items() if k in wanted}
        walls: dict[tuple[str, str], list[float]] = {}
        rss: dict[tuple[str, str], list[float]] = {}
        for i in range(args.repeat):
            order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
            for name, argv in table.items():
                for label, tree in order:  # alternated: drift hits both
                    wall, peak, _ = run_one(tree, ["-m", "benchtui", *argv])
                    walls.setdefault((name, label), []).append(wall)
                    rss.setdefault((name, label), []).append(peak)
            if not args.no_replay:
                for label, tree in order:
                    first, _, _ = run_replay(tree, session, args.speed)
                    walls.setdefault(("replay first draw", label), []).append(first)
        print(f"load average after: {os.getloadavg()}")
        print(f"{'view':18} {'tree':7} {'wall s: median [min-max]':26} {'peak RSS MiB':14} verdict")
        names = [*table, *([] if args.no_replay else ["replay first draw"])]
        for name in names:
            for label in trees:
                w = walls[(name, label)]
                r = rss.get((name, label), [float("nan")])
                mb = max(r)
                limit = 0.5 if name == "replay first draw" else TARGET_S
                mem_limit = CSV_TARGET_MB if name == "per-batch csv" else TARGET_MB
                ok = statistics.median(w) < limit and (mb != mb or mb < mem_limit)
                mem = "n/a" if mb != mb else f"{mb:8.0f}"
                print(
                    f"{name:18} {label:7} {spread(w):26} {mem:14} {'OK' if ok else 'over'} (< {limit} s, {mem_limit:.0f} MB)"
                )
            if "before" in trees:
                before, after = walls[(name, "before")], walls[(name, "after")]
                ratios = [b / a for b, a in zip(before, after, strict=True) if a == a and b == b and a > 0]
                if ratios:
                    print(f"{'':18} ratio   before/after {spread(ratios)} (per repeat, side by side)")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
