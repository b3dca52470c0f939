"""Hand-made session folders in exactly the format the engine writes, for tests and benchmarks.

``make_session`` writes ``session.json`` (as SessionWriter does), ``events.jsonl``
(runner events tagged with their run, parent run_start/run_end events and GPU samples,
in time order, as Engine writes them) and ``summary.json`` (SessionModel.summary()).
The runner events are written by the runners' own ``EventWriter`` and tagged as the engine
tags them, so a made session's runner lines are the wire's (``benchtui_runners.wire``).
Everything is deterministic for a given seed.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from benchtui.core.model.session_model import SessionModel
from benchtui.core.plan.plan import Plan, run_order
from benchtui.core.provenance import benchtui_version
from benchtui.core.store.session import SESSION_SCHEMA, slugify
from benchtui_runners import catalog
from benchtui_runners.protocol import EventWriter
from benchtui_runners.timing import describe as timing_words

GIB = 1024**3
#: Seconds per batch by (framework, model) unless given; tf.keras a bit slower, as in the study.
DEFAULT_BATCH_S = {"torch": 0.050, "tensorflow": 0.060, "keras-jax": 0.055, "keras-torch": 0.065}
MODEL_SCALE = {
    "inception_v3": 1.0,
    "resnet50": 0.8,
    "densenet121": 0.9,
    "densenet169": 1.0,
    "inception_resnet_v2": 1.6,
    "nasnet_large": 2.4,
    "pnasnet_large": 2.2,
}
BUILD_S = {"torch": 0.6, "tensorflow": 2.5, "keras-jax": 1.8, "keras-torch": 2.0}
#: What each side of ResNet50 builds, as the runners measure it (``networks=``): torchvision's v1.5
#: against keras.applications' v1, FLOPs per image of a training step 6.1% apart (the issue's figures).
RESNET50_NETWORKS: dict[tuple[str, str], dict[str, Any]] = {
    ("torch", "resnet50"): {
        "params": 25_557_032,
        "trainable_params": 25_557_032,
        "flops": 24.3e9,
        "source": "torchvision 0.20 resnet50",
        "architecture": catalog.MODELS["resnet50"].side("torch"),
    },
    ("tensorflow", "resnet50"): {
        "params": 25_636_712,
        "trainable_params": 25_583_592,
        "flops": 22.9e9,
        "source": "keras.applications ResNet50",
        "architecture": catalog.MODELS["resnet50"].side("keras"),
    },
}
#: DenseNet121: the same network on both sides (equal counts).
DENSENET121_NETWORKS: dict[tuple[str, str], dict[str, Any]] = {
    ("torch", "densenet121"): {
        "params": 7_978_856,
        "trainable_params": 7_978_856,
        "flops": 17.2e9,
        "source": "torchvision 0.20 densenet121",
    },
    ("tensorflow", "densenet121"): {
        "params": 8_062_504,
        "trainable_params": 7_978_856,
        "flops": 17.2e9,
        "source": "keras.applications DenseNet121",
    },
}


#: Where a made-up profiled step goes, as shares of it, per framework family (``profile=``).
PROFILE_SHARES: dict[str, dict[str, float]] = {
    "torch": {
        "conv": 0.45,
        "matmul": 0.05,
        "norm": 0.12,
        "elementwise": 0.15,
        "optimizer": 0.06,
        "data": 0.02,
        "communication": 0.0,
        "other": 0.05,
        "idle": 0.10,
    },
    "keras": {
        "conv": 0.40,
        "matmul": 0.05,
        "norm": 0.18,
        "elementwise": 0.12,
        "optimizer": 0.05,
        "data": 0.05,
        "communication": 0.0,
        "other": 0.03,
        "idle": 0.12,
    },
}
#: A made-up op per category, per framework family: the names each profiler gives them.
PROFILE_OPS: dict[str, dict[str, str]] = {
    "torch": {
        "conv": "aten::cudnn_convolution",
        "norm": "aten::native_batch_norm",
        "elementwise": "aten::add_",
        "optimizer": "Optimizer.step#SGD.step",
    },
    "keras": {
        "conv": "Conv2DBackpropFilter",
        "norm": "FusedBatchNormGradV3",
        "elementwise": "AddV2",
        "optimizer": "ResourceApplyGradientDescent",
    },
}


def profile_event(
    spec: dict[str, Any], framework: str, step_s: float, gpu: bool, trace: dict[str, Any] | None
) -> dict[str, Any]:
    """A ``profile`` event's fields as a runner sends them (``profile=`` of ``make_session``).

    ``spec``: {"ok": False, "reason": ...} for a profiler that failed; else "shares" (category -> share
    of the step, the family's PROFILE_SHARES when absent), "overhead" (the profiled step over
    ``step_s``, less 1; 0.05 when absent), "steps", "trace_note", and "raw": fields sent as they are
    (over the rest), for hostile input.
    """
    if spec.get("ok") is False:
        return {
            "ok": False,
            "reason": spec.get("reason", "profile unavailable: no profiler"),
            **spec.get("raw", {}),
        }
    family = catalog.family(framework)
    shares = spec.get("shares") or PROFILE_SHARES["torch" if family == "torch" else "keras"]
    steps = spec.get("steps", 5)
    profiled = step_s * (1 + spec.get("overhead", 0.05))
    traced = profiled * 0.98
    categories = {c: shares.get(c, 0.0) * traced for c in PROFILE_SHARES["torch"]}
    ops = PROFILE_OPS["torch" if family == "torch" else "keras"]
    top = sorted(
        (
            {
                "name": name,
                "category": category,
                "seconds": 0.8 * categories[category],
                "calls": 53.0,
                "share": 0.8 * shares.get(category, 0.0),
            }
            for category, name in ops.items()
            if shares.get(category, 0.0) > 0
        ),
        key=lambda op: -op["seconds"],
    )
    event: dict[str, Any] = {
        "ok": True,
        "profiler": "torch.profiler 2.5 (CUDA activity)"
        if family == "torch"
        else "TensorFlow profiler 2.18 (host + device)",
        "device": "gpu" if gpu else "cpu",
        "steps": steps,
        "window_s": profiled * steps,
        "step_s": profiled,
        "traced_step_s": traced,
        "categories": categories,
        "busy_s": traced - categories["idle"],
        "idle_s": categories["idle"],
        "host_s": None,
        "idle_means": "GPU idle: no kernel or copy running (the device waits for the host)"
        if gpu
        else "no op running: Python and framework code between ops",
        "top": top,
        "trace": trace,
        "trace_note": spec.get("trace_note"),
        "method": "fixture: made-up shares of the made-up step",
    }
    return {**event, **spec.get("raw", {})}


def _wire_loss(value: float) -> float | str:
    """A loss as the wire carries it: a number, or "nan" / "inf" / "-inf" (JSON has no NaN)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _diverged(losses: list[float] | None, steps: int) -> str | None:
    """What the engine records of a run with these epoch losses: its reason when it diverged, else None."""
    if not losses:
        return None
    for epoch, value in enumerate(losses, 1):
        if not math.isfinite(value):
            word = "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            return f"diverged: loss {word} at epoch {epoch}"
    if len(set(losses)) == 1 and steps * len(losses) > 1:
        return f"diverged: loss did not change over its {steps * len(losses)} steps ({losses[0]:.4f})"
    return None


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


