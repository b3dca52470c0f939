"""Every plan option, declared once: its flag, how the command line reads it, its help, its limits, the
plan field it sets, the runner's field it becomes, and the plan screen's field for it.

The command line's plan flags (``add_plan_args``), the names ``plan_from_args`` copies, the flags that
shape a plan (``SHAPING``), the limits ``Plan.validate`` checks (``LIMITS``, ``POSITIVE``, ``CHOICES``),
the fields ``Plan.run_config`` copies into the runner's ``RunConfig`` (``RUNNER_FIELDS``) and the plan
screen's labels (``FORM_LABELS``) are all read from ``OPTIONS``. The plan's typed fields and their
defaults stay on ``Plan``; ``tests/test_plan_options.py`` proves the two agree.

Light (the standard library, and the runners' constants): the command line imports it before ``--help``
answers.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchtui.core.plan.nodes import DEFAULT_PORT, JOIN_TIMEOUT_S, SLURM, slurm_nodes
from benchtui.core.plan.sweep import AXES
from benchtui_runners.config import COMPILE_MODES, HEADS, OPTIMIZERS, PRECISIONS, TASKS
from benchtui_runners.timing import TIMINGS

#: Where sessions go when no --sessions-dir names a folder (session.sessions_dir), as the help says it.
SESSIONS_DEFAULT = (
    "(default: $BENCHTUI_SESSIONS_DIR, else ./sessions where it exists, else the user's data folder)"
)
ORDERS = ("interleaved", "grouped")
INTERVAL = 0.5  # GPU sampling period, seconds
INTERVAL_RANGE = (0.05, 3600.0)  # 20 samples a second at most, one an hour at least
STALL_RANGE = (1.0, 7 * 86400.0)  # --stall-timeout, seconds
#: --profile-steps: steps captured by each framework's profiler after the timed epochs (a trace of
#: more than a few dozen steps of a large model is gigabytes, and says nothing the first few do not).
PROFILE_STEPS = 5
PROFILE_STEPS_RANGE = (1, 50)
DATA_PLACEMENTS = ("device", "host")
#: --sweep's axes, as its help says them (``sweep.AXES``).
SWEEP_AXES = ", ".join(
    f"{a.name} ({', '.join(a.choices) if a.choices else 'numbers' + (' or ' + ', '.join(a.words) if a.words else '')})"
    for a in AXES.values()
)
BATCH_POLICIES = ("min", "per-framework")


def csv_list(text: str) -> list[str]:
    """``a, b,,c`` -> ['a', 'b', 'c']."""
    return [part.strip() for part in text.split(",") if part.strip()]


def stall_seconds(text: str) -> float:
    """``--stall-timeout``: auto (0), off (-1) or seconds."""
    if text in ("auto", "off"):
        return 0.0 if text == "auto" else -1.0
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be auto, off or seconds, got {text!r}") from None


def device_list(text: str) -> tuple[int, list[int]]:
    """``--devices 4`` (a count) or ``--devices 0,2`` (GPUs by NVML index): (count, indices)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        numbers = [int(p) for p in parts if p]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a count or a list of GPU indices, got {text!r}") from None
    if not numbers:
        raise argparse.ArgumentTypeError(f"a count or a list of GPU indices, got {text!r}")
    if len(parts) == 1:
        return numbers[0], []
    return len(numbers), numbers


def node_count(text: str) -> int | str:
    """``--nodes``: a count of machines, or ``slurm`` (``NodesAction`` reads the count from Slurm)."""
    if text.strip().lower() == SLURM:
        return SLURM
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a count of machines or slurm, got {text!r}") from None


#: An argparse action class (``Option.action``: its name, or a class such as ``NodesAction``).
ActionClass = type[argparse.Action]
#: The namespace's attribute saying where ``--nodes`` came from: "flags" or "slurm" (absent: not given).
NODES_FROM = "nodes_from"


