"""``benchtui watch [-- COMMAND ...]``: a session without a plan, in the app or headless."""

from __future__ import annotations

import argparse
import os
import shutil

from benchtui.commands import BadInput, say


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
    from benchtui.core.plan.plan import watch_plan
    from benchtui.core.store.session import SessionWriter, usable_sessions_dir

    command = watched_command(args.argv)
    plan = watch_plan(command, os.getcwd(), name=args.name or "", interval=args.interval)
    if args.headless:
        from benchtui.core.reporting.terminal import print_result
        from benchtui.core.running.headless import run_headless

        writer = SessionWriter.create(plan, args.sessions_dir)
        code = run_headless(plan, writer, use_nvml=not args.no_nvml, on_summary=print_result)
        if writer.failure:
            say(
                f"benchtui: error: {writer.failure} in {writer.path}: the session stopped; what was written is kept"
            )
        return code
    from benchtui.app import run_app

    usable_sessions_dir(args.sessions_dir)  # the app makes the folder later: say it now, nothing started
    return run_app(plan, autostart=True, sessions_dir=args.sessions_dir, use_nvml=not args.no_nvml)
