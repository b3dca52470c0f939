"""How long loading and summarising a big session takes, stage by stage, before and after (issue 35).

    .venv/bin/python benchmarks/load_session.py [--events 1000000] [--dir DIR] [--repeat 3]
        [--before PATH | --no-before] [--profile]

Builds a study-shaped session (7 models × 2 frameworks × 3 runs × 5 epochs, GPU samples every 0.5 s)
with as many batches as it takes to reach ``--events`` (``--dir``: build it there once and reuse it),
then times each stage in a fresh process, for this tree and for the code before issue 35 (a git worktree
of ``BEFORE_COMMIT``, or ``--before PATH``), alternately, ``--repeat`` times:

- read: events.jsonl's lines, nothing parsed;
- read + decode + validate: ``iter_events`` as a load runs it (GPU samples held back but the newest; batch
  lines decoded into the wire's Struct where the tree has the batch lane);
- fold: the rest of ``load_session`` (the model's ``apply`` of every event);
- summary: ``model.summary()`` (statistics, bootstrap intervals, framework ratios);
- total: load + summary, the figure the issue's target is about (< 2 s for a million events);
- cached: reopening a finished session whose summary.json holds the cache (``cached_summary``; after only).

Wall and CPU seconds (medians, with the spread over the repeats), the load average beside them, and the
ratio before/after of each. CPU time is what the code costs when other processes share the cores. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BEFORE_COMMIT = "c10ec9b"
TARGET_S = 2.0
STAGES = ("read", "decode+validate", "fold", "summary", "total", "cached")

# What a worker runs, in a fresh interpreter whose sys.path starts at the tree being measured (argv[1]).
WORKER = r"""
import json, os, resource, sys, time
root, path, profile = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
sys.path[:0] = [root + "/tui", root + "/runners"]
from pathlib import Path
from benchtui.core.store import session as store
from benchtui.core.store.session import GpuTail, SessionFolder, iter_events, load_session
from benchtui.core.model.session_model import SessionModel

path = Path(path)
out = {}

def timed(name, fn):
    t, c = time.perf_counter(), time.process_time()
    value = fn()
    out[name] = [time.perf_counter() - t, time.process_time() - c]
    return value

def read():
    with open(path / "events.jsonl", "rb") as fh:
        return sum(1 for _ in store.event_lines(fh))

out["lines"] = timed("read", read)
folder = SessionFolder(path)
meta = folder.read_meta()
window = SessionModel(folder.read_plan(meta)).gpu_samples.maxlen
# As the load reads them: since the batch lane, batch lines as lists of Structs (``batches``), not dicts.
lane = {"batches": True} if "batches" in __import__("inspect").signature(iter_events).parameters else {}
out["events"] = timed(
    "decode+validate",
    lambda: sum(len(e) if type(e) is list else 1 for e in iter_events(path, [], GpuTail(window), **lane)),
)
if profile:
    import cProfile, pstats
    profiler = cProfile.Profile()
    profiler.enable()
loaded = timed("load", lambda: load_session(path))
summary = timed("summary", loaded.model.summary)
if profile:
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(20)
out["fold"] = [a - b for a, b in zip(out.pop("load"), out["decode+validate"])]
out["total"] = [a + b + c for a, b, c in zip(out["decode+validate"], out["fold"], out["summary"])]
out["rows"] = len(summary["rows"])
out["warnings"] = loaded.warnings
if hasattr(folder, "cached_summary"):  # after issue 35: the cache, written once, then read
    store._write_json_atomic(folder.summary_path, summary)
    loaded.summary()
    assert timed("cached", folder.cached_summary) is not None
