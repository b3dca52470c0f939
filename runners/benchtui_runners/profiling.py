"""Where step time goes: a few steps after the timed epochs, under the framework's own profiler.

``--profile`` (``RunConfig.profile``) runs, after the last timed epoch, ``PROFILE_WARMUP`` steps
and then ``profile_steps`` steps with ``torch.profiler``, the TensorFlow profiler or
``jax.profiler`` recording. The profiled steps are a window between two device
synchronisations, marked in the trace by an annotation (``WINDOW``). Every framework's trace
is written as Chrome trace-event JSON (it opens in Perfetto) and reduced here, by one reducer
for all three, into a ``profile`` event:

- every op's exclusive time on its host thread (the time in none of its children), in the
  category of its outermost categorised ancestor: an ``aten::add_`` inside ``Optimizer.step``
  is optimizer time, a TensorFlow op under the optimizer's name scope too;
- on a GPU, kernels and copies on the device streams, each in its launching op's category
  (PyTorch's correlation) or by its own name;
- a sweep over the window shares each instant among what runs then: ops and kernels first,
  input work only when nothing computes, and an instant where nothing runs is *idle* (on a
  GPU: the device waits for the host; on the CPU: Python and framework code between ops). So
  the categories and idle add up to the window, which is the profiled steps' wall time.

Nothing here runs inside the timed epochs, and a profiler that fails gives the run a note,
never a failure. Standard library only at import: each runner imports its profiler itself.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: The categories of step time, in the order reports show them; ``idle`` is the time nothing ran.
CATEGORIES = ("conv", "matmul", "norm", "elementwise", "optimizer", "data", "communication", "other", "idle")
#: Steps run under the profiler before the window opens (its start-up and first-step costs).
PROFILE_WARMUP = 2
#: The annotation that marks the profiled window in every framework's trace.
WINDOW = "benchtui.profile"
#: The annotation around fetching a batch in the runner's own loop (PyTorch): input time.
DATA = "benchtui.data"
#: The top operations sent, by time.
TOP = 12
IDLE_GPU = "GPU idle: no kernel or copy running (the device waits for the host)"
IDLE_CPU = "no op running: Python and framework code between ops"

# -- categories --------------------------------------------------------------------------------
_OPTIMIZER_SCOPE = re.compile(
    r"(^|/)(sgd|adam|adamw|rmsprop|adagrad|optimizer|apply_gradients)(_\d+)?(/|$)", re.I
)
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.I))
    for category, pattern in (
        (
            "communication",
            r"nccl|all_?reduce|all-reduce|all_?gather|all-gather|reduce_?scatter|reduce-scatter|"
            r"c10d|gloo|collective|broadcast_coalesced|record_param_comms",
        ),
        (
            "optimizer",
            r"^optimizer\.|multi_tensor_apply|_foreach_|fused_?adam|fused_?sgd|resourceapply|applygradient",
        ),
        (
            "data",
            r"benchtui\.data|dataloader|iterator::|iteratorgetnext|iterator_get_next|memcpy ?h(to|2)d|"
            r"memcpyh2d|\bhtod\b|prefetch",
        ),
        (
            "conv",
            r"conv(?!ert)|winograd|(^|[^a-z])(fprop|dgrad|wgrad)|implicit_gemm|implicit_convolve|depthwise",
        ),
        (
            "norm",
            r"batch_?norm|layer_?norm|group_?norm|rms_?norm|instance_?norm|bn_fw|bn_bw|cudnn::bn|"
            r"fusedbatchnorm|nativebatchnorm|nativelayernorm|welford",
        ),
        (
            "matmul",
            r"gemm|gemv|matmul|(^|\W)mm($|\W)|addmm|bmm|\blinear\b|(^|\W|_)dot(\W|_|$)|einsum|cublas|"
            r"cutlass|scaled_dot_product|flash|fmha|attention|sdpa",
        ),
        ("other", r"ynn_fusion|xnn_fusion"),
    )
)
_NORM_SCOPE = re.compile(
    r"batch_?norm|layer_?norm|group_?norm|rms_?norm|normalization|(^|[/_])bn(_\d+)?(/|$)", re.I
)
#: Annotations and framework wrappers: time inside them belongs to what runs inside them.
_WRAPPER = re.compile(
    r"^(benchtui\.profile|profilerstep#|executorstate::|eagerlocalexecute|eagerexecute|eagerkernelexecute|"
    r"kernelanddevicefunc|tfe_|functionrun|pjitfunction|thunkexecutor|commonpjrt|pjrt|"
    r"executehelper|torch-compiled region|compiledfunction|##)",
    re.I,
)
#: Waiting, not working: a synchronisation's time is nobody's work.
_WAIT = re.compile(r"synchroni[sz]e|wait for|await|\bwait\b|cudaeventsynchron|blocking", re.I)


#: Words (whole words of a name, CamelCase split) of elementwise, activation, pooling and reduction
#: ops, and of layout and memory ops; a word prefix ends in "*".
_ELEMENTWISE = frozenset(
    "add sub subtract mul multiply div divide real pow sqrt rsqrt exp expm1 log log1p neg negate abs square "
    "erf relu relu6 gelu silu swish sigmoid logistic tanh softmax softplus threshold clamp clip where select "
    "compare equal greater less dropout pool* max maximum min minimum reduce sum mean prod bias cast convert "
    "loss entropy crossentropy nll argmax sign elementwise* vectorized* unrolled* fill floor ceil round "
    "addcmul addcdiv lerp sin cos not and or".split()
)
_LAYOUT = frozenset(
    "copy transpose reverse reshape concat concatenate slice pad gather scatter bitcast broadcast permute "
    "contiguous clone empty zero zeros as strided view resize memcpy memset iota identity".split()
)


def _words(name: str) -> list[str]:
    """A name's words: ``_MklNativeConv2DBackpropInput`` → mkl native conv2 d backprop input."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def _has(words: list[str], vocabulary: frozenset[str]) -> bool:
    for word in words:
        if word in vocabulary:
            return True
        if any(word.startswith(v[:-1]) for v in vocabulary if v.endswith("*")):
            return True
    return False


