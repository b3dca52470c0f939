"""Reusable widgets of the benchtui app: results table, comparison strips, telemetry panels, log pane."""
