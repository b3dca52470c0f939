"""The results table: one row per (model, framework), or per (model, sweep point, framework), redrawn by diff
from the session model."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from rich.console import JustifyMethod
from rich.text import Text
from textual.widgets import DataTable

from benchtui.core import fmt
from benchtui.core.model.cell import CellSummary
from benchtui.core.model.parity import marked
from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.stats import quantile, warmup_cut
from benchtui.core.model.status import RunStatus, status_style
from benchtui.core.plan.sweep import Point
from benchtui_runners import catalog

LIVE = frozenset({"starting", "building", "running"})
RECENT_BATCHES = 32  # "current" images/s: the median of this many latest batches
MEDIAN_WINDOW = 4096  # batches of a live run the running median looks at (bounded cost per tick)

# key, two-line header (all times in seconds, said in the table's title), shown when compact.
# A column shows when the rows carry its key: inference rows carry "latency" instead of "batch",
# a data-parallel session's rows "devices" (devices × per-device batch = the global batch).
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("model", "Model\n", True),
    ("point", "Point\n", True),  # a sweep's: the header names the axes, a cell their values (``point_text``)
    ("framework", "Framework\n", True),
    ("devices", "Devices\n× batch", True),
    ("state", "State\n", True),
    ("ips", "img/s\n", True),
    ("batch", "Batch\nmedian", True),
    ("latency", "Latency ms\np50/p90/p99", True),
    ("epoch", "Epoch\nmean", True),
    ("first", "Epoch\nfirst", False),
    ("excl", "Epoch\nexcl.1st", True),
    ("build", "Build\n", False),
    ("peak", "Peak\nmemory", True),
    ("tflops", "TFLOP/s\n(% peak)", False),  # the unit is the session's (``flop_unit``): GFLOP/s on a CPU
)
#: Not a column: the unit of the FLOP rate column, the same in every row (the header says it).
UNIT_KEY = "tflops_unit"
#: Not a column: a sweep's Point column header (the axes swept), the same in every row.
AXES_KEY = "point_axes"
#: Columns of words, left-aligned; the figures are right-aligned.
LEFT = ("model", "point", "framework", "state")

Cell = tuple[str, str]  # (text, style): compared as plain data, turned into Text when changed
#: The throughput column's header by the kinds of model in the table: images, tokens, or both
#: (each cell then says its unit).
RATE_HEADERS = {
    frozenset({"image"}): "img/s\n",
    frozenset({"tokens"}): "tok/s\n",
    frozenset({"tensor"}): "smp/s\n",  # float tensors: a user's own model, a watched command
}
#: The unit a cell of a table of several kinds says after its figure.
RATE_UNITS = {"image": " img", "tokens": " tok", "tensor": " smp"}


def rate_header(model_ids: list[str]) -> str:
    """The throughput column's header for a table of these models."""
    kinds = frozenset(catalog.MODELS[m].kind if m in catalog.MODELS else "image" for m in model_ids)
    return RATE_HEADERS.get(kinds, "Rate\nper s" if len(kinds) > 1 else "img/s\n")


def rate_text(samples_per_s: float | None, tokens: int, mixed: bool, kind: str = "image") -> str:
    """A row's throughput: images/s (samples/s for tensors), or tokens/s for a token model; with its unit
    in a table of several kinds."""
    if samples_per_s is None:
        return "–"
    if tokens:
        return fmt.rate(samples_per_s * tokens) + (" tok" if mixed else "")
    return fmt.rate(samples_per_s) + (RATE_UNITS.get(kind, " img") if mixed else "")


def flop_unit(model: SessionModel) -> fmt.FlopUnit:
    """The unit of the table's FLOP rates: GFLOP/s when the runs train on a CPU, TFLOP/s on a GPU; fixed by
    the device (the runners' word, else the plan's), not by the figures, so the header does not jump as
    they come."""
    kinds = {
        device.get("type")
        for run in model.runs.values()
        if isinstance(device := run.hello.get("device"), dict) and device.get("type")
    }
    if kinds:
        return fmt.device_flop_unit(cpu="cuda" not in kinds)
    return fmt.device_flop_unit(cpu=model.plan.device == "cpu")


