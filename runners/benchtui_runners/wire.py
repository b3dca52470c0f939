"""The wire schema: every event of events.jsonl, stated once (its name, its fields, each field's type and limits).

Each event is a ``TypedDict`` whose fields are ``Annotated[<type>, <limit>, REQUIRED]``: the type is what
mypy checks where an event is folded; the limit (``Int``, ``Num``, ``Text``, ...) is what the parent's
reader (``benchtui.core.wire.events``) derives its checks from (a ``Literal`` of words is its own limit);
``REQUIRED`` names a field an event of that type cannot lack. A field with no limit is declared and passes
unchecked (the runner's own record, folded as it is). Fields an event does not declare pass through
unchecked too (a newer runner's additions), and a type not declared here is kept and never folded.

The runners send ``RUNNER_EVENTS`` (``protocol.EventWriter``); the parent adds ``PARENT_EVENTS`` (a runner's
line of one of those is malformed). Standard library only: the runners import it, and so does the parent.
The limits are plain data, so a typed decoder (msgspec ``Meta(ge=, le=, max_length=)``) can be made from them.
"""

# No ``from __future__ import annotations``: the fields' annotations are objects when a class is made, so
# reading them back (``fields``) compiles no strings at the parent's start.
import functools
import math
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypedDict

#: The wire's version: every runner event carries it as ``v``.
WIRE_VERSION = 1

# -- limits -------------------------------------------------------------------------------------
MAX_TIME = 1e9  # seconds: one step, one epoch or a monotonic clock beyond this is nonsense
MAX_TO_FIRST_BATCH = 1e6  # seconds from an epoch's start to its first step (11 days: nonsense beyond)
MAX_COUNT = 10**12
MAX_EPOCH = 10**7
MAX_WINDOW = 10**9  # steps in one batch event
MAX_VERSION = 10**6
MAX_TEXT = 4096  # a name, a word, a device's field
LONG_TEXT = 64 * 1024  # an error's message
MAX_TRACEBACK = 512 * 1024
MAX_OBJECTS = 1024  # objects in a list of objects (``Obj(many=True)``)
MAX_NODE = 4096  # a node rank (several machines: ``node``)


@dataclass(frozen=True)
class Int:
    """A whole number (not a bool) in [lo, hi]."""

    lo: int
    hi: int = MAX_COUNT


@dataclass(frozen=True)
class Num:
    """A finite number (int or float, not a bool) in [lo, hi]; ``above``: lo itself excluded."""

    lo: float
    hi: float
    above: bool = False


@dataclass(frozen=True)
class Text:
    """A string of at most ``most`` characters."""

    most: int = MAX_TEXT


@dataclass(frozen=True)
class OneOf:
    """One of these words."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class Exactly:
    """A value of exactly one of these types (a bool is not an int here, nor an int a bool)."""

    types: tuple[type, ...]


@dataclass(frozen=True)
class Ints:
    """A list of at most ``most`` whole numbers in [lo, hi]."""

    lo: int
    hi: int
    most: int = 4096


@dataclass(frozen=True)
class Durations:
    """A non-empty list of at most ``most`` measured durations (``TIME``: one per rank)."""

    most: int = 65536


@dataclass(frozen=True)
class Obj:
    """An object whose known fields (those ``spec``, a TypedDict of this module, declares) pass their limits;
    ``many``: a list of at most ``MAX_OBJECTS`` such objects."""

    spec: type
    many: bool = False


@dataclass(frozen=True)
class Loss:
    """A training loss: a finite number (int or float, not a bool), or one of ``NON_FINITE``'s words (JSON
    has no NaN: a loss that became NaN or infinite is sent as ``"nan"``, ``"inf"`` or ``"-inf"``)."""


@dataclass(frozen=True)
class Custom:
    """Checked by hand where it is read (``where``), not by a limit."""

    where: str


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: In a field's ``Annotated``: an event of that type without it (or with it null) is malformed.
REQUIRED = _Required()

Limit = Int | Num | Text | OneOf | Exactly | Ints | Durations | Obj | Loss | Custom

TIME = Num(0.0, MAX_TIME, above=True)  # a duration that was measured: never zero
CLOCK = Num(-MAX_TIME, MAX_TIME)  # a monotonic clock reading
SECONDS = Num(0.0, MAX_TIME)  # a share of a step, a search's time: may be zero
COUNT = Int(0)
POSITIVE = Int(1)
EPOCH = Int(1, MAX_EPOCH)
WINDOW = Int(1, MAX_WINDOW)
DICT = Exactly((dict,))
TEXT = Text()
LONG = Text(LONG_TEXT)
AMOUNT = Num(-1e18, 1e18)  # a telemetry reading: any finite number
PERCENT = Num(0.0, 100.0)
LOSS = Loss()

#: The epoch event's loss fields.
LOSS_FIELDS = ("loss", "loss_min", "loss_max")
#: A non-finite loss on the wire, by its float: the only strings a loss field may be.
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def loss_wire(value: float) -> float | str:
    """A loss as the wire carries it: a finite number as it is, NaN / +inf / -inf as ``"nan"`` / ``"inf"`` /
    ``"-inf"``."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def loss_float(value: float | str) -> float:
    """A loss field read back (one the parent's reader passed): ``"nan"`` -> ``math.nan``, a number -> itself."""
    return NON_FINITE[value] if isinstance(value, str) else float(value)