def categorize(op: str, scope: str = "") -> str | None:
    """The category of an op by its type name (``Conv2D``, ``aten::addmm``, a kernel name), or None.

    ``scope``: the op's name scope (TensorFlow), which says only whether it is the optimizer's:
    a layer's scope (``conv2_block1_1_bn``) must not decide what the op does.
    """
    if scope and _OPTIMIZER_SCOPE.search(scope):
        return "optimizer"
    if _WRAPPER.match(op):
        return None
    category = _by_type(op)
    if category in (None, "elementwise", "other") and scope and _NORM_SCOPE.search(scope):
        return "norm"  # a normalization layer made of arithmetic ops (Keras 3's BatchNormalization)
    return category


def _by_type(op: str) -> str | None:
    for category, pattern in _RULES:
        if pattern.search(op):
            return category
    words = _words(op)
    if _has(words, _ELEMENTWISE):
        return "elementwise"
    if _has(words, _LAYOUT):
        return "other"
    if "fusion" in words:
        return "elementwise"  # an XLA loop fusion with no telling word
    return None


_SUFFIX = re.compile(r"[._]\d+$")


def short_name(name: str) -> str:
    """A name to group an op's calls under: no numeric suffix (``convolution.15``), no template
    arguments or parameter list (a CUDA kernel's), at most 80 characters."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    depth, out = 0, []
    for ch in text:  # drop <...> template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif not depth:
            out.append(ch)
    text = "".join(out).split("(")[0].strip() or text
    while _SUFFIX.search(text):
        text = _SUFFIX.sub("", text)
    return text[:80]


# -- spans ---------------------------------------------------------------------------------------
@dataclass
class Span:
    """One event of a trace: an op, an annotation or a kernel, in seconds of the trace's clock."""

    thread: str
    name: str
    start: float
    end: float
    device: bool = False  # on a device stream (a kernel, a copy)
    scope: str = ""  # TensorFlow's op name scope
    op: str = ""  # the type name that decides the category (default: name)
    ext: int | None = None  # PyTorch: a host op's External id; a kernel's launching op's
    work: bool = False  # an op or a launch (not an annotation or a framework wrapper)
    # filled by the reduction
    category: str | None = None
    children: list[Span] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.op or self.name


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_TF_OP = re.compile(r"^[^:\s]+:[A-Za-z_][A-Za-z0-9_]*$")


