"""Issue 5's measurement logic: warm-up detection and the largest-batch search policy."""

from __future__ import annotations

import asyncio

import pytest

from benchtui.core.model.stats import warmup_cut
from benchtui.core.running.batchsearch import choose, search_largest_batch


@pytest.mark.parametrize(
    "values, cut",
    [
        ([], 0),
        ([5.0], 0),
        ([5.0, 1.0], 1),
        ([9.0, 1.0, 1.0], 1),
        ([9.0, 4.0, 2.0] + [1.0] * 20, 3),  # compile, then autotune, then steady
        ([1.0] * 30, 0),  # no warm-up at all: nothing is cut
        ([12.0] + [1.0, 1.01, 0.99] * 10, 1),
        ([8.0, 1.0, 1.0, 7.0] + [1.0] * 30, 4),  # a slow batch inside the first window moves the cut
        ([8.0] + [1.0] * 20 + [6.0] + [1.0] * 20, 1),  # a single slow batch later on does not
        ([5.0, 1.0] * 5, 5),  # never three steady batches in a row: cut at half
    ],
)
def test_warmup_cut(values: list[float], cut: int) -> None:
    assert warmup_cut(values) == cut


def _search(fits_up_to: int, start: int, upper: int, errors_at: int | None = None):
    asked: list[int] = []

    async def probe(batch: int) -> str:
        asked.append(batch)
        if errors_at is not None and batch == errors_at:
            return "error"
        return "ok" if batch <= fits_up_to else "oom"

    return asyncio.run(search_largest_batch(probe, start, upper)), asked


@pytest.mark.parametrize(
    "fits, start, upper, best",
    [
        (19, 16, 64, 19),
        (19, 16, 32, 19),
        (100, 16, 64, 64),
        (5, 16, 64, 5),
        (1, 4, 8, 1),
        (0, 4, 8, None),
        (7, 7, 7, 7),
    ],
)
def test_search_finds_the_exact_largest_fit(fits: int, start: int, upper: int, best: int | None) -> None:
    result, asked = _search(fits, start, upper)
    assert result.best == best and result.exact
    assert all(b <= upper for b in asked) and len(asked) == len(set(asked))  # never above, never twice
    assert [b for b, _ in result.probes] == asked


def test_search_probes_in_order_from_the_guess() -> None:
    result, asked = _search(19, 16, 64)
    assert asked == [16, 32, 24, 20, 18, 19]
    assert result.probes == [(16, "ok"), (32, "oom"), (24, "oom"), (20, "oom"), (18, "ok"), (19, "ok")]


def test_a_non_memory_failure_stops_the_search() -> None:
    result, asked = _search(100, 16, 64, errors_at=32)
    assert result.best == 16 and result.error and asked == [16, 32]


def test_probe_budget_gives_an_inexact_answer() -> None:
    async def probe(batch: int) -> str:
        return "ok" if batch <= 3000 else "oom"

    result = asyncio.run(search_largest_batch(probe, 1, 10**6, max_probes=6))
    assert not result.exact and result.best == 32 and len(result.probes) == 6


def test_choose_policies() -> None:
    found = {"torch": 24, "tensorflow": 16, "keras-jax": None}
    assert choose(found, "min") == {"torch": 16, "tensorflow": 16}
    assert choose(found, "per-framework") == {"torch": 24, "tensorflow": 16}
    assert choose({"torch": None}, "min") == {}


def test_the_search_is_folded_into_the_model_for_the_live_screen() -> None:
    from benchtui.core.model.session_model import SessionModel
    from benchtui.core.plan.plan import Plan

    model = SessionModel(Plan(frameworks=["torch", "tensorflow"], models=["resnet50"], batch_auto=True))
    start = {"type": "probe_start", "run": None, "framework": "torch", "model": "resnet50", "batch_size": 16}
    model.apply(start)
    assert model.probing == start
    assert model.search_lines() == ["largest batch, ResNet50 · PyTorch: 16 …"]
    for batch, result in ((16, "oom"), (8, "ok")):
        model.apply(
            {
                "type": "probe",
                "run": None,
                "framework": "torch",
                "model": "resnet50",
                "batch_size": batch,
                "result": result,
            }
        )
    model.apply(
        {
            "type": "batch_choice",
            "run": None,
            "model": "resnet50",
            "policy": "min",
            "found": {"torch": 8},
            "chosen": {"torch": 8},
        }
    )
    assert model.probing is None and len(model.probes) == 2
    assert model.search_lines() == ["largest batch, ResNet50 · PyTorch: 16 oom, 8 ok → batch 8"]
    assert model.unknown_runs == 0 and model.malformed == 0