# -- objects inside events ----------------------------------------------------------------------
class DeviceInfo(TypedDict, total=False):
    """The device a runner really uses (``hello.device``)."""

    type: Annotated[str, TEXT]
    name: Annotated[str, TEXT]
    index: Annotated[int, COUNT]
    memory_bytes: Annotated[int, COUNT]
    capability: Annotated[str, TEXT]
    threads: Annotated[int, COUNT]
    assigned: Annotated[dict[str, Any], DICT]


#: The GPU's profiling counters a reading may carry (percent of the interval): SM, tensor-core and DRAM activity.
COUNTERS = ("sm_active", "tensor_active", "dram_active")


class GpuReading(TypedDict, total=False):
    """What the sampler reads of one GPU (``gpus`` of a ``gpu`` event)."""

    index: Annotated[int, COUNT]
    name: Annotated[str, TEXT]
    throttle: Annotated[list[str], Exactly((list,))]
    lost: Annotated[bool, Exactly((bool,))]
    util: Annotated[float, AMOUNT]
    mem_util: Annotated[float, AMOUNT]
    mem_used: Annotated[float, AMOUNT]
    mem_total: Annotated[float, AMOUNT]
    power_w: Annotated[float, AMOUNT]
    temp_c: Annotated[float, AMOUNT]
    sm_clock_mhz: Annotated[float, AMOUNT]
    energy_mj: Annotated[float, AMOUNT]
    proc_mem: Annotated[float, AMOUNT]
    other_procs: Annotated[float, AMOUNT]
    other_mem: Annotated[float, AMOUNT]
    sm_active: Annotated[float, PERCENT]  # COUNTERS
    tensor_active: Annotated[float, PERCENT]
    dram_active: Annotated[float, PERCENT]


class HostReading(TypedDict, total=False):
    """What the sampler reads of the runner's host (``host`` of a ``gpu`` event)."""

    cpu_percent: Annotated[float, AMOUNT]
    rss: Annotated[float, AMOUNT]
    system_busy_cores: Annotated[float, AMOUNT]


class GpuFigures(TypedDict, total=False):
    """Data parallel: one of the run's GPUs over the run, as the sampler saw it (``run_end.per_gpu``)."""

    index: Annotated[int, Int(0, 1024)]
    util: Annotated[float, AMOUNT]
    mem_max: Annotated[float, AMOUNT]
    power_w: Annotated[float, AMOUNT]
    samples: Annotated[int, COUNT]


# -- every event --------------------------------------------------------------------------------
class _Event(TypedDict, total=False):
    """What every event has: ``type`` and ``t`` (monotonic seconds); runner events ``v``; the parent tags a
    run's events with ``run`` (null: a session's own event)."""

    type: str  # at most 64 characters (checked by hand: it picks the rest)
    t: Annotated[float, CLOCK]
    v: Annotated[int, Int(0, MAX_VERSION)]  # wire version (runner events)
    run: Annotated[str, Exactly((str, type(None)))]  # the run it belongs to (added by the parent)
    # Several nodes (issue 33): the node whose benchtui recorded or relayed it, added by node 0's parent to
    # what another node sends it (that node's runner's events, its run_start/run_end, its GPU samples).
    # Absent: node 0's own (every session before several nodes). A runner's own ``node`` is dropped.
    node: Annotated[int, Int(1, MAX_NODE)]