def flop_header(unit: str) -> str:
    """The FLOP rate column's header: '(% peak)' under TFLOP/s only (a GPU's; a CPU has no peak here)."""
    return f"{unit}\n(% peak)" if unit == "TFLOP/s" else f"{unit}\n"


def latency_text(sorted_seconds: Any) -> str:
    """'50.8/51.8/52.7': p50/p90/p99 of sorted batch times, in milliseconds."""
    if not len(sorted_seconds):
        return "–"
    return "/".join(fmt.seconds(quantile(sorted_seconds, q) * 1000) for q in (0.5, 0.9, 0.99))


@dataclass
class CellCache:
    """The last summary row of a cell and the run statuses it was computed from."""

    key: tuple[str, ...]
    row: CellSummary


def row_key(framework: str, model: str, point: Point | None = None) -> str:
    """'resnet50|torch'; a sweep's cell adds its point's key: 'resnet50|torch|batch=8,channels-last=on'."""
    return f"{model}|{framework}|{point.key}" if point else f"{model}|{framework}"


def point_header(axes: list[str]) -> str:
    """The Point column's header: the swept axes, over its two lines ('batch ·\nchannels-last')."""
    if len(axes) < 2:
        return f"{axes[0] if axes else 'Point'}\n"
    cut = (len(axes) + 1) // 2
    return " · ".join(axes[:cut]) + " ·\n" + " · ".join(axes[cut:])


def point_text(point: Point) -> str:
    """A point in its row, the axes' values in the header's order: '8 · on'."""
    return " · ".join(value for _, value in point.items)


def generate_rate(run: RunState) -> str:
    """A generate run's tokens/s after the first token, its batch's, over its latest calls (issue 34): what
    the tok/s column says of a generate session (the verdict's figure), '–' before a call with a later token."""
    steps = run.generation.steps[-RECENT_BATCHES:] if run.generation is not None else []
    rates = [r for s in steps if (r := s.batch_tokens_per_s) is not None]
    return fmt.rate(statistics.median(rates)) if rates else "–"


def _median_tail(values: Any, n: int) -> float | None:
    if not values:
        return None
    tail = values[-n:] if len(values) > n else values
    return statistics.median(tail)


def run_batch_size(run: RunState, model: SessionModel, model_id: str) -> int:
    """The batch size the runner says it used (its hello), else the cell's at the run's point
    (``SessionModel.batch_size``)."""
    config = run.hello.get("config")
    size = config.get("batch_size") if isinstance(config, dict) else None
    if isinstance(size, int) and size > 0:
        return size
    return model.batch_size(run.spec.framework, model_id, run.spec.point)


def run_state_label(run: RunState, compact: bool = False) -> str:
    if run.status == "running" and not run.epochs_planned:  # a watch: no count of epochs to go by
        return f"epoch {run.current_epoch}" if run.current_epoch else "running"
    if run.status == "running":
        epoch = max(run.current_epoch, 1)
        return f"epoch {epoch}/{run.epochs_planned}" if compact else f"epoch {epoch} of {run.epochs_planned}"
    if run.status == "starting":
        return "starting"
    return "building"


def devices_text(devices: int, per_device: int, compact: bool = False, nodes: int = 1) -> str:
    """'4 × 16 = 64': devices, the batch on each and the global batch ('4×16' compact); on several nodes
    '2×4 × 16 = 128' (nodes × devices, '2×4×16' compact)."""
    if nodes > 1:
        return (
            f"{nodes}×{devices}×{per_device}"
            if compact
            else f"{nodes}×{devices} × {per_device} = {nodes * devices * per_device}"
        )
    return f"{devices}×{per_device}" if compact else f"{devices} × {per_device} = {devices * per_device}"


def other_count_run(model: SessionModel, framework: str, model_id: str) -> RunState | None:
    """A scaling session's run in progress of this cell at another device count than the row's."""
    run = model.runs.get(model.current) if model.current else None
    if run is None or run.status not in LIVE:
        return None
    if (run.spec.nodes, run.spec.devices) == (model.plan.nodes, model.plan.devices):
        return None
    return run if (run.spec.framework, run.spec.model) == (framework, model_id) else None


