"""The ``benchtui`` command line: one vocabulary for the app, headless runs and the docs.

The parser and a lazy dispatch into ``benchtui.commands``: only argparse, the commands
package's exit codes, the export-format registry and the plan options (``core.plan.options``, where
each plan flag is declared once) are imported up front, so ``benchtui --help`` answers at once; each
command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import os
import signal
import sys
from typing import TYPE_CHECKING, NoReturn, TextIO

from benchtui.commands import EXIT_BAD_INPUT, EXIT_OK, BadInput, say
from benchtui.core.fmt import FALLBACK, FALLBACK_KEEPING_BYTES, OutputError
from benchtui.core.plan.options import INTERVAL, INTERVAL_RANGE, SESSIONS_DEFAULT, add_plan_args, csv_list
from benchtui.core.reporting.registry import WRITERS

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One clear line, not usage + error.
        raise BadInput(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="benchtui",
        description="Which framework trains this network faster on this GPU, by how much, and why.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument(
        "--sessions-dir",
        metavar="DIR",
        dest="app_sessions_dir",
        help=f"where the app (and any command that names none) reads and writes sessions {SESSIONS_DEFAULT}",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    run = sub.add_parser(
        "run",
        help="start a plan at once (in the app, or --headless)",
        description="Start a plan at once. With no plan named and no flag that shapes one, the default "
        "plan: quick where the runs go to the CPU (minutes), the study where a GPU takes them (the app's "
        "plan screen starts from the same).",
    )
    run.add_argument(
        "plan",
        nargs="?",
        metavar="PLAN",
        help="a preset to start from: study, quick, modern, modern-cpu (as --preset)",
    )
    add_plan_args(run)
    run.add_argument("--headless", action="store_true", help="no app: Rich progress, table on stdout")
    run.add_argument("--no-nvml", action="store_true", help=argparse.SUPPRESS)

    watch = sub.add_parser(
        "watch",
        help="the live screen without a plan: telemetry until you quit, or a command's telemetry (and its "
        "batches, when it uses benchtui's timing hooks) until it exits",
        description="Record a session without a plan. Without a command: GPU (or CPU) telemetry until you "
        "quit. With one (after --): the command runs in this folder and environment, its output goes to the "
        "session's log, its telemetry is recorded, and a script that uses benchtui's timing hooks "
        "(benchtui_runners.hooks: StepTimer for a PyTorch loop, KerasTimer for Keras model.fit) streams its "
        "batches and epochs. The command's exit code is the run's; Ctrl+C stops its whole process group.",
    )
    watch.add_argument("--name", help="a label for the session (its folder name is made safe from it)")
    watch.add_argument(
        "--sessions-dir",
        metavar="DIR",
        help=f"where sessions are written {SESSIONS_DEFAULT}",
    )
    watch.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help=f"sampling period (default {INTERVAL:g}; {INTERVAL_RANGE[0]:g} to {INTERVAL_RANGE[1]:g})",
    )
    watch.add_argument("--no-nvml", action="store_true", help="sample CPU and memory only, even with a GPU")
    watch.add_argument(
        "--headless", action="store_true", help="no app: progress on stderr, the summary on stdout"
    )
    watch.add_argument(
        "argv",  # not "command": the subcommand's own name is there
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS ...]",
        help="the command to run and watch (none: telemetry only)",
    )

    doctor = sub.add_parser("doctor", help="what is installed, what each framework sees, NVML status")
    doctor.add_argument(
        "--fresh",
        "--no-cache",
        action="store_true",
        help="ask every framework again instead of using the answers kept since nothing changed",
    )

    parity = sub.add_parser(
        "parity",
        help="is each model the same network on every side? parameters and FLOPs counted by each framework",
    )
    parity.add_argument(
        "--models", type=csv_list, help="model ids or groups: study, modern, all (default: all)"
    )
    parity.add_argument("--frameworks", type=csv_list, help="default: torch,tensorflow")
    parity.add_argument(
        "--model-file",
        action="append",
        default=[],
        metavar="FILE",
        help="your own model (see benchtui run --model-file): counted alone, or with --models",
    )
    parity.add_argument(
        "--image-size", type=int, metavar="N", help="default: each model's own (224 px for most)"
    )
    parity.add_argument("--seq-len", type=int, metavar="N", help="token models (default: their context)")
    parity.add_argument(
        "--task", metavar="train|inference", help="FLOPs of a training step (default) or a forward"
    )
    parity.add_argument("--num-classes", type=int, metavar="N", help="the head's width (default 1000)")
    parity.add_argument("--format", choices=["text", "md", "json"], default="text")
    parity.add_argument("--jobs", type=int, metavar="N", help="counts at a time (default: one per two cores)")
    parity.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="FRAMEWORK=INTERPRETER",
        help="count a framework with another Python (repeatable)",
    )

    envs = sub.add_parser("envs", help="one environment per framework: list them, or create them")
    envs_sub = envs.add_subparsers(dest="envs_action", parser_class=_Parser)
    envs_sub.add_parser("list", help="where each framework's environment is (the default)")
    create = envs_sub.add_parser("create", help="make the environments (uv), used by every plan from then on")
    create.add_argument("frameworks", nargs="*", metavar="FRAMEWORK", help="default: every framework")
    create.add_argument("--gpu", action="store_true", help="the builds that see an NVIDIA GPU")
    create.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")

    replay = sub.add_parser("replay", help="play a recorded session through the live screen")
    replay.add_argument("session", help="a session folder, or a unique prefix of its name")
    replay.add_argument("--speed", type=float, default=1.0, help="playback speed factor (default 1)")
    replay.add_argument("--sessions-dir", metavar="DIR")

    export = sub.add_parser("export", help=f"export a session: {', '.join(WRITERS)}")
    export.add_argument("session")
    export.add_argument(
        "--format",
        required=True,
        choices=list(WRITERS),
        metavar="FORMAT",
        help="; ".join(f"{w.name}: {w.description}" for w in WRITERS.values()),
    )
    export.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write here instead of stdout (html: default SESSION/report.html)",
    )
    batch_formats = ", ".join(w.name for w in WRITERS.values() if w.per_batch)
    export.add_argument("--per-batch", action="store_true", help=f"{batch_formats}: one row per batch")
    export.add_argument("--sessions-dir", metavar="DIR")

    compare = sub.add_parser("compare", help="two sessions side by side, ratios with 95%% CIs")
    compare.add_argument("a", help="the baseline session")
    compare.add_argument("b", help="the session compared to it")
    compare.add_argument(
        "--fail-above",
        type=float,
        metavar="PCT",
        help="exit 1 if B is slower than A by more than PCT on any row",
    )
    compare.add_argument("--sessions-dir", metavar="DIR")

    show = sub.add_parser("show", help="print a session's summary table")
    show.add_argument("session")
    show.add_argument("--sessions-dir", metavar="DIR")

    sessions = sub.add_parser("sessions", help="list saved sessions")
    sessions.add_argument("--sessions-dir", metavar="DIR")
    return parser


def unrecognized(parser: argparse.ArgumentParser, command: str | None, extras: list[str]) -> str:
    """argparse's "unrecognized arguments" line, each unknown flag with the nearest the command has
    ("--modles (did you mean '--models'?)"), as a mistyped model name gets."""
    from benchtui.core.plan.plan import did_you_mean

    options = parser._option_string_actions
    for action in parser._subparsers._group_actions if parser._subparsers is not None else []:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            options = action.choices[command]._option_string_actions
    said = []
    for extra in extras:
        flag = extra.partition("=")[0]
        hint = did_you_mean(flag, [o for o in options if o.startswith("--")]) if flag.startswith("--") else ""
        said.append(f"{extra}{hint}")
    return f"unrecognized arguments: {' '.join(said)}"


#: command -> (module under benchtui.commands, function): imported only when that command runs.
COMMANDS = {
    "run": ("run", "cmd_run"),
    "watch": ("watch", "cmd_watch"),
    "doctor": ("setup", "cmd_doctor"),
    "parity": ("parity", "cmd_parity"),
    "envs": ("setup", "cmd_envs"),
    "show": ("report", "cmd_show"),
    "export": ("report", "cmd_export"),
    "compare": ("report", "cmd_compare"),
    "sessions": ("sessions", "cmd_sessions"),
    "replay": ("run", "cmd_replay"),
    None: ("run", "cmd_app"),
}


def dispatch(args: argparse.Namespace) -> int:
    """Run the command ``args`` names (the app when none)."""
    # `benchtui --sessions-dir DIR [COMMAND]`: the folder before the command counts where the command has none.
    if args.app_sessions_dir and getattr(args, "sessions_dir", None) is None and args.command is not None:
        args.sessions_dir = args.app_sessions_dir
    module, name = COMMANDS[args.command]
    return int(getattr(importlib.import_module(f"benchtui.commands.{module}"), name)(args))


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (sys.argv's when None); return the exit code."""
    try:
        try:
            return _main(argv)
        finally:  # what is still buffered fails here, not in the interpreter's own flush at exit
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
    except OutputError as exc:
        return _output_failed(exc)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:
            raise BadInput(unrecognized(parser, args.command, extras))
        if args.version:
            from benchtui.core.provenance import benchtui_version

            print(f"benchtui {benchtui_version()}")
            return EXIT_OK
        return dispatch(args)
    except BadInput as exc:
        say(f"benchtui: error: {exc}")
        return EXIT_BAD_INPUT
    except ValueError as exc:  # PlanError, SessionError: user-facing by construction
        from benchtui.core.plan.plan import PlanError
        from benchtui.core.store.session import SessionError

        if isinstance(exc, (PlanError, SessionError)):
            say(f"benchtui: error: {exc}")
            return EXIT_BAD_INPUT
        raise
    except KeyboardInterrupt:
        return 130


