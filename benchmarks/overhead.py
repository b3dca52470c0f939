"""What the harness costs: each framework's benchtui runner against the same training written plainly.

- PyTorch: the runner against a bare hand-written loop on the same device batches.
- tf.keras: the runner against three plain ``model.fit`` scripts of the same model on the same
  NumPy array (host data on every side, as the study's scripts), each timed per epoch by a
  callback that, like the runner, waits for the device at each epoch's end:

  - ``plain-default``: ``model.fit(x, y)`` with TensorFlow's defaults (no thread variables);
  - ``plain``: ``model.fit(x, y)`` with benchtui's thread settings (``OMP_NUM_THREADS``,
    ``MKL_NUM_THREADS``, ``TF_NUM_INTRAOP_THREADS``, ``set_intra_op_parallelism_threads``);
  - ``plain-one-iterator``: the same thread settings, fed as the runner feeds it: Keras's own
    array pipeline (``ArrayDataAdapter.get_tf_dataset``, what ``fit(x, y)`` builds) repeated,
    with ``steps_per_epoch``, so one tf.data iterator serves every epoch.

  A plain ``model.fit(x, y)`` makes a new tf.data iterator at every epoch's start and drops the
  last one there; TensorFlow 2.21 then waits, idle, for the dropped iterator's autotuning thread
  to wake from its timed sleep (its period doubles from 10 ms to 60 s), which on a CPU starts
  some epochs with a 0-5 s pause and not others, by where the wake-ups fall. Each epoch's time
  to its first batch is printed on every side, so such a stall shows as what it is.
- Keras/JAX (and Keras/torch): the runner against ``plain`` (``model.fit(x, y)``).

Every side of a round uses the same model, batch, data, epochs and (but ``plain-default``) thread
count, each in a fresh process; the sides of a round run one after another, their order rotated
from round to round, so machine drift, other people's load and any advantage of going first fall
on every side. The first epoch is excluded everywhere. Per process it prints the epochs' seconds,
each epoch's time to its first batch, the images/s over epochs 2-N (whole epochs), the steady
pace (time per step after each epoch's first step, waited for) and the CPU other processes kept
busy meanwhile (from /proc/stat, less this process's children); then per framework each plain
side's figure against the runner's, per round (median, and min-max over the rounds).

The harness overhead is read from the runner against the side fed the same way (PyTorch: the bare
loop; tf.keras: ``plain-one-iterator``; Keras/JAX: ``plain``); targets: within 2% on a CPU, 1% on
a GPU for the steady pace, 5% for the whole epochs. Asserts nothing.

    python benchmarks/overhead.py [--frameworks torch,tensorflow,keras-jax] [--device cpu|cuda]
        [--model resnet50_v1_5] [--image-size 64] [--batch-size 16] [--steps 16] [--epochs 4]
        [--pairs 3] [--threads N] [--sides plain-default,plain,plain-one-iterator]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

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
times = []  # per epoch: its seconds, the seconds after its first step (waited for), to its first batch, CPU s
cpu = time.process_time()
for epoch in range(a["epochs"]):
    wait()
    t = time.perf_counter()
    for i in range(a["steps"]):
        x, y = pool[i % len(pool)]
        if i == 0:
            first = time.perf_counter() - t
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        if i == 0:
            wait()
            t1 = time.perf_counter()
    wait()
    end = time.perf_counter()
    used, cpu = time.process_time() - cpu, time.process_time()
    times.append([end - t, end - t1, first, used])
print(json.dumps(times))
"""

