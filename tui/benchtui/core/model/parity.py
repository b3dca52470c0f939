"""Parity between frameworks: do they build the same network? Judged on what each runner measured.

Each runner reports its network's parameters once built (the ``model`` event) and its FLOPs per
sample after the timed epochs (the ``flops`` event). A model whose frameworks differ by more than
``PARITY_TOLERANCE`` in trainable parameters or in FLOPs per sample is flagged, with the numbers,
in one sentence that every view prints (a row caution of kind ``ARCHITECTURE``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import NetworkIdentity, ParityEntry
from benchtui.core.model.runs import RunState
from benchtui.core.model.status import RunStatus
from benchtui_runners import catalog

#: Relative difference (largest over smallest, minus one) above which frameworks do not build the
#: same network: 1%. Counting conventions agree far closer than that when they do.
PARITY_TOLERANCE = 0.01
#: After a model's name in any table: its frameworks do not build the same network.
PARITY_MARK = "≠"
#: The keys of a ``model`` event kept on the run.
MODEL_FIELDS = ("params", "trainable_params", "kind", "tokens_per_sample", "source", "architecture")


def model_info_of_event(event: dict[str, Any]) -> dict[str, Any]:
    """The fields of a ``model`` event, counts checked (a nonsense value raises ValueError)."""
    out = {k: event.get(k) for k in MODEL_FIELDS}
    for key in ("params", "trainable_params", "tokens_per_sample"):
        raw = out[key]
        if raw is not None:
            value = int(raw)
            if value < 0 or value != raw:
                raise ValueError(f"{key} must be a whole number of at least 0")
            out[key] = value
    if out["params"] is None:
        raise ValueError("a model event without params")
    return out


def per_word(model: str) -> str:
    """What one sample of ``model`` is: 'image' or 'sequence'."""
    info = catalog.MODELS.get(model)
    return "sequence" if info is not None and info.kind == "tokens" else "image"


def identity(runs: Sequence[RunState]) -> dict[str, Any] | None:
    """What a cell's runs say its network is (params, FLOPs per sample, source), or None when they said nothing.

    Runs that succeeded are asked first; a run that failed later still built the network.
    """
    ordered = sorted(runs, key=lambda r: r.status is not RunStatus.OK)
    info = next((r.model_info for r in ordered if r.model_info.get("params") is not None), {})
    flops = next((r.flops for r in ordered if r.flops.get("per_image")), {})
    if not info and not flops:
        return None
    return {
        "params": info.get("params"),
        "trainable_params": info.get("trainable_params"),
        "flops_per_sample": flops.get("per_image"),
        "flops_counted": flops.get("counted") or "",
        "source": info.get("source") or "",
        "architecture": info.get("architecture") or "",
    }


def relative_difference(values: Sequence[float]) -> float | None:
    """(largest − smallest) / smallest, or None with fewer than two values or a zero."""
    if len(values) < 2 or min(values) <= 0:
        return None
    return (max(values) - min(values)) / min(values)


def count_text(value: float | None, digits: int = 3) -> str:
    """A parameter count: '25.6M', '5.72k', '1.23B'."""
    if value is None:
        return "–"
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{suffix}"
    return f"{value:.0f}"


def flops_text(value: float | None, digits: int = 3) -> str:
    """A FLOP count: '24.3 GFLOP' (``fmt.flops`` with as many digits as asked)."""
    if value is None:
        return "–"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}FLOP"
    return f"{value:.0f} FLOP"


def _distinct(values: Sequence[float], writer: Callable[[float, int], str]) -> list[str]:
    """Each value written with the fewest digits (3 to 6) that keep different values apart."""
    texts = [writer(v, 3) for v in values]
    for digits in range(3, 7):
        texts = [writer(v, digits) for v in values]
        if len(set(texts)) == len(set(values)):
            break
    return texts


def _numbers(labels: Sequence[str], values: Sequence[float], writer: Callable[[float, int], str]) -> str:
    """'PyTorch 24.3 vs tf.keras 22.9 GFLOP': each framework's figure, the unit said once where shared."""
    texts = _distinct(values, writer)
    units = {t.rpartition(" ")[2] if " " in t else "" for t in texts}
    if len(units) == 1 and " " in texts[0]:
        unit = units.pop()
        parts = [f"{label} {t.rpartition(' ')[0]}" for label, t in zip(labels, texts, strict=True)]
        return " vs ".join(parts) + f" {unit}"
    return " vs ".join(f"{label} {t}" for label, t in zip(labels, texts, strict=True))


