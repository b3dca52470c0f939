"""The commands behind ``benchtui``: each takes the parsed arguments from cli.py, prints, and returns an exit code.

Only the standard library is imported here: cli.py imports this package at start.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchtui.core.store.session import LoadedSession

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """Bad input from the user: one line on stderr, exit 2."""


def load(session: str, sessions_dir: str | None, tag: str = "") -> LoadedSession:
    """The session named on the command line, read back; what was skipped or odd goes to stderr as warnings."""
    from benchtui.core.store.session import load_session, resolve_session

    loaded = load_session(resolve_session(session, sessions_dir))
    prefix = f"{tag} {loaded.path.name}: " if tag else ""
    for warning in loaded.warnings:
        print(f"warning: {prefix}{warning}", file=sys.stderr)
    return loaded