def chrome_spans(trace: dict[str, Any] | list[Any]) -> list[Span]:
    """The complete (``ph: X``) events of a Chrome trace-event JSON, as spans.

    PyTorch's trace (kineto), TensorFlow's (``trace_viewer@``) and JAX's (perfetto) all are one.
    Device work: PyTorch's kernel, copy and set events; TensorFlow's and JAX's events on a
    device process's ``Stream`` threads (their other device lines repeat the streams' events).
    """
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    frames = trace.get("stackFrames", {}) if isinstance(trace, dict) else {}
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M":
            label = str((e.get("args") or {}).get("name", ""))
            if e.get("name") == "process_name":
                processes[e.get("pid")] = label
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = label
    spans = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur, name = _number(e.get("ts")), _number(e.get("dur")), e.get("name")
        if ts is None or dur is None or dur <= 0 or not isinstance(name, str) or name.startswith("$"):
            continue
        pid, tid = e.get("pid"), e.get("tid")
        args: dict[str, Any] = e["args"] if isinstance(e.get("args"), dict) else {}
        cat = str(e.get("cat", ""))
        process, thread = processes.get(pid, str(pid)), threads.get((pid, tid), str(tid))
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            device = True
        elif "/device:" in process or "GPU" in process.upper().split(":")[0]:
            if not thread.startswith("Stream"):
                continue  # derived lines (XLA Ops, TensorFlow Ops, Steps) repeat the streams
            device = True
        else:
            device = False
        frame = frames.get(str(e.get("sf"))) if "sf" in e and isinstance(frames, dict) else None
        full = frame.get("name") if isinstance(frame, dict) else None
        if isinstance(full, str) and _TF_OP.match(full):
            name = full  # TensorFlow's trace viewer names an op by type, its full name in a stack frame
        scope, op = "", ""
        work = device or cat in ("cpu_op", "cuda_runtime", "cuda_driver")
        tf_op = args.get("tf_op") or args.get("long_name") or ""
        if isinstance(tf_op, str) and ":" in tf_op and device:
            scope, op = tf_op.rsplit(":", 1)
        elif _TF_OP.match(name) and not device:
            scope, op = name.rsplit(":", 1)  # a TensorFlow op: "scope/name:Type"
            work = True
        elif isinstance(args.get("hlo_op"), str):
            op, work = args["hlo_op"], True  # an XLA op (JAX, TensorFlow with XLA)
        ext = args.get("External id")
        spans.append(
            Span(
                thread=f"{pid}/{tid}",
                name=name,
                start=ts * 1e-6,
                end=(ts + dur) * 1e-6,
                device=device,
                scope=scope,
                op=op,
                ext=ext if isinstance(ext, int) and not isinstance(ext, bool) else None,
                work=work,
            )
        )
    return spans


# -- the reduction -------------------------------------------------------------------------------
class ProfileError(Exception):
    """The trace cannot say where the time went (no window, nothing in it)."""


def _nest(spans: list[Span]) -> list[Span]:
    """Build each thread's call tree (children inside their parent); the roots, in time order."""
    roots: list[Span] = []
    stack: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -(s.end - s.start))):
        while stack and stack[-1].end <= span.start + 1e-9:
            stack.pop()
        if stack:
            span.end = min(span.end, stack[-1].end)  # a child ends with its parent (clock rounding)
            stack[-1].children.append(span)
        else:
            roots.append(span)
        stack.append(span)
    return roots


def _categorise(span: Span, inherited: str | None) -> None:
    own = categorize(span.kind, span.scope)
    span.category = inherited or own
    for child in span.children:
        _categorise(child, span.category)


def _exclusive(span: Span) -> Iterator[tuple[float, float, Span]]:
    """Span's time in none of its children, as (start, end, span) pieces, then its children's."""
    at = span.start
    for child in span.children:
        if child.start > at:
            yield at, child.start, span
        yield from _exclusive(child)
        at = max(at, child.end)
    if span.end > at:
        yield at, span.end, span


@dataclass
class _Segment:
    start: float
    end: float
    category: str
    key: str
    tier: int  # 1: compute; 2: input work (only when nothing computes)


def _segments(
    roots: list[Span], window: tuple[float, float], calls: dict[tuple[str, str], int] | None = None
) -> list[_Segment]:
    """The exclusive pieces of work inside the window; ``calls`` counts each span once by its key."""
    out = []
    seen: set[int] = set()
    w0, w1 = window
    for start, end, span in _pieces(roots):
        if end <= w0 or start >= w1 or _WAIT.search(span.name) or not (span.category or span.work):
            continue
        category, key = span.category or "other", short_name(span.kind)
        out.append(_Segment(max(start, w0), min(end, w1), category, key, 2 if category == "data" else 1))
        if calls is not None and id(span) not in seen:
            seen.add(id(span))
            calls[(key, category)] = calls.get((key, category), 0) + 1
    return out