out["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["summary_sha"] = __import__("hashlib").sha256(json.dumps(store.json_safe(summary), sort_keys=True).encode()).hexdigest()[:16]
print(json.dumps(out))
"""


def build(root: Path, events: int) -> Path:
    sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners"), str(ROOT / "tests")]
    from benchtui_runners import catalog
    from sessionfactory import make_session

    models = list(catalog.MODEL_ORDER)
    runs, epochs = 3, 5
    real_runs = sum(1 for m in models for fw in ("torch", "tensorflow") if catalog.available(fw, m)[0]) * runs
    # Per run-epoch: steps batch events + epoch + memory; plus about 1 GPU sample per 10 batches.
    steps = max(1, int(events / (real_runs * epochs * 1.1)))
    return make_session(
        root, name="bench-1m", models=models, runs=runs, epochs=epochs, steps=steps, write_summary=False
    )


def measure(tree: Path, session: Path, profile: bool = False) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(tree), str(session), "1" if profile else "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the worker for {tree} failed:\n{proc.stderr[-3000:]}")
    if profile:
        print(proc.stderr)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load"] = os.getloadavg()[0]
    return result


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, help="where to build the session once and reuse it")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternating (default 3)")
    parser.add_argument("--before", type=Path, help=f"a tree of the code before (default: {BEFORE_COMMIT})")
    parser.add_argument("--no-before", action="store_true", help="time this tree only")
    parser.add_argument("--profile", action="store_true", help="this tree's load and summary under cProfile")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        existing = sorted(root.glob("*_bench-1m"))
        t = time.perf_counter()
        path = existing[0] if existing else build(root, args.events)
        made = time.perf_counter() - t
        size = (path / "events.jsonl").stat().st_size
        how = "reused" if existing else f"built in {made:.1f} s"
        print(f"session: {path.name}: {size / 2**20:.1f} MiB ({how})")
        if args.profile:
            measure(ROOT, path, profile=True)
            return 0
        before = args.before
        if before is None and not args.no_before:
            before = Path(tmp) / "before"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before), BEFORE_COMMIT],
                check=True,
            )
        sides = {"after": ROOT} | ({"before": before} if before is not None else {})
        results: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        try:
            for _ in range(args.repeat):
                for side, tree in sides.items():
                    results[side].append(measure(tree, path))
        finally:
            if before is not None and args.before is None:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False
                )
        first = results["after"][0]
        print(f"{first['lines']:,} lines, {first['events']:,} events read; {first['rows']} rows")
        loads = [r["load"] for rs in results.values() for r in rs]
        print(
            f"load average (1 min) over the runs: {min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} CPUs"
        )
        if "before" in results:
            same = {r["summary_sha"] for rs in results.values() for r in rs}
            print(
                f"summaries before and after: {'identical' if len(same) == 1 else 'DIFFER'} ({', '.join(same)})"
            )
        print(f"medians (min-max) of {args.repeat} runs each, seconds")
        header = f"{'stage':<17} {'after wall':>20} {'after CPU':>20}"
        if "before" in results:
            header += f" {'before wall':>20} {'before CPU':>20} {'ratio (CPU)':>12}"
        print(header)
        for stage in STAGES:
            cells = []
            for side in sides:
                runs = [r[stage] for r in results[side] if stage in r]
                cells.append(runs)
            after = cells[0]
            if not after:
                continue
            line = f"{stage:<17} {spread([w for w, _ in after]):>20} {spread([c for _, c in after]):>20}"
            if "before" in results:
                old = cells[1]
                if old:
                    ratio = statistics.median(c for _, c in old) / max(
                        statistics.median(c for _, c in after), 1e-9
                    )
                    line += f" {spread([w for w, _ in old]):>20} {spread([c for _, c in old]):>20} {ratio:>11.1f}x"
                else:
                    line += f" {'-':>20} {'-':>20} {'-':>12}"
            print(line)
        for side in sides:
            rss = max(r["maxrss_mib"] for r in results[side])
            print(f"peak memory ({side}): {rss:.0f} MiB")
        total = statistics.median(r["total"][0] for r in results["after"])
        verdict = "OK" if total < TARGET_S else "TOO SLOW"
        print(f"total (after, wall): {total:.2f} s; target < {TARGET_S:.0f} s: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
