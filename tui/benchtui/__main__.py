"""``python -m benchtui``: the same as the ``benchtui`` command."""

from benchtui.cli import entry

entry()