class _Timeline:
    """Writes events in time order, slipping GPU samples in every ``interval`` seconds."""

    def __init__(self, fh: IO[str], interval: float, gpu: bool, rng: random.Random, t0: float) -> None:
        self.fh = fh
        self.interval = interval
        self.gpu = gpu
        self.rng = rng
        self.next_sample = t0
        self.run: str | None = None
        self.lines = 0
        self.busy = False
        self.gpu_count = 1  # GPUs in every sample (a data-parallel session's)
        self.run_gpus: list[int] = []  # the current run's GPUs when it trains on several
        self.counters: dict[str, float] = {}  # the current run's profiling counters (``gpu_counters=``)
        self.record = False  # whether run_end records the means of the counters sampled (as the engine does)
        self.counter_sums: dict[str, list[float]] = {}  # what the engine sums for run_end: name -> [sum, n]
        # Several nodes (``nodes=``): the other nodes of the current run, each sampling its own GPUs, whose
        # samples node 0 records tagged with the node (drawn from their own generator: one node's bytes stay).
        self.run_nodes: list[int] = []
        self.node_rng = random.Random(0)
        self.node_busy = False

    def sample(self, t: float) -> None:
        event: dict[str, Any] = {"type": "gpu", "t": round(t, 6), "run": self.run}
        rng = self.rng
        if self.gpu:
            util = rng.randint(88, 99) if self.busy else rng.randint(0, 3)
            used = (14.5 if self.busy else 0.4) * GIB + rng.randint(0, 2**26)
            event["gpus"] = [
                {
                    "index": i,
                    "util": util if i == 0 or i in self.run_gpus else rng.randint(0, 3),
                    "mem_util": util // 2,
                    "mem_used": int(used),
                    "mem_total": 80 * GIB,
                    "power_w": round(280 + rng.random() * 40 if self.busy else 60.0, 3),
                    "temp_c": 65 if self.busy else 38,
                    "sm_clock_mhz": 1980,
                    "throttle": [] if self.busy else ["gpu_idle"],
                    "proc_mem": int(14 * GIB) if self.busy else (0 if self.run else None),
                    **(self.counters if self.busy and (i == 0 or i in self.run_gpus) else {}),
                }
                for i in range(self.gpu_count)
            ]
            if self.busy and self.record:
                for name, value in {"gpu_util": util, **self.counters}.items():
                    sums = self.counter_sums.setdefault(name, [0.0, 0])
                    sums[0] += value
                    sums[1] += 1
            event["watched"] = 0
            if self.run_gpus:
                event["devices"] = self.run_gpus
        event["host"] = {
            "cpu_percent": round(100 + rng.random() * 5, 1) if self.run else None,
            "rss": 3 * GIB + rng.randint(0, 2**24) if self.run else None,
        }
        self.write_line(_dumps(event))
        for node in self.run_nodes:
            self.node_sample(t, node)

    def node_sample(self, t: float, node: int) -> None:
        """Node ``node``'s GPU sample, as its benchtui sends it and node 0 records it (``node`` added)."""
        rng = self.node_rng
        event: dict[str, Any] = {"type": "gpu", "t": round(t, 6), "run": self.run, "node": node}
        if self.gpu:
            busy = self.node_busy
            event["gpus"] = [
                {
                    "index": i,
                    "util": (rng.randint(80, 90) if busy else rng.randint(0, 3)),
                    "mem_util": 40 if busy else 1,
                    "mem_used": int((13.5 if busy else 0.4) * GIB),
                    "mem_total": 80 * GIB,
                    "power_w": round(250 + rng.random() * 20 if busy else 55.0, 3),
                    "temp_c": 60 if busy else 37,
                    "sm_clock_mhz": 1980,
                    "throttle": [] if busy else ["gpu_idle"],
                    "proc_mem": int(13 * GIB) if busy else 0,
                }
                for i in range(self.gpu_count)
            ]
            event["watched"] = 0
            if self.run_gpus:
                event["devices"] = self.run_gpus
        event["host"] = {"cpu_percent": round(100 + rng.random() * 5, 1), "rss": 3 * GIB}
        self.write_line(_dumps(event))

    def write_line(self, line: str) -> None:
        self.fh.write(line + "\n")
        self.lines += 1

    def at(self, t: float) -> None:
        while self.next_sample <= t:
            self.sample(self.next_sample)
            self.next_sample += self.interval

    def parent(self, t: float, type_: str, run: str, **fields: Any) -> None:
        self.at(t)
        self.write_line(_dumps({"type": type_, "t": round(t, 6), "run": run, **fields}))

    def runner(self, t: float, run: str, node: int = 0) -> EventWriter:
        """The run's runner at ``t``: what it sends (the runners' EventWriter, at a made-up clock) is
        written tagged with ``run``, as the engine tags a runner's line (``Engine._pump``); ``node`` k > 0:
        node k's runner's, as node 0 records what node k relays (tagged ``node`` too)."""
        self.at(t)
        now = round(t, 6)
        prefix = '{"run":' + json.dumps(run) + "," + (f'"node":{node},' if node else "")
        return EventWriter(
            None,
            sink=lambda line: self.write_line(prefix + line.decode("utf-8").strip()[1:]),
            clock=lambda: now,
        )


