"""What the harness costs: each framework's benchtui runner against the same training written plainly.

- PyTorch: the runner against a bare hand-written loop on the same device batches.
- tf.keras and Keras/JAX: the runner against a plain ``model.fit`` of the same model on the
  same NumPy array (host data on both sides, as the study's scripts), timed per epoch by a
  callback that, like the runner, waits for the device at each epoch's end.

Both sides of a pair use the same model, batch, data, thread count and epochs, each in a fresh
process, in ABBA order (bare, runner, runner, bare, ...) so machine drift and any advantage
of going first fall on both. The first epoch is excluded on both sides. Prints each pair's
epochs, then per framework two ratios (median of the pairs', and their range):

- the throughput ratio, over whole epochs after the first;
- the steady-pace ratio: time per step after each epoch's first step (the runner: after its
  first window), waited for on both sides. The harness's costs (a sync per window, an event) are
  in it; what each epoch starts with is not. On a CPU, tf.keras's array pipeline starts most
  epochs with a 3–5 s pause before the first step, in a plain ``model.fit`` and in the runner
  alike (seen here: 0.01 s in some epochs, 4.8 s in others), which spreads its throughput ratio
  by ±25% from pair to pair.

The harness overhead is read from the steady-pace ratio; targets: within 2% on a CPU, 1% on a GPU.

    python benchmarks/overhead.py [--frameworks torch,tensorflow,keras-jax] [--device cpu|cuda]
        [--model resnet50] [--image-size 64] [--batch-size 16] [--steps 20] [--epochs 4]
        [--pairs 4] [--threads N]
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

Epoch = tuple[float, float, int]  # seconds, seconds after the first step(s), steps in those

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "runners")]

from benchtui_runners import catalog  # noqa: E402
from benchtui_runners.config import usable_cores  # noqa: E402

# The bare loop: what a person would write by hand to time training, nothing else.
BARE_TORCH = r"""
import json, sys, time
a = json.loads(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from benchtui_runners.config import apply_thread_env
apply_thread_env(a["threads"])
import torch
from benchtui_runners.models import build_torch
torch.set_num_threads(a["threads"])
dev = torch.device(a["device"])
torch.manual_seed(0)
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
model = build_torch(a["model"], 1000).to(dev).train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
bs, s = a["batch_size"], a["image_size"]
pool = [(torch.randn((bs, 3, s, s), device=dev), torch.randint(0, 1000, (bs,), device=dev)) for _ in range(min(a["steps"], 4))]
def wait():
    if dev.type == "cuda": torch.cuda.synchronize()
times = []  # per epoch: its seconds, and the seconds after its first step (waited for)
for epoch in range(a["epochs"]):
    wait()
    t = time.perf_counter()
    for i in range(a["steps"]):
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        if i == 0:
            wait()
            t1 = time.perf_counter()
    wait()
    end = time.perf_counter()
    times.append([end - t, end - t1])
print(json.dumps(times))
"""

# A plain model.fit, as the study's Keras scripts: an epoch timer, plus a wait for the device at
# each epoch's end so that the epoch is over when its clock stops (the runner waits there too).
BARE_KERAS = r"""
import json, os, sys, time
a = json.loads(sys.argv[1])
sys.path.insert(0, sys.argv[2])
os.environ["KERAS_BACKEND"] = a["backend"]
from benchtui_runners.config import apply_thread_env
apply_thread_env(a["threads"])
import keras, numpy as np
from benchtui_runners.models import build_keras
backend = a["backend"]
if backend == "tensorflow":
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(a["threads"])
if a["device"] == "cpu" and backend == "jax":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
keras.utils.set_random_seed(0)
bs, s, n = a["batch_size"], a["image_size"], a["batch_size"] * a["steps"]
rng = np.random.default_rng(0)
x = rng.standard_normal((n, s, s, 3), dtype=np.float32)
y = rng.integers(0, 1000, n).astype(np.int32)
if backend == "tensorflow":
    with tf.device("/CPU:0"):
        x, y = tf.constant(x), tf.constant(y)
model = build_keras(a["model"], 1000, s)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

def wait():
    if backend == "tensorflow":
        tf.test.experimental.sync_devices()
    elif backend == "jax":
        import jax
        # Inside fit, Keras keeps JAX's live state in model._jax_state (the variables are stale).
        state = getattr(model, "_jax_state", None)
        arrays = [v for part in dict(state).values() for v in (part or [])] if state else []
        jax.block_until_ready(arrays or [v.value for v in model.variables])

class EpochTimer(keras.callbacks.Callback):
    times = []  # per epoch: its seconds, and the seconds after its first step (waited for)
    def on_epoch_begin(self, epoch, logs=None):
        self.t = time.perf_counter()
    def on_train_batch_begin(self, batch, logs=None):
        if batch == 1:  # the first step has ended
            wait()
            self.t1 = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        wait()
        end = time.perf_counter()
        self.times.append([end - self.t, end - self.t1])

model.fit(x, y, batch_size=bs, epochs=a["epochs"], shuffle=False, verbose=0, callbacks=[EpochTimer()])
print(json.dumps(EpochTimer.times))
"""


def _spec(args: argparse.Namespace, framework: str) -> dict[str, object]:
    return {
        "device": args.device,
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "steps": args.steps,
        "epochs": args.epochs,
        "threads": args.threads,
        "backend": catalog.FRAMEWORKS[framework][1],
    }


def bare(args: argparse.Namespace, framework: str) -> list[Epoch]:
    """The plain version's epochs after the first: seconds, seconds after the first step, those steps."""
    script = BARE_TORCH if framework == "torch" else BARE_KERAS
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(_spec(args, framework)), str(ROOT / "runners")],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    if out.returncode != 0:
        raise SystemExit(f"bare {framework} failed:\n{out.stderr[-3000:]}")
    times: list[list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return [(epoch, steady, args.steps - 1) for epoch, steady in times[1:]]


def runner(args: argparse.Namespace, framework: str) -> list[Epoch]:
    """The runner's epochs after the first, on the same work: seconds, seconds after the epoch's
    first window (its first step or few, waited for), the steps after that window."""
    config = {
        "framework": framework,
        "model": args.model,
        "image_size": args.image_size,
        "samples": args.batch_size * args.steps,
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "device": args.device,
        # PyTorch against a loop over device batches; Keras against model.fit on a NumPy array.
        "data": "device" if framework == "torch" else "host",
        "cudnn_autotune": True,
        "threads": args.threads,
    }
    read_fd, write_fd = os.pipe()
    # The runner package, and the runners' extra packages as benchtui gives them (BENCHTUI_RUNNER_PYTHONPATH).
    extra = [p for p in os.environ.get("BENCHTUI_RUNNER_PYTHONPATH", "").split(os.pathsep) if p]
    path = os.pathsep.join([str(ROOT / "runners"), *extra])
    env = {**os.environ, "BENCHTUI_EVENT_FD": str(write_fd), "PYTHONPATH": path}
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
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
        raise SystemExit(f"{framework} runner failed: {[e for e in events if e['type'] == 'error']}")
    result = []
    for number, seconds in enumerate(epochs[1:], start=2):
        first = next(e for e in events if e["type"] == "batch" and e["epoch"] == number)
        result.append((seconds, seconds - first["seconds"] * first["steps"], args.steps - first["steps"]))
    return result


def event_cost(n: int = 20000) -> float:
    """Seconds the runner spends per window on its own bookkeeping: a clock read and one event."""
    import threading
    import time

    from benchtui_runners.protocol import EventWriter

    read_fd, write_fd = os.pipe()
    drain = threading.Thread(target=lambda: [None for _ in os.fdopen(read_fd, "rb")], daemon=True)
    drain.start()  # a reader on the other end, as the parent is
    writer = EventWriter(write_fd)
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        writer.batch(1, i, time.perf_counter() - t, 16, steps=1)
    cost = (time.perf_counter() - start) / n
    writer.close()
    drain.join(timeout=5)
    return cost


def measure(args: argparse.Namespace, framework: str) -> tuple[list[float], list[float]]:
    """Per pair, in ABBA order: the runner/bare ratio of throughput over whole epochs, and of
    the steady pace (time per step after each epoch's first step)."""
    label = catalog.FRAMEWORK_LABELS[framework]
    images = args.batch_size * args.steps
    overall, pace = [], []
    for i in range(args.pairs):
        if i % 2 == 0:
            b = bare(args, framework)
            r = runner(args, framework)
        else:
            r = runner(args, framework)
            b = bare(args, framework)
        overall.append(sum(e[0] for e in b) / sum(e[0] for e in r))  # the same images on both sides
        b_pace, r_pace = (sum(e[1] for e in x) / sum(e[2] for e in x) for x in (b, r))
        pace.append(b_pace / r_pace)
        first = "bare first" if i % 2 == 0 else "runner first"
        print(
            f"{label} pair {i + 1} ({first}): bare {images * len(b) / sum(e[0] for e in b):.2f} img/s, "
            f"runner {images * len(r) / sum(e[0] for e in r):.2f} img/s, runner/bare {overall[-1]:.4f}; "
            f"steady step bare {b_pace * 1e3:.1f} ms, runner {r_pace * 1e3:.1f} ms, ratio {pace[-1]:.4f}; "
            f"epochs bare {' '.join(f'{e[0]:.2f}' for e in b)}, runner {' '.join(f'{e[0]:.2f}' for e in r)}",
            flush=True,
        )
    return overall, pace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frameworks", default="torch,tensorflow,keras-jax")
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--threads", type=int, default=usable_cores(), help="the same on both sides")
    args = p.parse_args()
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    unknown = [f for f in frameworks if f not in ("torch", "tensorflow", "keras-jax", "keras-torch")]
    if unknown:
        raise SystemExit(f"unknown framework(s): {', '.join(unknown)}")
    results = {fw: measure(args, fw) for fw in frameworks}
    target = 1.0 if args.device.startswith("cuda") else 2.0
    print(
        f"{args.model} {args.image_size}px batch {args.batch_size}, {args.steps} steps x {args.epochs} epochs "
        f"on {args.device}, {args.threads} thread(s), {args.pairs} pairs ABBA, first epoch excluded"
    )
    per_event = event_cost()
    print(f"instrumentation per window (clock + one event on a pipe): {per_event * 1e6:.1f} µs")
    for fw, (overall, pace) in results.items():
        median, pace_median = statistics.median(overall), statistics.median(pace)
        overhead = (1 / pace_median - 1) * 100
        print(
            f"{catalog.FRAMEWORK_LABELS[fw]}: runner/bare throughput ratio {median:.4f} "
            f"(pairs {min(overall):.4f}–{max(overall):.4f}); steady-pace ratio {pace_median:.4f} "
            f"(pairs {min(pace):.4f}–{max(pace):.4f}): harness overhead {overhead:+.2f}% "
            f"(target within ±{target:.0f}%: {'met' if abs(overhead) <= target else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
