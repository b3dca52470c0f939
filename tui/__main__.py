"""``python -m tui``: the same as the ``benchtui`` command."""

from tui.cli import entry

entry()