class NodesAction(argparse.Action):
    """``--nodes N``, or ``--nodes slurm``: the count Slurm's variables give, read as the command line is
    (``nodes.slurm_nodes``; PlanError, one line, outside Slurm), so that the plan records a count like any
    other; ``nodes_from`` keeps which it was, for ``nodes.cluster_from_args``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        slurm = values == SLURM
        setattr(namespace, self.dest, slurm_nodes(os.environ) if slurm else values)
        setattr(namespace, NODES_FROM, SLURM if slurm else "flags")


@dataclass(frozen=True)
class Option:
    """One plan option. ``field``: the ``Plan`` field the flag sets as given ('' where the flag is read by
    code of its own: --models, --batch-size, --devices, ...). ``shapes``: it says what a plan measures, so a
    command that gives it gets no default plan (the others say where or how the plan runs and is recorded).
    ``most``: the largest value (beyond it a plan is a typo, not a benchmark); ``positive``: at least 1;
    ``choices``: the values it takes, said "one of a, b" (or "a or b" with ``either``). ``runner``: the
    ``RunConfig`` field the value is copied to as it is (runner code reads it there). ``form``: the plan
    screen's label for it, which its errors are said with there; ``widget``: the screen's field for it,
    "choice" (a drop-down of ``choices``) or "number" ('': laid out by the screen's own code, or none)."""

    flag: str
    field: str = ""
    help: str | None = None
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    action: str | ActionClass | None = None
    nargs: str | None = None
    const: Any = None
    default: Any = None
    dest: str | None = None
    shapes: bool = False
    most: int | None = None
    positive: bool = False
    choices: tuple[str, ...] = ()
    either: bool = False
    runner: bool = False
    form: str | None = None
    widget: str = ""

    @property
    def name(self) -> str:
        """The argparse destination: ``--image-size`` -> ``image_size`` (or ``dest``)."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    def add_to(self, group: argparse._ArgumentGroup) -> None:
        """The flag's argparse argument, as ``benchtui run --help`` shows it."""
        kwargs: dict[str, Any] = {}
        for key in ("action", "nargs", "const", "type", "metavar", "dest"):
            value = getattr(self, key)
            if value is not None:
                kwargs[key] = value
        if self.action in ("store_true", "store_false", "append") or self.default is not None:
            kwargs["default"] = self.default
        if self.help is not None:
            kwargs["help"] = self.help
        group.add_argument(self.flag, **kwargs)

    def must_be(self) -> str:
        """How its choices are said in an error: 'one of a, b, c' or 'a or b'."""
        return " or ".join(self.choices) if self.either else f"one of {', '.join(self.choices)}"


#: The plan options, in ``benchtui run --help``'s order.
OPTIONS: tuple[Option, ...] = (
    Option("--preset", "preset", help="start from a preset: study, quick, modern, modern-cpu"),
    Option(
        "--frameworks",
        "frameworks",
        type=csv_list,
        help="comma-separated: torch,tensorflow,keras-jax,keras-torch",
        shapes=True,
    ),
    Option(
        "--models",
        type=csv_list,
        help="comma-separated model ids, or groups of them: study, modern, all",
        shapes=True,
    ),
    Option(
        "--model-file",
        action="append",
        default=[],
        metavar="FILE",
        help="your own model: a TOML (or .json) file naming its builder per framework, its input, and "
        "optionally its loss and optimizer (see the README); repeatable",
        shapes=True,
    ),
    Option(
        "--model-def",
        action="append",
        default=[],
        metavar="FRAMEWORK=MODULE:FUNCTION",
        help="your own model's builder for a framework (torch, tensorflow, keras-jax, keras-torch, or keras "
        "for every Keras backend): FUNCTION(input_shape, num_classes) returns the model; repeatable",
        shapes=True,
    ),
    Option(
        "--model-name",
        metavar="NAME",
        help="--model-def: the model's name (default: its module's)",
        shapes=True,
    ),
    Option(
        "--model-input",
        metavar="image|tokens:VOCAB:SEQ_LEN|tensor:D1xD2...",
        help="--model-def: what the model takes: images of --image-size (default), token ids, or float "
        "tensors of one sample's shape",
        shapes=True,
    ),
    Option(
        "--task",
        "task",
        metavar="train|inference|generate",
        help="train (default): training steps; inference: forward only, eval mode, no gradients, "
        "every batch timed (--timing step unless given); generate (token models): greedy decoding with a "
        "key/value cache, time to first token and per-token latency",
        shapes=True,
        choices=TASKS,
        runner=True,
        form="Task",
        widget="choice",
    ),
    Option(
        "--image-size",
        "image_size",
        type=int,
        metavar="N",
        shapes=True,
        most=4096,
        positive=True,
        runner=True,
        form="Image size",
        widget="number",
    ),
    Option(
        "--seq-len",
        "seq_len",
        type=int,
        metavar="N",
        help="token models (GPT-2): tokens per sample (default: the model's context)",
        shapes=True,
        most=1 << 20,
        runner=True,
        form="Seq len",
        widget="number",
    ),
    Option(
        "--prompt-len",
        "prompt_len",
        type=int,
        metavar="P",
        help="--task generate: prompt tokens per sequence (default 128, or half the model's context where "
        "prompt and new tokens would not fit)",
        shapes=True,
        most=1 << 20,
        runner=True,
        form="Prompt len",
        widget="number",
    ),
    Option(
        "--new-tokens",
        "new_tokens",
        type=int,
        metavar="N",
        help="--task generate: tokens generated per sequence, exactly, greedily (default 128, or half the "
        "model's context)",
        shapes=True,
        most=1 << 20,
        runner=True,
        form="New tokens",
        widget="number",
    ),
    Option(
        "--samples",
        "samples",
        type=int,
        metavar="N",
        shapes=True,
        most=10**8,
        positive=True,
        runner=True,
        form="Samples",
        widget="number",
    ),
    Option(
        "--batch-size",
        metavar="N|auto|MODEL=N,...",
        help="one size for all, per model, or auto: the largest that fits (probed in fresh processes)",
        shapes=True,
        form="Batch size",
    ),
    Option(
        "--batch-policy",
        "batch_policy",
        help="auto: min (the smallest across frameworks, default) or per-framework",
        shapes=True,
        choices=BATCH_POLICIES,
        either=True,
    ),
    Option(
        "--max-batch-size",
        "max_batch_size",
        type=int,
        metavar="N",
        help="auto: never probe above N",
        shapes=True,
        most=10**6,
    ),
    Option(
        "--epochs",
        "epochs",
        type=int,
        metavar="N",
        shapes=True,
        most=10_000,
        positive=True,
        runner=True,
        form="Epochs",
        widget="number",
    ),
    Option(
        "--runs",
        "runs",
        type=int,
        metavar="N",
        shapes=True,
        most=1000,
        positive=True,
        form="Runs",
        widget="number",
    ),
    Option("--device", "device", help="auto, cpu, cuda or cuda:N (default auto)", runner=True, form="Device"),
    Option(
        "--devices",
        type=device_list,
        metavar="N|I,J,...",
        help="data parallel on N devices (GPUs, or CPU replicas), or on the GPUs listed by NVML index: "
        "torchrun + DDP, tf.distribute.MirroredStrategy, keras.distribution.DataParallel",
        shapes=True,
        most=1024,
    ),
    Option(
        "--nodes",
        "nodes",
        type=node_count,
        action=NodesAction,
        metavar="N|slurm",
        help="train every run across N machines, the same plan on each (one benchtui per node: --node-rank, "
        "--rendezvous); slurm: read them from Slurm's variables (srun, one task per node)",
        shapes=True,
        most=1024,
        positive=True,
    ),
    Option(
        "--scaling",
        "scaling",
        action="store_true",
        default=None,
        help="also run 1, 2, 4 ... devices up to --devices: throughput and scaling efficiency per count "
        "(--sweep devices=1,2,3 names the counts)",
        shapes=True,
    ),
    Option(
        "--sweep",
        action="append",
        default=[],
        metavar="AXIS=V1,V2,...",
        help="measure every framework at each point of a grid of settings, one cell per (framework, model, "
        f"point), runs interleaved; repeatable, one axis each: {SWEEP_AXES} (devices: a scaling session, "
        "alone)",
        shapes=True,
    ),
    Option(
        "--best",
        action="store_true",
        default=None,
        help="--sweep settings=same,best: every framework at the plan's settings, and each at the ones its "
        "own documentation recommends for speed (mixed precision where the GPU has it, its compiler, "
        "channels-last for PyTorch's CNNs, its largest batch)",
        shapes=True,
    ),
    Option(
        "--global-batch",
        "global_batch",
        type=int,
        metavar="N",
        help="samples per step over all devices (strong scaling); default: --batch-size is per device",
        shapes=True,
        most=10**8,
    ),
    Option(
        "--data",
        "data",
        help="device: synthetic tensors made on the device; host: a NumPy array",
        shapes=True,
        choices=DATA_PLACEMENTS,
        either=True,
        runner=True,
        form="Data",
    ),
    Option(
        "--precision",
        "precision",
        help="fp32, tf32, amp-fp16, amp-bf16 (default fp32)",
        shapes=True,
        choices=PRECISIONS,
        runner=True,
        form="Precision",
        widget="choice",
    ),
    Option(
        "--compile",
        "compile",
        nargs="?",
        const="on",
        metavar="default|on|off",
        help="default: each framework's own (Keras jit_compile='auto': XLA on a GPU; PyTorch eager); "
        "on (bare --compile): XLA / torch.compile everywhere; off: none anywhere",
        shapes=True,
        choices=COMPILE_MODES,
        runner=True,
        form="Compile",
        widget="choice",
    ),
    Option(
        "--timing",
        "timing",
        metavar="window|step",
        help="window (default): one device sync per ~0.3 s of steps; step: a sync after every step, "
        "on every framework",
        shapes=True,
        choices=TIMINGS,
        runner=True,
        form="Timing",
        widget="choice",
    ),
    Option(
        "--optimizer",
        "optimizer",
        metavar="sgd|adam",
        help="sgd (default, lr 0.01, momentum 0.9) or adam (lr 1e-4)",
        shapes=True,
        choices=tuple(OPTIMIZERS),
        runner=True,
        form="Optimizer",
        widget="choice",
    ),
    Option(
        "--learning-rate",
        "learning_rate",
        type=float,
        metavar="LR",
        help="the optimizer's learning rate",
        shapes=True,
    ),
    Option(
        "--head",
        "head",
        metavar="softmax|sigmoid",
        help="softmax over --num-classes (default), or one sigmoid output with binary cross-entropy (the study's)",
        shapes=True,
        choices=HEADS,
        runner=True,
        form="Head",
        widget="choice",
    ),
    Option(
        "--shuffle",
        "shuffle",
        action="store_true",
        default=None,
        help="host data: a new order every epoch (the study's)",
        shapes=True,
        runner=True,
    ),
    Option(
        "--loader-workers",
        "loader_workers",
        type=int,
        metavar="N",
        help="PyTorch host data: DataLoader worker processes (default min(4, usable cores))",
        shapes=True,
        most=256,
        runner=True,
    ),
    Option(
        "--no-cudnn-autotune",
        "cudnn_autotune",
        dest="cudnn_autotune",
        action="store_false",
        default=None,
        shapes=True,
        runner=True,
    ),
    Option(
        "--channels-last",
        "channels_last",
        action="store_true",
        default=None,
        help="PyTorch NHWC memory format",
        shapes=True,
        runner=True,
    ),
    Option(
        "--order",
        "order",
        help="interleaved (default) or grouped",
        shapes=True,
        choices=ORDERS,
        either=True,
        form="Order",
        widget="choice",
    ),
    Option(
        "--num-classes",
        "num_classes",
        type=int,
        metavar="N",
        shapes=True,
        most=10**6,
        positive=True,
        runner=True,
        form="Classes",
    ),
    Option("--name", "name", help="a label for the session (its folder name is made safe from it)"),
    Option("--sessions-dir", metavar="DIR", help=f"where sessions are written {SESSIONS_DEFAULT}"),
    Option(
        "--interval",
        "interval",
        type=float,
        metavar="SECONDS",
        help=f"GPU sampling period (default {INTERVAL:g}; {INTERVAL_RANGE[0]:g} to {INTERVAL_RANGE[1]:g})",
    ),
    Option(
        "--stall-timeout",
        "stall_timeout",
        type=stall_seconds,
        metavar="auto|off|SECONDS",
        help="stop a runner that sends nothing for this long, as failed: stalled (auto, the default: 15 min "
        "before its first step, then 50 times its longest window of steps, at least 2 min)",
    ),
    Option(
        "--threads",
        "threads",
        type=int,
        metavar="N",
        help="CPU threads for every framework's ops (default on a CPU: the cores other processes left idle, "
        "measured over 1 s before the plan, the same for every framework; on a GPU: each framework's own "
        "choice)",
        most=4096,
        runner=True,
        form="Threads",
        widget="number",
    ),
    Option(
        "--memory-limit",
        "memory_limit_mb",
        dest="memory_limit_mb",
        type=int,
        metavar="MB",
        help="cap each runner's address space (RLIMIT_AS): a smaller memory, on CPU",
        most=2**24,  # MB: 16 TiB
        runner=True,
    ),
    Option(
        "--python",
        action="append",
        default=[],
        metavar="FRAMEWORK=INTERPRETER",
        help="run a framework's runners with another Python (repeatable)",
    ),
    Option(
        "--profile",
        "profile",
        action="store_true",
        default=None,
        help="after each run's timed epochs, capture a few steps with the framework's own profiler: where "
        "step time goes (raw traces in the session's traces/ folder; batch-size probes are never profiled)",
        runner=True,
    ),
    Option(
        "--profile-steps",
        "profile_steps",
        type=int,
        metavar="N",
        help=f"--profile: steps captured per run (default {PROFILE_STEPS}; "
        f"{PROFILE_STEPS_RANGE[0]} to {PROFILE_STEPS_RANGE[1]})",
        runner=True,
    ),
)

#: Where this benchtui stands among the plan's ``--nodes`` machines: not the plan's (every node runs the same
#: plan, and a node whose plan differs is refused), read by ``nodes.cluster_from_args``. Their own group.
NODE_OPTIONS: tuple[Option, ...] = (
    Option(
        "--node-rank",
        type=int,
        metavar="R",
        help="with --nodes N: this machine's rank, 0 on the machine at --rendezvous (it records the session), "
        "1 to N-1 on the others",
    ),
    Option(
        "--rendezvous",
        metavar="HOST:PORT",
        help="with --nodes: node 0's address and a free port on it, the same on every node ([ADDRESS]:PORT "
        f"for IPv6); with --nodes slurm, a PORT alone or nothing: the job step's first host, port {DEFAULT_PORT}",
    ),
    Option(
        "--node-timeout",
        type=float,
        metavar="SECONDS",
        help=f"with --nodes: how long the nodes wait for each other at the rendezvous (default {JOIN_TIMEOUT_S:g})",
    ),
)
NODES_GROUP_TITLE = "several machines (with --nodes: where this benchtui stands among them, not the plan's)"

BY_FLAG: dict[str, Option] = {o.flag: o for o in OPTIONS}
BY_FIELD: dict[str, Option] = {o.field: o for o in OPTIONS if o.field}

PLAN_GROUP_TITLE = (
    "plan (defaults: the study's protocol; with no PLAN and no flag that shapes one, the quick preset "
    "where the runs go to the CPU)"
)

#: The flags that say what a plan measures: a command with none of them (and no preset)
#: gets the default plan, as the app's plan screen does (``devices.default_preset``). The others (--device,
#: --threads, --name, --sessions-dir, --python, --interval, --stall-timeout, --profile, --memory-limit) say
#: where or how it runs and is recorded, and keep it.
SHAPING: tuple[Option, ...] = tuple(o for o in OPTIONS if o.shapes)
#: The options whose value, when given, is set on the plan field as it is (``plan_from_args``).
COPIED: tuple[Option, ...] = tuple(o for o in OPTIONS if o.field and o.field != "preset")
#: The largest value each count may take: beyond these a plan is a typo, not a benchmark (and
#: --runs 999999999 would allocate the whole memory before anything ran). flag: (plan field, largest).
LIMITS: dict[str, tuple[str, int]] = {
    o.flag: (o.field or o.name, o.most) for o in OPTIONS if o.most is not None
}
#: Counts that must be at least 1: (flag, plan field).
POSITIVE: tuple[tuple[str, str], ...] = tuple((o.flag, o.field) for o in OPTIONS if o.positive)
#: Options with a fixed set of values.
CHOICES: tuple[Option, ...] = tuple(o for o in OPTIONS if o.choices)
#: The plan fields a runner's ``RunConfig`` takes as they are (the same name on both sides).
RUNNER_FIELDS: tuple[str, ...] = tuple(o.field for o in OPTIONS if o.runner)
#: Flags in PlanError messages, as the plan screen labels its fields.
FORM_LABELS: dict[str, str] = {o.flag: o.form for o in OPTIONS if o.form}
#: The plan screen's drop-downs (plan field -> (label, choices)) and number fields (plan field -> label).
FORM_CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    o.field: (o.form or o.flag, o.choices) for o in OPTIONS if o.widget == "choice"
}
FORM_NUMBERS: dict[str, str] = {o.field: o.form or o.flag for o in OPTIONS if o.widget == "number"}


def add_plan_args(parser: argparse.ArgumentParser) -> None:
    """``benchtui run``'s plan flags, one argument group, in ``OPTIONS``'s order; then where this node
    stands among several (``NODE_OPTIONS``), a group of their own."""
    group = parser.add_argument_group(PLAN_GROUP_TITLE)
    for option in OPTIONS:
        option.add_to(group)
    nodes = parser.add_argument_group(NODES_GROUP_TITLE)
    for option in NODE_OPTIONS:
        option.add_to(nodes)


def given(args: argparse.Namespace, option: Option) -> bool:
    """Whether the command line gave ``option`` (a repeatable flag: at least once)."""
    return getattr(args, option.name, None) not in (None, [])


#: The default each policy gives a setting the user left unsaid, from the rest of the plan: inference is
#: measured by its latency, so every batch is waited for, on every framework (``--timing step``).
def timing_for(task: str) -> str:
    """The timing a plan of ``task`` gets when none is given."""
    return "step" if task == "inference" else "window"
