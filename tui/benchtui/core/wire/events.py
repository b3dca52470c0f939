"""Reading the wire format on the parent side: one JSON object per line, never trusted."""

from __future__ import annotations

import json
from typing import Any

WIRE_VERSION = 1
EVENT_TYPES = frozenset({"hello", "phase", "batch", "epoch", "memory", "flops", "error", "done"})


class Malformed(ValueError):
    """A line that is not a wire event."""


def parse_line(line: bytes | str) -> dict[str, Any]:
    """Parse one line from a runner. Unknown types and fields pass through untouched.

    Raises Malformed for anything that is not a JSON object with a string ``type``.
    """
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Malformed(f"not UTF-8: {exc}") from exc
    line = line.strip()
    if not line:
        raise Malformed("empty line")
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise Malformed(f"not JSON: {exc.msg}") from exc
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise Malformed("not an event object with a 'type'")
    return event
