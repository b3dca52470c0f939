"""The wire: the events a runner sends down its pipe, and their checks (the lowest layer)."""