# -- runner events ------------------------------------------------------------------------------
class HelloEvent(_Event, total=False):
    """Versions, the device the runner really uses, settings that change the answer."""

    pid: Annotated[int, COUNT]
    framework: Annotated[str, TEXT]
    versions: Annotated[dict[str, str], DICT]
    device: Annotated[dict[str, Any], Obj(DeviceInfo)]
    settings: Annotated[dict[str, Any], DICT]
    samples_per_epoch: Annotated[int, POSITIVE]
    steps_per_epoch: Annotated[int, POSITIVE]
    config: dict[str, Any]  # the run's RunConfig as the runner read it
    # ``benchtui doctor``'s hello (no run): what the framework sees.
    devices: list[dict[str, Any]]
    gpu: dict[str, Any]  # {sees_gpu, why}
    memory_env: dict[str, str]
    cuda_build: Any


class PhaseEvent(_Event, total=False):
    name: Annotated[str, TEXT, REQUIRED]  # import, build, compile, first_batch, ...
    edge: Annotated[Literal["start", "end"], REQUIRED]
    at: Annotated[float, CLOCK]  # when it really happened, if earlier than ``t``


class BatchEvent(_Event, total=False):
    """A window of ``steps`` steps ending with ``step``, timed between device synchronizations."""

    epoch: Annotated[int, EPOCH, REQUIRED]
    step: Annotated[int, POSITIVE, REQUIRED]
    seconds: Annotated[float, TIME, REQUIRED]  # the window's mean time per step
    samples: Annotated[int, COUNT]  # per step
    steps: Annotated[int, WINDOW]  # steps in the window (1 when absent: sessions before benchtui 0.3)


class SettingsEvent(_Event, total=False):
    """Settings known only after the build (what Keras's ``jit_compile="auto"`` became): added to the hello's."""

    settings: Annotated[dict[str, Any], DICT]


class EpochEvent(_Event, total=False):
    epoch: Annotated[int, EPOCH, REQUIRED]
    seconds: Annotated[float, TIME, REQUIRED]
    samples: Annotated[int, COUNT]
    # Seconds from the epoch's start (before the framework builds or resets its data iterator) to
    # the moment its first step begins: a stall there (tf.data tearing down an iterator) shows as
    # such. Runners before issue 30 omit it.
    to_first_batch_s: Annotated[float, Num(0.0, MAX_TO_FIRST_BATCH)]
    # Training only: the epoch's mean loss over its steps, read where the runner already waits for the
    # device at the epoch's end; loss_min / loss_max: its smallest and largest step loss, where the runner
    # has them for free (PyTorch). A number, or "nan" / "inf" / "-inf" (``loss_wire``). Runners before
    # issue 36, and inference, send none.
    loss: Annotated[float | str, LOSS]
    loss_min: Annotated[float | str, LOSS]
    loss_max: Annotated[float | str, LOSS]


class MemoryEvent(_Event, total=False):
    peak_bytes: Annotated[int | None, COUNT]
    source: Annotated[str, TEXT]
    epoch: int  # the epoch that just ended (absent from ``done``)


class DoneEvent(MemoryEvent, total=False):
    """The run's end: its last memory reading (``epoch`` absent)."""


class FlopsEvent(_Event, total=False):
    per_step: Annotated[float, Num(0.0, 1e30)]
    per_image: Annotated[float, Num(0.0, 1e30)]
    batch_size: Annotated[int, POSITIVE]
    method: Annotated[str, TEXT]
    counted: Annotated[str, TEXT]  # "forward+backward" (training) or "forward" (inference)
    convention: Annotated[str, TEXT]
    by_op: dict[str, Any]
    reason: Annotated[str, LONG]
    seconds: Annotated[float, SECONDS]


