"""``python -m tui``: the same as the ``benchtui`` command."""

from benchtui.cli import entry

entry()
