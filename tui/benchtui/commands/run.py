"""``benchtui run``, ``replay`` and the app: a plan from the command line, run headless or in the app."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from benchtui.commands import BadInput, say

#: What stops a headless run: Ctrl+C, kill, the terminal closing.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal that came before the engine's event loop handles them (``EarlySignals``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class EarlySignals:
    """A headless run's stop signals from its first moment until the engine's loop takes them over
    (``session_run.stop_on_signals`` replaces these handlers), and again once that loop is gone; the
    handlers found are put back on leaving (``with EarlySignals() as signals``).

    Each raises ``Interrupted`` where the process is, as Python's own SIGINT handler raises
    KeyboardInterrupt; inside ``held()`` (a session folder being made, or finished) one is only
    noted, so no folder is ever left half made or half finished.
    """

    def __init__(self) -> None:
        self.pending: int | None = None
        self._holding = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> EarlySignals:
        self._previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._holding:
            self.pending = self.pending or signum
            return
        raise Interrupted(signum)

    @contextlib.contextmanager
    def held(self, then_raise: bool = True) -> Iterator[None]:
        """Signals are only noted inside; one that came is raised as it ends (``then_raise``)."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if then_raise and self.pending is not None:
            raise Interrupted(self.pending)


def chosen_preset(args: argparse.Namespace) -> str:
    """The preset a run starts from: PLAN or --preset, as named; with neither and no flag that shapes the
    plan, the default plan (quick where its runs go to the CPU, the study where a GPU takes them); '' when
    flags shape a plan of their own (the study's protocol, the help's "defaults")."""
    from benchtui.core.plan.devices import default_preset
    from benchtui.core.plan.options import SHAPING, given
    from benchtui.core.plan.plan import PRESETS, PlanError, did_you_mean

    named = getattr(args, "plan", None)
    if named is not None:
        if named not in PRESETS:
            raise PlanError(
                f"unknown plan {named!r}{did_you_mean(named, PRESETS)}: PLAN names a preset, one of "
                f"{', '.join(PRESETS)}"
            )
        if args.preset is not None and args.preset != named:
            raise PlanError(f"PLAN {named} and --preset {args.preset} name two plans: give one")
        return str(named)
    if args.preset is not None:
        return str(args.preset)
    if any(given(args, option) for option in SHAPING):
        return ""
    device = args.device or "auto"
    if device == "auto":
        from benchtui.core.running.sampler import list_gpus

        return default_preset(bool(list_gpus(use_nvml=not getattr(args, "no_nvml", False)).gpus), device)
    return default_preset(False, device)


def plan_from_args(args: argparse.Namespace) -> Any:
    """Build and validate a Plan from parsed flags (raises PlanError)."""
    from benchtui.core.plan.options import COPIED, timing_for
    from benchtui.core.plan.plan import Plan, PlanError, from_preset, models_named
    from benchtui_runners import catalog

    preset = chosen_preset(args)
    plan = from_preset(preset) if preset else Plan()
    overrides: dict[str, Any] = {}
    own = own_models(args)
    if own:
        plan.custom_models = own  # registered by plan.validate()
        names = [d["name"] for d in own]
        # Your own models, after the catalog's that --models names (only yours when it names none).
        named = models_named(args.models) if args.models is not None else []
        overrides["models"] = named + [n for n in names if n not in named]
    elif args.models is not None:
        overrides["models"] = models_named(args.models)
    for option in COPIED:  # every option that sets its plan field as given
        value = getattr(args, option.name)
        if value is not None:
            overrides[option.field] = value
    for name in ("prompt_len", "new_tokens"):  # 0 on the plan is each model's default: never a flag's
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise PlanError(f"{_flag(name)} must be at least 1, got {value}")
    if args.timing is None and args.task is not None:  # --timing's default follows the task
        overrides["timing"] = timing_for(args.task)
    if args.profile_steps is not None and not (args.profile or plan.profile):
        raise PlanError(
            f"--profile-steps {args.profile_steps} sets how many steps --profile captures: add --profile"
        )
    if args.devices is not None:
        overrides["devices"], overrides["device_ids"] = args.devices
    for key, value in overrides.items():
        setattr(plan, key, value)
    if args.batch_size == "auto":
        plan.batch_auto, plan.batch_sizes = True, {}
    elif args.batch_size is not None:
        sizes = _batch_sizes(args.batch_size, plan.models, PlanError)
        for key in sizes:
            model = key.rpartition(":")[2]
            if model in catalog.MODELS and model not in plan.models:
                # A size for a model the plan does not run is a typo or a forgotten --models entry.
                raise PlanError(
                    f"--batch-size names {model}, which the plan does not run (its models: "
                    f"{', '.join(plan.models)}): add it to --models, or leave its size out"
                )
        # Named sizes replace the preset's for those models only; one size for all replaces them all.
        plan.batch_sizes = {**plan.batch_sizes, **sizes} if "=" in args.batch_size else sizes
    _sweep_from_args(args, plan, PlanError)
    for item in args.python:
        fw, sep, path = item.partition("=")
        if not sep or not path:
            raise PlanError(f"--python takes FRAMEWORK=INTERPRETER, got {item!r}")
        plan.python[fw] = path
    plan.validate()
    for fw, path in plan.python.items():
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise PlanError(f"--python {fw}={path}: no executable interpreter there")
    if own:
        from benchtui.core.plan.custom import check_sources

        for definition in own:
            check_sources(definition, set(plan.python))
    return plan


