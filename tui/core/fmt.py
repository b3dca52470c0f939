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


def maybe(value: Any, suffix: str = "", digits: int = 0) -> str:
    if value is None:
        return NA
    if isinstance(value, float):
        return f"{value:.{digits}f}{suffix}"
    return f"{value}{suffix}"
