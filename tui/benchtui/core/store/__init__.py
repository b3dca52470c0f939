"""The session store: one folder per session, written while it runs, loaded and replayed later."""
