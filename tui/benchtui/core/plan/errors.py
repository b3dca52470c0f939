"""The error of a plan that cannot be run (its own module: the device layer raises it too, and the plan
reads the device layer's placement)."""

from __future__ import annotations


class PlanError(ValueError):
    """A plan that cannot be run; the message is one line for the user."""