def _pieces(roots: list[Span]) -> Iterator[tuple[float, float, Span]]:
    for root in roots:
        yield from _exclusive(root)


def _sweep(
    segments: list[_Segment], window: tuple[float, float]
) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Share every instant of the window among the segments running then (tier 1 before tier 2)."""
    categories = dict.fromkeys(CATEGORIES, 0.0)
    keys: dict[tuple[str, str], float] = {}
    edges: list[tuple[float, int, int]] = []
    for i, seg in enumerate(segments):
        edges.append((seg.start, 1, i))
        edges.append((seg.end, 0, i))
    edges.sort()
    active: set[int] = set()
    at = window[0]
    for t, opening, i in edges:
        if t > at:
            _share(categories, keys, segments, active, t - at)
            at = t
        if opening:
            active.add(i)
        else:
            active.discard(i)
    if window[1] > at:
        categories["idle"] += window[1] - at
    return categories, keys


def _share(
    categories: dict[str, float],
    keys: dict[tuple[str, str], float],
    segments: list[_Segment],
    active: set[int],
    dt: float,
) -> None:
    if not active:
        categories["idle"] += dt
        return
    tier = min(segments[i].tier for i in active)
    running = [segments[i] for i in active if segments[i].tier == tier]
    part = dt / len(running)
    for seg in running:
        categories[seg.category] += part
        keys[(seg.key, seg.category)] = keys.get((seg.key, seg.category), 0.0) + part


def _union(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def reduce_spans(spans: list[Span], steps: int, on_gpu: bool) -> dict[str, Any]:
    """Where the window's time went, per step: categories (adding up to the window), busy and
    idle, host time, and the top operations. ``spans`` come from :func:`chrome_spans`."""
    marks = [s for s in spans if s.name == WINDOW and not s.device]
    if not marks:
        raise ProfileError(f"the window's mark ({WINDOW}) is not in the trace")
    mark = max(marks, key=lambda s: s.end - s.start)
    window = (mark.start, mark.end)
    span_s = window[1] - window[0]
    if span_s <= 0 or steps <= 0:
        raise ProfileError("the profiled window is empty")

    host: dict[str, list[Span]] = {}
    for span in spans:
        if not span.device:
            host.setdefault(span.thread, []).append(span)
    roots = [root for thread in host.values() for root in _nest(thread)]
    for root in roots:
        _categorise(root, None)
    host_calls: dict[tuple[str, str], int] = {}
    device_calls: dict[tuple[str, str], int] = {}
    host_segments = _segments(roots, window, host_calls)

    if on_gpu:
        launched = {s.ext: s.category for s in spans if not s.device and s.ext is not None}
        kernels = [s for s in spans if s.device and s.end > window[0] and s.start < window[1]]
        for k in kernels:
            by_launch = launched.get(k.ext) if k.ext is not None else None
            k.category = by_launch or categorize(k.kind, k.scope) or categorize(k.name) or "other"
        segments = _segments(kernels, window, device_calls)
        host_busy: float | None = _union((s.start, s.end) for s in host_segments)
    else:
        segments = host_segments
        host_busy = None
    if not segments:
        raise ProfileError("no op or kernel ran inside the profiled window")

    categories, keys = _sweep(segments, window)
    calls = device_calls if on_gpu else host_calls
    top = sorted(keys.items(), key=lambda kv: -kv[1])[:TOP]
    idle = categories["idle"]  # no segment running: the window less the union of the segments
    return {
        "traced_step_s": span_s / steps,
        "categories": {name: seconds / steps for name, seconds in categories.items()},
        "busy_s": (span_s - idle) / steps,
        "idle_s": idle / steps,
        "host_s": (host_busy if host_busy is not None else idle) / steps,
        "idle_means": IDLE_GPU if on_gpu else IDLE_CPU,
        "top": [
            {
                "name": name,
                "category": category,
                "seconds": seconds / steps,
                "calls": calls.get((name, category), 0) / steps,
                "share": seconds / span_s,
            }
            for (name, category), seconds in top
        ],
    }


# -- capture -------------------------------------------------------------------------------------
class Capture:
    """One framework's profiler: started before the warm-up steps, stopped after the window.

    ``start()`` starts recording into a private folder; ``mark()`` returns the window's
    annotation (a context manager the framework records); ``stop()`` stops and returns the
    trace as Chrome trace-event JSON (a dict), and ``trace_file()`` the file to keep.
    """

    name = "profiler"
    on_gpu = False

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self._trace: str | None = None  # the trace file ``stop`` wrote

    def start(self) -> None:
        raise NotImplementedError

    def mark(self) -> Any:
        raise NotImplementedError

    def stop(self) -> dict[str, Any]:
        raise NotImplementedError

    def trace_file(self) -> str | None:
        """The Perfetto-readable trace this capture wrote (gzipped JSON), or None."""
        return self._trace


class Window:
    """The profiled window: opened and closed between device synchronisations, timed by the runner."""

    def __init__(self, capture: Capture, sync: Callable[[], None]) -> None:
        self.capture, self.sync = capture, sync
        self.steps = 0
        self.started = self.seconds = 0.0
        self._mark: Any = None

    def open(self) -> None:
        self.sync()
        self._mark = self.capture.mark()
        self._mark.__enter__()
        self.started = time.perf_counter()

    def close(self) -> None:
        if self._mark is None:
            return
        self.sync()
        self.seconds = time.perf_counter() - self.started
        self._mark.__exit__(None, None, None)
        self._mark = None


def profile_run(
    writer: Any,
    config: Any,
    capture: Callable[[str], Capture],
    sync: Callable[[], None],
    run: Callable[[Window, int, int], None],
    versions: str,
    active: bool = True,
) -> None:
    """Profile ``config.profile_steps`` steps after ``PROFILE_WARMUP`` and send the ``profile`` event.

    ``run(window, warmup, steps)`` runs ``warmup`` steps, ``window.open()``, ``steps`` more
    (counting them in ``window.steps``) and ``window.close()``. ``active``: whether this process
    profiles (data parallel: every rank runs the steps, rank 0 profiles). Failures are reported
    as ``ok: false`` with the reason; they never fail the run.
    """
    steps = max(1, int(config.profile_steps))
    if not active:
        run(_NoWindow(), PROFILE_WARMUP, steps)
        return
    writer.phase("profile", "start")
    workdir = ""
    try:
        workdir = tempfile.mkdtemp(prefix="benchtui-profile-", dir=_trace_dir(config))
        cap = capture(workdir)
        window = Window(cap, sync)
        cap.start()
        try:
            run(window, PROFILE_WARMUP, steps)
        finally:
            window.close()
            trace = cap.stop()
        if not window.steps or window.seconds <= 0:
            raise ProfileError("no step ran inside the profiled window")
        summary = reduce_spans(chrome_spans(trace), window.steps, cap.on_gpu)
        kept, note = _keep(cap.trace_file(), config)
        writer.emit(
            "profile",
            ok=True,
            profiler=f"{cap.name} {versions}".strip(),
            device="gpu" if cap.on_gpu else "cpu",
            steps=window.steps,
            window_s=window.seconds,
            step_s=window.seconds / window.steps,
            **summary,
            trace=kept,
            trace_note=note,
            method=(
                "each op's exclusive time on its thread, in its outermost categorised caller's category; "
                + (
                    "kernels and copies on the device streams, in their launching op's category; "
                    if cap.on_gpu
                    else ""
                )
                + "each instant of the window shared among what ran then (input only when nothing computed), "
                "idle when nothing ran"
            ),
        )
    except Exception as exc:  # a profile never fails the run (ParentGone is no Exception)
        reason = str(exc) if isinstance(exc, ProfileError) else f"{type(exc).__name__}: {exc}"
        writer.emit("profile", ok=False, reason=f"profile unavailable: {reason.splitlines()[0][:300]}")
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    writer.phase("profile", "end")


class _NoWindow(Window):
    def __init__(self) -> None:
        self.steps = 0

    def open(self) -> None:
        return

    def close(self) -> None:
        return


def _trace_dir(config: Any) -> str | None:
    folder = os.path.dirname(config.trace_path) if config.trace_path else ""
    if folder:
        os.makedirs(folder, exist_ok=True)
        return folder
    return None


def _keep(path: str | None, config: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Move the trace next to the run's log as ``<trace_path>.trace.json.gz``, if within the cap."""
    if not path or not os.path.exists(path):
        return None, "the profiler wrote no trace file"
    size = os.path.getsize(path)
    cap = int(config.trace_cap_mb) * 1024 * 1024
    if size > cap:
        return None, f"trace dropped: {size / 2**20:.0f} MB over the {config.trace_cap_mb} MB cap"
    if not config.trace_path:
        return None, "trace not kept: the run has no session folder"
    # PyTorch's own suffix, which TensorBoard's PyTorch profiler plugin looks for.
    target = config.trace_path + (
        ".pt.trace.json.gz" if path.endswith(".pt.trace.json.gz") else ".trace.json.gz"
    )
    os.replace(path, target)
    return {"file": os.path.basename(target), "bytes": size}, None


