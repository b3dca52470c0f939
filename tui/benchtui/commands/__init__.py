"""The commands behind ``benchtui``: each takes the parsed arguments from cli.py, prints, and returns an exit code.

Only the standard library is imported here (and benchtui.core.fmt, which imports nothing else): cli.py
imports this package at start. What they print from a session or a runner goes through ``fmt.clean``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from benchtui.core.fmt import clean

if TYPE_CHECKING:
    from benchtui.core.store.session import LoadedSession

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """Bad input from the user: one line on stderr, exit 2."""


def say(message: object) -> None:
    """One line on stderr, without the control characters that session text can hold."""
    print(clean(message), file=sys.stderr)


def load(
    session: str,
    sessions_dir: str | None,
    tag: str = "",
    light: bool = False,
    again: LoadedSession | None = None,
) -> LoadedSession:
    """The session named on the command line, read back; what was skipped or odd goes to stderr as warnings.
    ``light``: without its running runs' batch lines where its summary cache holds (``reporting.light``: the
    caller redoes its work from ``light.full`` when it meets ``NeedsBatches``; the warnings are the same).
    ``again``: a session read already, taken as it is when ``session`` names the same path (compare A A)."""
    from benchtui.core.store.session import load_session, resolve_session

    path = resolve_session(session, sessions_dir)
    loaded = again if again is not None and again.path == path else None
    if light and loaded is None:
        from benchtui.core.reporting.light import light_load

        loaded = light_load(path)
    if loaded is None:
        loaded = load_session(path)
    prefix = f"{tag} {loaded.path.name}: " if tag else ""
    for warning in loaded.warnings:
        say(f"warning: {prefix}{warning}")
    return loaded
