"""Screens of the benchtui app: the plan, the live view of runs (or a replay), the quit confirmation."""