def cell_state(runs: list[RunState], compact: bool = False) -> str:
    """queued / starting / building / epoch e of E / done / failed / unavailable / stopped ..."""
    live = [r for r in runs if r.status in LIVE]
    if live:
        return run_state_label(live[0], compact)
    statuses = [r.status for r in runs]
    if not runs or all(s == "queued" for s in statuses):
        return "queued"
    if "failed" in statuses:
        return "failed"
    if all(s == "unavailable" for s in statuses):
        return "unavailable"
    ok = statuses.count(RunStatus.OK)
    if ok == len(runs):
        return "done"
    of = "/" if compact else " of "
    diverged = statuses.count(RunStatus.DIVERGED)
    if diverged and "queued" not in statuses:  # its loss said it did not train: never "done"
        return "diverged" if diverged == len(runs) else f"diverged {diverged}{of}{len(runs)}"
    if "queued" in statuses:
        return f"{ok}{of}{len(runs)} runs" if ok else "queued"
    if ok:
        return f"done {ok}{of}{len(runs)}"
    return next(s for s in statuses if s not in ("ok", "queued"))


def cell_values(
    model: SessionModel,
    framework: str,
    model_id: str,
    cache: dict[str, CellCache],
    compact: bool = False,
    point: Point | None = None,
) -> dict[str, Cell]:
    """The displayed text of one row. Finished runs come from ``SessionModel.row`` (cached
    until a run of the cell changes status); a live run adds its figures so far.

    Token models show tokens/s; inference shows latency per batch (p50/p90/p99 ms) instead
    of the median batch, and, compact, without the mean epoch time to fit 80 columns; so does a
    data-parallel session, whose rows say their devices and batch, and a sweep, whose rows say their point.
    """
    values = _cell_values(model, framework, model_id, cache, compact, point)
    if compact and ("latency" in values or "devices" in values or "point" in values):
        values.pop("epoch", None)
    return values


