"""Sweeps: a plan as a grid of settings (``--sweep AXIS=V1,V2``, ``--best``).

A plan's ``sweep`` maps an axis ("batch", "precision", ...) to the values it takes, in the order given;
its points are their product (``points``), first axis outermost. Every (framework, model, point) is a
cell, with its own runs, row and same-settings verdict. A plan without a sweep has one point, the empty
``Point()``: its cells, run ids, rows and files are what they were before sweeps.

``devices`` is the one axis that is no point: a sweep of it is the scaling session (``Plan.device_counts``),
its rows at the largest count and its curve over the others, as ``--scaling`` always was.

An axis that changes nothing for a framework or a model (channels-last for Keras, which is always NHWC,
or for a token model; seq-len for an image model) is not run twice: the cell's runs are those of its
``effective`` point, the same point with that axis at its first value.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from benchtui.core.plan.errors import PlanError
from benchtui_runners import catalog
from benchtui_runners.config import COMPILE_MODES, PRECISIONS

#: A value a numeric axis takes, at most (a typo beyond).
MOST = 1 << 20
#: The settings ``--best`` sweeps: the plan's own ("same": every framework at the plan's settings), and each
#: framework's recommended ones ("best": ``best_settings``).
SETTINGS = ("same", "best")


@dataclass(frozen=True)
class Axis:
    """One axis a plan may sweep. ``field``: the plan field a value sets (``apply`` has the exceptions);
    ``choices``: the words it takes (numeric axes: whole numbers from 1, and ``words`` besides)."""

    name: str
    field: str
    help: str
    choices: tuple[str, ...] = ()
    numeric: bool = False
    words: tuple[str, ...] = ()  # a numeric axis's words ("auto")

    def parse(self, text: str) -> str:
        """``text`` as the axis keeps it ("08" -> "8"; PlanError: a value it refuses, said in one line)."""
        value = text.strip().lower() if not self.numeric else text.strip()
        if self.numeric:
            if value.lower() in self.words:
                return value.lower()
            if value.isdigit() and 1 <= int(value) <= MOST:
                return str(int(value))
            extra = f" or {', '.join(self.words)}" if self.words else ""
            raise PlanError(f"--sweep {self.name} takes whole numbers from 1{extra}, got {text.strip()!r}")
        if value in ("true", "yes", "1") and "on" in self.choices:
            value = "on"
        if value in ("false", "no", "0") and "off" in self.choices:
            value = "off"
        if value not in self.choices:
            raise PlanError(f"--sweep {self.name} takes {', '.join(self.choices)}, got {text.strip()!r}")
        return value

    def number(self, value: str) -> float | None:
        """A value's place on a numeric axis (None: a word, or a non-numeric axis)."""
        return float(value) if self.numeric and value.isdigit() else None


AXES: dict[str, Axis] = {
    a.name: a
    for a in (
        Axis(
            "batch",
            "batch_sizes",
            "the batch size (per device): numbers, or auto",
            numeric=True,
            words=("auto",),
        ),
        Axis("precision", "precision", "fp32, tf32, amp-fp16, amp-bf16", choices=PRECISIONS),
        Axis("compile", "compile", "each framework's compiler: default, on, off", choices=COMPILE_MODES),
        Axis(
            "channels-last",
            "channels_last",
            "PyTorch's channels-last layout for CNNs: off, on",
            choices=("off", "on"),
        ),
        Axis(
            "data",
            "data",
            "synthetic data on the device, or a NumPy array in host memory",
            choices=("device", "host"),
        ),
        Axis("devices", "devices", "data-parallel devices: a scaling curve (alone)", numeric=True),
        Axis("seq-len", "seq_len", "tokens per sample of a token model", numeric=True),
        Axis(
            "settings",
            "",
            "same: the plan's settings; best: each framework's recommended ones",
            choices=SETTINGS,
        ),
    )
}


