"""``benchtui sessions``: the saved sessions, newest first, as a table."""

from __future__ import annotations

import argparse
import sys

from benchtui.commands import EXIT_OK
from benchtui.core.fmt import clean


def cmd_sessions(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from benchtui.core.model.status import status_style
    from benchtui.core.store.session import list_sessions, sessions_dir

    infos = list_sessions(args.sessions_dir)
    if not infos:
        print(f"no sessions in {clean(sessions_dir(args.sessions_dir))}", file=sys.stderr)
        return EXIT_OK
    table = Table(header_style="bold")
    for col in ("Started (UTC)", "Session", "Name", "Device", "Frameworks", "Models", "Status"):
        table.add_column(col)
    for info in infos:
        status = clean(info["status"])
        # Text, not markup, and cleaned: names and errors come from session files.
        cells = [
            info["started"],
            info["name"],
            info.get("label", ""),
            info["device"],
            info["frameworks"],
            info["models"],
        ]
        status_text = Text(status, style=status_style(status, "dim"))
        if info.get("error"):
            status_text.append(f" {clean(info['error'])}")
        table.add_row(*(Text(clean(c)) for c in cells), status_text)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    console.print(table)
    return EXIT_OK