class ModelEvent(_Event, total=False):
    """The network a runner built, sent once after building: what parity is judged on."""

    params: Annotated[int, COUNT, REQUIRED]  # every parameter (BatchNorm statistics are buffers, not counted)
    trainable_params: Annotated[int, COUNT]
    kind: Literal["image", "tokens", "tensor"]  # "tensor": a user's own model on float tensors
    tokens_per_sample: Annotated[int, COUNT]  # token models: the sequence length
    source: Annotated[str, TEXT]  # "torchvision 0.24 resnet50", "keras.applications ResNet50", ...
    architecture: Annotated[str, LONG]  # the catalog's words for this side, where the sides differ


class ErrorEvent(_Event, total=False):
    kind: Annotated[str, TEXT]  # unavailable, device, oom, exception
    message: Annotated[str, LONG]
    traceback: Annotated[str, Text(MAX_TRACEBACK)]
    rank: int  # data parallel: the rank (not 0) whose error this is


class RanksEvent(_Event, total=False):
    """Data parallel: every rank's mean time per step over the window that ended with ``step``."""

    epoch: Annotated[int, EPOCH, REQUIRED]
    step: Annotated[int, POSITIVE, REQUIRED]
    steps: Annotated[int, WINDOW]
    seconds: Annotated[list[float], Durations(), REQUIRED]  # by rank


class TokensEvent(_Event, total=False):
    """Generation (issue 34): one generate step, a batch of ``sequences`` prompts of ``prompt_len`` tokens
    each given exactly ``new_tokens`` tokens greedily with a key/value cache, sent after the step's
    ``batch`` event (same ``epoch`` and ``step``).

    ``first_token_s``: the first token's latency (prefill + first decode step): under window timing its
    own generate call of one new token, timed to the token on the host; under ``--timing step`` the first
    token's stamp in the full call. ``decode_s``: the full call's time after its first token (tokens
    2..N; 0 when N is 1): under window timing the full call's time less ``first_token_s``; under step
    timing, the last token's stamp less the first's. ``token_s`` (``--timing step`` only): each later
    token's latency, N-1 of them, the device waited for at every token. ``tokens``: the new tokens each
    sequence really got (counted from the output); ``decode_steps``: the one-token steps the runner
    counted in the full call (None where it cannot count them without waiting per token)."""

    epoch: Annotated[int, EPOCH, REQUIRED]
    step: Annotated[int, POSITIVE, REQUIRED]
    sequences: Annotated[int, POSITIVE, REQUIRED]
    prompt_len: Annotated[int, POSITIVE, REQUIRED]
    new_tokens: Annotated[int, POSITIVE, REQUIRED]
    first_token_s: Annotated[float, TIME, REQUIRED]
    decode_s: Annotated[float, SECONDS, REQUIRED]
    token_s: Annotated[list[float], Durations()]
    tokens: Annotated[int, COUNT]
    decode_steps: Annotated[int | None, COUNT]


_PROFILE = "benchtui.core.wire.events.check_profile"


class ProfileEvent(_Event, total=False):
    """Where a profiled step's time goes, sent once after the timed epochs (``--profile``).

    ``ok`` False: the profiler was missing or failed, and ``reason`` says why ("profile
    unavailable: ..."); the run itself is not failed by it. Times are seconds per step. The parent
    drops a field that breaks its limit rather than the line (a profile is extra: ``check_profile``).
    """

    ok: Annotated[bool, Custom(_PROFILE)]
    reason: Annotated[str, Custom(_PROFILE)]
    profiler: Annotated[str, TEXT]  # "torch.profiler 2.5 (CUDA activity)", ...
    device: Literal["cpu", "gpu"]
    steps: Annotated[int, WINDOW]  # steps profiled
    window_s: Annotated[float, TIME]  # every profiled step, synchronised: the profiler's overhead included
    step_s: Annotated[float, TIME]  # window_s / steps
    traced_step_s: Annotated[float, TIME]  # the trace's own span of the window, per step
    # PROFILE_CATEGORIES -> seconds per step (they sum to traced_step_s)
    categories: Annotated[dict[str, float], Custom(_PROFILE)]
    busy_s: Annotated[float, SECONDS]
    idle_s: Annotated[float, SECONDS]
    host_s: Annotated[float | None, SECONDS]
    idle_means: Annotated[str, TEXT]  # what "idle" is on this device
    # {name, category, seconds, calls, share}: the longest ops, at most PROFILE_TOP
    top: Annotated[list[dict[str, Any]], Custom(_PROFILE)]
    # {file: a plain file name in <session>/traces/, bytes}
    trace: Annotated[dict[str, Any] | None, Custom(_PROFILE)]
    trace_note: Annotated[str | None, LONG]  # "trace dropped: 412 MB over the 200 MB cap"
    method: Annotated[str, LONG]