@dataclass(frozen=True, order=True)
class Point:
    """One point of a sweep: (axis, value) pairs in the plan's axis order; ``Point()`` for a plan without one."""

    items: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, values: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> Point:
        """A point from {axis: value} (summary.json's form) or pairs; anything but text pairs is left out."""
        pairs = values.items() if isinstance(values, Mapping) else (values or ())
        return cls(
            tuple((str(a), str(v)) for a, v in pairs if isinstance(a, str) and isinstance(v, (str, int)))
        )

    def __bool__(self) -> bool:
        return bool(self.items)

    def get(self, axis: str, default: str | None = None) -> str | None:
        return next((v for a, v in self.items if a == axis), default)

    def without(self, axis: str) -> Point:
        return Point(tuple((a, v) for a, v in self.items if a != axis))

    def with_value(self, axis: str, value: str) -> Point:
        return Point(tuple((a, value if a == axis else v) for a, v in self.items))

    @property
    def key(self) -> str:
        """'batch=8,channels-last=on': how files and ``compare`` name it ('' for no sweep)."""
        return ",".join(f"{a}={v}" for a, v in self.items)

    @property
    def label(self) -> str:
        """'batch 8 · channels-last on': how every view says it ('' for no sweep)."""
        return " · ".join(f"{a} {v}" for a, v in self.items)

    @property
    def tag(self) -> str:
        """'batch8_channels-last-on': the point in a run id (letters, digits, '-' and '_' only)."""
        return "_".join(f"{a}{v}" if v.isdigit() else f"{a}-{v}" for a, v in self.items)

    def to_json(self) -> dict[str, str]:
        return dict(self.items)

    @classmethod
    def from_key(cls, key: str) -> Point:
        """The point of ``key`` ('batch=8,channels-last=on'); pairs without '=' are left out."""
        return cls.of(tuple(p.split("=", 1)) for p in key.split(",") if "=" in p)  # type: ignore[misc]


