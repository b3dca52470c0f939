"""Formatting figures for people: seconds, bytes, rates, spreads. Shared by every view."""

from __future__ import annotations

from typing import Any

NA = "N/A"


def seconds(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.1f}"
    if value >= 10:
        return f"{value:.2f}"
    return f"{value:.{digits}f}"


def rate(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def bytes_(value: float | None) -> str:
    if value is None:
        return NA
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return NA


def spread(stats: dict[str, Any] | None, fmt=seconds) -> str:  # noqa: ANN001 - a formatter
    """'min–max' over runs, or '' when there is a single run."""
    if not stats or stats.get("n", 0) < 2:
        return ""
    return f"{fmt(stats['min'])}–{fmt(stats['max'])}"


def with_spread(value: float | None, stats: dict[str, Any] | None, fmt=seconds) -> str:  # noqa: ANN001
    text = fmt(value)
    extra = spread(stats, fmt)
    return f"{text} ({extra})" if extra else text


def tflops(value: float | None) -> str:
    """Achieved TFLOP/s with three significant digits: '0.0532', '1.23', '123'."""
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:#.3g}".rstrip(".")  # '#' keeps trailing zeros: 0.00700, not 0.007


def flops(value: float | None) -> str:
    """A FLOP count with an SI prefix: '3.99 GFLOP'."""
    if value is None:
        return "–"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}FLOP"
    return f"{value:.0f} FLOP"


def percent(fraction: float | None) -> str:
    """'42%', or '4.2%' under 10%."""
    if fraction is None:
        return "–"
    return f"{fraction:.0%}" if fraction >= 0.1 else f"{fraction:.1%}"


def tflops_with_peak(value: float | None, fraction: float | None) -> str:
    """'123 (45%)' when the GPU's peak is known, else '123'."""
    text = tflops(value)
    return f"{text} ({percent(fraction)})" if value is not None and fraction is not None else text