# A plain model.fit, as the study's Keras scripts: an epoch timer, plus a wait for the device at
# each epoch's end so that the epoch is over when its clock stops (the runner waits there too).
# a["threads"] 0: TensorFlow's defaults (no thread variable, no threading call). a["feed"]
# "arrays": fit(x, y); "one-iterator": Keras's own array pipeline, repeated, with steps_per_epoch.
BARE_KERAS = r"""
import json, os, sys, time
a = json.loads(sys.argv[1])
sys.path.insert(0, sys.argv[2])
os.environ["KERAS_BACKEND"] = a["backend"]
if a["threads"]:
    from benchtui_runners.config import apply_thread_env
    apply_thread_env(a["threads"])
import keras, numpy as np
from benchtui_runners.models import build_keras
backend = a["backend"]
if backend == "tensorflow":
    import tensorflow as tf
    if a["threads"]:
        tf.config.threading.set_intra_op_parallelism_threads(a["threads"])
if a["device"] == "cpu" and backend == "jax":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
# fp32 as the runner's --precision fp32 (and the bare PyTorch loop) have it: TF32 off. TensorFlow and JAX use
# TF32 on a GPU by default; left so, the plain fit ran 3.4x faster than the runner on an H200 (2026-11-26),
# a difference of precision, not of harness.
if backend == "tensorflow":
    tf.config.experimental.enable_tensor_float_32_execution(False)
    print("tf32", tf.config.experimental.tensor_float_32_execution_enabled())
elif backend == "jax":
    import jax
    jax.config.update("jax_default_matmul_precision", "float32")
    print("tf32", jax.config.jax_default_matmul_precision != "float32")
else:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("tf32", torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)
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
    # per epoch: its seconds, the seconds after its first step (waited for), to its first batch, and
    # the process's CPU seconds since the last epoch's end (every thread's)
    times = []
    cpu = time.process_time()
    def on_epoch_begin(self, epoch, logs=None):
        self.t = time.perf_counter()
    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            self.first = time.perf_counter() - self.t
        if batch == 1:  # the first step has ended
            wait()
            self.t1 = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        wait()
        end = time.perf_counter()
        cpu, EpochTimer.cpu = time.process_time() - EpochTimer.cpu, time.process_time()
        self.times.append([end - self.t, end - self.t1, self.first, cpu])

timer = EpochTimer()
if a["feed"] == "one-iterator":
    from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter
    data = ArrayDataAdapter(x, y, batch_size=bs, shuffle=False).get_tf_dataset().repeat()
    model.fit(data, steps_per_epoch=a["steps"], epochs=a["epochs"], verbose=0, callbacks=[timer])
else:
    model.fit(x, y, batch_size=bs, epochs=a["epochs"], shuffle=False, verbose=0, callbacks=[timer])
print(json.dumps(EpochTimer.times))
"""

#: Variables that size thread pools: the plain-default side runs without any of them.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

#: Each plain side: (thread settings as benchtui's, how the data is fed), and what it is in words.
KERAS_SIDES = {
    "plain-default": (False, "arrays", "model.fit(x, y), TensorFlow's default threads"),
    "plain": (True, "arrays", "model.fit(x, y), benchtui's thread settings"),
    "plain-one-iterator": (
        True,
        "one-iterator",
        "fit on Keras's array pipeline repeated, benchtui's threads",
    ),
}


@dataclass
class Process:
    """One side's fresh process: its epochs after the first, and what the machine did meanwhile."""

    side: str
    # seconds, seconds after the first step(s), to first batch, CPU seconds of the process (every thread)
    epochs: list[tuple[float, float, float, float]]
    steady_steps: int  # steps in the "after the first step(s)" part, over every epoch counted
    images: int  # per epoch
    wall: float
    others: float  # cores other processes kept busy, on average, while it ran

    @property
    def rate(self) -> float:
        """Images per second over the whole epochs after the first."""
        return self.images * len(self.epochs) / sum(e[0] for e in self.epochs)

    @property
    def cpu_per_image(self) -> float:
        """The process's CPU seconds per image over the epochs after the first (less sensitive to
        other processes' load than the wall clock: what the work itself costs)."""
        return sum(e[3] for e in self.epochs) / (self.images * len(self.epochs))

    @property
    def pace(self) -> float:
        """Seconds per step after each epoch's first step (or first window), waited for; NaN when there are no
        such steps (a fast machine ran every step of each epoch within the runner's first window)."""
        return sum(e[1] for e in self.epochs) / self.steady_steps if self.steady_steps else math.nan