def _near(word: str) -> str:
    close = difflib.get_close_matches(word, list(AXES), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: The point of a plan without a sweep.
NO_POINT = Point()


def parse_sweeps(texts: Iterable[str]) -> dict[str, list[str]]:
    """``--sweep`` as given (each 'AXIS=V1,V2,...'), as a plan's ``sweep`` (PlanError: one line)."""
    sweep: dict[str, list[str]] = {}
    for text in texts:
        name, eq, values = text.partition("=")
        name = name.strip().lower().replace("_", "-")
        if not eq or not name:
            raise PlanError(f"--sweep takes AXIS=V1,V2 (e.g. batch=32,64), got {text!r}")
        axis = AXES.get(name)
        if axis is None:
            raise PlanError(f"--sweep: unknown axis {name!r}{_near(name)}; choose from {', '.join(AXES)}")
        if name in sweep:
            raise PlanError(f"--sweep gives {name} twice: list its values once ({name}=A,B)")
        words = [w for w in values.split(",") if w.strip()]
        if not words:
            raise PlanError(f"--sweep {name} has no values: give {name}=V1,V2")
        parsed = [axis.parse(w) for w in words]
        twice = next((v for i, v in enumerate(parsed) if v in parsed[:i]), None)
        if twice is not None:
            raise PlanError(f"--sweep {name} gives {twice} twice: each value once")
        sweep[name] = parsed
    return sweep


def read(data: Any) -> dict[str, list[str]]:
    """A file's sweep ({axis: [values]}) as ``parse_sweeps`` would keep it; {} where it would refuse it."""
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        return {}
    try:
        return parse_sweeps(f"{a}={','.join(str(v) for v in vs)}" for a, vs in data.items())
    except PlanError:
        return {}


def points(sweep: Mapping[str, list[str]]) -> list[Point]:
    """A sweep's points in run order (first axis outermost); ``[Point()]`` without one. ``devices`` is no point."""
    axes = [(a, vs) for a, vs in sweep.items() if a != "devices"]
    if not axes:
        return [Point()]
    return [
        Point(tuple(zip([a for a, _ in axes], combo, strict=True)))
        for combo in itertools.product(*(vs for _, vs in axes))
    ]


def applies(axis: str, framework: str, model: str) -> str | None:
    """Why ``axis`` changes nothing for ``framework``'s ``model`` (None: it applies)."""
    info = catalog.MODELS.get(model)
    kind = info.kind if info is not None else "image"
    if axis == "channels-last":
        if kind != "image":
            return "a layout of images: this model takes no images"
        if catalog.family(framework) != "torch":
            return f"{catalog.FRAMEWORK_LABELS.get(framework, framework)} is channels-last at every setting"
    if axis == "seq-len" and kind != "tokens":
        return "tokens per sample: this model takes no tokens"
    return None


def effective(point: Point, framework: str, model: str, sweep: Mapping[str, list[str]]) -> Point:
    """The point whose runs measure ``point`` for ``framework``'s ``model``: ``point`` with every axis that
    changes nothing for them (``applies``) at its first value. The same point where every axis applies."""
    out = point
    for axis, value in point.items:
        values = sweep.get(axis) or [value]
        if value != values[0] and applies(axis, framework, model) is not None:
            out = out.with_value(axis, values[0])
    return out


#: The compute capability from which a GPU has bfloat16 arithmetic (Ampere), and tensor cores (Volta).
BF16_CAPABILITY = (8, 0)
TENSOR_CORE_CAPABILITY = (7, 0)


def capability(gpu: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """A GPU identity's compute capability ("8.0", or NVML's (8, 0)) as (major, minor); None: not known."""
    value = gpu.get("capability") if isinstance(gpu, Mapping) else None
    if isinstance(value, str):
        major, _, minor = value.partition(".")
        value = (major, minor or "0")
    if isinstance(value, (list, tuple)) and len(value) == 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            return None
    return None


def best_precision(framework: str, gpu: Mapping[str, Any] | None) -> str:
    """The mixed precision ``framework``'s documentation recommends on ``gpu`` (None: the CPU).

    The CPU: fp32 (Keras: "on CPUs, mixed precision will run significantly slower"; PyTorch's bf16
    autocast is fast only on AMX/AVX512-BF16 hardware, which benchtui cannot see). A GPU with bfloat16
    (compute capability 8.0 and up): amp-bf16 for PyTorch and Keras/torch (no loss scaling, so no host
    sync a step), amp-fp16 for TensorFlow and Keras/JAX (Keras's documented GPU policy, mixed_float16,
    whose loss scaling XLA keeps on the device). Tensor cores without bfloat16 (7.x): amp-fp16 for all.
    Older GPUs: fp32 ("older GPUs offer no math performance benefit"). A GPU of unknown capability:
    amp-fp16, which every GPU runs (bf16 would be refused below 8.0)."""
    if gpu is None:
        return "fp32"
    cc = capability(gpu)
    if cc is None:
        return "amp-fp16"
    if cc >= BF16_CAPABILITY:
        return "amp-bf16" if framework in ("torch", "keras-torch") else "amp-fp16"
    return "amp-fp16" if cc >= TENSOR_CORE_CAPABILITY else "fp32"


def best_settings(framework: str, model: str, gpu: Mapping[str, Any] | None) -> dict[str, Any]:
    """The plan fields of ``framework``'s recommended settings for speed on ``gpu`` (the placement's GPU
    identity; None: the CPU) for ``model`` ({}: a framework benchtui does not know).

    Precision: ``best_precision``. The compiler: torch.compile for PyTorch (the tuning guide: "fuse
    operations"; Inductor's C++ backend on a CPU); XLA for TensorFlow on a GPU (``on``: also where
    Keras's ``auto`` turns it off), Keras's own default on a CPU ("disable XLA on CPU-only machines");
    Keras's default for Keras/JAX (always jit) and Keras/torch (eager: its torch.compile is slower, by its
    maintainers' account). Channels-last: PyTorch's image models, where it has tensor cores or a CPU.
    The batch: the largest that fits, searched for each framework on its own (``per-framework``)."""
    if framework not in catalog.FRAMEWORKS:
        return {}
    precision = best_precision(framework, gpu)
    cc = capability(gpu)
    old_gpu = gpu is not None and cc is not None and cc < TENSOR_CORE_CAPABILITY
    out: dict[str, Any] = {"precision": precision, "batch_auto": True, "batch_policy": "per-framework"}
    if framework == "torch":
        out["compile"] = "on"
        out["channels_last"] = applies("channels-last", framework, model) is None and not old_gpu
    elif framework == "tensorflow":
        out["compile"] = "default" if gpu is None else "on"
    else:
        out["compile"] = "default"
    return out


def settings_words(plan: Any, point: Point, framework: str, model: str, gpu: Mapping[str, Any] | None) -> str:
    """What ``framework``'s ``model`` runs with at ``point`` (``plan.at``), in words: "amp-bf16, compile on,
    channels-last on, batch auto" (channels-last only where it changes something: PyTorch's image models;
    the batch "auto" where a search chooses it)."""
    at = plan.at(point, framework, model, gpu)
    words = [str(at.precision), f"compile {at.compile}"]
    if applies("channels-last", framework, model) is None:
        words.append(f"channels-last {'on' if at.channels_last else 'off'}")
    words.append("batch auto" if at.batch_auto else f"batch {at.batch_size(model, framework)}")
    return ", ".join(words)


def changes(
    point: Point,
    models: Iterable[str],
    framework: str = "",
    model: str = "",
    gpu: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The plan fields ``point`` sets (``Plan.at``): each axis's value in its field. ``batch`` N sets every
    model's batch (a search's sizes for a framework no longer apply); ``auto`` asks for the search.
    ``settings`` best takes ``framework``'s recommended settings (``best_settings``)."""
    out: dict[str, Any] = {}
    for axis, value in point.items:
        if axis == "batch":
            if value == "auto":
                out["batch_auto"] = True
            else:
                out["batch_auto"] = False
                out["batch_sizes"] = {m: int(value) for m in models}
        elif axis == "channels-last":
            out["channels_last"] = value == "on"
        elif axis in ("seq-len", "devices"):
            out[AXES[axis].field] = int(value)
        elif axis == "settings":
            if value == "best" and framework:
                out.update(best_settings(framework, model, gpu))
        else:
            out[AXES[axis].field] = value
    return out
