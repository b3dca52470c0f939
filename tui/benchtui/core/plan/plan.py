"""Benchmark plans: what to run, presets, validation, and the order of runs."""

from __future__ import annotations

import difflib
import math
import os
import re
import shlex
import sys
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from benchtui.core.fmt import clean
from benchtui.core.plan.errors import PlanError as PlanError  # raised here; imported from here too
from benchtui.core.plan.options import (
    CHOICES,
    INTERVAL,
    INTERVAL_RANGE,
    LIMITS,
    POSITIVE,
    PROFILE_STEPS,
    PROFILE_STEPS_RANGE,
    RUNNER_FIELDS,
    STALL_RANGE,
)
from benchtui.core.plan.sweep import NO_POINT, Point, parse_sweeps
from benchtui.core.plan.sweep import changes as point_changes
from benchtui.core.plan.sweep import effective as effective_point
from benchtui.core.plan.sweep import points as sweep_points
from benchtui.core.plan.sweep import read as read_sweep
from benchtui_runners import catalog
from benchtui_runners.config import OPTIMIZERS, RunConfig, usable_cores

if TYPE_CHECKING:
    from benchtui.core.plan.devices import Placement


#: What people call the frameworks, for the error that names the id benchtui takes.
FRAMEWORK_ALIASES = {
    "pytorch": "torch",
    "pt": "torch",
    "tf": "tensorflow",
    "tf.keras": "tensorflow",
    "tf-keras": "tensorflow",
    "keras": "tensorflow",
    "jax": "keras-jax",
    "keras_jax": "keras-jax",
    "keras_torch": "keras-torch",
}


def did_you_mean(word: str, choices: Any, aliases: dict[str, str] | None = None) -> str:
    """' (did you mean 'resnet50'?)' for a near miss of one of ``choices``, or ''."""
    hit = (aliases or {}).get(word.lower())
    if hit is None:
        close = difflib.get_close_matches(word.lower(), [str(c) for c in choices], n=1, cutoff=0.6)
        hit = close[0] if close else None
    return f" (did you mean {hit!r}?)" if hit else ""


DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d{1,3})?)$")
#: Most runs one plan may make (runs x frameworks x models x device counts): the study's is 42, all
#: 4 frameworks x 21 models x 100 runs is 8,400; a session of more would take seconds to load.
MAX_RUNS_IN_PLAN = 10_000
#: The most (framework, model, point) cells a plan's runs are counted over one by one (beyond: their product).
MAX_GRID = 100_000
MAX_NAME = 200
#: --task generate: prompt tokens and new tokens per sequence when the plan gives neither and the model's
#: context holds both (else half the context each; ``Plan.generate_lengths``).
GENERATE_DEFAULT = 128
#: The most nodes a plan may span (--nodes): beyond it a plan is a typo, not a cluster.
MAX_NODES = 1024
#: A run's raw trace is kept in the session's traces/ folder up to this size (MB); a larger one is dropped.
TRACE_CAP_MB = 200
TRACE_CAP_MAX_MB = 1 << 20  # MB: 1 TiB, a typo beyond
#: The one run of a ``benchtui watch`` session: no framework in its id (the command's hooks say which
#: it is only once it runs), so its events match it whatever the framework becomes.
WATCH_RUN = "001-watch"
#: The longest a watched command's label (the run's model label in every view) gets before it is cut.
WATCH_LABEL_MAX = 48