def _cpu_seconds(pid: int) -> float:
    """A process's CPU seconds so far, every thread's (utime + stime in /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _timed(
    cmd: list[str], env: dict[str, str], **popen: object
) -> tuple[subprocess.Popen[bytes], float, float]:
    """Run ``cmd`` to its end; (the process, its wall seconds, the cores others kept busy meanwhile)."""
    ticks = os.sysconf("SC_CLK_TCK")
    busy0, _ = _busy_jiffies()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, **popen)  # type: ignore[call-overload]
    return proc, start, busy0 / ticks - (usage0.ru_utime + usage0.ru_stime)


def _finish(proc: subprocess.Popen[bytes], start: float, mark: float) -> tuple[float, float]:
    proc.wait()
    wall = time.perf_counter() - start
    ticks = os.sysconf("SC_CLK_TCK")
    busy1, _ = _busy_jiffies()
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    others = (busy1 / ticks - (usage1.ru_utime + usage1.ru_stime)) - mark
    return wall, max(0.0, others / wall)


def _spec(args: argparse.Namespace, framework: str, threads: int, feed: str) -> dict[str, object]:
    return {
        "device": args.device,
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "steps": args.steps,
        "epochs": args.epochs,
        "threads": threads,
        "feed": feed,
        "backend": catalog.FRAMEWORKS[framework][1],
    }


def bare(args: argparse.Namespace, framework: str, side: str) -> Process:
    """A plain side's process: its epochs after the first."""
    script = BARE_TORCH if framework == "torch" else BARE_KERAS
    threaded, feed, _ = KERAS_SIDES.get(side, (True, "arrays", ""))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if not threaded:
        for name in THREAD_VARIABLES:
            env.pop(name, None)
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    spec = _spec(args, framework, args.threads if threaded else 0, feed)
    cmd = [sys.executable, "-c", script, json.dumps(spec), str(ROOT / "runners")]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc, start, mark = _timed(cmd, env, stdout=out, stderr=err)
        wall, others = _finish(proc, start, mark)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{side} {framework} failed:\n{stderr[-3000:]}")
    times: list[list[float]] = json.loads(stdout.strip().splitlines()[-1])
    epochs = [(e[0], e[1], e[2], e[3]) for e in times[1:]]
    return Process(side, epochs, (args.steps - 1) * len(epochs), args.batch_size * args.steps, wall, others)


def runner(args: argparse.Namespace, framework: str) -> Process:
    """The runner's epochs after the first, on the same work: seconds, seconds after the epoch's
    first window (its first step or few, waited for), its time to first batch (its epoch event's)."""
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
    cmd = [sys.executable, "-m", "benchtui_runners", "--config", json.dumps(config)]
    with tempfile.TemporaryFile() as log:
        proc, start, mark = _timed(cmd, env, stdout=log, stderr=log, pass_fds=(write_fd,))
        os.close(write_fd)
        events, cpu_at = [], []  # the runner's CPU seconds when each epoch event arrived
        with os.fdopen(read_fd, "rb") as fh:
            for line in fh:
                events.append(json.loads(line))
                if events[-1]["type"] == "epoch":
                    cpu_at.append(_cpu_seconds(proc.pid))
        wall, others = _finish(proc, start, mark)
    epochs = [e for e in events if e["type"] == "epoch"]
    if proc.returncode != 0 or len(epochs) != args.epochs:
        raise SystemExit(f"{framework} runner failed: {[e for e in events if e['type'] == 'error']}")
    result, steady = [], 0
    for event, cpu in zip(epochs[1:], [b - a for a, b in zip(cpu_at, cpu_at[1:], strict=False)], strict=True):
        first = next(e for e in events if e["type"] == "batch" and e["epoch"] == event["epoch"])
        seconds = event["seconds"]
        # The first window began at the epoch's start: what it holds beyond its steps' pace is the
        # time to first batch, in the epoch's seconds as on the plain side.
        result.append(
            (seconds, seconds - first["seconds"] * first["steps"], event.get("to_first_batch_s", 0.0), cpu)
        )
        steady += args.steps - first["steps"]
    return Process("runner", result, steady, args.batch_size * args.steps, wall, others)


def event_cost(n: int = 20000) -> float:
    """Seconds the runner spends per window on its own bookkeeping: a clock read and one event."""
    import threading

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


def sides_of(framework: str, args: argparse.Namespace) -> list[str]:
    """The plain sides a framework's runner is set against, the one fed as the runner is last."""
    if framework == "torch":
        return ["bare"]
    if framework != "tensorflow":
        return ["plain"]
    if args.sides:
        return [s for s in args.sides.split(",") if s]
    if args.device.startswith("cuda"):
        return ["plain", "plain-one-iterator"]
    return ["plain-default", "plain", "plain-one-iterator"]


def _line(label: str, p: Process) -> str:
    steady = (
        f"{p.pace * 1e3:6.1f} ms"
        if math.isfinite(p.pace)
        else "not measured (every step in the first window)"
    )
    return (
        f"  {p.side:>18}: {p.rate:6.2f} img/s over epochs 2-N, steady step {steady}, "
        f"CPU {p.cpu_per_image * 1e3:5.1f} ms/image; "
        f"epochs {' '.join(f'{e[0]:.2f}' for e in p.epochs)} s, to first batch "
        f"{' '.join(f'{e[2]:.2f}' for e in p.epochs)} s; others kept {p.others:.2f} cores busy ({p.wall:.0f} s)"
    )


