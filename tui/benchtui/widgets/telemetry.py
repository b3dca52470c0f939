"""Telemetry panels: one per visible GPU (NVML), one line per GPU of a data-parallel session, or the
runner process (psutil) when there is no GPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.text import Text
from textual.widget import Widget

from benchtui.core import fmt
from benchtui.widgets.spark import strip

LABEL_W = 11
VALUE_W = 20
GIB = 1024**3
MIN_SPAN = 120  # samples: a minute at the default 0.5 s interval
MAX_STRIPS = 8  # GPU lines in a data-parallel panel; more are summed up in one line
MIN_SPARK = 12  # columns a GPU's utilization strip keeps before its memory figure is left out


def _gib_pair(used: float | None, total: float | None) -> str:
    if used is None:
        return fmt.NA
    if total is None:
        return fmt.bytes_(used)
    return f"{used / GIB:.1f}/{total / GIB:.1f} GiB"


def span_label(seconds: float) -> str:
    if seconds >= 90:
        return f"last {seconds / 60:.0f} min"
    return f"last {seconds:.0f} s"


class TelemetryPanel(Widget):
    """Numbers and fixed-scale strips for one GPU (``gpu_index``) or for the runner process (None).

    The strips cover the last minute, then whole minutes up to the model's sample window
    (``capacity`` samples), newest at the right; a metric the GPU does not report is N/A
    and leaves gaps, never an error.
    """

    DEFAULT_CSS = """
    TelemetryPanel {
        height: auto;
    }
    """

    def __init__(
        self,
        gpu_index: int | None,
        info: dict[str, Any] | None = None,
        status: str = "",
        capacity: int = 600,
        interval: float = 0.5,
        cpu_count: int | None = None,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.gpu_index = gpu_index
        self.info = info or {}
        self.status = status
        self.capacity = capacity
        self.cpu_count = cpu_count or 1
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self.span = min(capacity, MIN_SPAN)  # samples across a strip: grows with the session up to capacity
        self._set_title()

    def _set_title(self) -> None:
        span = span_label(self.span * self.interval)
        if self.gpu_index is None:
            self.border_title = f"Runner process (psutil) · {span}"
        else:
            name = escape(fmt.clean(self.info.get("name") or "GPU"))  # border titles are markup
            self.border_title = f"GPU {self.gpu_index} · {name} · {span}"

    def update_samples(self, samples: list[dict[str, Any]]) -> None:
        """A fresh list of GPU events (oldest first), taken from the model on the UI tick."""
        self.samples = samples
        # The time axis starts at a minute and widens in whole minutes as the window fills,
        # so a short session is not squeezed into the right edge of a five-minute strip.
        per_minute = max(1, round(60 / self.interval))
        minutes = -(-len(samples) // per_minute)
        span = min(self.capacity, max(MIN_SPAN, minutes * per_minute))
        if span != self.span:
            self.span = span
            self._set_title()
        self.refresh(layout=True)

    # -- series -----------------------------------------------------------------------------
    def _gpu(self, sample: dict[str, Any]) -> dict[str, Any] | None:
        gpus = sample.get("gpus")
        if not isinstance(gpus, list) or self.gpu_index is None or self.gpu_index >= len(gpus):
            return None
        gpu = gpus[self.gpu_index]
        return gpu if isinstance(gpu, dict) else None

    def _series(self, pick: Callable[[dict[str, Any]], Any]) -> list[float | None]:
        out: list[float | None] = []
        for sample in self.samples:
            try:
                value = pick(sample)
            except (KeyError, TypeError, AttributeError):
                value = None
            out.append(
                float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            )
        return out

    def _metric(self, key: str) -> list[float | None]:
        return self._series(lambda s: (self._gpu(s) or {}).get(key))

    def _lines(self) -> list[tuple[str, str, list[float | None], float | None, str]]:
        """(label, value, series, ceiling, style) per line."""
        host = self._series(lambda s: s["host"]["cpu_percent"])
        rss = self._series(lambda s: s["host"]["rss"] or None)
        last = self.samples[-1] if self.samples else {}
        host_now = last.get("host")
        last_host: dict[str, Any] = host_now if isinstance(host_now, dict) else {}
        running = last.get("run") is not None
        cpu_now = last_host.get("cpu_percent")
        rss_now = last_host.get("rss") or None  # 0 is an exited (zombie) runner, not a size
        # psutil gives % of one core; people think in cores busy out of the machine's.
        cpu_text = (
            f"{cpu_now / 100:.1f}" if isinstance(cpu_now, (int, float)) else ("–" if not running else fmt.NA)
        )
        rss_text = fmt.bytes_(rss_now) if rss_now is not None else ("–" if not running else fmt.NA)
        cpu_ceiling = 100.0 * self.cpu_count
        if self.gpu_index is None:
            others = self._series(_other_load)
            other_now = _other_load(last) if last else None
            other_text = f"{other_now:.1f} cores" if other_now is not None else fmt.NA
            return [
                (
                    "runner CPU",
                    f"{cpu_text} of {self.cpu_count} cores" if cpu_now is not None else cpu_text,
                    host,
                    cpu_ceiling,
                    "#7bd88f",
                ),
                ("runner RSS", rss_text, rss, None, "#4ea1ff"),
                # Other processes on the same cores skew CPU timings: show them, not only the runner.
                ("others CPU", other_text, others, float(self.cpu_count or 1), "#f6a43c"),
            ]
        g = self._gpu(last) or {}

        def value(key: str, suffix: str, digits: int = 0) -> str:
            v = g.get(key)
            return (
                fmt.NA
                if v is None
                else (f"{v:.{digits}f}{suffix}" if isinstance(v, float) else f"{v}{suffix}")
            )

        total = g.get("mem_total") or self.info.get("memory_total")
        limit = self.info.get("power_limit_w")
        power = value("power_w", " W")
        if limit and g.get("power_w") is not None:
            power = f"{g['power_w']:.0f} of {limit:.0f} W"
        proc = g.get("proc_mem")
        proc_text = fmt.bytes_(proc) if proc is not None else ("–" if not running else fmt.NA)
        return [
            ("util", value("util", " %"), self._metric("util"), 100.0, "#7bd88f"),
            ("memory", _gib_pair(g.get("mem_used"), total), self._metric("mem_used"), total, "#4ea1ff"),
            ("power", power, self._metric("power_w"), limit, "#ffb347"),
            ("temp", value("temp_c", " °C"), self._metric("temp_c"), 100.0, "#ff6f91"),
            (
                "SM clock",
                value("sm_clock_mhz", " MHz"),
                self._metric("sm_clock_mhz"),
                self.info.get("max_sm_clock_mhz"),
                "#c792ea",
            ),
            ("runner mem", proc_text, self._metric("proc_mem"), total, "#4ea1ff"),
            ("runner CPU", f"{cpu_text} · {rss_text}", host, cpu_ceiling, "#7bd88f"),
        ]

    def get_content_height(self, container, viewport, width: int) -> int:
        # Notes may wrap; metric lines are cut to the width and never do.
        console = self.app.console
        return sum(len(line.wrap(console, max(width, 1))) for line in self._render_lines(width))

    def _render_lines(self, width: int | None = None) -> list[Text]:
        width = max(width or self.size.width, 30)
        spark_w = max(width - LABEL_W - VALUE_W - 1, 6)
        lines: list[Text] = []
        last = self._gpu(self.samples[-1]) if self.samples and self.gpu_index is not None else None
        if self.gpu_index is None:
            lines.append(
                Text(fmt.clean(f"No GPU metrics (N/A): {self.status or 'NVML not used'}"), style="yellow")
            )
        elif last is not None and last.get("lost"):
            lines.append(
                Text("GPU lost: NVML no longer answers for it; its metrics are N/A", style="bold red")
            )
        for label, value, series, ceiling, style in self._lines():
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{label:<{LABEL_W}}", style="bold")
            line.append(f"{value:<{VALUE_W}}"[:VALUE_W], style="dim" if value in (fmt.NA, "–") else "")
            line.append(strip(series[-self.span :], spark_w, ceiling, self.span), style=style)
            lines.append(line)
        others = (last or {}).get("other_procs")
        if isinstance(others, int) and others > 0 and self.samples[-1].get("run") is not None:
            mem = (last or {}).get("other_mem")
            held = f" ({fmt.bytes_(mem)})" if isinstance(mem, int) and mem > 0 else ""
            lines.append(
                Text(f"{others} other process(es) on this GPU{held}: the run shares it", style="yellow")
            )
        throttle = (last or {}).get("throttle")
        if throttle:
            reasons = [r for r in throttle if r != "gpu_idle"]
            if reasons:
                lines.append(Text("clocks held back: " + ", ".join(reasons), style="yellow"))
        return lines

    def render(self) -> Group:
        return Group(*self._render_lines())


class GpuStrips(TelemetryPanel):
    """A data-parallel session's GPUs, one line each: utilization over time, memory and power now.

    ``gpu_indices`` are the NVML indices of the session's GPUs (positions in a sample's ``gpus``).
    The GPUs the current run trains on (a sample's ``devices``, else its ``watched`` GPU) are
    marked; at most ``max_strips`` lines are drawn, the run's GPUs first, and the rest summed
    up in one line. Warnings (a lost GPU, clocks held back, another process) follow the strips.
    """

    def __init__(
        self,
        gpu_indices: list[int],
        infos: list[dict[str, Any]] | None = None,
        status: str = "",
        capacity: int = 600,
        interval: float = 0.5,
        cpu_count: int | None = None,
        *,
        max_strips: int = MAX_STRIPS,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        self.gpu_indices = list(gpu_indices)
        self.infos = {
            info["index"]: info for info in infos or [] if isinstance(info, dict) and "index" in info
        }
        self.max_strips = max_strips
        self.training: list[int] = []  # the GPUs of the run in progress, as the latest sample names them
        first = self.gpu_indices[0] if self.gpu_indices else 0
        super().__init__(
            first, self.infos.get(first), status, capacity, interval, cpu_count, id=id, classes=classes
        )

    def _set_title(self) -> None:
        span = span_label(self.span * self.interval)
        # One model name for all (the usual case) is said once; a mixed set would not fit a title.
        names = {fmt.clean((self.infos.get(i) or {}).get("name") or "GPU") for i in self.gpu_indices}
        name = f" · {escape(names.pop())}" if len(names) == 1 else ""
        self.border_title = f"{_gpu_list(self.gpu_indices)}{name} · {span}"

    def update_samples(self, samples: list[dict[str, Any]]) -> None:
        last = samples[-1] if samples else {}
        self.training = _run_gpus(last)
        super().update_samples(samples)

    def _at(self, sample: dict[str, Any], index: int) -> dict[str, Any]:
        gpus = sample.get("gpus")
        if not isinstance(gpus, list) or not 0 <= index < len(gpus) or not isinstance(gpus[index], dict):
            return {}
        gpu: dict[str, Any] = gpus[index]
        return gpu

    def _util(self, index: int) -> list[float | None]:
        return self._series(lambda s: self._at(s, index).get("util"))

    def shown(self) -> tuple[list[int], list[int]]:
        """The GPUs drawn as strips (in index order) and those summed up in the "+N more" line."""
        if len(self.gpu_indices) <= self.max_strips:
            return list(self.gpu_indices), []
        keep = max(self.max_strips - 1, 1)  # one line goes to the "+N more" summary
        first = [i for i in self.gpu_indices if i in self.training][:keep]
        first += [i for i in self.gpu_indices if i not in first][: keep - len(first)]
        return sorted(first, key=self.gpu_indices.index), [i for i in self.gpu_indices if i not in first]

    def _render_lines(self, width: int | None = None) -> list[Text]:
        width = max(width or self.size.width, 30)
        last = self.samples[-1] if self.samples else {}
        running = last.get("run") is not None
        shown, hidden = self.shown()
        label_w = max(len(f"GPU {i}") for i in self.gpu_indices) + 3 if self.gpu_indices else 8
        rows = []
        for index in shown:
            g = self._at(last, index)
            total = g.get("mem_total") or (self.infos.get(index) or {}).get("memory_total")
            util = g.get("util")
            power = g.get("power_w")
            values = (
                ("lost", "", "")
                if g.get("lost")
                else (
                    f"{util:.0f} %" if isinstance(util, (int, float)) else fmt.NA,
                    _gib_pair(g.get("mem_used"), total),
                    f"{power:.0f} W" if isinstance(power, (int, float)) else fmt.NA,
                )
            )
            rows.append((index, values))
        # Value columns as wide as their widest entry, so the strips line up; memory goes first
        # when the panel is too narrow for it (utilization and power say more about a run).
        widths = [max((len(v[k]) for _, v in rows), default=0) for k in range(3)]
        spark_w = width - label_w - widths[0] - widths[1] - widths[2] - 4
        drop_memory = spark_w < MIN_SPARK
        if drop_memory:
            spark_w += widths[1] + 1
        spark_w = max(spark_w, 4)
        lines: list[Text] = []
        for index, (util, mem, power) in rows:
            training = index in self.training
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"GPU {index}", style="bold" if training or not running else "dim")
            line.append(" ●" if training else "  ", style="#7bd88f")
            line.append(" " * (label_w - len(f"GPU {index}") - 2))
            series = self._util(index)
            line.append(strip(series[-self.span :], spark_w, 100.0, self.span), style="#7bd88f")
            line.append(f" {util:>{widths[0]}}", style="bold red" if util == "lost" else _dim(util))
            if not drop_memory:
                line.append(f" {mem:>{widths[1]}}", style=_dim(mem))
            line.append(f" {power:>{widths[2]}}", style=_dim(power))
            lines.append(line)
        if hidden:
            utils = [u for i in hidden if isinstance(u := self._at(last, i).get("util"), (int, float))]
            spread = (
                f": util {min(utils):.0f}–{max(utils):.0f} %"
                if len(utils) > 1 and min(utils) != max(utils)
                else (f": util {utils[0]:.0f} %" if utils else "")
            )
            lines.append(Text(f"+{len(hidden)} more ({_gpu_list(hidden)}){spread}", style="dim"))
        # The runner process (all of a data-parallel run's processes): CPU on the same time axis.
        now = last.get("host")
        host: dict[str, Any] = now if isinstance(now, dict) else {}
        cpu, rss = host.get("cpu_percent"), host.get("rss") or None  # rss 0: an exited runner
        value = (
            f"{cpu / 100:.1f} CPU · {fmt.bytes_(rss) if rss is not None else fmt.NA}"
            if isinstance(cpu, (int, float))
            else ("–" if not running else fmt.NA)
        )
        block = widths[0] + widths[2] + 1 + (0 if drop_memory else widths[1] + 1)
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{'runner':<{label_w}}", style="bold")
        cpu_w = min(spark_w, width - label_w - max(block, len(value)) - 1)
        series = self._series(lambda s: s["host"]["cpu_percent"])
        line.append(
            strip(series[-self.span :], max(cpu_w, 4), 100.0 * self.cpu_count, self.span), style="#7bd88f"
        )
        line.append(f" {value:>{max(block, len(value))}}", style=_dim(value))
        lines.append(line)
        lines += self._warnings(last, running)
        return lines

    def _warnings(self, last: dict[str, Any], running: bool) -> list[Text]:
        """What needs saying about the GPUs, one line per kind of trouble (GPUs with the same say it once)."""
        lost: list[int] = []
        shared: list[str] = []
        held: dict[tuple[str, ...], list[int]] = {}
        for index in self.gpu_indices:
            g = self._at(last, index)
            if g.get("lost"):
                lost.append(index)
                continue
            others = g.get("other_procs")
            if isinstance(others, int) and others > 0 and running:
                mem = g.get("other_mem")
                size = f", {fmt.bytes_(mem)}" if isinstance(mem, int) and mem > 0 else ""
                shared.append(f"GPU {index} ({others}{size})")
            reasons = tuple(r for r in g.get("throttle") or [] if r != "gpu_idle")
            if reasons:
                held.setdefault(reasons, []).append(index)
        out = []
        if lost:
            out.append(Text(f"{_gpu_list(lost)} lost: NVML no longer answers; N/A", style="bold red"))
        if shared:
            out.append(
                Text("other processes on " + ", ".join(shared) + ": the run shares them", style="yellow")
            )
        out += [
            Text(f"{_gpu_list(indices)} clocks held back: " + ", ".join(reasons), style="yellow")
            for reasons, indices in held.items()
        ]
        return out


def _dim(value: str) -> str:
    return "dim" if value in (fmt.NA, "–") else ""


def _gpu_list(indices: list[int]) -> str:
    """'GPUs 0–3', 'GPUs 0, 2, 5', 'GPU 1'."""
    if len(indices) == 1:
        return f"GPU {indices[0]}"
    if indices == list(range(indices[0], indices[0] + len(indices))):
        return f"GPUs {indices[0]}–{indices[-1]}"
    return "GPUs " + ", ".join(map(str, indices))


def _run_gpus(sample: dict[str, Any]) -> list[int]:
    """The NVML indices of the GPUs the sample's run trains on: its ``devices``, else the watched GPU."""
    if sample.get("run") is None:
        return []
    devices = sample.get("devices")
    if isinstance(devices, list):
        return [i for i in devices if isinstance(i, int)]
    watched = sample.get("watched")
    return [watched] if isinstance(watched, int) else []


def _other_load(sample: dict[str, Any]) -> float | None:
    """Cores' worth of CPU that processes other than the runner used (None if unknown)."""
    host = sample.get("host")
    if not isinstance(host, dict):
        return None
    busy, mine = host.get("system_busy_cores"), host.get("cpu_percent")
    if not isinstance(busy, (int, float)):
        return None
    return max(0.0, busy - (mine or 0.0) / 100.0)
