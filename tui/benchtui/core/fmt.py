"""Formatting for people: seconds, bytes, rates, spreads, and text made safe to show. Shared by every view."""

from __future__ import annotations

import codecs
import functools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

NA = "N/A"

#: One colour per framework in every view: the app's strips and the reports' charts. Mid-tones
#: that read on a dark terminal and on a white page alike.
FRAMEWORK_COLORS = {
    "torch": "#e8590c",
    "tensorflow": "#1c7ed6",
    "keras-jax": "#2f9e44",
    "keras-torch": "#7950f2",
}
#: For anything else (a watched command before its hooks name a framework, a series of its own).
PALETTE = ("#1c7ed6", "#e8590c", "#2f9e44", "#7950f2", "#d6336c", "#f08c00", "#1098ad", "#74b816")


def color_for(key: str, index: int = 0) -> str:
    """The colour of a framework (or of the ``index``-th other series)."""
    return FRAMEWORK_COLORS.get(key, PALETTE[index % len(PALETTE)])


def plural(count: object, noun: str, *, grouped: bool = False) -> str:
    """'1 thread', '2 threads'; ``grouped``: thousands apart, '1,024 samples' (the plan screen's words)."""
    number = f"{count:,}" if grouped else f"{count}"
    return f"{number} {noun}{'' if count == 1 else 's'}"


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


def _numbers(values: Iterable[object]) -> list[float]:
    return [
        abs(float(v))
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v != 0
    ]


def _needed(smallest: float, significant: int) -> int:
    """The decimals that show ``smallest`` with ``significant`` significant digits."""
    return max(0, significant - 1 - math.floor(math.log10(smallest)))


def column_decimals(values: Iterable[object], most: int, own: int, significant: int) -> int:
    """One number of decimals for a column of figures (``values``, CI bounds included): as many as its
    smallest non-zero value needs for ``significant`` significant digits, never fewer than ``own`` (what
    the figure's own formatter gives the column's largest value), never more than ``most``."""
    numbers = _numbers(values)
    if not numbers:
        return own
    return min(most, max(own, _needed(min(numbers), significant)))


def seconds_column(values: Iterable[object], digits: int = 3) -> Callable[[Any], str]:
    """A formatter of seconds with one number of decimals for the whole column (``values``): '12.640' and
    '0.704', not '12.64' and '0.704'; the decimals are those ``seconds`` gives where they agree."""
    numbers = _numbers(values)
    largest = max(numbers, default=0.0)
    own = 1 if largest >= 100 else 2 if largest >= 10 else digits
    decimals = column_decimals(numbers, max(digits, own), own, digits)

    def text(value: Any) -> str:
        return _fixed(value, f"{{:.{decimals}f}}")

    return text


def _fixed(value: Any, pattern: str) -> str:
    """A number in ``pattern``; '–' for None, anything else as text."""
    if value is None:
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return pattern.format(value)
    return clean(value)


def rate_column(values: Iterable[object]) -> Callable[[Any], str]:
    """A formatter of rates (images/s) with one number of decimals for the whole column: '1,234.0' and
    '47.7', not '1,234' and '47.7'; '1,234' and '980' where every value reads whole."""
    numbers = _numbers(values)
    decimals = 0 if numbers and min(numbers) >= 100 else 1

    def text(value: Any) -> str:
        return _fixed(value, f"{{:,.{decimals}f}}")

    return text


def bytes_(value: float | None) -> str:
    if value is None:
        return NA
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return NA


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


def percent(fraction: float | None, fine_under: float = 0.1) -> str:
    """'42%'; a fraction above 0 and under ``fine_under`` with one decimal: '4.2%'. A share of a step passes
    0.01: '18%', '3%', '0.4%' (``why``'s columns); '0%' for nothing."""
    if fraction is None:
        return "–"
    return f"{fraction:.1%}" if 0 < fraction < fine_under else f"{fraction:.0%}"


def milliseconds(value: float | None) -> str:
    """Seconds shown in milliseconds: '12.34', '1.234', '123.4'."""
    return "–" if value is None else seconds(value * 1000)


def times(value: float | None) -> str:
    """A speedup or a ratio, '1.86×'."""
    return "–" if value is None else f"{value:.2f}×"


def joules(value: float | None) -> str:
    """Energy, '0.123 J'."""
    return "–" if value is None else f"{value:.3g} J"


