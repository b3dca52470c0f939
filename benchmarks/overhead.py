"""What the harness costs: the PyTorch runner's throughput against a bare hand-written loop.

Both train the same model on the same synthetic device data with the same batch, each
in a fresh process, in ABBA order (bare, runner, runner, bare, ...) so machine drift and
any advantage of going first fall on both. Throughput excludes the first epoch on both sides. Prints images/s of
each and the ratio; targets: at most 2% slower on CPU, at most 1% on a GPU.

    python benchmarks/overhead.py [--device cpu|cuda] [--model resnet50] [--image-size 64]
        [--batch-size 16] [--steps 20] [--epochs 3] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The bare loop: what a person would write by hand to time training, nothing else.
BARE = r"""
import json, sys, time, torch
sys.path.insert(0, sys.argv[2])
from benchtui_runners.models import build_torch
a = json.loads(sys.argv[1])
dev = torch.device(a["device"])
torch.manual_seed(0)
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
model = build_torch(a["model"], 1000).to(dev).train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
bs, s = a["batch_size"], a["image_size"]
g = torch.Generator(device=dev).manual_seed(0)
pool = [(torch.randn((bs, 3, s, s), device=dev, generator=g), torch.randint(0, 1000, (bs,), device=dev, generator=g)) for _ in range(min(a["steps"], 4))]
times = []
for epoch in range(a["epochs"]):
    if dev.type == "cuda": torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(a["steps"]):
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    if dev.type == "cuda": torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
print(json.dumps(times))
"""


def bare(args: argparse.Namespace) -> float:
    spec = json.dumps(
        {
            "device": args.device,
            "model": args.model,
            "batch_size": args.batch_size,
            "image_size": args.image_size,
            "steps": args.steps,
            "epochs": args.epochs,
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", BARE, spec, str(ROOT / "runners")], capture_output=True, text=True, check=True
    )
    times = json.loads(out.stdout.strip().splitlines()[-1])
    return args.batch_size * args.steps * (len(times) - 1) / sum(times[1:])


def runner(args: argparse.Namespace) -> float:
    config = {
        "framework": "torch",
        "model": args.model,
        "image_size": args.image_size,
        "samples": args.batch_size * args.steps,
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "device": args.device,
        "data": "device",
        "cudnn_autotune": True,
    }
    read_fd, write_fd = os.pipe()
    env = {**os.environ, "BENCHTUI_EVENT_FD": str(write_fd), "PYTHONPATH": str(ROOT / "runners")}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchtui_runners", "--config", json.dumps(config)],
            stdout=log,
            stderr=log,
            pass_fds=(write_fd,),
            env=env,
            stdin=subprocess.DEVNULL,
        )
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as fh:
            events = [json.loads(line) for line in fh]
        proc.wait()
    epochs = [e["seconds"] for e in events if e["type"] == "epoch"]
    if proc.returncode != 0 or len(epochs) != args.epochs:
        raise SystemExit(f"runner failed: {[e for e in events if e['type'] == 'error']}")
    return config["samples"] * (len(epochs) - 1) / sum(epochs[1:])


def event_cost(n: int = 20000) -> float:
    """Seconds the runner spends per batch on its own bookkeeping: a clock read and one event."""
    import threading
    import time

    sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners")]
    from benchtui_runners.protocol import EventWriter

    read_fd, write_fd = os.pipe()
    drain = threading.Thread(target=lambda: [None for _ in os.fdopen(read_fd, "rb")], daemon=True)
    drain.start()  # a reader on the other end, as the parent is
    writer = EventWriter(write_fd)
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        writer.batch(1, i, time.perf_counter() - t, 16)
    cost = (time.perf_counter() - start) / n
    writer.close()
    drain.join(timeout=5)
    return cost


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--pairs", type=int, default=4)
    args = p.parse_args()
    bare_ips, runner_ips = [], []
    for i in range(args.pairs):
        # ABBA order: whatever favours the first (or second) process of a pair falls on both.
        if i % 2 == 0:
            bare_ips.append(bare(args))
            runner_ips.append(runner(args))
        else:
            runner_ips.append(runner(args))
            bare_ips.append(bare(args))
        first = "bare first" if i % 2 == 0 else "runner first"
        print(
            f"pair {i + 1} ({first}): bare {bare_ips[-1]:.2f} img/s, runner {runner_ips[-1]:.2f} img/s",
            flush=True,
        )
    b, r = statistics.median(bare_ips), statistics.median(runner_ips)
    overhead = (b / r - 1) * 100
    target = 1.0 if args.device.startswith("cuda") else 2.0
    print(
        f"{args.model} {args.image_size}px batch {args.batch_size} on {args.device}, "
        f"{args.pairs} pairs, first epoch excluded"
    )
    print(f"median bare loop: {b:.2f} img/s; median benchtui runner: {r:.2f} img/s")
    per_event = event_cost()
    batch_s = args.batch_size / r
    print(
        f"instrumentation per batch (clock + one event on a pipe): {per_event * 1e6:.1f} µs = "
        f"{per_event / batch_s * 100:.4f}% of a {batch_s * 1000:.0f} ms batch"
    )
    print(
        f"runner/bare throughput ratio {r / b:.4f}: harness overhead {overhead:+.2f}% "
        f"(target <= {target:.0f}%: {'met' if overhead <= target else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
