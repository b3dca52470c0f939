"""The ``benchtui`` command line: one vocabulary for the app, headless runs and the docs.

Only argparse is imported up front so ``benchtui --help`` answers at once; each
command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """Bad input from the user: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One clear line, not usage + error.
        raise BadInput(message)


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _add_plan_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("plan (defaults: the study's protocol)")
    g.add_argument("--preset", help="start from a preset: study, quick")
    g.add_argument("--frameworks", type=_csv, help="comma-separated: torch,tensorflow,keras-jax,keras-torch")
    g.add_argument("--models", type=_csv, help="comma-separated model ids, or 'all'")
    g.add_argument("--image-size", type=int, metavar="N")
    g.add_argument("--samples", type=int, metavar="N")
    g.add_argument(
        "--batch-size", metavar="N|auto|MODEL=N,...",
        help="one size for all, per model, or auto: the largest that fits (probed in fresh processes)",
    )
    g.add_argument("--batch-policy", help="auto: min (the smallest across frameworks, default) or per-framework")
    g.add_argument("--max-batch-size", type=int, metavar="N", help="auto: never probe above N")
    g.add_argument("--epochs", type=int, metavar="N")
    g.add_argument("--runs", type=int, metavar="N")
    g.add_argument("--device", help="auto, cpu, cuda or cuda:N (default auto)")
    g.add_argument("--data", help="device: synthetic tensors made on the device; host: a NumPy array")
    g.add_argument("--precision", help="fp32, tf32, amp-fp16, amp-bf16 (default fp32)")
    g.add_argument("--compile", action="store_true", default=None, help="torch.compile / XLA")
    g.add_argument("--no-cudnn-autotune", dest="cudnn_autotune", action="store_false", default=None)
    g.add_argument("--channels-last", action="store_true", default=None, help="PyTorch NHWC memory format")
    g.add_argument("--order", help="interleaved (default) or grouped")
    g.add_argument("--num-classes", type=int, metavar="N")
    g.add_argument("--name", help="a label for the session (its folder name is made safe from it)")
    g.add_argument("--sessions-dir", metavar="DIR", help="where sessions are written (default ./sessions)")
    g.add_argument("--interval", type=float, metavar="SECONDS", help="GPU sampling period (default 0.5)")
    g.add_argument(
        "--threads", type=int, metavar="N",
        help="CPU threads for every framework's ops (default 0: each framework's own choice)",
    )
    g.add_argument(
        "--memory-limit", dest="memory_limit_mb", type=int, metavar="MB",
        help="cap each runner's address space (RLIMIT_AS): a smaller memory, on CPU",
    )
    g.add_argument(
        "--python", action="append", default=[], metavar="FRAMEWORK=INTERPRETER",
        help="run a framework's runners with another Python (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="benchtui",
        description="Which framework trains this network faster on this GPU, by how much, and why.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    run = sub.add_parser("run", help="start a plan at once (in the app, or --headless)")
    _add_plan_args(run)
    run.add_argument("--headless", action="store_true", help="no app: Rich progress, table on stdout")
    run.add_argument("--no-nvml", action="store_true", help=argparse.SUPPRESS)

    sub.add_parser("doctor", help="what is installed, what each framework sees, NVML status")

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

    export = sub.add_parser("export", help="export a session: md, csv, json or html")
    export.add_argument("session")
    export.add_argument("--format", required=True, choices=["md", "csv", "json", "html"])
    export.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout (html: default SESSION/report.html)")
    export.add_argument("--per-batch", action="store_true", help="csv: one row per batch")
    export.add_argument("--sessions-dir", metavar="DIR")

    compare = sub.add_parser("compare", help="two sessions side by side, ratios with 95%% CIs")
    compare.add_argument("a", help="the baseline session")
    compare.add_argument("b", help="the session compared to it")
    compare.add_argument("--fail-above", type=float, metavar="PCT", help="exit 1 if B is slower than A by more than PCT on any row")
    compare.add_argument("--sessions-dir", metavar="DIR")

    show = sub.add_parser("show", help="print a session's summary table")
    show.add_argument("session")
    show.add_argument("--sessions-dir", metavar="DIR")

    sessions = sub.add_parser("sessions", help="list saved sessions")
    sessions.add_argument("--sessions-dir", metavar="DIR")
    return parser


def plan_from_args(args: argparse.Namespace) -> Any:
    """Build and validate a Plan from parsed flags (raises PlanError)."""
    from benchtui_runners import catalog

    from benchtui.core.plan.plan import Plan, PlanError, from_preset

    plan = from_preset(args.preset) if args.preset else Plan()
    overrides: dict[str, Any] = {}
    if args.frameworks is not None:
        overrides["frameworks"] = args.frameworks
    if args.models is not None:
        overrides["models"] = list(catalog.MODEL_ORDER) if args.models == ["all"] else args.models
    for name in (
        "image_size", "samples", "epochs", "runs", "device", "data", "precision", "compile",
        "cudnn_autotune", "channels_last", "order", "num_classes", "name", "interval", "memory_limit_mb",
        "batch_policy", "max_batch_size", "threads",
    ):
        value = getattr(args, name)
        if value is not None:
            overrides[name] = value
    for key, value in overrides.items():
        setattr(plan, key, value)
    if args.batch_size == "auto":
        plan.batch_auto, plan.batch_sizes = True, {}
    elif args.batch_size is not None:
        plan.batch_sizes = _batch_sizes(args.batch_size, plan.models, PlanError)
    for item in args.python:
        fw, sep, path = item.partition("=")
        if not sep or not path:
            raise PlanError(f"--python takes FRAMEWORK=INTERPRETER, got {item!r}")
        plan.python[fw] = path
    plan.validate()
    for fw, path in plan.python.items():
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise PlanError(f"--python {fw}={path}: no executable interpreter there")
    return plan


def _batch_sizes(text: str, models: list[str], error: type[Exception]) -> dict[str, int]:
    try:
        if "=" not in text:
            size = int(text)
            return {m: size for m in models}
        sizes = {}
        for part in _csv(text):
            model, _, value = part.partition("=")
            sizes[model.strip()] = int(value)
        return sizes
    except ValueError:
        raise error(f"--batch-size must be a number or MODEL=N,..., got {text!r}") from None


def check_device(device: str) -> None:
    """Refuse a CUDA device that this machine does not have (nothing started yet)."""
    if not device.startswith("cuda"):
        return
    from benchtui.core.plan.plan import PlanError
    from benchtui.core.running.sampler import load_nvml

    nvml, status = load_nvml()
    if nvml is None:
        raise PlanError(f"--device {device}: no NVIDIA GPU found ({status})")
    count = nvml.nvmlDeviceGetCount()
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= count:
        raise PlanError(f"--device {device}: this machine has {count} GPU(s) (cuda:0..cuda:{count - 1})")


def cmd_run(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    check_device(plan.device)
    from benchtui.core.store.session import SessionWriter

    if args.headless:
        from benchtui.core.running.headless import run_headless

        writer = SessionWriter.create(plan, args.sessions_dir)
        return run_headless(plan, writer, use_nvml=not args.no_nvml)
    from benchtui.app import run_app

    return run_app(plan, autostart=True, sessions_dir=args.sessions_dir, use_nvml=not args.no_nvml)


def cmd_app(args: argparse.Namespace) -> int:
    from benchtui.app import run_app

    return run_app(None, autostart=False, sessions_dir=None)


def cmd_replay(args: argparse.Namespace) -> int:
    from benchtui.app import replay_app
    from benchtui.core.store.session import resolve_session

    if not args.speed > 0:
        raise BadInput(f"--speed must be positive, got {args.speed}")
    return replay_app(resolve_session(args.session, args.sessions_dir), speed=args.speed)


def cmd_export(args: argparse.Namespace) -> int:
    from benchtui.core.reporting.export import cmd_export as run

    return run(args)


def cmd_compare(args: argparse.Namespace) -> int:
    from benchtui.core.reporting.compare import cmd_compare as run

    return run(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    from benchtui.core.running.doctor import run_doctor

    return run_doctor()


def cmd_envs(args: argparse.Namespace) -> int:
    from benchtui_runners import catalog

    from benchtui.core.plan import envs

    if args.envs_action == "create":
        unknown = [fw for fw in args.frameworks if fw not in catalog.FRAMEWORKS]
        if unknown:
            raise BadInput(f"unknown framework {unknown[0]!r}; choose from {', '.join(catalog.FRAMEWORKS)}")
        return envs.create(args.frameworks or list(catalog.FRAMEWORKS), args.gpu, args.dry_run)
    print(f"Environments in {envs.envs_dir()} (used instead of this Python when present):")
    for env in envs.describe():
        print(f"  {env['framework']:<12} {env['python'] or 'none (runs use ' + sys.executable + ')'}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from benchtui.core.reporting.tables import ratio_table
    from benchtui.core.running.headless import _stdout_console, print_summary
    from benchtui.core.store.session import load_session, resolve_session

    loaded = load_session(resolve_session(args.session, args.sessions_dir))
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    summary = loaded.model.summary()
    print_summary(summary["rows"], f"{loaded.path.name} · {escape(str(loaded.meta.get('status')))}")
    console = _stdout_console()
    ratios = ratio_table(summary.get("ratios") or [])
    if ratios is not None:
        console.print(ratios)
        console.print("95% CIs by seeded bootstrap; 'not significant' when the CI contains 1.", style="dim")
    return EXIT_OK


def cmd_sessions(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from benchtui.core.store.session import list_sessions, sessions_dir

    infos = list_sessions(args.sessions_dir)
    if not infos:
        print(f"no sessions in {sessions_dir(args.sessions_dir)}", file=sys.stderr)
        return EXIT_OK
    table = Table(header_style="bold")
    for col in ("Started (UTC)", "Session", "Name", "Device", "Frameworks", "Models", "Status"):
        table.add_column(col)
    for info in infos:
        status = info["status"]
        style = {"complete": "green", "failed": "red", "running": "magenta", "interrupted": "yellow", "incomplete": "yellow"}.get(status, "dim")
        # Text, not markup: names and errors come from session files.
        cells = [info["started"], info["name"], info.get("label", ""), info["device"], info["frameworks"], info["models"]]
        status_text = Text(status, style=style)
        if info.get("error"):
            status_text.append(f" {info['error']}")
        table.add_row(*(Text(c) for c in cells), status_text)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    console.print(table)
    return EXIT_OK


COMMANDS = {
    "run": cmd_run,
    "doctor": cmd_doctor,
    "show": cmd_show,
    "sessions": cmd_sessions,
    "replay": cmd_replay,
    "export": cmd_export,
    "compare": cmd_compare,
    "envs": cmd_envs,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.version:
            from importlib.metadata import PackageNotFoundError, version

            try:
                print(f"benchtui {version('benchtui')}")
            except PackageNotFoundError:
                print("benchtui (not installed)")
            return EXIT_OK
        if args.command is None:
            return cmd_app(args)
        return COMMANDS[args.command](args)
    except BadInput as exc:
        print(f"benchtui: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as exc:  # PlanError, SessionError: user-facing by construction
        from benchtui.core.plan.plan import PlanError
        from benchtui.core.store.session import SessionError

        if isinstance(exc, (PlanError, SessionError)):
            print(f"benchtui: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        raise
    except KeyboardInterrupt:
        return 130


def entry() -> NoReturn:
    sys.exit(main())