def measure(args: argparse.Namespace, framework: str) -> list[dict[str, Process]]:
    """Rounds of fresh processes, one per side and the runner, in an order rotated every round."""
    label = catalog.FRAMEWORK_LABELS[framework]
    order = [*sides_of(framework, args), "runner"]
    rounds = []
    for i in range(args.pairs):
        k = i % len(order)
        this = order[k:] + order[:k]
        print(f"{label} round {i + 1} (order {', '.join(this)}), load {_loadavg()}", flush=True)
        got: dict[str, Process] = {}
        for side in this:
            got[side] = runner(args, framework) if side == "runner" else bare(args, framework, side)
            print(_line(label, got[side]), flush=True)
        rounds.append(got)
    return rounds


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.4f} (rounds {min(values):.4f}-{max(values):.4f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frameworks", default="torch,tensorflow,keras-jax")
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="resnet50_v1_5")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--pairs", type=int, default=3, help="rounds: every side once per round")
    p.add_argument(
        "--threads", type=int, default=usable_cores(), help="the same on every side but plain-default"
    )
    p.add_argument("--sides", default="", help=f"tf.keras's plain sides, of {', '.join(KERAS_SIDES)}")
    args = p.parse_args()
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    unknown = [f for f in frameworks if f not in ("torch", "tensorflow", "keras-jax", "keras-torch")]
    bad_sides = [s for s in args.sides.split(",") if s and s not in KERAS_SIDES]
    if unknown or bad_sides:
        raise SystemExit(f"unknown framework(s) or side(s): {', '.join(unknown + bad_sides)}")
    if args.epochs < 2 or args.steps < 2:
        raise SystemExit("--epochs and --steps must be at least 2 (the first epoch and step are excluded)")
    results = {fw: measure(args, fw) for fw in frameworks}
    target = 1.0 if args.device.startswith("cuda") else 2.0
    print(
        f"{args.model} {args.image_size}px batch {args.batch_size}, {args.steps} steps x {args.epochs} epochs "
        f"on {args.device}, {args.threads} thread(s) (plain-default: TensorFlow's own), {args.pairs} rounds, "
        f"order rotated, first epoch excluded; {usable_cores()} usable cores, load now {_loadavg()}"
    )
    per_event = event_cost()
    print(f"instrumentation per window (clock + one event on a pipe): {per_event * 1e6:.1f} µs")
    for fw, rounds in results.items():
        label = catalog.FRAMEWORK_LABELS[fw]
        sides = sides_of(fw, args)
        others = [r[s].others for r in rounds for s in r]
        print(
            f"{label}: other processes kept {min(others):.2f}-{max(others):.2f} cores busy during its processes"
        )
        for side in sides:
            rate = [r["runner"].rate / r[side].rate for r in rounds]
            stalls = [max(e[2] for e in r[side].epochs) for r in rounds]
            cpu = [r[side].cpu_per_image / r["runner"].cpu_per_image for r in rounds]
            print(
                f"  runner/{side} images/s over epochs 2-N (whole epochs): {_spread(rate)}; "
                f"by CPU seconds per image: {_spread(cpu)}; "
                f"{side}'s longest time to first batch per round: {' '.join(f'{s:.2f}' for s in stalls)} s"
            )
        stalls = [max(e[2] for e in r["runner"].epochs) for r in rounds]
        print(f"  runner's longest time to first batch per round: {' '.join(f'{s:.3f}' for s in stalls)} s")
        same = sides[-1]  # fed as the runner is: the harness's own cost
        whole = statistics.median(r["runner"].rate / r[same].rate for r in rounds)
        pace = [
            r[same].pace / r["runner"].pace
            for r in rounds
            if math.isfinite(r["runner"].pace) and r["runner"].pace > 0 and math.isfinite(r[same].pace)
        ]
        if not pace:  # a fast machine: each epoch's steps all fell in the runner's first window
            print(
                f"{label}: runner/{same} throughput ratio {whole:.4f}; steady pace not measured: every step of "
                "an epoch fell in the runner's first window of steps (give more --steps)"
            )
            continue
        overhead = (1 / statistics.median(pace) - 1) * 100
        print(
            f"{label}: runner/{same} throughput ratio {whole:.4f}; steady-pace ratio {_spread(pace)}: "
            f"harness overhead {overhead:+.2f}% (target within ±{target:.0f}%: "
            f"{'met' if abs(overhead) <= target else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