def _sides(model: str, cells: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """'PyTorch builds ResNet v1.5 (…), tf.keras ResNet v1 (…)': each side's architecture, where known."""
    info = catalog.MODELS.get(model)
    groups: dict[str, list[str]] = {}
    for fw, ident in cells:
        words = ident.get("architecture") or ""
        if not words and info is not None and fw in catalog.FRAMEWORKS:
            words = info.side(catalog.family(fw))
        if words:
            groups.setdefault(str(words), []).append(framework_label(fw))
    parts = []
    for i, (words, labels) in enumerate(groups.items()):
        names = " and ".join(labels)
        verb = ("build " if len(labels) > 1 else "builds ") if i == 0 else ""
        parts.append(f"{names} {verb}{words}")
    return ", ".join(parts)


def model_parity(model: str, cells: Sequence[tuple[str, dict[str, Any]]]) -> ParityEntry | None:
    """The parity entry of one model from its frameworks' identities; None with fewer than two.

    ``cells``: (framework, ``identity``) in the plan's order, for the frameworks that reported.
    """
    if len(cells) < 2:
        return None
    trainable = all(ident.get("trainable_params") is not None for _, ident in cells)
    key = "trainable_params" if trainable else "params"
    with_params = [(fw, float(ident[key])) for fw, ident in cells if ident.get(key) is not None]
    with_flops = [
        (fw, float(ident["flops_per_sample"])) for fw, ident in cells if ident.get("flops_per_sample")
    ]
    params_diff = relative_difference([v for _, v in with_params])
    flops_diff = relative_difference([v for _, v in with_flops])
    flagged = any(d is not None and d > PARITY_TOLERANCE for d in (params_diff, flops_diff))
    per = per_word(model)
    info = catalog.MODELS.get(model)
    twin = info.twin if info is not None else ""
    clauses = []
    if flops_diff is not None:
        numbers = _numbers(
            [framework_label(fw) for fw, _ in with_flops], [v for _, v in with_flops], flops_text
        )
        clauses.append(f"FLOPs per {per} differ by {flops_diff:.1%} ({numbers})")
    if params_diff is not None:
        what = "trainable parameters" if trainable else "parameters"
        numbers = _numbers(
            [framework_label(fw) for fw, _ in with_params], [v for _, v in with_params], count_text
        )
        clauses.append(f"{what} {'by' if clauses else 'differ by'} {params_diff:.1%} ({numbers})")
    if flagged:
        sides = _sides(model, cells) or "the frameworks do not build the same network"
        text = f"{model_label(model)}: {sides}: " + ", ".join(clauses)
        if twin:
            text += f"; {twin} ({model_label(twin)}) trains the same network on both sides"
    else:
        text = f"{model_label(model)}: the same network on every side: " + ", ".join(clauses)
    return ParityEntry(
        model=model,
        kind="tokens" if per == "sequence" else "image",
        per=per,
        frameworks={fw: NetworkIdentity.from_json(ident) for fw, ident in cells},
        params_compared=key,
        params_diff=params_diff,
        flops_diff=flops_diff,
        tolerance=PARITY_TOLERANCE,
        flagged=flagged,
        twin=twin if flagged else "",
        text=text,
    )


def differences_text(entry: ParityEntry) -> str:
    """'FLOPs per image differ by 6.1%, trainable parameters by 0.1%': a flagged entry's differences, short."""
    parts = []
    if entry.flops_diff is not None:
        parts.append(f"FLOPs per {entry.per} differ by {entry.flops_diff:.1%}")
    if entry.params_diff is not None:
        what = "trainable parameters" if entry.params_compared == "trainable_params" else "parameters"
        parts.append(f"{what} {'by' if parts else 'differ by'} {entry.params_diff:.1%}")
    return ", ".join(parts)


def marked(label: str, flagged: bool) -> str:
    """A model's label with the parity mark when its frameworks do not build the same network."""
    return f"{label} {PARITY_MARK}" if flagged else label


def parity_entries(counts: Iterable[Any]) -> list[dict[str, Any]]:
    """The parity entries of counts made outside a session (``benchtui parity``), as a summary has them.

    ``counts``: objects with ``framework``, ``model``, ``params``, ``trainable_params``,
    ``flops_per_sample`` and optionally ``counted``, ``source``, ``architecture`` (a count
    without parameters or FLOPs is left out). Models and frameworks keep the counts' order.
    """
    by_model: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for count in counts:
        ident = {
            "params": getattr(count, "params", None),
            "trainable_params": getattr(count, "trainable_params", None),
            "flops_per_sample": getattr(count, "flops_per_sample", None) or None,
            "flops_counted": getattr(count, "counted", "") or "",
            "source": getattr(count, "source", "") or "",
            "architecture": getattr(count, "architecture", "") or "",
        }
        if ident["params"] is None and ident["flops_per_sample"] is None:
            continue
        by_model.setdefault(str(count.model), []).append((str(count.framework), ident))
    return [
        entry.to_json()
        for model, cells in by_model.items()
        if (entry := model_parity(model, cells)) is not None
    ]