def read_json(path: str) -> Any:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        return json.load(handle)


def _find(folder: str, suffix: str) -> str | None:
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            if name.endswith(suffix):
                return os.path.join(root, name)
    return None


def _gzip_file(source: str, target: str) -> str:
    with open(source, "rb") as raw, gzip.open(target, "wb", compresslevel=6) as out:
        shutil.copyfileobj(raw, out, 1 << 20)
    os.remove(source)
    return target


class TorchCapture(Capture):
    """``torch.profiler``: CPU activity, and CUDA activity (CUPTI) on a GPU. Keras on torch too."""

    name = "torch.profiler"

    def __init__(self, workdir: str, cuda: bool) -> None:
        super().__init__(workdir)
        self.on_gpu = cuda
        self._prof: Any = None

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.on_gpu else [])
        self._prof = profile(activities=activities)
        self._prof.start()

    def mark(self) -> Any:
        from torch.profiler import record_function

        return record_function(WINDOW)

    def stop(self) -> dict[str, Any]:
        self._prof.stop()
        path = os.path.join(self.workdir, "trace.pt.trace.json")
        self._prof.export_chrome_trace(path)
        trace = read_json(path)
        self._trace = _gzip_file(path, path + ".gz")
        return trace


class TensorFlowCapture(Capture):
    """The TensorFlow profiler (host ops; CUPTI on a GPU); its XSpace converted to trace-event JSON."""

    name = "TensorFlow profiler"

    def __init__(self, workdir: str, gpu: bool) -> None:
        super().__init__(workdir)
        self.on_gpu = gpu

    def start(self) -> None:
        import tensorflow as tf

        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=2, python_tracer_level=0, device_tracer_level=1 if self.on_gpu else 0
        )
        tf.profiler.experimental.start(self.workdir, options=options)

    def mark(self) -> Any:
        import tensorflow as tf

        return tf.profiler.experimental.Trace(WINDOW)

    def stop(self) -> dict[str, Any]:
        import tensorflow as tf
        from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

        tf.profiler.experimental.stop()
        xspace = _find(self.workdir, ".xplane.pb")
        if xspace is None:
            raise ProfileError("the TensorFlow profiler wrote no XSpace")
        data, ok = _pywrap_profiler_plugin.xspace_to_tools_data([xspace], "trace_viewer@", {})
        if not ok or not data:
            raise ProfileError("the TensorFlow profiler's trace could not be converted to trace events")
        path = os.path.join(self.workdir, "trace.json.gz")
        with gzip.open(path, "wb", compresslevel=6) as out:
            out.write(data)
        self._trace = path
        return json.loads(data)


