"""Every reader of a session folder on every hostile folder, each in a fresh process: its wall time and
peak memory against issue 29's bounds (1 s, 200 MB).

    .venv/bin/python benchmarks/hostile_readers.py [--files session.json,events.jsonl] [--readers show,compare]

Records a session with the real engine and a stand-in runner (``record_session`` of
tests/test_fuzz_sessions.py), then makes each of session.json, summary.json and events.jsonl each
kind of file no writer makes (``FILE_KINDS``: a FIFO, a folder, links, 20 GB holes, files at and over
their bounds, the densest JSON at its bound, nesting 100,000 deep) and adds issue 29's other reading
cases (plans ``run`` refuses, a line nested too deep, lone surrogates). Each reader (``readers``: the
command line's, a replay's and the sessions screen's) runs as a user runs it, in a fresh process whose
wall time (start-up included) and peak RSS are printed. The undamaged session comes first: what every
reader pays anyway. A last section measures what the per-line bound does not cover. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners"), str(ROOT / "tests")]

from benchtui.core.store.session import MAX_EVENT_LINE_BYTES  # noqa: E402
from test_fuzz_sessions import (  # noqa: E402
    FILE_KINDS,
    FILES,
    READER_MB,
    READER_S,
    Read,
    hostile_folder,
    measured,
    readers,
    record_session,
    slug,
)
from test_hostile_folders import NESTED_LINES, REFUSED_PLANS, _surrogates, edit_meta  # noqa: E402


def _nested_line(depth: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        lines = (path / "events.jsonl").read_bytes().splitlines(keepends=True)
        line = NESTED_LINES["an event's field"](depth).encode() + b"\n"
        (path / "events.jsonl").write_bytes(b"".join([*lines[:3], line, *lines[3:]]))

    return damage


def _retained_samples(count: int) -> Callable[[Path], None]:
    """``count`` GPU samples, each a line at the bound with a field of its own of the densest JSON: each
    line is read alone, but the model keeps its window of samples whole, that field too."""

    def damage(path: Path) -> None:
        head = b'{"type":"gpu","t":1.0,"run":null,"pad":['
        room = MAX_EVENT_LINE_BYTES - len(head) - len(b"{}]}")
        line = head + b"{}," * (room // 3) + b" " * (room % 3) + b"{}]}\n"
        with open(path / "events.jsonl", "ab") as fh:
            fh.write(line * count)

    return damage


#: Issue 29's reading cases beyond a file's type and size (items 7, 8 and 9), made on a copy.
CASES: dict[str, Callable[[Path], None]] = {
    **{
        f"plan: {name}": (lambda change: lambda p: edit_meta(p, change))(c)
        for name, (c, _) in REFUSED_PLANS.items()
    },
    "events.jsonl: a line nested 600 deep": _nested_line(600),
    "events.jsonl: a line nested 100,000 deep": _nested_line(100_000),
    "session.json: lone surrogates": lambda p: edit_meta(p, _surrogates),
    # What the model keeps: GPU samples past MAX_GPU_LINE_BYTES are skipped, the rest pruned to the
    # sampler's fields; long lines past LONG_LINES_BUDGET are skipped.
    **{f"events.jsonl: {n} GPU samples at the line bound": _retained_samples(n) for n in (1, 3, 10)},
}
BEYOND: dict[str, Callable[[Path], None]] = {}  # nothing the bounds leave out, measured so far


def run_readers(case: str, bad: Path, good: Path, out: Path, only: set[str]) -> list[tuple[str, Read]]:
    reads = []
    for name, args in readers(bad, good, out).items():
        if only and name not in only:
            continue
        read = measured(name, args)
        reads.append((case, read))
        rc = "hung" if read.rc is None else read.rc
        over = " OVER" if read.wall_s > READER_S or read.rss_mb > READER_MB or read.rc is None else ""
        said = (read.err.strip().splitlines() or [""])[-1][:90]
        print(
            f"{case:<44} {name:<20} {rc!s:>4} {read.wall_s:6.2f} s {read.rss_mb:6.0f} MB{over}  {said}",
            flush=True,
        )
    return reads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default=",".join(FILES), help="which files to damage (comma-separated)")
    parser.add_argument("--readers", default="", help="only these readers (comma-separated names)")
    parser.add_argument("--no-cases", action="store_true", help="file kinds only, not items 7-9 and beyond")
    args = parser.parse_args()
    only = {r for r in args.readers.split(",") if r}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        real = record_session(base / "recorded")
        print(f"session: {real.name}: {(real / 'events.jsonl').stat().st_size / 1024:.0f} KiB of events")
        print(f"{'case':<44} {'reader':<20} {'exit':>4} {'wall':>8} {'peak':>9}")
        all_reads: list[tuple[str, Read]] = []
        n = 0

        def folder(case: str) -> tuple[Path, Path, Path]:
            nonlocal n
            n += 1
            root = base / f"c{n}"
            out = root / "out"
            out.mkdir(parents=True)
            return root, out, root / "sessions"

        root, out, sessions = folder("undamaged")
        good = sessions / f"20200101T000000Z_{real.name.partition('_')[2]}"
        shutil.copytree(real, good)
        baseline = run_readers("undamaged", good, good, out, only)
        shutil.rmtree(root)
        for file in args.files.split(","):
            for kind in FILE_KINDS:
                root, out, sessions = folder(kind)
                good, bad = hostile_folder(real, sessions, file, kind)
                all_reads += run_readers(f"{file}: {kind}", bad, good, out, only)
                shutil.rmtree(root)
        for group in () if args.no_cases else (CASES, BEYOND):
            if group is BEYOND and BEYOND:
                print("-- beyond the per-line bound: what the model keeps (not a file's kind) --")
            for case, damage in group.items():
                root, out, sessions = folder(case)
                good = sessions / f"20200101T000000Z_{real.name.partition('_')[2]}"
                bad = sessions / f"20300101T000000Z_{slug(case)}"
                shutil.copytree(real, good)
                shutil.copytree(real, bad)
                damage(bad)
                reads = run_readers(case, bad, good, out, only)
                if group is CASES:
                    all_reads += reads
                shutil.rmtree(root)
    walls = [r.wall_s for _, r in all_reads]
    wall_case, worst_wall = max(all_reads, key=lambda cr: cr[1].wall_s)
    rss_case, worst_rss = max(all_reads, key=lambda cr: cr[1].rss_mb)
    over = [r for _, r in all_reads if r.wall_s > READER_S or r.rss_mb > READER_MB or r.rc is None]
    print(
        json.dumps(
            {
                "reads": len(all_reads),
                "undamaged_median_s": round(statistics.median(r.wall_s for _, r in baseline), 3),
                "median_s": round(statistics.median(walls), 3),
                "worst_s": [wall_case, worst_wall.reader, round(worst_wall.wall_s, 3)],
                "worst_mb": [rss_case, worst_rss.reader, round(worst_rss.rss_mb, 1)],
                "bounds": {"s": READER_S, "mb": READER_MB},
                "over": len(over),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
