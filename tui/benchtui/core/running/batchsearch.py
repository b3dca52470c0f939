"""The largest-batch search: which batch sizes to probe, and what the answers mean.

Pure logic, no processes: the engine supplies ``probe(batch) -> "ok" | "oom" | "error"``
(each probe a fresh runner process). The search starts at a guess, doubles while
probes fit, halves while they do not, then bisects between the largest size that
fit and the smallest that did not, never above ``upper``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

ProbeFn = Callable[[int], Awaitable[str]]

MAX_PROBES = 14  # enough for an exact answer up to 2**12 from a reasonable guess

#: A probe under ``--memory-limit`` runs under this share of the cap, so the batch it finds leaves the run
#: the rest. An address space is not the same from one process to the next: ResNet50's at batch 12 under a
#: 5,000 MB cap peaked 46 MB under it in one run and over it in another, so a probe that just fitted chose a
#: run that did not (CI, stop 44). 5% is 250 MB of a 5 GB cap, several times that spread.
PROBE_HEADROOM = 0.95


def probe_memory_limit(limit_mb: int) -> int:
    """The address-space cap (MB) a probe runs under for a run capped at ``limit_mb`` (0: no cap)."""
    return max(1, int(limit_mb * PROBE_HEADROOM)) if limit_mb > 0 else 0


@dataclass
class SearchResult:
    """The outcome of one (framework, model) search."""

    best: int | None  # the largest batch that trained; None if none did
    probes: list[tuple[int, str]] = field(default_factory=list)  # (batch, result) in probe order
    exact: bool = True  # False when the probe budget ran out before bisection ended
    error: str = ""  # a non-OOM failure stops the search


async def search_largest_batch(
    probe: ProbeFn, start: int, upper: int, max_probes: int = MAX_PROBES
) -> SearchResult:
    """Find the largest batch in [1, upper] for which ``probe`` answers "ok"."""
    if upper < 1:
        raise ValueError("upper bound must be at least 1")
    result = SearchResult(best=None)
    known: dict[int, str] = {}

    async def ask(batch: int) -> str:
        if batch not in known:
            if len(result.probes) >= max_probes:
                raise _Budget
            answer = await probe(batch)
            known[batch] = answer
            result.probes.append((batch, answer))
            if answer == "error":
                raise _Stop
        return known[batch]

    lo, hi = 0, upper + 1  # lo: largest known to fit (0: none); hi: smallest known not to fit
    batch = max(1, min(start, upper))
    try:
        # Bracket: double up from a fit, or halve down from a miss.
        if await ask(batch) == "ok":
            lo = batch
            while lo < upper:
                nxt = min(lo * 2, upper)
                if await ask(nxt) == "ok":
                    lo = nxt
                else:
                    hi = nxt
                    break
        else:
            hi = batch
            while hi > 1:
                nxt = hi // 2
                if await ask(nxt) == "ok":
                    lo = nxt
                    break
                hi = nxt
        # Bisect the gap to the exact largest size.
        while lo and hi - lo > 1:
            mid = (lo + hi) // 2
            if await ask(mid) == "ok":
                lo = mid
            else:
                hi = mid
    except _Budget:
        result.exact = False
    except _Stop:
        result.error = "a probe failed for another reason than memory"
    result.best = lo or None
    return result


class _Budget(Exception):
    pass


class _Stop(Exception):
    pass


def choose(found: dict[str, int | None], policy: str) -> dict[str, int]:
    """Batch per framework for one model: the smallest across frameworks ("min", the study's
    rule, so every framework trains the same batch) or each framework's own."""
    sizes = {fw: b for fw, b in found.items() if b}
    if not sizes:
        return {}
    if policy == "min":
        smallest = min(sizes.values())
        return {fw: smallest for fw in sizes}
    return sizes