# -- parent events ------------------------------------------------------------------------------
class RunStartEvent(_Event, total=False):
    framework: Annotated[str, TEXT]
    model: Annotated[str, TEXT]
    index: Annotated[int, COUNT]
    python: Annotated[str, TEXT]
    pid: Annotated[int, COUNT]  # the runner's process (absent: it could not be started)
    devices: Annotated[int, Int(1, 1 << 20)]  # data-parallel devices (absent: one), on each node
    nodes: Annotated[int, Int(1, MAX_NODE)]  # the machines the run trains on (absent: one)
    host: Annotated[str, TEXT]  # the machine the runner runs on (several nodes: each node's run_start)


class RunEndEvent(_Event, total=False):
    status: Annotated[str, TEXT]  # a RunStatus word
    reason: Annotated[str, LONG]
    returncode: Annotated[int | None, Int(-(2**31), 2**31)]
    malformed: Annotated[int, COUNT]
    log_problem: Annotated[
        str, LONG
    ]  # what the run's log lost because it could not be written (absent: nothing)
    other_cpu_cores: Annotated[float, Num(0.0, 1e6)]
    other_gpu_processes: Annotated[int, COUNT]
    other_gpu_memory: Annotated[int, COUNT]
    # Data parallel: each of the run's GPUs over the run, as the sampler saw it.
    per_gpu: Annotated[list[dict[str, Any]], Obj(GpuFigures, many=True)]
    # Means over the samples taken while the run trained (its GPUs), as the sampler read them:
    # NVML's utilization (a kernel was running) and, where readable, the profiling counters (%).
    gpu_util: Annotated[float, PERCENT]
    sm_active: Annotated[float, PERCENT]  # COUNTERS
    tensor_active: Annotated[float, PERCENT]
    dram_active: Annotated[float, PERCENT]


class EnergyEvent(_Event, total=False):
    epoch: Annotated[int, Int(0, MAX_EPOCH), REQUIRED]  # 0: at the first batch; N: at the end of epoch N
    mj: Annotated[float, Num(0.0, 1e18), REQUIRED]


class GpuEvent(_Event, total=False):
    """One telemetry sample: every GPU, the runner's host figures, which GPU the run uses.

    A GPU's reading may carry ``sm_active``, ``tensor_active`` and ``dram_active`` (percent, 0 to
    100): the profiling counters, where they can be read (the ``counters`` event says whether).
    """

    gpus: Annotated[list[dict[str, Any]], Obj(GpuReading, many=True)]
    host: Annotated[dict[str, Any], Obj(HostReading)]
    watched: Annotated[int, Int(-1, 1024)]
    devices: Annotated[list[int], Ints(0, 1024)]  # a data-parallel run's GPUs (NVML indices), when several


class CountersEvent(_Event, total=False):
    """Whether the sampler can read the GPU's profiling counters (SM, tensor-core, DRAM activity): sent once."""

    available: Annotated[bool, Exactly((bool,)), REQUIRED]
    source: Annotated[str, TEXT]  # "DCGM profiling fields 1002, 1004, 1005", ...
    reason: Annotated[str, LONG]  # why not, when not


class ProbeStartEvent(_Event, total=False):
    """The largest-batch search (``--batch-size auto``) starts a probe: one batch size in a fresh process."""

    probe: Annotated[str, TEXT, REQUIRED]  # the probe's id (its log's name)
    framework: Annotated[str, TEXT, REQUIRED]
    model: Annotated[str, TEXT, REQUIRED]
    batch_size: Annotated[int, POSITIVE, REQUIRED]
    point: Annotated[str, TEXT]  # a sweep's point (``Point.key``) the probe searches at; none without a sweep


