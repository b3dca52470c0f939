"""CPU used by the parent process: while runs go on at a typical rate, and idle.

The app runs on a real pty (Textual's terminal driver) with the sampler on, fake
runners reporting about ``--rate`` batches per second; the parent's own CPU time
(getrusage, runners excluded) over wall time is its share of one core. Targets:
under 10% while runs go on, under 3% idle. Run:

    .venv/bin/python benchmarks/cpu_usage.py [--rate 30] [--seconds 30] [--idle 10]
"""

from __future__ import annotations

import argparse

from _apprun import run_in_pty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=30.0, help="batches per second per runner")
    parser.add_argument("--seconds", type=float, default=30.0, help="about how long the runs last in all")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds measured idle")
    parser.add_argument("--width", type=int, default=120)
    parser.add_argument("--height", type=int, default=40)
    args = parser.parse_args()
    # Two runs (PyTorch, tf.keras) of two epochs each.
    steps = max(1, int(args.rate * args.seconds / 4))
    size = dict(width=args.width, height=args.height)
    r = run_in_pty(
        [
            "--batch-s",
            str(1 / args.rate),
            "--steps",
            str(steps),
            "--epochs",
            "2",
            "--runs",
            "1",
            "--idle",
            str(args.idle),
            "--nvml",
        ],
        **size,
    )
    rate = r["events"] / r["run_s"]
    print(
        f"terminal {args.width}x{args.height}, {r['events']:,} events in {r['run_s']:.1f} s ({rate:.0f} events/s), status {r['status']}"
    )
    print(f"parent CPU while runs go on: {r['run_cpu_s'] / r['run_s'] * 100:.1f}% of one core (target < 10%)")
    print(
        f"parent CPU idle on the finished live screen: {r['idle_cpu_s'] / r['idle_s'] * 100:.1f}% of one core (target < 3%)"
    )
    p = run_in_pty(["--mode", "plan", "--idle", str(args.idle + 3)], **size)
    marks = p["marks"]
    # Skip the first 3 s: start-up (first layout, the GPU probe) is not idling.
    start = next(m for m in marks if m["t"] >= 3.0)
    end = marks[-1]
    share = (end["cpu"] - start["cpu"]) / (end["t"] - start["t"]) * 100
    print(f"parent CPU idle on the plan screen: {share:.1f}% of one core (target < 3%)")


if __name__ == "__main__":
    main()
