"""The plan: what to run (frameworks, models, settings), on which device, with which Python."""