def tflops_with_peak(value: float | None, fraction: float | None) -> str:
    """'123 (45%)' when the GPU's peak is known, else '123'."""
    return _with_peak(tflops(value), value, fraction)


def _with_peak(text: str, value: float | None, fraction: float | None) -> str:
    return f"{text} ({percent(fraction)})" if value is not None and fraction is not None else text


@dataclass(frozen=True)
class FlopUnit:
    """The unit a column of achieved FLOP rates is shown in: its name, and how many of it make one TFLOP/s."""

    name: str = "TFLOP/s"
    per_tflop: float = 1.0

    def text(self, tflops_value: float | None) -> str:
        """A rate given in TFLOP/s, in this unit with three significant digits: '6.07' (GFLOP/s), '1,234'."""
        if tflops_value is None:
            return "–"
        value = tflops_value * self.per_tflop
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return tflops(value)

    def with_peak(self, tflops_value: float | None, fraction: float | None) -> str:
        """'123 (45%)' when the GPU's peak is known, else '123'; in this unit."""
        return _with_peak(self.text(tflops_value), tflops_value, fraction)


#: The units of achieved FLOP rates, largest first. Not beyond TFLOP/s: GPU peaks are said in it.
FLOP_UNITS = (FlopUnit("TFLOP/s", 1.0), FlopUnit("GFLOP/s", 1e3), FlopUnit("MFLOP/s", 1e6))


def flop_unit(tflops_values: Iterable[float | None]) -> FlopUnit:
    """The one unit of a column of FLOP rates (given in TFLOP/s), so its rows compare at a glance: the
    largest in which the column's largest value is at least 1 ('6.07 GFLOP/s' on a CPU, not '0.00607
    TFLOP/s'); TFLOP/s for a column without a value."""
    values = [abs(v) for v in tflops_values if isinstance(v, (int, float)) and math.isfinite(v) and v != 0]
    if not values:
        return FLOP_UNITS[0]
    top = max(values)
    return next((u for u in FLOP_UNITS if top * u.per_tflop >= 1), FLOP_UNITS[-1])


def device_flop_unit(cpu: bool) -> FlopUnit:
    """The unit of a live table's FLOP rates, fixed before any is known: GFLOP/s on a CPU, TFLOP/s on a GPU."""
    return FLOP_UNITS[1] if cpu else FLOP_UNITS[0]


# -- text from files and runners, made safe to show -------------------------------------------
# Session files and runners are not trusted: an error message, a plan's name or a hand-edited
# session.json can hold escape sequences that clear the screen, retitle the window or fake
# output. Whole sequences go, so that no half of one is left to print as garbage:
_SEQUENCES = re.compile(
    r"\x1b[\]PX^_].*?(?:\x07|\x1b\\|\x9c|\Z)"  # OSC, DCS, SOS, PM, APC: up to BEL or ST (or the end)
    r"|[\x90\x98\x9d\x9e\x9f].*?(?:\x07|\x1b\\|\x9c|\Z)"  # the same opened by a C1 control
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: parameters, intermediates, a final byte
    r"|\x1b[ -/]*[0-~]?",  # any other escape: ESC, intermediates, a final byte
    re.DOTALL,
)
#: C0 (but tab and line ends, handled apart), DEL, C1, and the bidi overrides and isolates that
#: can make text read differently from what it is (Trojan Source).
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_LINE_ENDS = re.compile("\r\n|[\r\n\u2028\u2029]")


def clean(text: object, *, one_line: bool = True) -> str:
    """``text`` as a string safe to print on a terminal or in a cell: no control characters.

    Escape sequences (CSI, OSC and the like) are removed whole; other C0 and C1 controls,
    DEL and Unicode bidi overrides are dropped. With ``one_line`` line breaks and tabs become
    spaces; without it they stay, as ``\\n`` and ``\\t``. It does not escape markup: Rich
    markup, HTML and Markdown are each writer's to escape.
    """
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():  # the usual case: no control, no format character, no line break
        return text
    text = _CONTROLS.sub("", _SEQUENCES.sub("", text))
    if one_line:
        return _LINE_ENDS.sub(" ", text).replace("\t", " ")
    return _LINE_ENDS.sub("\n", text)


