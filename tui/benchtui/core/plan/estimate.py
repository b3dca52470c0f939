"""How long a plan will take on a CPU, roughly: enough to say "days" before a headless run starts."""

from __future__ import annotations

from dataclasses import replace

from benchtui.core.plan.plan import Plan, from_preset, run_order, scale_list, scale_words
from benchtui.core.plan.sweep import applies
from benchtui_runners import catalog

#: Forward FLOPs of one sample at the size given (billions; twice the multiply-adds that model cards list).
#: Only the order of magnitude matters: the estimate says "hours" or "days", never a minute count.
FORWARD_GFLOPS: dict[str, tuple[float, int]] = {  # model: (GFLOPs, at this image size)
    "inception_v3": (11.4, 299),
    "resnet50": (8.2, 224),
    "resnet50_v1_5": (8.2, 224),
    "resnet101": (15.6, 224),
    "resnet152": (23.0, 224),
    "densenet121": (5.7, 224),
    "densenet169": (6.7, 224),
    "densenet201": (8.6, 224),
    "inception_resnet_v2": (26.4, 299),
    "nasnet_large": (47.6, 331),
    "pnasnet_large": (50.0, 331),
    "vgg16": (31.0, 224),
    "mobilenet_v3_large": (0.44, 224),
    "efficientnet_b0": (0.78, 224),
    "efficientnet_b3": (3.7, 300),
    "efficientnet_v2_s": (16.7, 384),
    "convnext_tiny": (8.9, 224),
    "vit_b_16": (35.0, 224),
    "vit_ti_16": (2.5, 224),
}
#: What one core sustains training a network, at best (billions of FLOP/s): a generous figure, so that
#: the estimate errs short and "likely N or more" stays true.
CPU_GFLOPS_PER_CORE = 25.0
#: Starting a runner, importing its framework and building the model, per run (seconds).
RUN_OVERHEAD_S = 10.0
#: The fewest cores an estimate counts on: a machine whose cores other processes keep busy still gives
#: a run a share of one (the scheduler splits a core among the threads that want it).
MIN_CORES = 0.5
#: A CPU plan estimated to take longer than this is worth a warning before it starts.
LONG_PLAN_S = 3600.0


def sample_gflops(plan: Plan, model: str) -> float | None:
    """FLOPs of one sample's step of ``model`` under ``plan`` (billions; None: not known, a user's model)."""
    info = catalog.MODELS.get(model)
    if info is None:
        return None
    steps = 3.0 if plan.task == "train" else 1.0  # a backward pass costs about twice the forward
    if info.kind == "tokens":
        arch = info.config
        layers, width, vocab = int(arch["layers"]), int(arch["width"]), int(arch["vocab"])
        tokens = plan.seq_len or info.context
        if plan.task == "generate":  # one sequence: its prompt's prefill, then one token a decode step
            prompt, new = plan.generate_lengths(model)
            tokens = prompt + new
            # Window timing calls generate twice a step: the first token's own call prefills once more.
            steps = (prompt + new + (prompt if plan.timing == "window" else 0)) / tokens
        # Per token: the blocks' matrices (12 width² per layer), the attention over the sequence, the head.
        per_token = 2 * (12 * layers * width**2 + layers * tokens * width + vocab * width)
        return steps * tokens * per_token / 1e9
    known = FORWARD_GFLOPS.get(model)
    if known is None:
        return None
    gflops, size = known
    return steps * gflops * (plan.image_size / size) ** 2


def cpu_seconds(plan: Plan, cores: float) -> float:
    """A rough duration of ``plan`` on ``cores`` CPU cores (seconds; ``--threads`` uses fewer): the runs its
    frameworks can make, each its samples times its epochs, plus each run's start; models of unknown cost
    (a user's own) count their start only. ``cores`` may be a fraction: the idle share of a busy machine's
    cores (never counted below ``MIN_CORES``)."""
    rate = CPU_GFLOPS_PER_CORE * max(MIN_CORES, min(plan.threads, cores) if plan.threads else cores)
    total = 0.0
    for spec in run_order(plan):
        if not catalog.available(spec.framework, spec.model)[0]:
            continue
        per_sample = sample_gflops(plan.at(spec.point, spec.framework, spec.model), spec.model) or 0.0
        total += RUN_OVERHEAD_S + per_sample * plan.samples * plan.epochs / rate
    return total


