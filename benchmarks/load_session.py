"""How long loading and summarising a big session takes (target: one million events in under 5 s).

    .venv/bin/python benchmarks/load_session.py [--events 1000000] [--dir DIR] [--profile]

Builds a study-shaped session (7 models × 2 frameworks × 3 runs × 5 epochs, GPU samples
every 0.5 s) with as many batches as it takes to reach ``--events``, then times reading
the events, folding them into the model, and computing the summary (statistics, bootstrap
intervals, framework ratios). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners"), str(ROOT / "tests")]

from benchtui.core.store.session import iter_events, load_session  # noqa: E402
from benchtui_runners import catalog  # noqa: E402
from sessionfactory import make_session  # noqa: E402

TARGET_S = 5.0


def build(root: Path, events: int) -> Path:
    models = list(catalog.MODEL_ORDER)
    runs, epochs = 3, 5
    real_runs = sum(1 for m in models for fw in ("torch", "tensorflow") if catalog.available(fw, m)[0]) * runs
    # Per run-epoch: steps batch events + epoch + memory; plus about 1 GPU sample per 10 batches.
    steps = max(1, int(events / (real_runs * epochs * 1.1)))
    return make_session(
        root, name="bench-1m", models=models, runs=runs, epochs=epochs, steps=steps, write_summary=False
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, help="where to build the session (default: a temporary folder)")
    parser.add_argument("--profile", action="store_true", help="print the top functions by cumulative time")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp)
        existing = sorted(root.glob("*_bench-1m")) if args.dir else []
        t = time.perf_counter()
        path = existing[0] if existing else build(root, args.events)
        made = time.perf_counter() - t
        size = (path / "events.jsonl").stat().st_size
        with open(path / "events.jsonl", "rb") as fh:
            lines = sum(1 for _ in fh)
        print(
            f"session: {path.name}: {lines:,} events, {size / 2**20:.1f} MiB ({'reused' if existing else f'built in {made:.1f} s'})"
        )

        t, c = time.perf_counter(), time.process_time()
        n = sum(1 for _ in iter_events(path, []))
        parse, parse_cpu = time.perf_counter() - t, time.process_time() - c
        print(
            f"read + parse only:            {parse:6.2f} s wall, {parse_cpu:6.2f} s CPU ({n / parse / 1e6:.2f} M events/s)"
        )

        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        loaded = load_session(path)
        t1, c1 = time.perf_counter(), time.process_time()
        summary = loaded.model.summary()
        t2, c2 = time.perf_counter(), time.process_time()
        if profiler:
            profiler.disable()
        json.dumps(summary)
        total, cpu = t2 - t0, c2 - c0
        # Wall time is what the target is about; CPU time shows what the code costs when
        # other processes share the machine's cores.
        print(f"load_session (parse + fold):  {t1 - t0:6.2f} s wall, {c1 - c0:6.2f} s CPU")
        print(f"summary (stats, CIs, ratios): {t2 - t1:6.2f} s wall, {c2 - c1:6.2f} s CPU")
        verdict = "OK" if total < TARGET_S else "TOO SLOW"
        print(
            f"total:                        {total:6.2f} s wall, {cpu:6.2f} s CPU; target < {TARGET_S:.0f} s: {verdict}"
        )
        print(f"rows: {len(summary['rows'])}, ratios: {len(summary['ratios'])}, warnings: {loaded.warnings}")
        if profiler:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(18)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