def clean_tree(value: Any) -> Any:
    """A copy of JSON-like ``value`` (dicts, lists, scalars) with every string cleaned (``clean``)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_tree(v) for v in value]
    return value


# -- output that cannot take every character ---------------------------------------------------
# A stdout in ASCII or Latin-1 (PYTHONIOENCODING, or the C locale without UTF-8 mode) cannot encode
# the '·' and '–' benchtui prints; a lone surrogate (a folder name that is not UTF-8, a string escaped
# in a JSON file) has no encoding at all. Neither may stop a command: the error handlers below give
# each such character a stand-in, and benchtui's streams and export files use them.
#: ASCII for the characters benchtui's own text uses, where the output cannot encode them.
ASCII_STAND_INS = {
    "·": "-",
    "–": "-",
    "—": "-",
    "−": "-",
    "×": "x",
    "…": "...",
    "≠": "!=",
    "≥": ">=",
    "≤": "<=",
    "→": "->",
    "÷": "/",
    "±": "+/-",
    "≈": "~",
    "°": "deg",
    "µ": "u",
    "✓": "v",
    "✗": "x",
    "●": "*",
    "▲": "^",
    "│": "|",
    "─": "-",
    "━": "-",
    "┃": "|",
}
#: Error handlers (``str.encode(encoding, errors=...)``, a stream's ``errors``): a stand-in for each
#: character the encoding lacks (``stand_in``); the same, but a surrogate that stands for a byte (a
#: file name read with surrogateescape) written as that byte, as the stream's own surrogateescape
#: would; JSON's own escape (``\u00b7``), which a JSON reader reads back as the same character.
FALLBACK, FALLBACK_KEEPING_BYTES, JSON_ESCAPE = (
    "benchtui.fallback",
    "benchtui.surrogateescape",
    "benchtui.json",
)


class OutputError(OSError):
    """A write to benchtui's stdout or stderr failed: its reader is gone (EPIPE), its disk full."""

    stream = "stdout"  #: which: "stdout" or "stderr"


@functools.lru_cache(maxsize=4096)
def stand_in(char: str, encoding: str) -> str:
    """What ``char`` is written as where ``encoding`` cannot encode it: its ``ASCII_STAND_INS``, else its
    compatibility form without accents ('é' -> 'e', a full-width '＋' -> '+'), else its Python escape
    ('\\u65e5', a lone surrogate '\\udce9'): never dropped, never a '?' that hides what it was."""
    undecorated = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    for candidate in (ASCII_STAND_INS.get(char), undecorated):
        if candidate and candidate != char:
            try:
                candidate.encode(encoding)
            except (UnicodeError, LookupError):
                continue
            return candidate
    return char.encode("ascii", "backslashreplace").decode("ascii")


def _encoding_error(exc: UnicodeError) -> UnicodeEncodeError:
    if not isinstance(exc, UnicodeEncodeError):  # only ever named for encoding
        raise exc
    return exc


def _fallback(exc: UnicodeError) -> tuple[str, int]:
    err = _encoding_error(exc)
    return "".join(stand_in(c, err.encoding) for c in err.object[err.start : err.end]), err.end


def _stands_for_a_byte(char: str) -> bool:
    return "\udc80" <= char <= "\udcff"  # what surrogateescape makes of a byte that is not UTF-8


def _fallback_keeping_bytes(exc: UnicodeError) -> tuple[str | bytes, int]:
    err = _encoding_error(exc)
    text, end = err.object, err.start
    if _stands_for_a_byte(text[end]):
        while end < err.end and _stands_for_a_byte(text[end]):
            end += 1
        return bytes(ord(c) - 0xDC00 for c in text[err.start : end]), end
    while end < err.end and not _stands_for_a_byte(text[end]):
        end += 1
    return "".join(stand_in(c, err.encoding) for c in text[err.start : end]), end


def _json_escape(exc: UnicodeError) -> tuple[str, int]:
    """JSON's escape for each character (a pair of them above U+FFFF): non-ASCII text in a JSON document
    is only ever inside a string, where the escape reads back as the character (a lone surrogate too)."""
    err = _encoding_error(exc)
    parts = []
    for char in err.object[err.start : err.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            parts.append(f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}")
        else:
            parts.append(f"\\u{code:04x}")
    return "".join(parts), err.end


codecs.register_error(FALLBACK, _fallback)
codecs.register_error(FALLBACK_KEEPING_BYTES, _fallback_keeping_bytes)
codecs.register_error(JSON_ESCAPE, _json_escape)
