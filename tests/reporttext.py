"""A report as each format writes it, into a string: what the report tests read."""

from __future__ import annotations

import io
import re
from html import escape, unescape
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


def flat(text: str) -> str:
    """Text with its lines joined: a long sentence wraps at the console's width."""
    return " ".join(text.split())


def md_section(md: str, title: str) -> str:
    """The Markdown section under ``## title``, up to the next one."""
    return md.split(f"## {title}")[1].split("\n## ")[0]


def html_table(html: str, title: str) -> list[list[str]]:
    """The cells of the html table under ``<h3>title</h3>``, row by row (header first), as text (tags removed)."""
    body = html.split(f"<h3>{escape(title, quote=True)}</h3>")[1].split("</table>")[0]
    return [
        [unescape(re.sub("<[^>]+>", "", cell)) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in body.split("<tr>")[1:]
    ]


def terminal_rows(text: str, first: str) -> list[list[str]]:
    """The cells of the framed table rows (``show``) whose first cell is ``first``."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if line.startswith("│") and cells[0] == first:
            rows.append(cells)
    return rows