def _cell_values(
    model: SessionModel,
    framework: str,
    model_id: str,
    cache: dict[str, CellCache],
    compact: bool,
    point: Point | None = None,
) -> dict[str, Cell]:
    runs = model.cell_runs(framework, model_id, point=point)
    key = row_key(framework, model_id, point)
    statuses = tuple(r.status for r in runs)
    cached = cache.get(key)
    if cached is None or cached.key != statuses:
        cached = CellCache(statuses, model.row(framework, model_id, point))
        cache[key] = cached
    row = cached.row
    live = next((r for r in runs if r.status in LIVE), None)
    state = cell_state(runs, compact)
    # A scaling session's run at another count: the row says its state, and its count in the
    # devices cell; the figures stay the row's own count's (none until its runs finish).
    elsewhere = other_count_run(model, framework, model_id) if live is None else None
    if elsewhere is not None:
        state = run_state_label(elsewhere, compact)
    info = catalog.MODELS.get(model_id)
    # Frameworks that build different networks: the model's label carries the parity mark (its
    # sentence is the rows' ARCHITECTURE caution, and every export's). Asked of the model each
    # time, not of the cached row: the other framework's count may have come since.
    same = model.parity(model_id)
    values: dict[str, Cell] = {
        "model": (marked(info.label if info else model_id, bool(same and same.flagged)), ""),
        "framework": (catalog.FRAMEWORK_LABELS.get(framework, framework), ""),
        "state": (state, status_style(state.split(" ")[0], "bold cyan" if live or elsewhere else "")),
    }
    if point:
        values["point"] = (point_text(point), "")
        values[AXES_KEY] = (point_header([axis for axis, _ in point.items]), "")
    if model.plan.multi_device:
        devices = int(row.devices or model.plan.devices)
        per_device = int(row.batch_size or model.plan.batch_size(model_id, framework))
        nodes = model.plan.nodes
        if elsewhere is not None:
            devices, nodes = elsewhere.spec.devices, elsewhere.spec.nodes
            per_device = model.plan.batch_size(model_id, framework, devices, nodes)
        values["devices"] = (devices_text(devices, per_device, compact, nodes), "cyan" if elsewhere else "")
    inference = model.plan.task == "inference"
    generate = model.plan.task == "generate"
    tokens = int(row.tokens_per_sample or 0)
    mixed = len({catalog.MODELS[m].kind for m in model.plan.models if m in catalog.MODELS}) > 1
    kind = info.kind if info is not None else "image"
    unit = flop_unit(model)
    values[UNIT_KEY] = (unit.name, "")
    if live is not None and not row.runs:
        # No finished run yet: show the live run's figures so far.
        figures = live.figures()
        recent = _median_tail(live.batch_seconds, RECENT_BATCHES)
        seconds = live.batch_seconds  # after the detected warm-up, as the summary's median is
        steady = seconds[max(warmup_cut(seconds), len(seconds) - MEDIAN_WINDOW) :]
        batch = statistics.median(steady) if steady else None
        bs = run_batch_size(live, model, model_id)
        if inference:
            values["latency"] = (latency_text(sorted(steady)), "")
        else:
            values["batch"] = (fmt.seconds(batch), "")
        rate = rate_text(bs / recent if recent else None, tokens, mixed, kind)
        values.update(
            ips=(live_rate(generate_rate(live) if generate else rate), "cyan"),
            epoch=(fmt.seconds(figures["mean_epoch_s"]), ""),
            first=(fmt.seconds(figures["first_epoch_s"]), ""),
            excl=(fmt.seconds(figures["mean_epoch_excl_first_s"]), ""),
            build=(fmt.seconds(figures["build_s"]), ""),
            peak=(fmt.bytes_(live.peak_bytes) if live.peak_bytes is not None else "–", ""),
            tflops=(_live_flops(model, live, unit), "cyan"),
        )
        return values
    # The finished runs' figure, as the answer above the table has it; a later run going on adds its
    # current rate, marked as such (not on a compact table: no room).
    ips = rate_text(row.images_per_s, tokens, mixed, kind)
    if generate:  # the batch's tokens/s after the first token: the verdict's figure (issue 34)
        ips = fmt.rate(row.generation.batch_tokens_per_s if row.generation is not None else None)
    if live is not None and live.batch_seconds and not compact:
        recent = _median_tail(live.batch_seconds, RECENT_BATCHES)
        bs = run_batch_size(live, model, model_id)
        now = rate_text(bs / recent if recent else None, tokens, mixed, kind)
        if generate:
            now = generate_rate(live)
        values["ips"] = (f"{ips} · {live_rate(now)}" if now != "–" else ips, "")
    else:
        values["ips"] = (ips, "")
    values["tflops"] = (unit.with_peak(row.achieved_tflops, row.peak_fraction), "")
    peak = row.peak_memory_bytes
    if inference:  # the summary's latency percentiles, as every export has them
        p50, p90, p99 = row.latency_p50_s, row.latency_p90_s, row.latency_p99_s
        values["latency"] = (
            "–" if p50 is None else "/".join(fmt.seconds(v * 1000) for v in (p50, p90, p99) if v is not None),
            "",
        )
    else:
        values["batch"] = (fmt.seconds(row.median_batch_s), "")
    values.update(
        epoch=(fmt.seconds(row.mean_epoch_s), ""),
        first=(fmt.seconds(row.first_epoch_s), ""),
        excl=(fmt.seconds(row.mean_epoch_excl_first_s), ""),
        build=(fmt.seconds(row.build_s), ""),
        peak=(fmt.bytes_(peak) if peak is not None else "–", ""),
    )
    return values


def live_rate(rate: str) -> str:
    """A run going on's current rate, said as such ('now 41.2'): not a finished run's figure ('–' while it
    has none)."""
    return rate if rate == "–" else f"now {rate}"


def _live_flops(model: SessionModel, run: RunState, unit: fmt.FlopUnit) -> str:
    """A live run's FLOP rate so far (its last batches), with its share of the GPU's peak, in ``unit``."""
    figures = model.live_figures(run)
    return unit.with_peak(figures.tflops, figures.peak_fraction)


