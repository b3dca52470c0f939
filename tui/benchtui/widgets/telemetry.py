"""Telemetry panels: one per visible GPU (NVML), or the runner process (psutil) when there is none."""

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

    def get_content_height(self, container, viewport, width: int) -> int:  # noqa: ANN001
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


def _other_load(sample: dict[str, Any]) -> float | None:
    """Cores' worth of CPU that processes other than the runner used (None if unknown)."""
    host = sample.get("host")
    if not isinstance(host, dict):
        return None
    busy, mine = host.get("system_busy_cores"), host.get("cpu_percent")
    if not isinstance(busy, (int, float)):
        return None
    return max(0.0, busy - (mine or 0.0) / 100.0)