def duration_words(seconds: float) -> str:
    """'3 days', '5 hours', '2 weeks': a duration at the precision an estimate has."""
    for unit, size in (("week", 7 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = round(seconds / size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return "under a minute"


def preset_words(preset: str, cores: float) -> str:
    """How long ``preset`` takes on ``cores`` idle CPU cores, in words ("about 2 minutes"): the preset's
    plan as a CPU runs it (its threads the idle cores, as the engine sets them), by ``cpu_seconds``."""
    plan = from_preset(preset)
    plan.threads = 0  # the engine's default on a CPU: the idle cores, which ``cores`` already is
    words = duration_words(cpu_seconds(plan, cores))
    return words if words == "under a minute" else f"about {words}"


def long_cpu_warning(plan: Plan, cores: float) -> str:
    """One line warning that ``plan`` will likely take very long on this CPU ('' when it will not)."""
    seconds = cpu_seconds(plan, cores)
    if seconds < LONG_PLAN_S:
        return ""
    n, unit = (plan.threads, "thread") if plan.threads else (max(1, round(cores)), "core")
    if plan.task == "generate":  # the quick preset trains: a small generate plan is the advice
        small = replace(
            plan, models=["gpt2_mini"], samples=16, epochs=2, runs=2, batch_sizes={"gpt2_mini": 4}, threads=0
        )
        small.prompt_len = small.new_tokens = 32
        words = duration_words(cpu_seconds(small, cores))
        advice = f"{QUICK_GENERATE} generates on this CPU in {words if words == 'under a minute' else 'about ' + words}"
    else:
        advice = f"--preset quick measures both frameworks in {preset_words('quick', cores)}"
    return (
        f"on this CPU ({n} {unit}{'s' if n != 1 else ''}) this plan likely takes "
        f"{duration_words(seconds)} or more; {advice}"
    )


#: A generate plan a CPU finishes in a minute or two: the long-plan warning's advice for --task generate.
QUICK_GENERATE = (
    "--models gpt2_mini --prompt-len 32 --new-tokens 32 --samples 16 --batch-size 4 --epochs 2 --runs 2"
)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def shared_points(plan: Plan) -> str:
    """Which frameworks run fewer points than the grid has, and why, in words ("tf.keras shares its
    channels-last points"): an axis that changes nothing for a framework's model (``sweep.applies``) is
    not run twice ('' where every framework runs every point)."""
    by_axes: dict[tuple[str, ...], list[str]] = {}
    for fw in plan.frameworks:
        axes = tuple(
            a
            for a, values in plan.sweep.items()
            if len(values) > 1 and any(applies(a, fw, m) is not None for m in plan.models)
        )
        if axes:
            by_axes.setdefault(axes, []).append(catalog.FRAMEWORK_LABELS.get(fw, fw))
    parts = []
    for axes, names in by_axes.items():
        who = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        its = "its" if len(names) == 1 else "their"
        share = "shares" if len(names) == 1 else "share"
        parts.append(f"{who} {share} {its} {' and '.join(axes)} points")
    return "; ".join(parts)


def nodes_words(plan: Plan) -> str:
    """Where a plan across several machines trains, in words: "on 2 nodes × 1 device" (each run), or with
    ``--scaling`` its scale points in run order, "at 1 node × 1, 2 devices, then 2, 4 nodes × 2 devices"
    ('' for a plan on one machine, which says its devices as before)."""
    if plan.nodes <= 1:
        return ""
    scales = plan.scale_points()
    return f"on {scale_words(scales[0])}" if len(scales) == 1 else f"at {scale_list(scales)}"


def sweep_words(plan: Plan, cores: float, gpu: bool = False) -> str:
    """A sweep's size and rough duration, said before it starts: "4 points × 2 frameworks × 2 runs = 14 runs
    (tf.keras shares its channels-last points), about 3 minutes" ('' for a plan without a sweep); across
    nodes, where ("= 8 runs on 2 nodes × 1 device"; with --scaling its scale points are a factor).

    The duration is the CPU's estimate (``cpu_seconds`` on ``cores`` idle cores); on a GPU (``gpu``) the runs
    are said without one, as there is no honest basis for it. A batch search's probes come on top."""
    if not plan.sweep:
        return ""
    if set(plan.sweep) == {"devices"}:
        head = _plural(len(plan.device_counts()), "device count")
    else:
        head = _plural(len(plan.points()), "point")
    scales = plan.scale_points()
    parts = [head]
    if plan.nodes > 1 and len(scales) > 1:  # the runs of every point at each of them
        parts.append(_plural(len(scales), "scale point"))
    parts.append(_plural(len(plan.frameworks), "framework"))
    if len(plan.models) > 1:
        parts.append(_plural(len(plan.models), "model"))
    parts.append(_plural(plan.runs, "run"))
    text = f"{' × '.join(parts)} = {_plural(plan.run_count(), 'run')}"
    if plan.nodes > 1:
        text += f" {nodes_words(plan)}"
    shared = shared_points(plan)
    if shared:
        text += f" ({shared})"
    if not gpu:
        words = duration_words(cpu_seconds(plan, cores))
        text += ", " + (words if words == "under a minute" else f"about {words}")
    searched = (
        plan.batch_auto or "auto" in plan.sweep.get("batch", []) or "best" in plan.sweep.get("settings", [])
    )
    if searched:
        text += ", and the batch searches before them"
    return text