def _distributed(framework: str, nodes: int, node: int, devices: int, gpu: bool) -> dict[str, Any]:
    """A runner's ``settings.distributed`` on several nodes (issue 33's contract, section 1): node ``node``'s."""
    if catalog.family(framework) == "torch":
        engine, link = "torchrun c10d + DDP", "NCCL (NCCL_NET Socket)" if gpu else "Gloo over TCP"
        ranks = [node * devices, devices]
    elif framework == "tensorflow":
        engine, link = "tf.distribute.MultiWorkerMirroredStrategy", "RING over gRPC"
        ranks = [node, 1]
    else:
        engine = "jax.distributed + keras.distribution.DataParallel"
        link = "NCCL through XLA" if gpu else "jax.distributed (gRPC coordinator), CPU collectives: gloo"
        ranks = [node, 1]
    return {"engine": engine, "nodes": nodes, "node_rank": node, "ranks": ranks, "link": link}


def _versions(framework: str) -> dict[str, Any]:
    if catalog.family(framework) == "torch":
        return {
            "python": "3.11.7",
            "torch": "2.5.1+cu124",
            "torchvision": "0.20.1+cu124",
            "cuda": "12.4",
            "cudnn": 90100,
        }
    return {"python": "3.11.7", "keras": "3.6.0", "tensorflow": "2.18.0", "cuda": "12.5.1", "cudnn": "9"}


def _settings(framework: str) -> dict[str, Any]:
    if catalog.family(framework) == "torch":
        return {
            "precision": "fp32",
            "tf32_matmul": False,
            "tf32_cudnn": False,
            "cudnn_benchmark": True,
            "compile": "eager",
            "channels_last": False,
            "data": "device",
            "intra_op_threads": 8,
        }
    return {
        "precision": "fp32",
        "data": "device",
        "keras_dtype_policy": "float32",
        "tf32": False,
        "cudnn_autotune": True,
        "compile": "tf.function graph",
        "intra_op_threads": 0,
        "channels_last": True,
    }


#: What each family's runner states of its generate (hello ``settings.generation``; issue 34's contract),
#: at prompt P and N new tokens: transformers prefills the prompt for the first token, then N - 1 one-token
#: steps; keras-hub seeds its cache over P + N positions, then N one-token steps.
def generation_settings(framework: str, prompt_len: int, new_tokens: int) -> dict[str, Any]:
    """A made ``settings.generation`` for ``framework`` (``generate=`` of ``make_session``)."""
    width, layers = 256, 4  # gpt2_mini's; the bytes per token are fp32 keys and values of every layer
    if catalog.family(framework) == "torch":
        return {
            "engine": "transformers GPT2LMHeadModel.generate, greedy, static cache",
            "cache": f"static, {prompt_len + new_tokens} positions",
            "prefill": f"{prompt_len} prompt positions, giving the first token",
            "decode_steps": f"{new_tokens - 1} one-token steps",
            "compile": "eager",
            "first_token": "own call of one new token",
            "cache_bytes_per_token": 2 * layers * width * 4,
        }
    return {
        "engine": "keras-hub GPT2CausalLM.generate, GreedySampler, XLA",
        "cache": f"seeded, {prompt_len + new_tokens} positions",
        "prefill": f"the cache seeded over {prompt_len + new_tokens} positions (prompt and new tokens)",
        "decode_steps": f"{new_tokens} one-token steps (the first re-reads the prompt's last token)",
        "compile": "XLA (jit_compile)",
        "first_token": "own call of one new token",
        "cache_bytes_per_token": 2 * layers * width * 4,
    }


