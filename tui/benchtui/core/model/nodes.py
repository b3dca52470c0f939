"""Several machines (issue 33): each node's figures in a cell, and the straggler among them.

Node 0's figures are its runs' own; node k's come from the events node 0 recorded tagged ``node`` k
(``RunState.nodes``). A node's step time is its mean seconds per step over the timed epochs (those after
the first), a mean over the cell's runs; its ranks are the global ranks its runner's hello named
(``settings.distributed.ranks``: [first, count]; torchrun's c10d need not give node k ranks k x nproc), by
which the run's per-rank step times (torch's ``ranks`` events) are given to their nodes. The straggler is the
slowest node over the fastest, named when at least ``scaling.STRAGGLER_RATIO``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchtui.core.model.cell import NodeFigures, NodeStraggler
from benchtui.core.model.runs import RunState
from benchtui.core.model.scaling import STRAGGLER_RATIO
from benchtui.core.model.stats import mean
from benchtui.core.model.status import RunStatus
from benchtui.core.plan.plan import Plan


def shares(run: RunState) -> dict[int, RunState]:
    """Every node's share of ``run``, by node rank: node 0 is the run itself."""
    return {0: run, **dict(sorted(run.nodes.items()))}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def node_fields(plan: Plan, runs: Sequence[RunState]) -> dict[str, Any]:
    """A row's figures on several nodes (``CellSummary.nodes``, ``per_node``, ``node_straggler``, ``link``)
    over its successful ``runs``; {} on one node (the row as before several nodes)."""
    count = max([plan.nodes, *(r.spec.nodes for r in runs)])
    if count <= 1:
        return {}
    # Every global rank's step time, a mean over the runs (the run's own ``ranks``: node 0's lead's gather).
    by_rank: dict[int, list[float]] = {}
    for run in runs:
        for rank, value in enumerate(run.rank_step_s()):
            if value is not None:
                by_rank.setdefault(rank, []).append(value)
    rank_step = {rank: mean(values) for rank, values in by_rank.items()}
    per_node = []
    for node in range(count):
        parts = [part for run in runs if (part := shares(run).get(node)) is not None]
        per_node.append(_node_figures(node, parts, rank_step))
    link = next((f.link for f in per_node if f.node == 0 and f.link), "")
    slowest = straggler(per_node)
    # As summary.json has them: ``SessionModel.row`` reads its row through ``CellSummary.from_json``.
    return {
        "nodes": count,
        "per_node": [f.to_json() for f in per_node],
        "node_straggler": slowest.to_json() if slowest is not None else None,
        "link": link,
    }


def _node_figures(node: int, parts: list[RunState], rank_step: dict[int, float]) -> NodeFigures:
    """One node over the cell's runs: its host, ranks, mean step time, GPUs, link and how its shares ended."""
    host = next((p.host for p in parts if p.host), "")
    ranks = next((span for p in parts if (span := p.ranks_span()) is not None), None)
    steps = [s for p in parts if (s := p.step_s()) is not None]
    utils: list[float] = []
    powers: list[float] = []
    mems: list[float] = []
    for part in parts:
        gpus = part.per_gpu()
        run_utils = [u for g in gpus if (u := _number(g.get("util"))) is not None]
        run_powers = [w for g in gpus if (w := _number(g.get("power_w"))) is not None]
        if run_utils:
            utils.append(mean(run_utils))
        if run_powers:
            powers.append(mean(run_powers))
        mems += [
            m for g in gpus if isinstance(m := g.get("mem_max"), (int, float)) and not isinstance(m, bool)
        ]
    link = next((str(p.distributed()["link"]) for p in parts if p.distributed().get("link")), "")
    not_ok = [p for p in parts if p.status is not RunStatus.OK]
    rank_steps: tuple[float | None, ...] = ()
    if ranks is not None and rank_step:
        first, n = ranks
        rank_steps = tuple(rank_step.get(r) for r in range(first, first + n))
    return NodeFigures(
        node=node,
        host=host,
        ranks=ranks,
        step_s=mean(steps) if steps else None,
        rank_step_s=rank_steps,
        util=mean(utils) if utils else None,
        power_w=mean(powers) if powers else None,
        mem_max=max(mems) if mems else None,
        link=link,
        runs=len(parts),
        status=str(not_ok[0].status) if not_ok else ("ok" if parts else "not reported"),
    )


def node_name(figures: NodeFigures) -> str:
    """'node 1 (host-b)', or 'node 1' where its host is not known."""
    return f"node {figures.node}" + (f" ({figures.host})" if figures.host else "")


def straggler(per_node: Sequence[NodeFigures]) -> NodeStraggler | None:
    """The slowest node by step time over the fastest, named when at least ``STRAGGLER_RATIO``, with the
    slowest rank over the fastest where each rank was timed; None when fewer than two nodes were timed."""
    timed = [f for f in per_node if f.step_s]
    if len(timed) < 2:
        return None
    slow = max(timed, key=lambda f: f.step_s or 0.0)
    fast = min(timed, key=lambda f: f.step_s or 0.0)
    ratio = (slow.step_s or 0.0) / (fast.step_s or 1.0)
    named = ratio >= STRAGGLER_RATIO
    ranks = [
        (f.ranks[0] + i, value)
        for f in per_node
        if f.ranks is not None
        for i, value in enumerate(f.rank_step_s)
        if value
    ]
    rank = rank_ratio = None
    if len(ranks) > 1:
        slowest = max(ranks, key=lambda r: r[1])
        rank, rank_ratio = slowest[0], slowest[1] / min(v for _, v in ranks)
    if named:
        text = f"straggler: {node_name(slow)}, {ratio:.2f}× the step time of the fastest, {node_name(fast)}"
        if rank is not None and rank_ratio is not None:
            text += f"; slowest rank {rank}, {rank_ratio:.2f}× the fastest rank's"
    else:
        spread = ratio - 1  # under 1%: a tenth of a percent, never "within 0%"
        share = f"{spread:.1%}" if spread < 0.01 else f"{spread:.0%}"
        text = f"no straggler: nodes within {share} of each other's step time"
    return NodeStraggler(slow.node, slow.host, ratio, named, rank, rank_ratio, text)