class ResultsTable(DataTable):
    """The study's figures per (model, framework), updated cell by cell.

    ``compact`` drops the first-epoch, build and TFLOP/s columns so the table fits 80 columns;
    all three stay in the exported summary.
    """

    DEFAULT_CSS = """
    ResultsTable {
        height: auto;
        max-height: 50vh;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(
            id=id, classes=classes, header_height=2, cursor_type="row", zebra_stripes=True, show_cursor=False
        )
        self._compact = False
        self._shown: dict[str, dict[str, Cell]] = {}
        self._columns_built = False
        # What the rows carry (their keys) and the throughput header for their models.
        self._keys: frozenset[str] = frozenset(
            key for key, _, _ in COLUMNS if key not in ("latency", "devices", "point")
        )
        self._rate_header = "img/s\n"
        self._flop_header = flop_header("TFLOP/s")
        self._point_header = "Point\n"

    @property
    def compact(self) -> bool:
        return self._compact

    @property
    def columns_shown(self) -> list[str]:
        return [key for key, _, compact in COLUMNS if (compact or not self._compact) and key in self._keys]

    def set_compact(self, compact: bool) -> None:
        """Switch the column set; the next ``show`` rebuilds the table."""
        if compact != self._compact or not self._columns_built:
            self._compact = compact
            self._columns_built = False

    def _build_columns(self) -> None:
        self.clear(columns=True)
        self._shown.clear()
        for key, label, _ in COLUMNS:
            if key in self.columns_shown:
                justify: JustifyMethod = "left" if key in LEFT else "right"
                header = {
                    "ips": self._rate_header,
                    "tflops": self._flop_header,
                    "point": self._point_header,
                }.get(key, label)
                self.add_column(Text(header, justify=justify), key=key)
        self._columns_built = True

    def show(self, rows: dict[str, dict[str, Cell]]) -> int:
        """Bring the table to ``rows`` (row key -> column -> cell); return how many cells changed.

        The columns are those the rows carry (inference rows: latency instead of the median
        batch), and the throughput header names what the rows' models process.
        """
        if rows:
            first = next(iter(rows.values()))
            keys = frozenset(first) - {UNIT_KEY, AXES_KEY}
            header = rate_header([key.split("|", 1)[0] for key in rows])
            flops = flop_header(first[UNIT_KEY][0]) if UNIT_KEY in first else self._flop_header
            axes = first[AXES_KEY][0] if AXES_KEY in first else self._point_header
            if (keys, header, flops, axes) != (
                self._keys,
                self._rate_header,
                self._flop_header,
                self._point_header,
            ):
                self._keys, self._rate_header, self._flop_header = keys, header, flops
                self._point_header = axes
                self._columns_built = False
        if not self._columns_built:
            self._build_columns()
        columns = self.columns_shown
        changed = 0
        # A row no longer there: a watch's run, once its hooks name the framework.
        for key in [k for k in self._shown if k not in rows]:
            self.remove_row(key)
            del self._shown[key]
            changed += len(columns)
        for key, values in rows.items():
            shown = self._shown.get(key)
            if shown is None:
                self.add_row(*(_text(values[c], c) for c in columns), key=key)
                self._shown[key] = dict(values)
                changed += len(columns)
                continue
            for column in columns:
                old = shown.get(column)
                if old != values[column]:
                    # Growing text widens its column; shrinking never narrows it (no jitter).
                    wider = old is None or len(values[column][0]) > len(old[0])
                    self.update_cell(key, column, _text(values[column], column), update_width=wider)
                    shown[column] = values[column]
                    changed += 1
        return changed

    def cell_text(self, key: str, column: str) -> str:
        """The plain text shown in a cell (for tests and screen readers of the model)."""
        return self._shown[key][column][0]


def _text(cell: Cell, column: str) -> Text:
    text, style = cell
    justify: JustifyMethod = "left" if column in LEFT else "right"
    return Text(fmt.clean(text), style=style, justify=justify)  # runner reasons, labels from files
