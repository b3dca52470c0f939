"""A stand-in runner that speaks the wire format without any framework, for UI tests and benchmarks.

``python fake_runner.py [--batch-s S] [--steps N] [--child] --config JSON`` emits the
events a real runner would (import, hello, build, one batch event per step, epochs,
memory, done), sleeping ``--batch-s`` per batch (0: as fast as it can write). ``--child``
starts a grandchild process that sleeps, so tests can check that stopping a run
reaches the runner's whole process group. It prints a line to stdout per epoch, which
the parent sends to the run's log.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchtui_runners.protocol import EventWriter


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-s", type=float, default=0.01)
    parser.add_argument("--steps", type=int, default=0, help="batches per epoch (default: from the config)")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    config = json.loads(args.config)
    writer = EventWriter.from_env()
    child = None
    if args.child:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    writer.phase("import", "start", at=time.monotonic())
    writer.phase("import", "end")
    bs = int(config["batch_size"])
    steps = args.steps or max(1, int(config["samples"]) // bs)
    writer.hello(
        framework=config["framework"],
        versions={"python": sys.version.split()[0], "fake": "1"},
        device={"type": "cpu", "name": "fake"},
        config=config,
        settings={},
        steps_per_epoch=steps,
        samples_per_epoch=steps * bs,
        child_pid=child.pid if child else None,
    )
    writer.phase("build", "start")
    writer.phase("build", "end")
    for epoch in range(1, int(config["epochs"]) + 1):
        start = time.perf_counter()
        for step in range(1, steps + 1):
            if epoch == 1 and step == 1:
                writer.phase("first_batch", "start")
            t = time.perf_counter()
            if args.batch_s > 0:
                time.sleep(args.batch_s)
            writer.batch(epoch, step, time.perf_counter() - t, bs)
            if epoch == 1 and step == 1:
                writer.phase("first_batch", "end")
        writer.epoch(epoch, time.perf_counter() - start, steps * bs)
        writer.memory(epoch=epoch, peak_bytes=100 * 1024 * 1024, source="fake")
        print(f"fake runner {os.getpid()}: epoch {epoch} done", flush=True)
    writer.done(peak_bytes=100 * 1024 * 1024, source="fake")
    if child is not None:
        child.terminate()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
