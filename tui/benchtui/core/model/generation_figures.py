"""A generate cell's figures (issue 34): ``GenerationFigures`` from its runs' folded ``tokens`` events, and
the parity caution where the two sides do not run the same decoding.

The figures are over the steady epochs (after the first, which holds each side's trace or compile of its
decode loop) of the runs that ended well; a plan of one epoch has none, and its figures are then over the
steps after each run's first (``compile_s`` unknown). Percentiles are ``stats.quantile``'s (linear, NumPy's
default) over every step of every run, pooled; per token (``per_token``) when every step carries its
tokens' own latencies (``--timing step``), else per step (its ``decode_s / (N - 1)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import GenerationFigures
from benchtui.core.model.generation import TokenStep
from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import Ratio, mean, median, quantile, ratio_ci

#: The parts of a runner's ``settings.generation`` that say what work its generate does, in the words of
#: the parity caution; where the sides differ in one, they do not run the same decoding.
PARITY_PARTS = (("prefill", "prefill differs"), ("decode_steps", "decode steps differ"))


def steady_steps(runs: Sequence[RunState]) -> tuple[list[TokenStep], bool]:
    """The runs' generate steps after the first epoch, and whether they are that (False: a plan of one epoch,
    whose steps after each run's first stand in)."""
    done = [r.generation.steps for r in runs if r.generation is not None and r.generation.steps]
    steady = [s for steps in done for s in steps if s.epoch > 1]
    if steady:
        return steady, True
    return [s for steps in done for s in steps[1:]], False


def _quantiles(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    ordered = sorted(values)
    return quantile(ordered, 0.5), quantile(ordered, 0.9), quantile(ordered, 0.99)


def compile_s(run: RunState) -> float | None:
    """Its first epoch's seconds less its median steady epoch's (never below 0); None with no steady epoch."""
    first = run.epoch_times.get(1)
    later = [s for e, s in run.epoch_times.items() if e > 1]
    if first is None or not later:
        return None
    return max(first - median(later), 0.0)


def _setting(run: RunState) -> dict[str, Any]:
    settings = run.hello.get("settings")
    said = settings.get("generation") if isinstance(settings, dict) else None
    return said if isinstance(said, dict) else {}


def _counted(values: list[int | None]) -> int | None:
    """What every step counted (the least where they differ); None where a step did not count."""
    if not values or any(v is None for v in values):
        return None
    return min(v for v in values if v is not None)


def figures(runs: Sequence[RunState], sequences: int = 0) -> GenerationFigures | None:
    """A cell's ``GenerationFigures`` from its runs that ended well (``runs``); None: no generate step."""
    steps, _ = steady_steps(runs)
    if not steps:
        return None
    first = steps[0]
    later = first.new_tokens - 1
    per_token = later > 0 and all(len(s.token_s) == s.new_tokens - 1 for s in steps)
    if per_token:
        latencies = [v for s in steps for v in s.token_s]
    else:
        latencies = [v for s in steps if (v := s.token_latency_s) is not None]
    decode = sum(s.decode_s for s in steps)
    after_first = sum(s.new_tokens - 1 for s in steps)
    p50, p90, p99 = _quantiles([s.first_token_s for s in steps])
    t50, t90, t99 = _quantiles(latencies)
    compiles = [c for r in runs if (c := compile_s(r)) is not None]
    cache = next(
        (v for r in runs if isinstance(v := _setting(r).get("cache_bytes_per_token"), int) and v > 0),
        None,
    )
    curve: tuple[float, ...] = ()
    if per_token:
        full = [s.token_s for s in steps if len(s.token_s) == later]
        curve = tuple(median([gaps[i] for gaps in full]) for i in range(later)) if full else ()
    return GenerationFigures(
        prompt_len=first.prompt_len,
        new_tokens=first.new_tokens,
        sequences=sequences or first.sequences,
        steps=len(steps),
        first_token_s=p50,
        first_token_p90_s=p90,
        first_token_p99_s=p99,
        token_s=t50,
        token_p90_s=t90,
        token_p99_s=t99,
        per_token=per_token,
        tokens_per_s=after_first / decode if decode > 0 and after_first else None,
        batch_tokens_per_s=(
            sum((s.new_tokens - 1) * s.sequences for s in steps) / decode
            if decode > 0 and after_first
            else None
        ),
        compile_s=mean(compiles) if compiles else None,
        cache_bytes_per_token=cache,
        tokens=_counted([s.tokens for s in steps]),
        decode_steps=_counted([s.decode_steps for s in steps]),
        latency_curve=curve,
    )


def _value_text(value: Any) -> str:
    return str(value) if value is not None else "not said"


def _said(cells: Sequence[tuple[str, Sequence[RunState]]]) -> list[tuple[str, dict[str, Any]]]:
    """Each framework's ``settings.generation`` (its first run that said one), for those that did."""
    return [
        (fw, found) for fw, runs in cells if (found := next((g for r in runs if (g := _setting(r))), None))
    ]


def _differing(said: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, list[Any]]]:
    out = []
    for key, words in PARITY_PARTS:
        values = [setting.get(key) for _, setting in said]
        if len({repr(v) for v in values}) > 1:
            out.append((words, values))
    return out