def _whole(value: Any, lo: int, hi: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def scale_words(at: Scale) -> str:
    """'2 nodes × 4 devices': where a run trains."""
    return f"{plural(at.nodes, 'node')} × {plural(at.devices, 'device')}"


def scale_list(points: list[Scale]) -> str:
    """'1 node × 1, 2 devices, then 2, 4 nodes × 2 devices': a plan's scale points, in run order, each run
    of points on one node count (or at one device count) said once."""
    parts: list[str] = []
    i = 0
    while i < len(points):
        at = points[i]
        if at.nodes == 1:  # 1 node at 1, 2, 4 ... devices
            devices = [p.devices for p in points[i:] if p.nodes == 1]
            parts.append(f"1 node × {', '.join(map(str, devices))} device{'s' if devices != [1] else ''}")
            i += len(devices)
        else:  # then 2, 4 ... nodes at the plan's devices
            nodes = [p.nodes for p in points[i:] if p.devices == at.devices and p.nodes > 1]
            parts.append(f"{', '.join(map(str, nodes))} nodes × {plural(at.devices, 'device')}")
            i += len(nodes)
    return ", then ".join(parts)


@dataclass
class Plan:
    """A benchmark session's protocol. Defaults are the study's."""

    frameworks: list[str] = field(default_factory=lambda: ["torch", "tensorflow"])
    models: list[str] = field(default_factory=lambda: list(catalog.STUDY_MODELS))
    image_size: int = 299
    task: str = "train"  # TASKS: training steps, or inference (forward only)
    seq_len: int = 0  # token models: tokens per sample (0: each model's context)
    # --task generate (issue 34): each sample a prompt of ``prompt_len`` tokens given exactly ``new_tokens``
    # more (0: the default for the plan's models, ``generate_lengths``); no key in a file of another task.
    prompt_len: int = 0
    new_tokens: int = 0
    samples: int = 10000
    epochs: int = 5
    runs: int = 3
    # model -> batch, or "framework:model" -> batch (after a per-framework search); missing: study's
    batch_sizes: dict[str, int] = field(default_factory=dict)
    batch_auto: bool = False  # search the largest batch that fits before the runs
    batch_policy: str = "min"  # auto: "min" across frameworks (the study's rule) or "per-framework"
    max_batch_size: int = 0  # auto: never probe above this (0: only --samples bounds it)
    device: str = "auto"
    data: str = "device"
    precision: str = "fp32"
    compile: str = "default"  # each framework's own default (Keras: jit_compile="auto"), or on / off
    timing: str = "window"  # one synchronisation per window of steps, or per step (on every framework)
    optimizer: str = "sgd"
    learning_rate: float = 0.0  # 0: the optimizer's default (SGD 0.01, Adam 1e-4)
    head: str = "softmax"  # softmax over num_classes, or the study's one sigmoid output
    shuffle: bool = False  # host data: a new order every epoch (the study shuffled)
    loader_workers: int = -1  # PyTorch host data: DataLoader workers (-1: min(4, usable cores))
    cudnn_autotune: bool = True
    channels_last: bool = False
    num_classes: int = 1000
    order: str = "interleaved"
    name: str = ""
    preset: str = ""
    python: dict[str, str] = field(default_factory=dict)  # framework -> interpreter
    interval: float = INTERVAL  # GPU sampling period, seconds
    memory_limit_mb: int = 0  # cap on each runner's address space (0: none)
    threads: int = 0  # CPU threads for every framework's ops (0: each framework's default)
    # Seconds without an event after which a runner is stopped as stalled (0: derived from the
    # run so far, see engine.stall_limit; -1: never).
    stall_timeout: float = 0.0
    # Data parallel through each framework's own engine: devices on this machine (a count, or the
    # GPUs' NVML indices in ``device_ids``); ``scaling``: every power of two up to ``devices`` as
    # well, in one session. Batch sizes are per device unless ``global_batch`` fixes the total.
    devices: int = 1
    device_ids: list[int] = field(default_factory=list)
    scaling: bool = False
    global_batch: int = 0  # strong scaling: this many samples a step, divided among the devices
    # Several machines (issue 33): the nodes every run trains on, ``devices`` on each (torchrun's c10d
    # rendezvous, MultiWorkerMirroredStrategy, jax.distributed). Where this process stands among them (its
    # node rank, the rendezvous address) is not the plan's: every node runs the same plan (``cluster.Cluster``).
    # With ``scaling``, the session also runs 1 node at 1, 2, 4 ... devices, then 2, 4 ... nodes at ``devices``.
    nodes: int = 1
    # --profile: after each run's timed epochs, ``profile_steps`` steps captured with the framework's
    # own profiler and reduced to where step time goes; raw traces up to ``trace_cap_mb`` are kept
    # in the session's traces/ folder. Benchmark runs only: never a batch-size probe or a count.
    profile: bool = False
    profile_steps: int = PROFILE_STEPS
    trace_cap_mb: int = TRACE_CAP_MB
    # A user's own models (``--model-def``, ``--model-file``): their definitions (plain data, checked by
    # ``catalog.check_definition``), registered in the catalog by name so ``models`` can name them.
    custom_models: list[dict[str, Any]] = field(default_factory=list)
    # ``benchtui watch``: {"command": [argv...] ([]: telemetry only), "cwd": the folder it ran in}; {} for a
    # benchmark plan. A watch plan has one run (``run_order``), of the catalog's WATCH_MODEL, by
    # WATCH_FRAMEWORK until the command's hooks name its framework; see ``watch_plan``.
    watch: dict[str, Any] = field(default_factory=dict)
    # --sweep AXIS=V1,V2 (and --best, the axis "settings"): axis -> its values in the order given, as
    # ``sweep.parse_sweeps`` keeps them; {}: no sweep (one point). See core/plan/sweep.py.
    sweep: dict[str, list[str]] = field(default_factory=dict)

    def points(self) -> list[Point]:
        """The sweep's points in run order; ``[Point()]`` for a plan without a sweep."""
        return sweep_points(self.sweep)

    def at(
        self, point: Point, framework: str = "", model: str = "", gpu: dict[str, Any] | None = None
    ) -> Plan:
        """This plan at ``point`` (a copy; itself when ``point`` is empty): what ``framework``'s ``model``
        runs with there (``sweep.changes``) on ``gpu`` (the placement's GPU identity; None: the CPU, or
        not known yet), which ``settings`` best reads."""
        return replace(self, **point_changes(point, self.models, framework, model, gpu)) if point else self

    def effective(self, point: Point, framework: str, model: str) -> Point:
        """The point whose runs measure ``point`` for this cell (``sweep.effective``)."""
        return effective_point(point, framework, model, self.sweep)

    def register_models(self) -> None:
        """Make the plan's own models known to the catalog (PlanError: a definition that cannot run)."""
        if not isinstance(self.custom_models, list):
            raise PlanError("the plan's custom_models are not a list of model definitions")
        for definition in self.custom_models:
            try:
                catalog.register(definition)
            except ValueError as exc:
                raise PlanError(str(exc)) from exc

    def model_def(self, model: str) -> dict[str, Any]:
        """A user's model's definition as the plan records it ({} for the catalog's models)."""
        return next((d for d in self.custom_models if isinstance(d, dict) and d.get("name") == model), {})

    def batch_size(
        self, model: str, framework: str | None = None, devices: int | None = None, nodes: int = 1
    ) -> int:
        """The per-device batch of ``model`` (at ``devices`` devices on each of ``nodes``; the plan's
        device count when None)."""
        if self.global_batch:
            return self.global_batch // ((devices or self.devices) * max(1, nodes))
        if framework is not None and f"{framework}:{model}" in self.batch_sizes:
            return self.batch_sizes[f"{framework}:{model}"]
        return self.batch_sizes.get(model, catalog.MODELS[model].study_batch_size)

    def device_counts(self) -> list[int]:
        """The device counts the session runs: the plan's, or with ``scaling`` 1, 2, 4, ... and it, or a
        ``devices`` sweep's (ascending; ``devices`` is then their largest)."""
        swept = self.sweep.get("devices") if isinstance(self.sweep, dict) else None
        if swept:
            return sorted({int(v) for v in swept})
        if not self.scaling:
            return [self.devices]
        counts, n = [], 1
        while n < self.devices:
            counts.append(n)
            n *= 2
        return [*counts, self.devices]

    def scale_points(self) -> list[Scale]:
        """The (nodes, devices per node) the session runs, in run order: the plan's own, or with
        ``scaling`` (or a ``devices`` sweep) every device count on one node, then 2, 4 ... nodes (and the
        plan's count) at the plan's devices. A plan on one node: its ``device_counts`` on one node."""
        counts = self.device_counts()
        if self.nodes <= 1:
            return [Scale(1, d) for d in counts]
        if not (self.scaling or len(counts) > 1):
            return [Scale(self.nodes, self.devices)]
        nodes, n = [], 2
        while n < self.nodes:
            nodes.append(n)
            n *= 2
        return [Scale(1, d) for d in counts] + [Scale(k, self.devices) for k in [*nodes, self.nodes]]

    @property
    def multi_device(self) -> bool:
        return self.devices > 1 or self.nodes > 1 or self.scaling or len(self.device_counts()) > 1

    def batch_upper(self) -> int:
        """The largest batch the auto search may probe."""
        return min(self.samples, self.max_batch_size) if self.max_batch_size else self.samples

    def python_for(self, framework: str) -> str:
        """``--python``, else the framework's own environment (``benchtui envs create``), else this Python."""
        from benchtui.core.plan.envs import interpreter

        return self.python.get(framework) or interpreter(framework) or sys.executable

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.sweep:  # a plan without a sweep is recorded as before sweeps were
            del data["sweep"]
        if self.nodes == 1:  # a plan on one machine likewise, as before several nodes
            del data["nodes"]
        if self.task != "generate":  # and a plan that does not generate, as before generation
            del data["prompt_len"], data["new_tokens"]
        if self.watch:  # only what the command's hooks said (none: no batch size is known)
            return data
        data["batch_sizes"] = {
            **{m: self.batch_size(m) for m in self.models},
            **{k: v for k, v in self.batch_sizes.items() if ":" in k},
        }
        return data

    @property
    def lr(self) -> float:
        """The learning rate the runs use: the plan's, or the optimizer's default."""
        return self.learning_rate or OPTIMIZERS.get(self.optimizer, 0.01)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        known = set(cls.__dataclass_fields__)
        plan = cls(**{k: v for k, v in data.items() if k in known})
        if isinstance(plan.compile, bool):  # sessions before benchtui 0.3: compile was on or off
            plan.compile = "on" if plan.compile else "off"
        # A file's devices are read, never trusted: anything else is one device (the older sessions').
        if not _whole(plan.devices, 1, LIMITS["--devices"][1]):
            plan.devices = 1
        if not isinstance(plan.scaling, bool):
            plan.scaling = False
        if not _whole(plan.nodes, 1, MAX_NODES):
            plan.nodes = 1
        if not _whole(plan.global_batch, 0, LIMITS["--global-batch"][1]) or (
            plan.global_batch and any(plan.global_batch % n for n in plan.device_counts())
        ):
            plan.global_batch = 0
        if not isinstance(plan.device_ids, list) or not all(_whole(i, 0, 1 << 20) for i in plan.device_ids):
            plan.device_ids = []
        # Generation's lengths, likewise (sessions before --task generate have none: 0, the default).
        for name in ("prompt_len", "new_tokens"):
            if not _whole(getattr(plan, name), 0, LIMITS["--" + name.replace("_", "-")][1]):
                setattr(plan, name, 0)
        # Profiling, likewise (sessions before --profile have none of these: no profile).
        if not isinstance(plan.profile, bool):
            plan.profile = False
        if not _whole(plan.profile_steps, *PROFILE_STEPS_RANGE):
            plan.profile_steps = PROFILE_STEPS
        if not _whole(plan.trace_cap_mb, 1, TRACE_CAP_MAX_MB):
            plan.trace_cap_mb = TRACE_CAP_MB
        # A user's own models: registered so their names mean something; one that this version cannot
        # read is left out (the session's check then names the model it does not know).
        if not isinstance(plan.custom_models, list):
            plan.custom_models = []
        for definition in list(plan.custom_models):
            try:
                catalog.register(definition)
            except ValueError:
                plan.custom_models.remove(definition)
        # A sweep, read as --sweep reads it (a file's sweep that it would refuse is none: one point).
        plan.sweep = read_sweep(plan.sweep)
        # A watch session's command, read defensively (a hand edit): a list of words and a folder.
        if not isinstance(plan.watch, dict):
            plan.watch = {}
        if plan.watch:
            command = plan.watch.get("command")
            plan.watch = {
                "command": [str(word) for word in command] if isinstance(command, list) else [],
                "cwd": str(plan.watch.get("cwd") or ""),
            }
            catalog.label_watch(watch_label(plan.watch))
        return plan

    def run_config(
        self, framework: str, model: str, run_id: str, devices: int = 0, nodes: int = 1
    ) -> RunConfig:
        """The runner's configuration as the plan alone decides it: every option a runner takes as it is
        (``options.RUNNER_FIELDS``), and what the plan works out per run. Where the run goes, and the CPU
        threads a plan left to benchtui, are the resolved plan's (``Resolved.run_config``). ``nodes``: the
        machines the run trains on (which one this is, and where they meet: ``cluster``)."""
        devices = devices or self.devices
        prompt_len, new_tokens = self.generate_lengths(model)
        runner = {name: getattr(self, name) for name in RUNNER_FIELDS}
        runner.update(prompt_len=prompt_len, new_tokens=new_tokens)
        return RunConfig(
            framework=framework,
            model=model,
            run_id=run_id,
            batch_size=self.batch_size(model, framework, devices, nodes),
            replicas=devices,
            nodes=nodes,
            learning_rate=self.lr,
            trace_cap_mb=self.trace_cap_mb,
            model_def=self.model_def(model),
            **runner,
        )

    def generate_lengths(self, model: str) -> tuple[int, int]:
        """``--task generate``: (prompt tokens, new tokens) of ``model``'s sequences: the plan's, else 128 and
        128 where the context holds them, else half the context each (a length given, the other fills up to
        128 of what the context leaves). (0, 0) for another task."""
        if self.task != "generate":
            return 0, 0
        info = catalog.MODELS.get(model)
        context = info.context if info is not None and info.context else GENERATE_DEFAULT * 2
        prompt, new = self.prompt_len, self.new_tokens
        if not prompt and not new:
            if 2 * GENERATE_DEFAULT <= context:
                return GENERATE_DEFAULT, GENERATE_DEFAULT
            return context // 2, context // 2
        if not prompt:
            prompt = max(1, min(GENERATE_DEFAULT, context - new))
        if not new:
            new = max(1, min(GENERATE_DEFAULT, context - prompt))
        return prompt, new

    def resolve(
        self,
        placement: Placement,
        measured: dict[str, Any] | None = None,
        batch_sizes: dict[str, int] | None = None,
        point_batches: dict[tuple[str, str, str], int] | None = None,
    ) -> Resolved:
        """This plan as it runs here (``Resolved``): on ``placement``, with the CPU threads the idle cores
        ``measured`` give, and the batch sizes a search chose (model, or "framework:model" -> size) over
        its own, and at sweep points (``Resolved.point_batches``); the plan itself is unchanged."""
        plan = replace(self, batch_sizes={**self.batch_sizes, **batch_sizes}) if batch_sizes else self
        return Resolved(plan, placement, measured, dict(point_batches or {}))

    def _validate_devices(self) -> None:
        """--devices, --scaling and --global-batch: what can be checked without the machine."""
        n = self.devices
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise PlanError(f"--devices must be a positive whole number or a list of GPU indices, got {n!r}")
        ids = self.device_ids
        if ids:
            if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids):
                raise PlanError(f"--devices lists GPU indices (0, 1, ...), got {ids!r}")
            twice = sorted({i for i in ids if ids.count(i) > 1})
            if twice:
                raise PlanError(f"--devices names GPU {', '.join(map(str, twice))} twice: each device once")
            if len(ids) != n:
                raise PlanError(f"--devices lists {len(ids)} GPU(s) but asks for {n}")
            if self.device == "cpu":
                raise PlanError("--devices lists GPUs, and --device cpu hides them: give a count on the CPU")
        if not _whole(self.nodes, 1, MAX_NODES):
            raise PlanError(f"--nodes must be a whole number from 1 to {MAX_NODES}, got {self.nodes!r}")
        if self.scaling and n < 2 and self.nodes < 2:
            raise PlanError(
                "--scaling measures 1, 2, 4 ... N devices: give --devices N (or --nodes N) with N of at least 2"
            )
        if not isinstance(self.global_batch, int) or self.global_batch < 0:
            raise PlanError(f"--global-batch must be a positive whole number, got {self.global_batch!r}")
        if self.global_batch:
            if self.batch_auto:
                raise PlanError("--global-batch fixes the batch: it cannot go with --batch-size auto")
            points = self.scale_points()
            for at in sorted({at.workers: at for at in points}.values(), key=lambda at: at.workers):
                if self.global_batch % at.workers == 0:
                    continue
                if self.nodes > 1:
                    raise PlanError(
                        f"--global-batch {self.global_batch} does not divide among {at.workers} devices "
                        f"({scale_words(at)}): choose a multiple of every count the runs train on"
                        + (f" ({scale_list(points)})" if len(points) > 1 else "")
                    )
                raise PlanError(
                    f"--global-batch {self.global_batch} does not divide among {at.workers} devices: "
                    "choose a multiple of every device count"
                    + (" (the scaling runs 1, 2, 4 ... N)" if self.scaling else "")
                )
        if self.nodes > 1:
            self._validate_nodes()
        if n == 1 and not self.scaling:
            return
        if isinstance(self.device, str) and ":" in self.device:
            raise PlanError(
                f"--device {self.device} picks one GPU; with --devices list the GPUs instead (--devices 0,1)"
            )
        if self.task != "train":
            raise PlanError("--devices measures data-parallel training: --task inference runs on one device")
        if self.batch_auto:
            raise PlanError(
                "--batch-size auto searches one device: with --devices give the per-device batch "
                "(--batch-size N) or the total (--global-batch N)"
            )
        if "keras-torch" in self.frameworks:
            raise PlanError(
                "keras-torch cannot train data parallel: Keras 3's keras.distribution runs on JAX only "
                "(use torch for DDP, keras-jax or tensorflow for Keras)"
            )

    def _validate_nodes(self) -> None:
        """What a plan across several machines cannot measure, one line each: what searches or profiles one
        device on one machine, what no multi-node engine runs, and a devices sweep (``--scaling`` is the
        sweep across nodes)."""
        across = f"across --nodes {self.nodes}"
        if self.task != "train":
            raise PlanError("--nodes measures data-parallel training: --task inference runs on one device")
        if "keras-torch" in self.frameworks:
            raise PlanError(
                "keras-torch cannot train across nodes: Keras 3's keras.distribution runs on JAX only "
                "(use torch for DDP, keras-jax or tensorflow for Keras)"
            )
        if "tensorflow" in self.frameworks and self.device == "cpu" and self.devices > 1:
            raise PlanError(
                f"tensorflow on the CPU trains one replica a node {across}: MultiWorkerMirroredStrategy takes one "
                "CPU device per worker (give --devices 1, or leave tensorflow out)"
            )
        if self.batch_auto:
            raise PlanError(
                f"--batch-size auto searches one device on one machine: {across} give the per-device batch "
                "(--batch-size N) or the total (--global-batch N)"
            )
        sweep = self.sweep if isinstance(self.sweep, dict) else {}
        if "settings" in sweep:
            raise PlanError(
                "--best searches each framework's largest batch on one device: run it on one machine "
                "(without --nodes)"
            )
        if "auto" in [str(v) for v in sweep.get("batch", [])]:
            raise PlanError(
                f"--sweep batch auto searches one device on one machine: {across} sweep numbers of samples "
                "per device"
            )
        if "devices" in sweep:
            raise PlanError(
                f"--sweep devices runs on one machine: {across} use --scaling (1 node at 1, 2, 4 ... "
                "devices, then 2, 4 ... nodes)"
            )
        if self.profile:
            raise PlanError(
                "--profile keeps each run's traces on the machine that made them: profile on one machine "
                "(without --nodes)"
            )

    def validate(self) -> Plan:
        """Raise PlanError with one clear line if anything is off; return self."""
        if self.watch:
            return self._validate_watch()
        if not self.frameworks:
            raise PlanError("no framework chosen")
        for fw in self.frameworks:
            if fw not in catalog.FRAMEWORKS:
                raise PlanError(
                    f"unknown framework {fw!r}{did_you_mean(fw, catalog.FRAMEWORKS, FRAMEWORK_ALIASES)}; "
                    f"choose from {', '.join(catalog.FRAMEWORKS)}"
                )
        if not self.models:
            raise PlanError("no model chosen")
        # A repeat would run under the same run ids twice, and compare a framework with itself.
        for flag, names, what in (
            ("--frameworks", self.frameworks, "framework"),
            ("--models", self.models, "model"),
        ):
            twice = repeated(names)
            if twice is not None:
                raise PlanError(f"{flag} names {twice!r} twice: each {what} once")
        self.register_models()
        for model in self.models:
            if model == catalog.WATCH_MODEL:
                raise PlanError(
                    f"{model!r} is how benchtui watch records a command, not a model to train: "
                    "run benchtui watch -- COMMAND"
                )
            if model not in catalog.MODELS:
                known = [m for m in catalog.MODELS if m != catalog.WATCH_MODEL]
                raise PlanError(
                    f"unknown model {model!r}{did_you_mean(model, [*known, *catalog.MODEL_GROUPS])}; "
                    f"choose from {', '.join(known)} "
                    f"(or {', '.join(catalog.MODEL_GROUPS)})"
                )
        for option in CHOICES:
            value = getattr(self, option.field)
            if value not in option.choices:
                raise PlanError(f"{option.flag} must be {option.must_be()}, got {value!r}")
        if not isinstance(self.seq_len, int) or isinstance(self.seq_len, bool) or self.seq_len < 0:
            raise PlanError(f"--seq-len must be a positive whole number, got {self.seq_len!r}")
        for label, name in POSITIVE:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise PlanError(f"{label} must be a positive whole number, got {value!r}")
        if not isinstance(self.threads, int) or self.threads < 0:
            raise PlanError(f"--threads must be a whole number (0: framework default), got {self.threads!r}")
        if not isinstance(self.memory_limit_mb, int) or self.memory_limit_mb < 0:
            raise PlanError(f"--memory-limit must be a whole number of MB, got {self.memory_limit_mb!r}")
        for label, (name, most) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, int) and value > most:
                raise PlanError(f"{label} must be at most {most:,}, got {value:,}")
        self._validate_generate()
        self._validate_devices()
        self._validate_sweep()
        total = len(self.frameworks) * len(self.models) * self.runs * len(self.scale_points())
        if self.sweep:
            grid = math.prod(len(vs) for a, vs in self.sweep.items() if a != "devices")
            cells = grid * len(self.frameworks) * len(self.models)
            total = self.run_count() if cells <= MAX_GRID else total * grid  # too many to list: their product
        if total > MAX_RUNS_IN_PLAN:
            raise PlanError(
                f"the plan has {total:,} runs "
                f"(at most {MAX_RUNS_IN_PLAN:,}): fewer --runs, models"
                + (", frameworks or sweep values" if self.sweep else " or frameworks")
            )
        self._validate_interval_and_name()
        lo, hi = STALL_RANGE
        stall = self.stall_timeout
        if not isinstance(stall, (int, float)) or not (stall in (0, -1) or lo <= stall <= hi):
            raise PlanError(
                f"--stall-timeout must be auto, off or between {lo:g} and {hi:g} seconds, got {stall!r}"
            )
        for key, size in self.batch_sizes.items():
            fw, _, model = key.rpartition(":")
            if model not in catalog.MODELS or (fw and fw not in catalog.FRAMEWORKS):
                raise PlanError(f"--batch-size names unknown model {key!r}")
            if not isinstance(size, int) or size <= 0 or size > LIMITS["--samples"][1]:
                raise PlanError(f"--batch-size for {model} must be a positive whole number")
        if not isinstance(self.max_batch_size, int) or self.max_batch_size < 0:
            raise PlanError(f"--max-batch-size must be a positive whole number, got {self.max_batch_size!r}")
        widest = max(self.scale_points(), key=lambda at: at.workers)  # the most devices a run trains on
        for model in self.models:
            info = catalog.MODELS[model]
            most = widest.workers
            if (
                not self.batch_auto
                and "batch" not in self.sweep
                and self.batch_size(model, devices=most) * most > self.samples
            ):
                on = f"{most} devices" if self.nodes == 1 else scale_words(widest)
                what = (
                    f"batch size {self.batch_size(model)}"
                    if most == 1
                    else (f"the global batch {self.batch_size(model, devices=most) * most} ({on})")
                )
                raise PlanError(f"{what} for {model} is larger than --samples {self.samples}")
            if info.group == "custom" and not any(catalog.available(fw, model)[0] for fw in self.frameworks):
                raise PlanError(
                    f"{info.label} has no builder for {', '.join(self.frameworks)}: give --model-def "
                    f"{self.frameworks[0]}=MODULE:FUNCTION"
                )
            if info.kind == "tokens":
                if self.seq_len > info.context:
                    raise PlanError(
                        f"{info.label} has a context of {info.context:,} tokens: --seq-len {self.seq_len:,} "
                        "is longer"
                    )
                continue
            if info.kind == "tensor":
                continue
            if self.image_size < info.min_image_size:
                raise PlanError(
                    f"{info.label} needs --image-size of at least {info.min_image_size}, "
                    f"got {self.image_size}"
                )
            if info.patch_size and self.image_size % info.patch_size:
                raise PlanError(
                    f"{info.label} cuts images into {info.patch_size}-pixel patches: --image-size must be "
                    f"a multiple of {info.patch_size}, got {self.image_size}"
                )
        if not DEVICE_RE.match(self.device):
            raise PlanError(f"--device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if not isinstance(self.learning_rate, (int, float)) or not 0 <= self.learning_rate < 1e3:
            raise PlanError(f"--learning-rate must be a positive number, got {self.learning_rate!r}")
        if not isinstance(self.loader_workers, int) or self.loader_workers < -1:
            raise PlanError(
                f"--loader-workers must be a whole number of at least 0, got {self.loader_workers!r}"
            )
        for fw in self.python:
            if fw not in catalog.FRAMEWORKS:
                raise PlanError(f"--python names unknown framework {fw!r}")
        self._validate_profile()
        return self

    def _validate_generate(self) -> None:
        """--task generate (issue 34), and --prompt-len / --new-tokens: one line each for what it cannot do."""
        for flag, name in (("--prompt-len", "prompt_len"), ("--new-tokens", "new_tokens")):
            value = getattr(self, name)
            if not _whole(value, 0, LIMITS[flag][1]):
                raise PlanError(f"{flag} must be a positive whole number, got {value!r}")
        if self.task != "generate":
            if self.prompt_len or self.new_tokens:
                flag = "--prompt-len" if self.prompt_len else "--new-tokens"
                raise PlanError(f"{flag} sets the sequences --task generate decodes: add --task generate")
            return
        if self.seq_len:
            raise PlanError(
                "--seq-len sets tokens per sample of training and inference: with --task generate the prompt "
                "length is --prompt-len (and --new-tokens the tokens generated)"
            )
        for model in self.models:
            info = catalog.MODELS[model]
            if info.kind != "tokens":
                raise PlanError(
                    f"--task generate decodes tokens: {info.label} takes {info.kind}s, not tokens (choose a "
                    "token model: gpt2, gpt2_mini, or your own with --model-input tokens:VOCAB:SEQ_LEN)"
                )
            prompt, new = self.generate_lengths(model)
            if prompt + new > info.context:
                raise PlanError(
                    f"{info.label} has a context of {info.context:,} tokens: a prompt of {prompt:,} and "
                    f"{new:,} new tokens ({prompt + new:,}) is a prompt longer than the context"
                )
        sweep = self.sweep if isinstance(self.sweep, dict) else {}
        if self.multi_device:
            what = "--nodes" if self.nodes > 1 else "--devices"
            what = "--sweep devices" if "devices" in sweep else ("--scaling" if self.scaling else what)
            raise PlanError(f"--task generate runs on one device: drop {what}")
        if self.profile:
            raise PlanError(
                "--profile reduces training and inference steps: --task generate has no profile (drop --profile)"
            )
        if self.batch_auto:
            raise PlanError(
                "--batch-size auto searches the largest training batch: with --task generate give the "
                "sequences per call (--batch-size N)"
            )
        if "settings" in sweep:
            raise PlanError(
                "--best searches each framework's largest batch: it cannot go with --task generate"
            )
        if "auto" in [str(v) for v in sweep.get("batch", [])]:
            raise PlanError(
                "--sweep batch auto searches the largest batch: with --task generate sweep numbers"
            )
        for axis in ("devices", "seq-len"):
            if axis in sweep:
                instead = "runs on one device" if axis == "devices" else "takes --prompt-len, not a seq-len"
                raise PlanError(f"--sweep {axis} cannot go with --task generate: it {instead}")

    def run_count(self) -> int:
        """How many runs the plan makes (``run_order``'s length, counted without listing them): a sweep's
        points for each framework's model, less those whose axes change nothing for it (``effective``)."""
        grid = self.points()
        cells = sum(
            1 for m in self.models for fw in self.frameworks for p in grid if self.effective(p, fw, m) == p
        )
        return cells * self.runs * len(self.scale_points())

    def _validate_sweep(self) -> None:
        """--sweep and --best: the axes and values as ``parse_sweeps`` takes them, and what they cannot go
        with in this plan (one line each). The flags a sweep replaces (--precision with --sweep precision)
        are the command line's to refuse: a plan cannot tell a flag from a preset's value."""
        if not isinstance(self.sweep, dict) or not all(
            isinstance(a, str) and isinstance(vs, list) for a, vs in self.sweep.items()
        ):
            raise PlanError("the plan's sweep must map each axis to a list of its values")
        if not self.sweep:
            return
        self.sweep = parse_sweeps(f"{a}={','.join(str(v) for v in vs)}" for a, vs in self.sweep.items())
        sweep = self.sweep
        axes = list(sweep)
        if "devices" in sweep:
            others = [a for a in axes if a != "devices"]
            if others:
                raise PlanError(
                    f"--sweep devices is a scaling session and goes alone: drop --sweep {others[0]}"
                )
            most = max(int(v) for v in sweep["devices"])
            if self.devices != most:
                raise PlanError(
                    f"--sweep devices runs up to {most} devices: --devices {self.devices} says otherwise"
                )
        if "settings" in sweep:
            for axis in ("precision", "compile", "channels-last", "batch"):
                if axis in sweep:
                    chooses = (
                        "each framework's largest batch"
                        if axis == "batch"
                        else "precision, compile and channels-last per framework"
                    )
                    raise PlanError(f"--best chooses {chooses}: drop --sweep {axis} (or --best)")
            if self.multi_device:
                raise PlanError("--best searches the largest batch on one device: run it without --devices")
            if self.global_batch:
                raise PlanError(
                    "--best searches each framework's largest batch; --global-batch fixes it: give one"
                )
        batches = sweep.get("batch", [])
        if batches:
            if self.global_batch:
                raise PlanError("--global-batch fixes the batch: it cannot go with --sweep batch")
            if "auto" in batches and self.multi_device:
                raise PlanError(
                    "--sweep batch auto searches one device: with --devices sweep numbers of samples per device"
                )
            widest = max(self.scale_points(), key=lambda at: at.workers)
            most = widest.workers
            for value in batches:
                if value.isdigit() and int(value) * most > self.samples:
                    on = f"{most} devices" if self.nodes == 1 else scale_words(widest)
                    what = f"batch {value}" if most == 1 else f"batch {value} on {on} ({int(value) * most})"
                    raise PlanError(f"--sweep {what} is larger than --samples {self.samples}")
        infos = [catalog.MODELS[m] for m in self.models]
        if "seq-len" in sweep:
            tokens = [info for info in infos if info.kind == "tokens"]
            if not tokens:
                raise PlanError(
                    "--sweep seq-len sets tokens per sample: none of the plan's models takes tokens"
                )
            for info in tokens:
                longest = max(int(v) for v in sweep["seq-len"])
                if longest > info.context:
                    raise PlanError(
                        f"{info.label} has a context of {info.context:,} tokens: --sweep seq-len {longest:,} "
                        "is longer"
                    )
        if "channels-last" in sweep:
            if not any(catalog.family(fw) == "torch" for fw in self.frameworks):
                raise PlanError(
                    "--sweep channels-last changes nothing here: it is PyTorch's layout, and Keras is "
                    "channels-last at every setting (add torch to --frameworks)"
                )
            if not any(info.kind == "image" for info in infos):
                raise PlanError(
                    "--sweep channels-last changes nothing here: it is a layout of images, and none of the "
                    "plan's models takes images"
                )

    def _validate_interval_and_name(self) -> None:
        lo, hi = INTERVAL_RANGE
        if not isinstance(self.interval, (int, float)) or not lo <= self.interval <= hi:
            raise PlanError(f"--interval must be between {lo} and {hi:g} seconds, got {self.interval!r}")
        if not isinstance(self.name, str) or len(self.name) > MAX_NAME:
            raise PlanError(f"--name must be at most {MAX_NAME} characters")
        if clean(self.name) != self.name:  # what a terminal would show differently
            raise PlanError("--name must not contain control characters")

    def _validate_watch(self) -> Plan:
        """A ``benchtui watch`` plan: one framework (WATCH_FRAMEWORK, or the one the hooks named), the
        watch model, a command as a list of words, the folder it runs in, and the sampling settings."""
        command, cwd = self.watch.get("command"), self.watch.get("cwd")
        if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
            raise PlanError("the watched command must be a list of words")
        if command and not command[0]:
            raise PlanError("the watched command has no program name")
        if not isinstance(cwd, str) or not cwd:
            raise PlanError("the watched command needs the folder it runs in")
        known = (*catalog.FRAMEWORKS, catalog.WATCH_FRAMEWORK)
        if len(self.frameworks) != 1 or self.frameworks[0] not in known:
            raise PlanError(
                f"a watch has one framework, {catalog.WATCH_FRAMEWORK!r} until its hooks name theirs"
            )
        if self.models != [catalog.WATCH_MODEL] or self.runs != 1:
            raise PlanError(f"a watch has one run, of the model {catalog.WATCH_MODEL!r}")
        self._validate_interval_and_name()
        return self

    def _validate_profile(self) -> None:
        if not isinstance(self.profile, bool):
            raise PlanError(f"--profile is on or off, got {self.profile!r}")
        lo, hi = PROFILE_STEPS_RANGE
        if not _whole(self.profile_steps, lo, hi):
            raise PlanError(
                f"--profile-steps must be a whole number from {lo} to {hi}, got {self.profile_steps!r}"
            )
        if not _whole(self.trace_cap_mb, 1, TRACE_CAP_MAX_MB):
            raise PlanError(
                f"the trace cap must be a whole number of MB from 1 to {TRACE_CAP_MAX_MB:,}, "
                f"got {self.trace_cap_mb!r}"
            )


@dataclass(frozen=True)
class RunSpec:
    """One runner process to start (on each of its ``nodes``)."""

    run_id: str
    framework: str
    model: str
    index: int  # 1-based run number within its (framework, model, nodes, devices, point)
    devices: int = 1  # data-parallel devices (replicas) the run trains on, on each node
    point: Point = NO_POINT  # its sweep point (``Point()``: a plan without a sweep)
    nodes: int = 1  # the machines it trains on (node 0 records; the others follow: ``cluster``)

    @property
    def workers(self) -> int:
        """Replicas over every node: what a scaling curve is drawn against."""
        return self.devices * self.nodes


@dataclass(frozen=True, order=True)
class Scale:
    """Where a data-parallel run trains: ``nodes`` machines with ``devices`` devices each."""

    nodes: int
    devices: int

    @property
    def workers(self) -> int:
        return self.nodes * self.devices


# -- a plan resolved for this machine: the policies that need the machine, applied once before the runs --
# ``Plan.resolve`` gives a ``Resolved``: where every run goes (the placement, from the GPUs this job was
# given), the CPU threads every framework gets when the plan leaves them to benchtui (the idle cores
# measured once), and the batch sizes ``--batch-size auto`` chose. Each run's configuration is read from
# it (``Resolved.run_config``); the plan itself is never changed. What it resolved is recorded in
# session.json as before: ``placement``, ``cpu_threads``, and the plan with its chosen sizes. The policies
# a person's flags decide (``--timing``'s default from the task, the learning rate from the optimizer)
# are the plan's own (``options.timing_for``, ``Plan.lr``): they need no machine.
@dataclass(frozen=True)
class Resolved:
    """A plan as it runs here. ``plan``: the plan with the batch sizes the search chose (a copy; the
    user's plan as it was when none was searched); ``placement``: where the runs go; ``measured``: the
    idle cores measured before the first run (``threads.measure_idle``; None where none was)."""

    plan: Plan
    placement: Placement
    measured: dict[str, Any] | None = None
    #: The sizes the batch search chose at sweep points (an ``auto`` batch there): (framework, model,
    #: point key) -> size. A plan without a sweep keeps its choice in ``plan.batch_sizes``, as before.
    point_batches: dict[tuple[str, str, str], int] = field(default_factory=dict)

    @property
    def gpu(self) -> dict[str, Any] | None:
        """The GPU the runs go to, as ``sweep.best_settings`` reads it (None: the CPU; {} a GPU NVML did
        not describe, of unknown compute capability)."""
        return None if self.placement.runner_device == "cpu" else dict(self.placement.gpu or {})

    def at(self, point: Point, framework: str, model: str) -> Plan:
        """The plan ``framework``'s ``model`` runs with at ``point`` here: ``Plan.at`` on this GPU, with the
        batch the search chose for that point."""
        plan = self.plan.at(point, framework, model, self.gpu)
        size = self.point_batches.get((framework, model, point.key)) if point else None
        if size is not None:
            plan = replace(plan, batch_sizes={**plan.batch_sizes, f"{framework}:{model}": size})
        return plan

    @property
    def cpu_threads(self) -> int:
        """The threads every framework gets on a CPU when the plan names none: the cores other processes
        left idle when the session started, else the cores this process may use."""
        return int(self.measured["threads"]) if self.measured is not None else usable_cores()

    def threads(self, framework: str, devices: int) -> int:
        """The CPU threads of a run of ``framework`` on ``devices`` devices (0: the framework's own).

        On a CPU every framework gets the same pool: left to themselves the frameworks size it
        differently (TensorFlow per logical core, PyTorch per physical one), and the comparison would
        measure that choice; a pool larger than the idle cores stalls on a busy machine. On a GPU each
        keeps its own. PyTorch data parallel is one process per rank: the same cores shared among them
        (TensorFlow's and JAX's replicas share one process's pool).
        """
        if self.plan.threads or self.placement.runner_device != "cpu":
            return self.plan.threads
        if devices > 1 and catalog.family(framework) == "torch":
            return max(1, self.cpu_threads // devices)
        return self.cpu_threads

    def run_config(
        self,
        framework: str,
        model: str,
        run_id: str,
        devices: int = 1,
        point: Point = NO_POINT,
        nodes: int = 1,
    ) -> tuple[RunConfig, dict[str, str]]:
        """The run's configuration on the session's device (its first ``devices`` when data parallel) at
        its sweep ``point``, on ``nodes`` machines, and the environment that gives the runner exactly those
        (this machine's: on several nodes each sets its own ``node_rank`` and meeting point, ``cluster``)."""
        config = self.at(point, framework, model).run_config(framework, model, run_id, devices, nodes)
        env, gpus = self.placement.for_devices(devices)
        config.device, config.gpu = self.placement.runner_device, self.placement.gpu
        if devices > 1 and gpus:
            config.gpus = gpus
        config.threads = self.threads(framework, devices)
        return config, env


def run_order(plan: Plan) -> list[RunSpec]:
    """The runs of a plan, in the order they start.

    interleaved: per model, runs alternate between frameworks (torch, tensorflow,
    torch, ...) so drift in clocks or temperature falls on both. grouped: the
    study's order, all runs of one framework, then the next. A watch plan has one run, WATCH_RUN.
    """
    if plan.watch:
        framework = plan.frameworks[0] if plan.frameworks else catalog.WATCH_FRAMEWORK
        return [RunSpec(WATCH_RUN, framework, catalog.WATCH_MODEL, 1)]
    specs: list[tuple[str, str, Scale, Point, int]] = []
    counts = plan.scale_points()
    grid = plan.points()
    for model in plan.models:
        # A point a framework's model runs at: one whose every axis changes something for it (the others'
        # cells read the runs of their ``effective`` point).
        runs_at = {fw: [p for p in grid if plan.effective(p, fw, model) == p] for fw in plan.frameworks}
        for d in counts:  # a scaling session: every count of a model before the next model
            if plan.order == "interleaved":  # runs alternate between frameworks, and between points
                specs += [
                    (fw, model, d, p, i)
                    for i in range(1, plan.runs + 1)
                    for p in grid
                    for fw in plan.frameworks
                    if p in runs_at[fw]
                ]
            else:
                specs += [
                    (fw, model, d, p, i)
                    for fw in plan.frameworks
                    for p in runs_at[fw]
                    for i in range(1, plan.runs + 1)
                ]
    tag = plan.multi_device

    def scale_tag(at: Scale) -> str:
        """``x2-`` (devices), ``n2x1-`` (nodes x devices, a plan on several nodes), '' for one device."""
        if not tag:
            return ""
        return f"n{at.nodes}x{at.devices}-" if plan.nodes > 1 else f"x{at.devices}-"

    return [
        RunSpec(
            f"{n:03d}-{fw}-{model}-{scale_tag(d)}{f'{p.tag}-' if p else ''}{i}",
            fw,
            model,
            i,
            d.devices,
            p,
            d.nodes,
        )
        for n, (fw, model, d, p, i) in enumerate(specs, 1)
    ]


PRESETS: dict[str, dict[str, Any]] = {
    # The 2019 study's scripts (Wrosinski/dl_frameworks_benchmark): seven models, 299 px, 10k
    # samples, 5 epochs, 3 runs, the study's batch sizes, runs grouped by framework; Adam with
    # lr 1e-4, one sigmoid output with binary cross-entropy, a NumPy array in host memory fed
    # by Keras's model.fit and by a shuffled PyTorch DataLoader (4 workers, pinned memory).
    "study": {
        "frameworks": ["torch", "tensorflow"],
        "models": list(catalog.STUDY_MODELS),
        "image_size": 299,
        "samples": 10000,
        "epochs": 5,
        "runs": 3,
        "batch_sizes": {},
        "data": "host",
        "order": "grouped",
        "optimizer": "adam",
        "learning_rate": 1e-4,
        "head": "sigmoid",
        "shuffle": True,
        "loader_workers": 4,
    },
    # Minutes on a CPU-only machine (estimate.preset_words says how many from its idle cores): both
    # frameworks, two small runs of ResNet50 v1.5, the one network built the same on both sides (the
    # catalog's "resnet50" differs: Keras's puts the stride in the first 1x1 convolution of a block).
    "quick": {
        "frameworks": ["torch", "tensorflow"],
        "models": ["resnet50_v1_5"],
        "image_size": 64,
        "samples": 64,
        "epochs": 3,
        "runs": 2,
        "batch_sizes": {"resnet50_v1_5": 16},
        "device": "auto",
        "data": "device",
    },
    # The networks people train today, sized to finish in minutes on one GPU: a compact CNN, a
    # ConvNeXt, a vision transformer at 224 px and GPT-2 small over its whole 1024-token context.
    "modern": {
        "frameworks": ["torch", "tensorflow"],
        "models": ["efficientnet_b0", "convnext_tiny", "vit_b_16", "gpt2"],
        "image_size": 224,
        "seq_len": 0,
        "samples": 1024,
        "epochs": 3,
        "runs": 2,
        "batch_sizes": {"efficientnet_b0": 64, "convnext_tiny": 64, "vit_b_16": 64, "gpt2": 8},
        "data": "device",
    },
    # The same kinds of network, sized for a CPU (a few minutes on 2 cores): ViT-Ti for ViT-B, the
    # 4-layer GPT-2 for GPT-2 small, small images and sequences.
    "modern-cpu": {
        "frameworks": ["torch", "tensorflow"],
        "models": ["efficientnet_b0", "convnext_tiny", "vit_ti_16", "gpt2_mini"],
        "image_size": 64,
        "seq_len": 64,
        "samples": 32,
        "epochs": 2,
        "runs": 1,
        "batch_sizes": {"efficientnet_b0": 8, "convnext_tiny": 8, "vit_ti_16": 8, "gpt2_mini": 8},
        "device": "auto",
        "data": "device",
    },
}


def repeated(names: list[Any]) -> str | None:
    """The first name that ``names`` holds twice (None when each is there once)."""
    seen: set[str] = set()
    for name in names:
        if isinstance(name, str):  # anything else is refused by the checks of what it names
            if name in seen:
                return name
            seen.add(name)
    return None


def models_named(names: list[str]) -> list[str]:
    """``--models``: model ids, and group names (all, study, modern) expanded in place, a model a group
    shares with another name once (PlanError: a name given twice)."""
    twice = repeated(names)
    if twice is not None:
        what = "group" if twice in catalog.MODEL_GROUPS else "model"
        raise PlanError(f"--models names {twice!r} twice: name each {what} once")
    out: list[str] = []
    for name in names:
        for model in catalog.MODEL_GROUPS.get(name, [name]):
            if model not in out:
                out.append(model)
    return out


def watch_label(watch: dict[str, Any]) -> str:
    """What a watch session's run is called in every view: its command, shortened ('python train.py'), or
    'telemetry' when it watches none. Paths are cut to their last part; the whole command stays in the plan."""
    command = watch.get("command") or []
    if not command:
        return "telemetry"
    words = [
        os.path.basename(w.rstrip("/")) or w if i == 0 or ("/" in w and not w.startswith("-")) else w
        for i, w in enumerate(command)
    ]
    text = command_text(words)
    return text if len(text) <= WATCH_LABEL_MAX else text[: WATCH_LABEL_MAX - 1] + "…"


_PLAIN_WORD = re.compile(r"[\w@%+=:,./-]+")


def _shown_word(word: str) -> str:
    """A word of a command as a person reads it: bare, or in double quotes (a shell's quoting when it holds one)."""
    if _PLAIN_WORD.fullmatch(word):
        return word
    return f'"{word}"' if '"' not in word else shlex.quote(word)


def command_text(command: list[str]) -> str:
    """A command as a person reads it (words bare, or in double quotes), safe to print."""
    return clean(" ".join(_shown_word(w) for w in command))


def watch_plan(command: list[str], cwd: str, *, name: str = "", interval: float | None = None) -> Plan:
    """The plan of ``benchtui watch [-- COMMAND ...]``: one run, no limit on its epochs, no stall timeout
    (a script may print nothing for hours), checked (PlanError), its label given to the catalog."""
    plan = Plan(
        frameworks=[catalog.WATCH_FRAMEWORK],
        models=[catalog.WATCH_MODEL],
        epochs=1,  # the plan's count is not the command's: the session model sets no limit for a watch
        runs=1,
        samples=1,
        batch_sizes={},
        name=name,
        stall_timeout=-1.0,
        watch={"command": list(command), "cwd": cwd},
    )
    if interval is not None:
        plan.interval = interval
    plan.validate()
    catalog.label_watch(watch_label(plan.watch))
    return plan


def from_preset(name: str, **overrides: Any) -> Plan:
    if name not in PRESETS:
        raise PlanError(
            f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; choose from {', '.join(PRESETS)}"
        )
    values = {**PRESETS[name], **overrides, "preset": name}
    return Plan.from_dict(values)
