"""A report as each format writes it, into a string: what the report tests read."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from benchtui.core.reporting import terminal
from benchtui.core.reporting.model import Report


def written(report: Report, writer: Any) -> str:
    """The text a file format's writer (markdown, htmlreport, csvfile, jsonfile) makes of ``report``."""
    buf = io.StringIO()
    writer.write(report, buf)
    return buf.getvalue()


def shown(report: Report, width: int = 200) -> str:
    """What ``benchtui show`` prints of ``report`` on a terminal ``width`` columns wide."""
    out = io.StringIO()
    terminal.print_report(report, Console(file=out, width=width))
    return out.getvalue()