# -- stdout and stderr: whatever they cannot take ----------------------------------------------------
class _Descriptor(io.FileIO):
    """stdout's or stderr's file descriptor, whose failed writes say which stream failed (OutputError)."""

    def __init__(self, fd: int, stream: str) -> None:
        super().__init__(fd, "w", closefd=False)
        self.stream = stream
        self.name = f"<{stream}>"  # type: ignore[misc]  # what Python names its own

    def write(self, data: ReadableBuffer, /) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            error = OutputError(exc.errno, exc.strerror)
            error.stream = self.stream
            raise error from exc


def _guarded(stream: TextIO, name: str) -> TextIO:
    """``stream`` again, on the same descriptor, buffered as it was: a character its encoding lacks is
    written as a stand-in (fmt.FALLBACK: ASCII for '·', an escape for a lone surrogate), a surrogate that
    stands for a byte as that byte where the stream was surrogateescape (Python's choice for a POSIX
    locale: a folder name that is not UTF-8 goes through a pipe as it is), and a failed write is an
    OutputError that names the stream."""
    stream.flush()
    raw = _Descriptor(stream.fileno(), name)
    binary = raw if isinstance(stream.buffer, io.RawIOBase) else io.BufferedWriter(raw)  # -u: unbuffered
    errors = FALLBACK_KEEPING_BYTES if stream.errors == "surrogateescape" else FALLBACK
    return io.TextIOWrapper(
        binary,  # type: ignore[arg-type]
        encoding=stream.encoding,
        errors=errors,
        line_buffering=bool(stream.line_buffering),
        write_through=bool(getattr(stream, "write_through", False)),
    )