class JaxCapture(Capture):
    """``jax.profiler`` (no Python tracer); its Perfetto trace is trace-event JSON."""

    name = "jax.profiler"

    def __init__(self, workdir: str, gpu: bool) -> None:
        super().__init__(workdir)
        self.on_gpu = gpu

    def start(self) -> None:
        import jax

        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0
        jax.profiler.start_trace(self.workdir, create_perfetto_trace=True, profiler_options=options)

    def mark(self) -> Any:
        import jax

        return jax.profiler.TraceAnnotation(WINDOW)

    def stop(self) -> dict[str, Any]:
        import jax

        jax.profiler.stop_trace()
        path = _find(self.workdir, ".trace.json.gz")
        if path is None:
            raise ProfileError("jax.profiler wrote no Perfetto trace")
        self._trace = path
        return read_json(path)


def keras_capture(backend: str, gpu: bool) -> Callable[[str], Capture]:
    """The profiler of Keras's backend: TensorFlow's, JAX's, or PyTorch's."""
    kinds: dict[str, Callable[[str], Capture]] = {
        "tensorflow": lambda d: TensorFlowCapture(d, gpu),
        "jax": lambda d: JaxCapture(d, gpu),
        "torch": lambda d: TorchCapture(d, gpu),
    }
    return kinds[backend]
