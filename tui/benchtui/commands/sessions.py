"""``benchtui sessions``: the saved sessions, newest first, as a table."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from benchtui.commands import EXIT_OK
from benchtui.core.fmt import clean
from benchtui.core.store.session import own_name

if TYPE_CHECKING:
    from rich.console import RenderableType

#: The narrowest each column but the id may get (less only when its text is shorter): a date, a few
#: words, the longest framework id. Narrower than these, a table reads worse than a block per session.
MIN_WIDTHS = {"Started (UTC)": 10, "Name": 12, "Device": 12, "Frameworks": 11, "Models": 12}
GAP = 2  # columns between two columns of the table


def _fit(naturals: list[int], minimums: list[int], room: int) -> list[int] | None:
    """Widths for columns that would like ``naturals`` and need ``minimums``, in ``room`` (None: no fit).

    Every column gets its minimum (or less, when its text is shorter); what is left goes to the columns
    that want more, the smallest wish first, so that as many columns as can be are whole.
    """
    widths = [min(n, m) for n, m in zip(naturals, minimums, strict=True)]
    left = room - sum(widths)
    if left < 0:
        return None
    for i in sorted(range(len(widths)), key=lambda i: naturals[i] - widths[i]):
        extra = min(naturals[i] - widths[i], left)
        widths[i] += extra
        left -= extra
    return widths


def _listed(text: str) -> str:
    """A list of ids, a space after each comma so a narrow column wraps between them (a watch's command
    is left as it is)."""
    text = clean(text)
    return text if text.startswith("watch: ") else ", ".join(text.split(","))


def sessions_view(infos: list[dict[str, str]], width: int) -> RenderableType:
    """The sessions as a table ``width`` columns wide (or, too narrow for one, a block per session).

    A session's id is never cut: it is what ``show``, ``export``, ``compare`` and ``replay`` take. The
    other columns wrap instead; when they cannot fit beside the id, the start time goes first (the id
    begins with it), then the table gives way to one block per session: its id, then its facts.
    """
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    from benchtui.core.model.status import status_style

    def status_text(info: dict[str, str]) -> Text:
        text = Text(clean(info["status"]), style=status_style(clean(info["status"]), "dim"))
        if info.get("error"):
            text.append(f" {clean(info['error'])}")
        return text

    # Text, not markup, and cleaned: names and errors come from session files.
    ids = [clean(info["name"]) for info in infos]
    statuses = [status_text(info) for info in infos]
    columns = {
        "Started (UTC)": [clean(info["started"]) for info in infos],
        "Name": [clean(own_name(info)) for info in infos],
        "Device": [clean(info["device"]) for info in infos],
        "Frameworks": [_listed(info["frameworks"]) for info in infos],
        "Models": [_listed(info["models"]) for info in infos],
        "Status": [s.plain for s in statuses],
    }
    if not any(columns["Name"]):
        del columns["Name"]  # no session has a name of its own
    minimums = {**MIN_WIDTHS, "Status": max(max(len(clean(i["status"])) for i in infos), len("Status"))}
    id_width = max(map(len, ids))
    widths = None
    for shown in (list(columns), list(columns)[1:]):  # without the start time when narrow
        room = width - id_width - GAP * len(shown)
        naturals = [max(len(h), *map(len, columns[h])) for h in shown]
        widths = _fit(naturals, [minimums[h] for h in shown], room)
        if widths is not None:
            break
    if widths is None:
        blocks: list[RenderableType] = []
        for i, (name, status) in enumerate(zip(ids, statuses, strict=True)):
            head = Text(name, style="bold", overflow="fold")  # whole even where no line holds it
            head.append("  ").append_text(status)
            facts = " · ".join(columns[h][i] for h in list(columns)[:-1] if columns[h][i])
            blocks += [head, Padding(Text(facts, overflow="fold"), (0, 0, 0, 2))]
        return Group(*blocks)
    table = Table(
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )
    width_of = dict(zip(shown, widths, strict=True))
    order = ["Started (UTC)", "Session", "Name", "Device", "Frameworks", "Models", "Status"]
    for header in order:
        if header == "Session":
            table.add_column(header, width=id_width, no_wrap=True, overflow="ignore")
        elif header in width_of:
            table.add_column(header, width=width_of[header], overflow="fold")
    for i, name in enumerate(ids):
        cells = {"Session": Text(name), **{h: Text(columns[h][i]) for h in width_of if h != "Status"}}
        table.add_row(*(cells[h] for h in order if h in cells), statuses[i])
    return table


def cmd_sessions(args: argparse.Namespace) -> int:
    from rich.console import Console

    from benchtui.core.store.session import list_sessions, sessions_dir_words

    infos = list_sessions(args.sessions_dir)
    if not infos:  # the absolute path looked in, and why there: a user in another folder knows where
        print(f"no sessions in {clean(sessions_dir_words(args.sessions_dir))}", file=sys.stderr)
        return EXIT_OK
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(width=200)  # a file or a pipe: one line per session, unless COLUMNS says otherwise
    console.print(sessions_view(infos, console.width))
    return EXIT_OK