class ProbeEvent(ProbeStartEvent, total=False):
    """A probe's answer: whether the batch size trained."""

    result: Annotated[str, TEXT, REQUIRED]  # "ok", "oom" or "error"
    reason: Annotated[str, LONG]
    peak_bytes: Annotated[int | None, COUNT]
    seconds: Annotated[float, SECONDS]


class BatchChoiceEvent(_Event, total=False):
    """The batch size the search chose for a model, from what each framework's probes found."""

    model: Annotated[str, TEXT, REQUIRED]
    policy: Annotated[str, TEXT]
    upper: Annotated[int, COUNT]
    found: Annotated[dict[str, int | None], DICT]  # framework -> the largest batch that trained
    chosen: Annotated[dict[str, int], DICT]  # framework -> the batch its runs use
    point: Annotated[str, TEXT]  # a sweep's point (``Point.key``) it chose for; none without a sweep


class SessionEndEvent(_Event, total=False):
    """The session's last line: how many lines came before it, and how the session ended."""

    lines: Annotated[int, COUNT, REQUIRED]
    status: Annotated[str, TEXT]


RUNNER_EVENTS: dict[str, type] = {
    "hello": HelloEvent,
    "phase": PhaseEvent,
    "batch": BatchEvent,
    "settings": SettingsEvent,
    "epoch": EpochEvent,
    "memory": MemoryEvent,
    "flops": FlopsEvent,
    "model": ModelEvent,
    "error": ErrorEvent,
    "done": DoneEvent,
    "ranks": RanksEvent,
    "profile": ProfileEvent,
    "tokens": TokensEvent,
}
#: The parent's own events, the sampler's, the batch search's, the session's end: a runner's line of one
#: of these is malformed, never recorded as the parent's.
PARENT_EVENTS: dict[str, type] = {
    "run_start": RunStartEvent,
    "run_end": RunEndEvent,
    "energy": EnergyEvent,
    "gpu": GpuEvent,
    "counters": CountersEvent,
    "probe_start": ProbeStartEvent,
    "probe": ProbeEvent,
    "batch_choice": BatchChoiceEvent,
    "session_end": SessionEndEvent,
}
EVENTS: dict[str, type] = {**RUNNER_EVENTS, **PARENT_EVENTS}


@dataclass(frozen=True)
class Field:
    """One declared field: its Python type (as mypy reads it), its limit (None: unchecked), whether required."""

    name: str
    type: Any
    limit: Limit | None
    required: bool


@functools.cache
def fields(spec: type, *, common: bool = False) -> Mapping[str, Field]:
    """The fields ``spec`` (an event or object TypedDict of this module) declares, in their order.

    Without ``common``, an event's common fields (``_Event``: type, t, v, run) are left out.
    """
    hints = typing.get_type_hints(spec, globalns=vars(sys.modules[__name__]), include_extras=True)
    event = spec in EVENTS.values()
    skip = tuple(_Event.__annotations__) if event and not common else ()
    out: dict[str, Field] = {}
    for name, hint in hints.items():
        if name in skip:
            continue
        limit: Limit | None = None
        required = False
        base = hint
        if typing.get_origin(hint) is Annotated:
            base, *extras = typing.get_args(hint)
            for extra in extras:
                if extra is REQUIRED:
                    required = True
                elif isinstance(extra, (Int, Num, Text, OneOf, Exactly, Ints, Durations, Obj, Loss, Custom)):
                    limit = extra
        if limit is None and typing.get_origin(base) is Literal:
            limit = OneOf(typing.get_args(base))  # the words the type names
        out[name] = Field(name, base, limit, required)
    return MappingProxyType(out)


def common_fields() -> Mapping[str, Field]:
    """The fields every event may carry (``type``, ``t``, ``v``, ``run``)."""
    return fields(_Event, common=True)


def event_fields(kind: str) -> Mapping[str, Field] | None:
    """The fields an event of type ``kind`` declares (common ones left out); None for a type not declared."""
    spec = EVENTS.get(kind)
    return None if spec is None else fields(spec)
