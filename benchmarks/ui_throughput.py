"""How many runner events per second the parent takes in with the live screen drawing, and its memory.

Fake runners (tests/data/fake_runner.py) write batch events as fast as the pipe takes
them, so the rate is the parent's: reading, parsing, folding into the model, appending
to events.jsonl, and the 4 Hz redraw on a real terminal (a pty). Run:

    .venv/bin/python benchmarks/ui_throughput.py [--steps 25000] [--epochs 2] [--runs 1]
"""

from __future__ import annotations

import argparse
import statistics

from _apprun import run_in_pty

MIB = 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25000, help="batches per epoch")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1, help="runs per framework (2 frameworks)")
    parser.add_argument("--width", type=int, default=120)
    parser.add_argument("--height", type=int, default=40)
    args = parser.parse_args()
    r = run_in_pty(
        ["--steps", str(args.steps), "--epochs", str(args.epochs), "--runs", str(args.runs), "--idle", "1"],
        width=args.width,
        height=args.height,
    )
    marks = r["marks"]
    # Rates over the 0.5 s marks while events were flowing (between runs the count stands still).
    rates = [
        (b["events"] - a["events"]) / (b["t"] - a["t"])
        for a, b in zip(marks, marks[1:], strict=False)
        if b["events"] > a["events"] and b["t"] > a["t"]
    ]
    busy = [m for m in marks if m["events"] > 0]
    half = next((m for m in busy if m["events"] >= r["events"] / 2), busy[0])
    last = busy[-1]
    growth = (last["rss"] - half["rss"]) / max(last["events"] - half["events"], 1)
    print(
        f"terminal {args.width}x{args.height}, {r['events']:,} events ({args.runs * 2} runs), status {r['status']}"
    )
    print(f"events/s overall (incl. runner start-up): {r['events'] / r['run_s']:,.0f}")
    print(
        f"events/s while flowing: median {statistics.median(rates):,.0f}, min {min(rates):,.0f}, max {max(rates):,.0f}"
    )
    print(f"parent CPU while flowing: {r['run_cpu_s'] / r['run_s'] * 100:.0f}% of one core")
    print(
        f"parent RSS: start {r['rss_start'] / MIB:.1f} MiB, halfway {half['rss'] / MIB:.1f} MiB, "
        f"end {last['rss'] / MIB:.1f} MiB; growth in the second half {growth:.1f} B/event "
        "(the model keeps every batch time: 12 B/batch)"
    )
    print(f"screen output: {r['terminal_bytes'] / MIB:.1f} MiB over {r['run_s']:.1f} s")


if __name__ == "__main__":
    main()
