"""The live screen's nodes panel (issue 33): a row per machine of the run on several nodes in progress.

Each row says the node, its host, how its share of the run stands, its current step time (its runner's
latest batch window) and its GPUs' utilization and memory now (node 0: the session's newest sample; node k:
the newest sample its benchtui sent). Shown only for sessions on several nodes, live and in replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.markup import escape
from rich.text import Text
from textual.widget import Widget

from benchtui.core import fmt
from benchtui.core.model.status import RunStatus, status_style

if TYPE_CHECKING:
    from benchtui.core.model.runs import RunState
    from benchtui.core.model.session_model import SessionModel

GIB = 1024**3


def node_run(model: SessionModel) -> RunState | None:
    """The run whose nodes the panel shows: the one in progress when it trains on several nodes, else the
    latest such run that started (None before any did)."""
    current = model.runs.get(model.current) if model.current else None
    if current is not None and current.spec.nodes > 1:
        return current
    started = [r for r in model.runs.values() if r.spec.nodes > 1 and r.status is not RunStatus.QUEUED]
    return started[-1] if started else None


def _gpu_now(gpus: list[dict[str, Any]]) -> tuple[float | None, int | None]:
    """Mean utilization and total memory used over a node's GPUs in one sample (None: not read)."""
    utils = [g["util"] for g in gpus if isinstance(g.get("util"), (int, float))]
    mems = [g["mem_used"] for g in gpus if isinstance(g.get("mem_used"), (int, float))]
    return (sum(utils) / len(utils) if utils else None, int(sum(mems)) if mems else None)


def _node0_gpus(model: SessionModel, run: RunState) -> list[dict[str, Any]]:
    """Node 0's GPUs of ``run`` in the session's newest sample of it (its ``devices``, else ``watched``)."""
    for sample in reversed(model.gpu_samples):
        if sample.get("run") != run.spec.run_id:
            continue
        gpus, devices, watched = sample.get("gpus"), sample.get("devices"), sample.get("watched")
        if not isinstance(gpus, list):
            return []
        indices = devices if isinstance(devices, list) and devices else [watched]
        return [
            gpus[i]
            for i in indices
            if isinstance(i, int) and 0 <= i < len(gpus) and isinstance(gpus[i], dict)
        ]
    return []


def node_lines(model: SessionModel, host: str = "") -> tuple[str, list[tuple[str, str]]]:
    """(the panel's title, a (text, style) line per node) of the run ``node_run`` picks; ``host``: node 0's
    name where its run_start did not say it (session.json's host)."""
    run = node_run(model)
    if run is None:
        nodes = model.plan.nodes
        return f"Nodes · {nodes} machines", [("no run on several nodes has started yet", "dim")]
    shares: dict[int, RunState | None] = {k: None for k in range(run.spec.nodes)}
    shares[0] = run
    shares.update(run.nodes)
    rows: list[tuple[str, str]] = []
    width = max(len(str(k)) for k in shares)
    for k, share in sorted(shares.items()):
        if share is None:
            rows.append((f"node {k:>{width}} · – · waiting", "dim"))
            continue
        name = share.host or (host if k == 0 else "") or "–"
        status = str(share.status.value) if share.status is not RunStatus.RUNNING else "running"
        step = share.batch_seconds[-1] if len(share.batch_seconds) else None
        gpus = _node0_gpus(model, run) if k == 0 else list(getattr(share, "last_gpus", []))
        util, mem = _gpu_now(gpus)
        parts = [f"node {k:>{width}}", fmt.clean(name), status]
        parts.append(f"step {step * 1000:.1f} ms" if step is not None else "step –")
        if gpus:
            parts.append("GPU " + ("–" if util is None else f"{util:.0f}%"))
            parts.append("–" if mem is None else f"{mem / GIB:.1f} GiB")
        style = status_style(status, "") if share.status is not RunStatus.RUNNING else "cyan"
        rows.append((" · ".join(parts), style))
    title = f"Nodes · {escape(run.spec.run_id)} · {run.spec.nodes} machines"
    return title, rows


class NodeRows(Widget):
    """A row per node of the run on several machines in progress (``node_lines``); the screen calls
    ``show`` from its tick with what the model holds."""

    DEFAULT_CSS = """
    NodeRows {
        height: auto;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: list[tuple[str, str]] = []
        self.border_title = "Nodes"

    def show(self, title: str, rows: list[tuple[str, str]]) -> None:
        if title != self.border_title:
            self.border_title = title
        if rows != self.rows:
            self.rows = rows
            self.refresh(layout=True)

    def texts(self) -> list[str]:
        """The rows as drawn (plain text, for tests)."""
        return [text for text, _ in self.rows]

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.rows)

    def render(self) -> Group:
        return Group(
            *(Text(text, style=style, no_wrap=True, overflow="ellipsis") for text, style in self.rows)
        )
