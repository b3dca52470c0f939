"""``benchtui watch [-- COMMAND ...]``: a session without a plan, in the app or headless."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil

from benchtui.commands import BadInput


def watched_command(words: list[str]) -> list[str]:
    """The command after ``--`` (argparse leaves the ``--`` in front of it); [] for telemetry only.

    A command that cannot be found is bad input, said before anything is created.
    """
    command = words[1:] if words[:1] == ["--"] else list(words)
    if command and shutil.which(command[0]) is None:
        where = "no such executable file" if os.sep in command[0] else "not found on PATH"
        raise BadInput(f"watch: cannot run {command[0]!r}: {where}")
    return command


def cmd_watch(args: argparse.Namespace) -> int:
    from benchtui.commands.run import EarlySignals, start
    from benchtui.core.plan.plan import watch_plan

    # Headless, the signal handlers come first: a signal from now on ends the watch cleanly, whenever it comes.
    with EarlySignals() if args.headless else contextlib.nullcontext() as signals:
        command = watched_command(args.argv)
        plan = watch_plan(command, os.getcwd(), name=args.name or "", interval=args.interval)
        return start(plan, args, signals)
