"""Reporting: one report model built from a session, one writer per format, and comparisons."""