def _hold(fd: int) -> None:
    """/dev/null on descriptor ``fd``: a stream that was closed, or has failed, takes no more output, and no
    file opened later gets its number (a session file written to as "stdout" by whoever writes to 1)."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def guard_output() -> int | None:
    """Make the process's stdout and stderr take whatever benchtui writes (see ``_guarded``); an exit
    code when stdout is closed (``>&-``: Python gives None), after one line on stderr."""
    closed = None
    for fd, name in ((2, "stderr"), (1, "stdout")):
        stream = getattr(sys, name)
        if stream is None:  # closed before benchtui started
            _hold(fd)
            if name == "stdout":
                closed = EXIT_BAD_INPUT
                continue
            stream = open(fd, "w", closefd=False)  # the process's stderr, on /dev/null
        elif stream is not getattr(sys, f"__{name}__"):
            continue  # someone else's (a test's capture): theirs to handle
        setattr(sys, name, _guarded(stream, name))
    if closed is not None:
        say("benchtui: error: cannot write to stdout: it is closed")
    return closed


def _output_failed(exc: OutputError) -> int:
    """A write to stdout or stderr failed: what is still buffered for it goes to /dev/null (the Python
    docs' way, so the interpreter's flush at exit fails no more); a reader that left (``| head``) ends the
    command quietly with the status a shell gives a tool SIGPIPE killed; anything else is one line."""
    _hold(1 if exc.stream == "stdout" else 2)
    if exc.errno == errno.EPIPE:
        return 128 + signal.SIGPIPE
    if exc.stream == "stdout":
        try:
            say(f"benchtui: error: cannot write to stdout: {exc.strerror}")
        except OutputError:
            _hold(2)
    return EXIT_BAD_INPUT


def entry() -> NoReturn:
    """The ``benchtui`` command (and ``python -m benchtui``)."""
    refused = guard_output()
    sys.exit(refused if refused is not None else main())