def make_session(
    root: str | Path,
    *,
    name: str = "fixture",
    frameworks: tuple[str, ...] | list[str] = ("torch", "tensorflow"),
    models: tuple[str, ...] | list[str] = ("resnet50",),
    runs: int = 2,
    epochs: int = 3,
    steps: int = 8,
    batch_size: int | None = None,
    image_size: int = 299,
    gpu: bool = True,
    speed: dict[tuple[str, str], float] | None = None,
    noise: float = 0.02,
    run_noise: float = 0.01,
    time_scale: float = 1.0,
    warmup: tuple[float, ...] = (30.0, 1.3, 1.3),
    run_factor: dict[Any, float] | None = None,
    seed: int = 1,
    fail: dict[tuple[str, str, int], dict[str, Any]] | None = None,
    interval: float = 0.5,
    folder: str | None = None,
    started: str = "2026-01-02T03:04:05+00:00",
    order: str = "interleaved",
    write_summary: bool = True,
    status: str | None = None,
    meta_extra: dict[str, Any] | None = None,
    cpu_frameworks: tuple[str, ...] = (),
    task: str = "train",
    seq_len: int = 0,
    networks: dict[tuple[str, str], dict[str, Any]] | None = None,
    timing: str | None = None,
    devices: int = 1,
    scaling: bool = False,
    efficiency: dict[str, float] | None = None,
    straggler: float = 0.02,
    profile: dict[tuple[Any, ...], dict[str, Any]] | None = None,
    counters: dict[str, Any] | None = None,
    gpu_counters: dict[str, dict[str, float]] | None = None,
    sweep: dict[str, list[str]] | None = None,
    point_speed: dict[tuple[str, str], float] | None = None,
    loss: dict[tuple[str, str, int], list[float]] | None = None,
    nodes: int = 1,
    node_speed: dict[int, float] | None = None,
    generate: dict[str, Any] | None = None,
) -> Path:
    """Write a finished session folder under ``root`` and return its path.

    ``speed`` maps (framework, model) to seconds per batch (default: a made-up but
    plausible figure times ``time_scale``); ``warmup`` multiplies the first batches of a
    run; ``run_factor`` maps a run index (or (framework, run index): that run alone) to a factor on its speed; ``fail`` maps
    (framework, model, run index) to {"kind": "oom"|"exception", "message": ..., "epoch": N}.
    ``task`` and ``seq_len`` are the plan's (training or inference; a token model's sequence length).
    ``networks`` maps (framework, model) to what its runner measured of the network it built
    ({"params", "trainable_params", "flops" (per sample), "source", "architecture"}): a ``model``
    event after building and a ``flops`` event after the timed epochs, as the runners send them.
    ``timing`` ("window" or "step") goes into the runners' settings, as they record it.
    ``devices`` and ``scaling``: a data-parallel plan (per-device batch ``batch_size``); a run on
    d > 1 devices takes ``1 / efficiency[framework]`` times one device's step time (so its
    throughput is d x efficiency x one device's), PyTorch runs send ``ranks`` events (rank r
    ``straggler`` x r slower), and on a GPU the run_end carries each GPU's figures.
    ``profile``: a ``--profile`` plan; maps (framework, model), or (framework, model, run index) for
    one run, to what its runner profiled (``profile_event``): a ``profile`` event inside a "profile"
    phase after the timed epochs, and its trace in ``traces/`` (``"trace": False``: none). A cell
    the map lacks sends no profile. ``counters``: the sampler's ``counters`` event (available,
    source, reason), written first; ``gpu_counters`` maps a framework to the profiling counters
    (percent) of its GPU samples while it trains, whose means (and NVML's utilization's) the run_end
    records, as the engine does. ``sweep``: the plan's (``{"batch": ["4", "8"], ...}``, as ``--sweep`` keeps
    it); a point's batch is its ``batch`` value (a step's time scales as batch**0.8 from ``batch_size``), and
    ``point_speed`` maps (framework, point key 'batch=8,channels-last=on') to a factor on its step time.
    ``loss`` maps (framework, model, run index) to each epoch's loss (NaN and infinities allowed), sent in
    its epoch events as the runners send them ("nan", "inf", "-inf" as strings); a run whose loss goes
    non-finite or never changes ends "diverged" (the session "failed"), as the engine records it.
    ``nodes``: a plan on several machines (``--nodes``; with ``scaling``, 1 node at 1, 2, 4 ... devices, then
    2, 4 ... nodes): a run on k > 1 nodes also holds every other node's share as node 0 records it (section 2
    of issue 33's contract), tagged ``node``: its run_start (host ``bench-0{k+1}``, pid), its runner's hello
    (``settings.distributed`` with its ranks, nodes, node_rank, engine and link), phases, batch windows,
    epochs, done, its GPU samples and its run_end (with its GPUs' figures on a GPU); node 0's run_start
    carries ``nodes`` and ``host``. ``node_speed`` maps a node to a factor on its step time (a straggler).
    ``generate``: a ``--task generate`` plan (issue 34; give token models, e.g. ``models=("gpt2_mini",)``):
    {"prompt_len": P (128), "new_tokens": N (16), "first_token_s": {framework: s}, "token_s": {framework: s},
    "settings": {framework: {...}}, "tokens": {framework: n}, "decode_steps": {framework: n or None}}, every
    key optional. Each run's hello carries ``settings.generation`` (``generation_settings``, updated with
    "settings"), and each step's ``batch`` event is followed by its ``tokens`` event: the first token's
    latency ``first_token_s`` (default a fifth of the step's base time) and each later token's ``token_s``
    (default the rest over N - 1), both times the step's factor (noise; the first epoch's warmup), each later
    token jittered by 1% (``token_s`` sent under ``timing="step"`` only). The step's window is the first
    token's call and the full call under window timing (the plan's default: 2 x first + decode), the full
    call alone under step timing (first + decode). "tokens" / "decode_steps": what the runner counted
    (default N each; None: not counted).
    """
    root = Path(root)
    gen = dict(generate) if generate is not None else None
    prompt_len = new_tokens = 0
    if gen is not None:
        task = "generate"
        prompt_len, new_tokens = int(gen.get("prompt_len", 128)), int(gen.get("new_tokens", 16))
    batch_sizes = {m: batch_size or catalog.MODELS[m].study_batch_size for m in models}
    plan = Plan(
        frameworks=list(frameworks),
        models=list(models),
        image_size=image_size,
        # Every point's batch fits ``steps`` batches an epoch (a sweep's largest batch too).
        samples=max([*batch_sizes.values(), *(int(b) for b in (sweep or {}).get("batch", []) if b.isdigit())])
        * steps,
        epochs=epochs,
        runs=runs,
        batch_sizes=batch_sizes,
        device="cuda" if gpu else "cpu",
        name=name,
        order=order,
        interval=interval,
        task=task,
        seq_len=seq_len,
        devices=devices,
        scaling=scaling,
        profile=profile is not None,
        sweep=dict(sweep or {}),
        nodes=nodes,
        prompt_len=prompt_len,
        new_tokens=new_tokens,
        **({"timing": timing or "window"} if gen is not None else {}),
    )
    plan.samples *= devices * nodes  # every point gets ``steps`` batches per epoch at the most workers
    efficiency = {"torch": 0.9, "tensorflow": 0.8, "keras-jax": 0.85, **(efficiency or {})}
    # Every model gets exactly ``steps`` batches per epoch.
    steps_of = {m: steps for m in models}
    rng = random.Random(seed)
    gen_rng = random.Random(seed + 11)  # each later token's jitter (a generate session's alone)
    fail = fail or {}
    speed = speed or {}
    path = root / (folder or f"20260102T030405Z_{slugify(name)}")
    (path / "logs").mkdir(parents=True)
    t = 1000.0
    failed_any = False
    with open(path / "events.jsonl", "w", encoding="utf-8") as fh:
        tl = _Timeline(fh, interval, gpu, random.Random(seed + 1), t0=t)
        tl.gpu_count = devices if gpu else 1
        tl.node_rng = random.Random(seed + 7)
        tl.record = counters is not None or gpu_counters is not None
        if counters is not None:
            tl.write_line(_dumps({"type": "counters", "t": round(t, 6), **counters}))
        for spec in run_order(plan):
            fw, model, index, rid = spec.framework, spec.model, spec.index, spec.run_id
            ok, reason = catalog.available(fw, model)
            if not ok:
                tl.parent(t, "run_end", rid, status="unavailable", reason=reason)
                continue
            d = spec.devices
            at = plan.at(spec.point, fw, model)
            per_device = at.batch_size(model, fw) if not at.batch_auto else batch_sizes[model]
            bs = per_device * spec.workers  # samples a step, over every device of every node
            n_steps = steps_of[model] * devices * nodes // spec.workers
            others = list(range(1, spec.nodes))  # the run's other nodes
            base = speed.get(
                (fw, model), DEFAULT_BATCH_S.get(fw, 0.05) * MODEL_SCALE.get(model, 1.0) * time_scale
            )
            base *= (per_device / batch_sizes[model]) ** 0.8 * (point_speed or {}).get(
                (fw, spec.point.key), 1.0
            )
            factors = run_factor or {}
            base *= (1 + run_noise * rng.gauss(0, 1)) * factors.get((fw, index), factors.get(index, 1.0))
            if spec.workers > 1:
                base /= efficiency.get(fw, 0.85)
            tl.run_gpus = list(range(d)) if gpu and d > 1 else []
            tl.parent(
                t,
                "run_start",
                rid,
                framework=fw,
                model=model,
                index=index,
                pid=4000 + index,
                python="/usr/bin/python3",
                **({"devices": d} if d > 1 else {}),
                **({"nodes": spec.nodes, "host": "bench-01"} if spec.nodes > 1 else {}),
            )
            for k in others:
                tl.parent(
                    t,
                    "run_start",
                    rid,
                    node=k,
                    framework=fw,
                    model=model,
                    index=index,
                    pid=5000 + 100 * k + index,
                    python="/usr/bin/python3",
                    **({"devices": d} if d > 1 else {}),
                    nodes=spec.nodes,
                    host=f"bench-{k + 1:02d}",
                )
            tl.run_nodes = others
            tl.run = rid
            (path / "logs" / f"{rid}.log").write_text(f"{fw} {model} run {index}\n", encoding="utf-8")
            t0 = t + 0.04
            t = t0 + 1.5
            tl.runner(t, rid).phase("import", "start", at=round(t0, 6))
            tl.runner(t, rid).phase("import", "end")
            config = {
                "framework": fw,
                "model": model,
                "image_size": image_size,
                "samples": plan.samples,
                "batch_size": per_device,
                "replicas": d,
                "epochs": epochs,
                "device": plan.device,
                "data": at.data,
                "precision": at.precision,
                **({"compile": at.compile, "channels_last": at.channels_last} if spec.point else {}),
                "run_id": rid,
                "task": task,
                "seq_len": at.seq_len,
                **({"prompt_len": prompt_len, "new_tokens": new_tokens} if gen is not None else {}),
            }
            info = catalog.MODELS[model]
            tokens = catalog.tokens_per_sample(model, at.seq_len or info.context)  # a point's own seq-len
            if gen is not None:  # a generated sequence: its prompt and its new tokens
                tokens = catalog.tokens_per_sample(model, prompt_len + new_tokens)
            settings = _settings(fw)
            if task != "train" or tokens or timing:  # what runners with these workloads record
                settings.update(task=task, kind=info.kind, tokens_per_sample=tokens)
            if timing or gen is not None:
                settings["timing"] = timing_words(timing or "window")
            if gen is not None:
                settings["generation"] = {
                    **generation_settings(fw, prompt_len, new_tokens),
                    **(gen.get("settings") or {}).get(fw, {}),
                }
            device = (
                {
                    "type": "cuda",
                    "index": 0,
                    "name": "NVIDIA H100 80GB HBM3",
                    "memory_bytes": 80 * GIB,
                    "capability": "9.0",
                }
                if gpu and fw not in cpu_frameworks  # cpu_frameworks: fell back to the CPU (the bug to catch)
                else {"type": "cpu", "name": "x86_64", "threads": 8}
            )
            for k in [0, *others] if others else [0]:
                said = settings
                if others:  # several nodes: each node's runner records its own place among them
                    said = {**settings, "distributed": _distributed(fw, spec.nodes, k, d, gpu)}
                tl.runner(t, rid, k).hello(
                    pid=4000 + index if k == 0 else 5000 + 100 * k + index,
                    framework=fw,
                    versions=_versions(fw),
                    device=device,
                    config=config,
                    settings=said,
                    steps_per_epoch=n_steps,
                    samples_per_epoch=n_steps * bs,
                )
            for k in [0, *others]:
                tl.runner(t, rid, k).phase("data", "start")
            t += 0.05
            for k in [0, *others]:
                tl.runner(t, rid, k).phase("data", "end")
                tl.runner(t, rid, k).phase("build", "start")
            t += BUILD_S.get(fw, 1.0) * (1 + 0.03 * rng.gauss(0, 1))
            for k in [0, *others]:
                tl.runner(t, rid, k).phase("build", "end")
            network = (networks or {}).get((fw, model))
            if network is not None:
                tl.runner(t, rid).emit(
                    "model",
                    params=network["params"],
                    trainable_params=network.get("trainable_params", network["params"]),
                    kind=info.kind,
                    tokens_per_sample=tokens,
                    source=network.get("source", ""),
                    architecture=network.get("architecture", ""),
                )
            tl.busy = gpu
            tl.node_busy = True
            tl.counters = dict((gpu_counters or {}).get(fw, {})) if gpu else {}
            tl.counter_sums = {}
            source = (
                (
                    "torch.cuda.max_memory_allocated"
                    if catalog.family(fw) == "torch"
                    else "tf get_memory_info peak"
                )
                if gpu
                else "process peak RSS (CPU)"
            )
            failure = fail.get((fw, model, index))
            crashed = False
            for epoch in range(1, epochs + 1):
                epoch_start = t
                node_seconds = dict.fromkeys(others, 0.0)
                for step in range(1, n_steps + 1):
                    if failure and epoch == failure.get("epoch", 1) and step == failure.get("step", 1):
                        crashed = True
                        break
                    first = epoch == 1 and step == 1
                    if first:
                        for k in [0, *others]:
                            tl.runner(t, rid, k).phase("first_batch", "start")
                    seconds = base * (1 + noise * rng.gauss(0, 1))
                    if epoch == 1 and step <= len(warmup):
                        # The first step compiles and autotunes; a few more are slow too.
                        seconds = base * warmup[step - 1]
                    said_tokens: dict[str, Any] | None = None
                    if gen is not None:
                        said_tokens = _tokens_event(gen, fw, base, seconds / base, bs, timing, gen_rng)
                        seconds = said_tokens.pop("window_s")
                    t += seconds
                    tl.runner(t, rid).batch(epoch, step, seconds, bs)
                    if said_tokens is not None:
                        tl.runner(t, rid).tokens(epoch, step, **said_tokens)
                    for k in others:  # node k's lead times its own windows (a straggler's are slower)
                        slow = (node_speed or {}).get(k, 1.0)
                        node_s = seconds * slow * (1 + noise * tl.node_rng.gauss(0, 1))
                        node_seconds[k] += node_s
                        tl.runner(t, rid, k).batch(epoch, step, node_s, bs)
                    if d > 1 and catalog.family(fw) == "torch" and not others:
                        ranks = [seconds * (1 + straggler * r) for r in range(d)]
                        tl.runner(t, rid).emit("ranks", epoch=epoch, step=step, steps=1, seconds=ranks)
                    elif others and catalog.family(fw) == "torch":
                        # Every lead gathers every global rank's pace (node k's ranks k*d ... at its speed).
                        ranks = [
                            seconds * (1 + straggler * r) * (node_speed or {}).get(r // d, 1.0)
                            for r in range(spec.workers)
                        ]
                        for k in [0, *others]:
                            tl.runner(t, rid, k).emit("ranks", epoch=epoch, step=step, steps=1, seconds=ranks)
                    if first:
                        for k in [0, *others]:
                            tl.runner(t, rid, k).phase("first_batch", "end")
                if crashed:
                    break
                t += 0.002
                losses = (loss or {}).get((fw, model, index))
                said = {"loss": _wire_loss(losses[epoch - 1])} if losses and epoch <= len(losses) else {}
                tl.runner(t, rid).epoch(epoch, t - epoch_start, n_steps * bs, **said)
                tl.runner(t, rid).memory(epoch=epoch, peak_bytes=int(12.5 * GIB), source=source)
                for k in others:
                    tl.runner(t, rid, k).epoch(epoch, node_seconds[k] + 0.002, n_steps * bs)
            tl.busy = False
            tl.node_busy = False
            wanted = (profile or {}).get((fw, model, index)) or (profile or {}).get((fw, model))
            if wanted is not None and not crashed:
                tl.runner(t, rid).phase("profile", "start")
                trace = None
                if wanted.get("trace", True) and wanted.get("ok") is not False:
                    name = f"{rid}.pt.trace.json.gz" if catalog.family(fw) == "torch" else f"{rid}.xplane.pb"
                    (path / "traces").mkdir(exist_ok=True)
                    (path / "traces" / name).write_bytes(b"\x1f\x8b made-up trace")
                    trace = {"file": name, "bytes": (path / "traces" / name).stat().st_size}
                event = profile_event(wanted, fw, base, gpu and fw not in cpu_frameworks, trace)
                t += base * wanted.get("steps", 5) * 2
                tl.runner(t, rid).emit("profile", **event)
                tl.runner(t, rid).phase("profile", "end")
            if crashed:
                assert failure is not None
                kind = failure.get("kind", "exception")
                message = failure.get("message", "RuntimeError: boom")
                tl.runner(t, rid).error(kind, message, failure.get("traceback", "Traceback ...\n" + message))
                reason = f"out of memory: {message}" if kind == "oom" else message
                t += 0.3
                for k in others:
                    tl.parent(t, "run_end", rid, node=k, status="failed", reason=f"node 0 failed: {reason}")
                tl.parent(t, "run_end", rid, status="failed", reason=reason, returncode=1, malformed=0)
                failed_any = True
            else:
                if network is not None and network.get("flops"):
                    tl.runner(t, rid).emit(
                        "flops",
                        per_step=network["flops"] * bs,
                        per_image=network["flops"],
                        batch_size=bs,
                        method="fixture",
                        counted="forward" if task == "inference" else "forward+backward",
                        convention="multiply-add = 2 FLOPs",
                    )
                tl.runner(t, rid).done(peak_bytes=int(12.5 * GIB), source=source)
                for k in others:
                    tl.runner(t, rid, k).done(peak_bytes=int(12.5 * GIB), source=source)
                t += 0.3
                for k in others:  # node k's engine's run_end, relayed: its GPUs over its share of the run
                    node_gpus = [
                        {
                            "index": i,
                            "util": 85.0 - i,
                            "mem_max": int(13.5 * GIB),
                            "power_w": 260.0 - i,
                            "samples": 9,
                        }
                        for i in range(d)
                    ]
                    tl.parent(
                        t,
                        "run_end",
                        rid,
                        node=k,
                        status="ok",
                        reason="",
                        returncode=0,
                        malformed=0,
                        **({"per_gpu": node_gpus} if gpu else {}),
                    )
                per_gpu = (
                    [
                        {
                            "index": i,
                            "util": 92.0 - i,
                            "mem_max": int(14.5 * GIB),
                            "power_w": 300.0 - i,
                            "samples": 9,
                        }
                        for i in range(d)
                    ]
                    if gpu and (d > 1 or others)
                    else None
                )
                means = {name: total / n for name, (total, n) in tl.counter_sums.items() if n}
                diverged = _diverged((loss or {}).get((fw, model, index)), n_steps)
                failed_any = failed_any or diverged is not None
                tl.parent(
                    t,
                    "run_end",
                    rid,
                    status="diverged" if diverged else "ok",
                    reason=diverged or "",
                    returncode=0,
                    malformed=0,
                    **({"per_gpu": per_gpu} if per_gpu else {}),
                    **means,  # what the engine records of the counters it sampled
                )
            tl.run = None
            tl.run_gpus = []
            tl.run_nodes = []
            t += 0.5
        tl.at(t)
    meta: dict[str, Any] = {
        "schema": SESSION_SCHEMA,
        "kind": "benchtui-session",
        "name": name,
        "plan": plan.to_dict(),
        "host": {
            "hostname": "bench-01",
            "platform": "Linux-6.8-x86_64",
            "python": "3.11.7",
            "cpu_count": 32,
            "memory_bytes": 256 * GIB,
        },
        # This version, so that loading it says nothing about another version (a test can override).
        "benchtui": {"version": benchtui_version(), "commit": None, "runner_hash": "0" * 64},
        "status": status or ("failed" if failed_any else "complete"),
        "started": started,
        "started_monotonic": 1000.0,
        "finished": "2026-01-02T04:04:05+00:00",
        "gpus": [
            {
                "index": i,
                "name": "NVIDIA H100 80GB HBM3",
                "memory_total": 80 * GIB,
                "driver": "550.54.15",
                "cuda_driver": 12040,
                "max_sm_clock_mhz": 1980,
                "power_limit_w": 700.0,
            }
            for i in range(devices)
        ]
        if gpu
        else [],
        "telemetry": "NVML: 1 GPU(s)"
        if gpu
        else "NVML unavailable: NVML Shared Library Not Found (no NVIDIA driver or GPU?)",
        **(meta_extra or {}),
    }
    (path / "session.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if write_summary:
        model = SessionModel(plan)
        for event in read_events(path):
            model.apply(event)
        (path / "summary.json").write_text(json.dumps(model.summary(), indent=2) + "\n", encoding="utf-8")
    return path


def _tokens_event(
    gen: dict[str, Any],
    framework: str,
    base: float,
    factor: float,
    sequences: int,
    timing: str | None,
    rng: random.Random,
) -> dict[str, Any]:
    """One generate step's ``tokens`` event fields (``make_session``'s ``generate=``), and ``window_s``: the
    step's window as the runner's clock times it."""
    prompt_len, new_tokens = int(gen.get("prompt_len", 128)), int(gen.get("new_tokens", 16))
    first = (gen.get("first_token_s") or {}).get(framework, 0.2 * base) * factor
    later = new_tokens - 1
    token = (gen.get("token_s") or {}).get(framework, 0.8 * base / max(later, 1)) * factor
    gaps = [token * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(later)]
    decode = sum(gaps)
    step = timing == "step"
    counted = gen.get("decode_steps") or {}
    return {
        "sequences": sequences,
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "first_token_s": first,
        "decode_s": decode,
        **({"token_s": gaps} if step else {}),
        "tokens": (gen.get("tokens") or {}).get(framework, new_tokens),
        "decode_steps": counted[framework] if framework in counted else new_tokens,
        "window_s": first + decode if step else 2 * first + decode,
    }


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    with open(path / "events.jsonl", encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def cut_off(path: Path, keep_fraction: float = 0.5, live: bool = False) -> Path:
    """Make ``path`` look like a session killed mid-run: events cut mid-line, status still running.

    With ``live`` the events file keeps a fresh modification time, as a running session's does.
    """
    events = path / "events.jsonl"
    data = events.read_bytes()
    cut = int(len(data) * keep_fraction)
    # Cut in the middle of a line, as a kill -9 during a write would.
    line_start = data.rfind(b"\n", 0, cut) + 1
    events.write_bytes(data[: line_start + max(5, (cut - line_start) // 2)])
    meta = json.loads((path / "session.json").read_text(encoding="utf-8"))
    meta.update(status="running", finished=None)
    (path / "session.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    (path / "summary.json").unlink(missing_ok=True)
    if not live:
        # Crashed an hour ago: a recent write would look like a session still running.
        old = time.time() - 3600
        os.utime(events, (old, old))
    return path


def shaped_sessions(root: str | Path) -> list[Path]:
    """Four shapes a reader must fold alike, under ``root``: two epochs' worth of runs, a run that failed
    with an OOM, a data-parallel scaling session on GPUs, and a CPU inference session timed per step."""
    return [
        make_session(root, name="two", runs=2, epochs=3, steps=40, folder="two"),
        make_session(
            root,
            name="failing",
            models=("resnet50", "densenet121"),
            runs=2,
            fail={("tensorflow", "densenet121", 1): {"kind": "oom", "message": "OOM", "epoch": 2}},
            folder="failing",
        ),
        make_session(root, name="scaling", devices=4, scaling=True, gpu=True, runs=2, folder="scaling"),
        make_session(root, name="cpu", gpu=False, task="inference", timing="step", folder="cpu"),
    ]