#: The flag each sweep axis replaces (a sweep of it sets that setting at each point), and the setting in words.
SWEPT_FLAGS = {
    "batch": ("batch_size", "the batch size"),
    "precision": ("precision", "the precision"),
    "compile": ("compile", "the compiler"),
    "channels-last": ("channels_last", "the memory layout"),
    "data": ("data", "where the data is"),
    "seq-len": ("seq_len", "tokens per sample"),
    "devices": ("devices", "the devices"),
}
#: The flags whose setting --best chooses per framework, in words (its batch is searched at its own points;
#: --batch-size is the plan's, at the same-settings points).
BEST_CHOOSES = {
    "precision": "the precision",
    "compile": "the compiler",
    "channels_last": "the memory layout",
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _sweep_from_args(args: argparse.Namespace, plan: Any, error: type[Exception]) -> None:
    """--sweep and --best into the plan's sweep (``sweep.parse_sweeps``; PlanError, one line): a sweep of
    ``devices`` is a scaling session (the plan's devices its largest count); a flag whose setting the
    sweep sets, or that --best chooses, is refused. What the rest of the plan cannot go with is
    ``Plan.validate``'s."""
    from benchtui.core.plan.sweep import parse_sweeps

    texts = list(getattr(args, "sweep", None) or [])
    if not texts and not getattr(args, "best", None):
        return
    sweep = parse_sweeps(texts)
    for axis, (name, what) in SWEPT_FLAGS.items():
        if axis in sweep and getattr(args, name, None) is not None:
            raise error(f"--sweep {axis} sets {what}: drop {_flag(name)}")
    if "devices" in sweep and args.scaling:
        raise error("--sweep devices is the scaling session: drop --scaling")
    if args.best:
        if "settings" in sweep:
            raise error("--best is --sweep settings=same,best: give one of them")
        for name, what in BEST_CHOOSES.items():
            if getattr(args, name, None) is not None:
                raise error(f"--best chooses {what} per framework: drop {_flag(name)}")
        sweep["settings"] = ["same", "best"]
    if "batch" in sweep and args.global_batch is not None:
        raise error("--global-batch fixes the batch: it cannot go with --sweep batch")
    if "devices" in sweep:
        counts = sorted({int(v) for v in sweep["devices"]})
        plan.devices, plan.device_ids, plan.scaling = counts[-1], [], len(counts) > 1
    plan.sweep = sweep


def own_models(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The user's own models the flags define: each ``--model-file``, and one from ``--model-def``."""
    from benchtui.core.plan.custom import from_flags, read_model_file
    from benchtui.core.plan.plan import PlanError

    own = [read_model_file(path) for path in args.model_file]
    if args.model_def:
        own.append(from_flags(args.model_def, args.model_name, args.model_input))
    elif args.model_name or args.model_input:
        raise PlanError(
            "--model-name and --model-input describe a --model-def: add --model-def FRAMEWORK=MODULE:FUNCTION"
        )
    names = [d["name"] for d in own]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PlanError(f"two of your models are named {twice[0]!r}: give each its own name")
    return own


def _batch_sizes(text: str, models: list[str], error: type[Exception]) -> dict[str, int]:
    from benchtui.core.plan.options import csv_list

    try:
        if "=" not in text:
            size = int(text)
            if size < 1:  # one size for every model: said without naming one (the user named none)
                raise error(f"--batch-size must be a positive whole number, got {size}")
            return {m: size for m in models}
        sizes = {}
        for part in csv_list(text):
            model, _, value = part.partition("=")
            sizes[model.strip()] = int(value)
        return sizes
    except ValueError as exc:
        if isinstance(exc, error):
            raise
        raise error(f"--batch-size must be a number or MODEL=N,..., got {text!r}") from None


def check_devices(plan: Any) -> None:
    """Refuse devices this machine does not have, and data parallel without its launcher (nothing started)."""
    from pathlib import Path

    from benchtui.core.plan.plan import PlanError
    from benchtui_runners import catalog

    if not plan.multi_device:
        check_device(plan.device)
        return
    from benchtui.core.plan.devices import place
    from benchtui.core.running.sampler import list_gpus

    found = list_gpus(use_nvml=plan.device != "cpu")
    if plan.device.startswith("cuda") and not found.gpus:
        raise PlanError(
            f"--devices {plan.devices} on --device {plan.device}: no NVIDIA GPU found ({found.status})"
        )
    place(plan.device, found.gpus, plan.devices, plan.device_ids)
    for fw in plan.frameworks:
        if catalog.family(fw) == "torch":
            python = plan.python_for(fw)
            if not (Path(python).parent / "torchrun").is_file():
                raise PlanError(
                    f"--devices {plan.devices}: PyTorch's data parallel starts through torchrun, and there is no "
                    f"torchrun beside {python} (install torch in that environment)"
                )


def check_device(device: str) -> None:
    """Refuse a CUDA device that this job was not given (nothing started yet, no session folder made):
    one this machine does not have, or one outside an inherited ``CUDA_VISIBLE_DEVICES``."""
    if not device.startswith("cuda"):
        return
    from benchtui.core.plan.devices import place
    from benchtui.core.plan.plan import PlanError
    from benchtui.core.running.sampler import list_gpus

    found = list_gpus()
    if not found.nvml:
        raise PlanError(f"--device {device}: no NVIDIA GPU found ({found.status})")
    place(device, found.gpus)


def cmd_run(args: argparse.Namespace) -> int:
    # Headless, the signal handlers come first: a signal from now on ends the run cleanly, whenever it comes.
    with EarlySignals() if args.headless else contextlib.nullcontext() as signals:
        plan = plan_from_args(args)
        cluster = cluster_of(args)
        if cluster is not None and not args.headless:
            raise BadInput(
                "a run across nodes is headless: add --headless; replay the session in the app afterwards"
            )
        check_devices(plan)
        if cluster is not None:
            assert signals is not None
            return start_on_nodes(plan, args, cluster, signals)
        return start(plan, args, signals)


def cluster_of(args: argparse.Namespace) -> Any:
    """Where this benchtui stands among several machines (``nodes.cluster_from_args``): None on one."""
    from benchtui.core.plan.nodes import cluster_from_args

    return cluster_from_args(args, os.environ)


def start_on_nodes(plan: Any, args: argparse.Namespace, cluster: Any, signals: EarlySignals) -> int:
    """A plan across nodes, headless: node 0 waits for the others, then records the session as on one node
    (each run on several nodes met through the channel, ``cluster.Head``); node k joins node 0 and follows it,
    its runners' logs in a folder of its own. Nodes that cannot meet: one line, exit 2, nothing written."""
    from benchtui.core.running.cluster import ClusterError, Head
    from benchtui.core.running.headless import run_follower
    from benchtui.core.store.session import usable_sessions_dir

    root = usable_sessions_dir(args.sessions_dir)
    if not cluster.is_head:
        try:
            return run_follower(plan, cluster, root, use_nvml=not args.no_nvml, hold=signals.held)
        except ClusterError as exc:
            raise BadInput(str(exc)) from None
    head = Head(cluster, plan)
    try:
        try:
            head.listen()
            say(
                f"benchtui: node 0 waits for {cluster.nodes - 1} node(s) at {cluster.address} "
                f"(at most {cluster.timeout_s:g} s)"
            )
            head.gather()
        except ClusterError as exc:
            head.refuse(str(exc))
            raise BadInput(str(exc)) from None
        except KeyboardInterrupt:
            head.refuse("node 0 was interrupted before the session started")
            return 130
        return _start_headless(plan, args, signals, head)
    finally:
        head.close()


def start(plan: Any, args: argparse.Namespace, signals: EarlySignals | None = None) -> int:
    """Run a checked plan headless (progress on stderr, the table on stdout), or in the app.

    Headless, ``signals`` are the handlers the command installed first (installed here when None).
    """
    from benchtui.core.store.session import usable_sessions_dir

    if args.headless:
        if signals is None:
            with EarlySignals() as signals:
                return _start_headless(plan, args, signals)
        return _start_headless(plan, args, signals)
    from benchtui.app import run_app

    usable_sessions_dir(args.sessions_dir)  # the app makes the folder later: say it now, nothing started
    return run_app(plan, autostart=True, sessions_dir=args.sessions_dir, use_nvml=not args.no_nvml)


def _start_headless(plan: Any, args: argparse.Namespace, signals: EarlySignals, head: Any = None) -> int:
    """The session made (whole or not at all), run, and its table printed; interrupted whenever a signal comes.
    ``head``: node 0 of several, the others joined (told the session's id once it exists)."""
    from benchtui.core.reporting.model import build_report
    from benchtui.core.reporting.terminal import print_result
    from benchtui.core.running.headless import run_headless
    from benchtui.core.store.session import LoadedSession, SessionWriter

    def on_summary(loaded: LoadedSession, title: str) -> None:
        signals.install()  # the engine's loop is gone, and its handlers with it
        print_result(build_report(loaded, telemetry=False), title)  # the report ``show`` prints

    writer: SessionWriter | None = None
    try:
        with signals.held():  # the folder is made whole, or not at all
            writer = SessionWriter.create(plan, args.sessions_dir)
        if head is None:
            code = run_headless(
                plan, writer, use_nvml=not args.no_nvml, on_summary=on_summary, hold=signals.held
            )
        else:
            head.welcome(writer.path.name)
            code = run_headless(
                plan, writer, use_nvml=not args.no_nvml, on_summary=on_summary, head=head, hold=signals.held
            )
    except KeyboardInterrupt:  # before the engine's loop took the signals over, or after it
        signals.install()
        if writer is None or writer.closed:  # no folder yet, or the session already finished
            return 130
        with signals.held(then_raise=False):
            end_unstarted(plan, writer)
            if head is not None:
                head.end("interrupted")
        say(f"benchtui: session interrupted before it started: {writer.path}")
        return 130
    if writer.failure:
        say(
            f"benchtui: error: {writer.failure} in {writer.path}: the session stopped; what was written is kept"
        )
    return code


def end_unstarted(plan: Any, writer: Any) -> None:
    """Finish a session that was interrupted before its engine started: each run recorded as the engine
    records the runs an interrupted session never reached, the session "interrupted"."""
    from benchtui.core.model.session_model import SessionModel
    from benchtui.core.plan.plan import run_order
    from benchtui.core.store.session import StorageError
    from benchtui_runners import catalog

    model = SessionModel(plan, host=writer.meta.get("host"))
    for spec in run_order(plan):
        ok, why = (True, "") if plan.watch else catalog.available(spec.framework, spec.model)
        status, reason = ("skipped", "session interrupted before this run") if ok else ("unavailable", why)
        event = {
            "type": "run_end",
            "t": time.monotonic(),
            "run": spec.run_id,
            "status": status,
            "reason": reason,
        }
        model.apply(event)
        with contextlib.suppress(StorageError):
            writer.append(event)
    writer.finish("interrupted", model.summary())


def cmd_app(args: argparse.Namespace) -> int:
    from benchtui.app import run_app

    if args.app_sessions_dir:  # named: said now if it cannot be written, before the app takes the terminal
        from benchtui.core.store.session import usable_sessions_dir

        usable_sessions_dir(args.app_sessions_dir)
    return run_app(None, autostart=False, sessions_dir=args.app_sessions_dir)


def cmd_replay(args: argparse.Namespace) -> int:
    from benchtui.core.store.session import SessionFolder, resolve_session

    if not args.speed > 0:
        raise BadInput(f"--speed must be positive, got {args.speed}")
    path = resolve_session(args.session, args.sessions_dir)
    # Checked before the app takes the terminal: a folder that is not a session is one line on stderr
    # (SessionError), not an error drawn on the alternate screen and gone when it closes.
    SessionFolder.open(path).read_plan()
    from benchtui.app import replay_app

    return replay_app(path, speed=args.speed)