def differing_parts(cells: Sequence[tuple[str, Sequence[RunState]]]) -> list[str]:
    """['prefill differs', 'decode steps differ']: what differs in the sides' decoding ([]: nothing said
    differs, or fewer than two sides said)."""
    said = _said(cells)
    return [words for words, _ in _differing(said)] if len(said) > 1 else []


def generation_parity(model: str, cells: Sequence[tuple[str, Sequence[RunState]]]) -> str | None:
    """The caution of a generate cell whose sides do not run the same decoding: 'GPT-2 mini: the frameworks
    do not generate the same way: prefill differs (PyTorch: ...; tf.keras: ...), decode steps ...'; None where
    every side that said its ``settings.generation`` said the same prefill and decode steps (or one side did)."""
    said = _said(cells)
    if len(said) < 2:
        return None
    clauses = []
    for words, values in _differing(said):
        sides = "; ".join(
            f"{framework_label(fw)}: {_value_text(v)}" for (fw, _), v in zip(said, values, strict=True)
        )
        clauses.append(f"{words} ({sides})")
    if not clauses:
        return None
    return f"{model_label(model)}: the frameworks do not generate the same way: " + ", ".join(clauses)


def _token_times(run: RunState) -> list[float]:
    """A run's seconds per token after the first, each steady step's (its batch's later tokens over its
    ``decode_s``): what the verdict resamples."""
    steps, _ = steady_steps([run])
    return [
        s.decode_s / ((s.new_tokens - 1) * s.sequences) for s in steps if s.new_tokens > 1 and s.decode_s > 0
    ]


def compare(base: Sequence[RunState], other: Sequence[RunState]) -> Ratio | None:
    """Time per token after the first (the batch's) of ``other`` over ``base``, with its 95% CI (over runs,
    then steps within runs): below 1, ``other`` makes more tokens per second. None: a side has none."""
    a = tuple(tuple(t) for r in base if (t := _token_times(r)))
    b = tuple(tuple(t) for r in other if (t := _token_times(r)))
    return _ratio(a, b) if a and b else None


@lru_cache(maxsize=256)
def _ratio(a: tuple[tuple[float, ...], ...], b: tuple[tuple[float, ...], ...]) -> Ratio | None:
    return ratio_ci(a, b)


def ms(seconds: float | None) -> str:
    """'12.3 ms' ('—' for None)."""
    return "—" if seconds is None else f"{seconds * 1e3:.1f} ms"


def verdict_numbers(winner: GenerationFigures | None, loser: GenerationFigures | None) -> str:
    """'812 vs 660 tok/s, batch 8': the batch's tokens/s after the first token, winner first."""
    rates = [f.batch_tokens_per_s if f is not None else None for f in (winner, loser)]
    rate = " vs ".join(f"{v:,.0f}" if v is not None else "—" for v in rates) + " tok/s"
    batches = [f.sequences for f in (winner, loser) if f is not None]
    if batches:
        rate += (
            f", batch {batches[0]}" if len(set(batches)) == 1 else f", batch {' vs '.join(map(str, batches))}"
        )
    return rate


def first_token_text(winner: GenerationFigures | None, loser: GenerationFigures | None) -> str:
    """'time to first token 12.3 ms vs 15.0 ms' (medians, winner first)."""
    values = [f.first_token_s if f is not None else None for f in (winner, loser)]
    return f"time to first token {ms(values[0])} vs {ms(values[1])}"
