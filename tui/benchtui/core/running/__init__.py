"""Running a session: runner processes, the engine that orders them, batch search, GPU sampling."""
