"""Headless runs: the engine with a Rich progress display on stderr; the study's table goes to a callback."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchtui.core import fmt
from benchtui.core.model import analysis, generation_figures
from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import status_style
from benchtui.core.plan.devices import place
from benchtui.core.plan.estimate import long_cpu_warning, nodes_words, sweep_words
from benchtui.core.plan.nodes import Cluster
from benchtui.core.plan.plan import Plan, PlanError, command_text
from benchtui.core.plan.sweep import Point
from benchtui.core.plan.threads import threads_words
from benchtui.core.running.cluster import Follower, Head
from benchtui.core.running.sampler import Sampler
from benchtui.core.running.session_run import exit_code, run_whole, start_session, stop_on_signals
from benchtui.core.store.session import LoadedSession, SessionError, SessionFolder, SessionWriter
from benchtui_runners import catalog
from benchtui_runners.config import usable_cores


def _shown(text: object) -> str:
    """Text from a runner, an event or the plan inside markup: no control characters, brackets as they are."""
    return escape(fmt.clean(text))


def _run_line(model: SessionModel, run_id: str) -> str:
    run = model.runs[run_id]
    figures = run.figures()
    style = status_style(run.status, "magenta")
    rate, tokens = figures["images_per_s"], (run.hello.get("settings") or {}).get("tokens_per_sample")
    info = catalog.MODELS.get(run.spec.model)
    generated = generation_figures.figures([run]) if run.generation is not None else None
    if generated is not None:  # generate: the batch's tokens after the first, and the first token's latency
        speed = (
            f"{fmt.rate(generated.batch_tokens_per_s)} tokens/s after the first (batch {generated.sequences}), "
            f"first token {generation_figures.ms(generated.first_token_s)}"
        )
    elif isinstance(tokens, int) and tokens > 0 and rate is not None:
        speed = f"{fmt.rate(rate * tokens)} tokens/s"
    else:
        speed = f"{fmt.rate(rate)} {'samples' if info is not None and info.kind == 'tensor' else 'img'}/s"
    figures_text = f"mean epoch {fmt.seconds(figures['mean_epoch_s'])} s, {speed}" + (
        f", build {fmt.seconds(figures['build_s'])} s"
        if figures["build_s"] is not None or not model.plan.watch
        else ""
    )
    if model.plan.watch:  # a watch: how the command ended, then what it measured, if anything
        if run.epoch_times or run.batch_seconds:
            detail = "; ".join(x for x in (_shown(run.reason), figures_text) if x)
        else:  # the row's reason says both: how the command ended, and that it sent no timing
            detail = _shown(model.row(run.spec.framework, run.spec.model).reason)
    else:
        detail = _shown(run.reason) or figures_text
    return f"[{style}]{_shown(f'{run.status:>11}')}[/] {_shown(run_id)}  {detail}"


def _epoch_line(run: RunState, event: dict[str, Any]) -> str:
    """A watched command's epoch as it ends: its time and throughput (samples over time)."""
    seconds, samples = float(event["seconds"]), int(event.get("samples") or 0)
    rate = f", {fmt.rate(samples / seconds)} samples/s" if samples and seconds > 0 else ""
    label = analysis.framework_label(run.spec.framework)
    return f"[cyan]{'epoch':>11}[/] {_shown(run.spec.run_id)}  {_shown(label)} epoch {event['epoch']}: {fmt.seconds(seconds)} s{rate}"


def _probe_line(event: dict[str, Any]) -> str:
    style = {"ok": "green", "oom": "yellow"}.get(event["result"], "red")
    detail = (
        f"peak {fmt.bytes_(event['peak_bytes'])}"
        if event.get("peak_bytes")
        else _shown(event.get("reason", ""))
    )
    at = Point.from_key(str(event.get("point") or "")).label
    return (
        f"[{style}]{_shown('probe ' + str(event['result'])):>11}[/] {_shown(event['framework'])} "
        f"{_shown(event['model'])}{_shown(' at ' + at) if at else ''} batch {_shown(event['batch_size'])}  "
        f"{detail} ({event['seconds']:.1f} s)"
    )


def _finished(writer: SessionWriter, model: SessionModel) -> LoadedSession:
    """The session as ``show`` loads it (session.json, the plan it records: the chosen batch sizes, a watch's
    command), with the engine's own model: no events read again."""
    meta = dict(writer.meta)
    try:
        plan = SessionFolder(writer.path).read_plan(meta)
    except SessionError:  # a plan this version wrote: kept for safety, the model's
        plan = model.plan
    return LoadedSession(writer.path, meta, plan, model)


def _long_on_cpu(plan: Plan, gpus: list[dict[str, Any]], measured: dict[str, Any] | None) -> str:
    """The warning for a plan that will take very long on the CPU it resolves to ('' for a GPU, or a short
    one), estimated from the idle cores the engine measured (every usable core where it measured none)."""
    try:
        placement = place(plan.device, gpus, plan.devices, plan.device_ids)
    except PlanError:
        return ""  # the engine says why when it starts
    return long_cpu_warning(plan, _cores(measured)) if placement.kind == "cpu" else ""


def _cores(measured: dict[str, Any] | None) -> float:
    """The idle cores the engine measured (every usable core where it measured none)."""
    idle = (measured or {}).get("idle_cores")
    return float(idle) if isinstance(idle, (int, float)) else usable_cores()


def _sweep_line(plan: Plan, gpus: list[dict[str, Any]], measured: dict[str, Any] | None) -> str:
    """A sweep's size, and on a CPU its rough duration (``estimate.sweep_words``; '' without a sweep)."""
    if not plan.sweep:
        return ""
    try:
        on_gpu = place(plan.device, gpus, plan.devices, plan.device_ids).kind != "cpu"
    except PlanError:
        on_gpu = True  # the engine says why when it starts; no duration said meanwhile
    return sweep_words(plan, _cores(measured), gpu=on_gpu)


#: Shows the result at the end of a run: (the session as ``show`` would load it, its model the engine's; title).
SummaryCallback = Callable[[LoadedSession, str], None]


def _console() -> Console:
    err = Console(stderr=True)
    if not err.is_terminal:  # a log file: no wrapping at 80 columns
        err = Console(stderr=True, width=200)
    return err


def run_headless(
    plan: Plan,
    writer: SessionWriter,
    use_nvml: bool = True,
    on_summary: SummaryCallback | None = None,
    head: Head | None = None,
    hold: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> int:
    """Run a plan with progress on stderr, then hand the session (its folder, session.json and plan as
    recorded, the engine's model) to ``on_summary``, which shows its report; return the exit code.
    ``head``: node 0 of several, the other nodes joined (``cluster.Head``). ``hold``: the command's
    early signals held while an event loop is made or closed (``session_run.run_whole``)."""
    err = _console()
    session = start_session(plan, writer=writer, use_nvml=use_nvml, head=head)
    engine = session.engine
    gone: list[fmt.OutputError] = []  # stderr's failure, once: its reader left, or its disk is full

    def say(text: str, **kwargs: Any) -> None:
        """A line of progress on stderr. Where stderr fails, nobody sees the session any more: it stops as
        if its terminal had closed ("interrupted", what was recorded kept), and the failure is raised once
        the session is saved (cli: quiet for a reader that left, one line for the rest)."""
        if gone:
            return
        try:
            err.print(text, **kwargs)  # the progress display's console: printed above the bar
        except fmt.OutputError as exc:
            gone.append(exc)
            engine.cancel()

    watch = bool(plan.watch)
    # A CPU plan with no --threads: the idle cores, measured once (a second) before anything is said, so
    # that the warning's estimate and the plan line come from them; the engine's runs use the same figure.
    measured = None if watch else run_whole(engine.measure_cpu, hold)
    warning = "" if watch else _long_on_cpu(plan, session.sampler.gpus(), measured)
    if warning:  # said, never refused: scripts start long plans on purpose
        say(f"[yellow]benchtui: warning: {_shown(warning)}[/]", soft_wrap=True)
    say(f"[bold]benchtui[/] session [cyan]{_shown(writer.path)}[/] · {_shown(session.sampler.status)}")
    if measured is not None:
        say(f"[bold]plan[/] · {_shown(threads_words(measured))}")
    if head is not None:
        others = ", ".join(f"node {m.node} {m.host} ({m.address})" for _, m in sorted(head.members.items()))
        where = "" if plan.sweep else nodes_words(plan)  # a sweep's line says it with the plan's size
        say(
            f"[bold]nodes[/] · {head.cluster.nodes}: node 0 at {_shown(head.cluster.address)}, {_shown(others)}"
            + (f" · runs {_shown(where)}" if where else "")
        )
    swept = "" if watch else _sweep_line(plan, session.sampler.gpus(), measured)
    if swept:
        say(f"[bold]sweep[/] · {_shown(swept)}")
    if watch:
        what = command_text(plan.watch.get("command") or [])
        say(
            f"watching [bold]{_shown(what)}[/] · Ctrl+C stops it (its whole process group)"
            if what
            else "watching telemetry only · Ctrl+C ends the session"
        )

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    overall = progress.add_task("runs", total=0)
    current = progress.add_task("", total=1, visible=False)

    def listener(event: dict[str, Any]) -> None:
        kind = event.get("type")
        run_id = event.get("run")
        if "node" in event:  # another node's, recorded: its run is node 0's line
            return
        if kind == "probe":
            say(_probe_line(event))
            return
        if kind == "batch_choice":
            chosen = ", ".join(
                f"{catalog.FRAMEWORK_LABELS.get(fw, fw)} {b}" for fw, b in event["chosen"].items()
            )
            at = Point.from_key(str(event.get("point") or "")).label
            say(
                f"[bold]batch for {_shown(event['model'])}{_shown(' at ' + at) if at else ''}[/] "
                f"({_shown(event['policy'])}): "
                f"{_shown(chosen or 'none fits')}"
            )
            return
        if kind == "gpu" or run_id is None:
            return
        run = engine.model.runs.get(run_id)
        if run is None:
            return
        shown = _shown(run_id)  # the progress line's text is markup
        if watch:  # one run, as many epochs as the command trains: no total to count to
            if kind == "run_start":
                label = analysis.model_label(run.spec.model)
                progress.update(current, description=f"{shown} {_shown(label)}", total=None, visible=True)
            elif kind == "batch":
                progress.update(
                    current,
                    description=f"{shown} epoch {run.current_epoch}",
                    completed=run.current_step,
                    total=run.steps_per_epoch,
                )
            elif kind == "epoch":
                say(_epoch_line(run, event))
            elif kind == "run_end":
                progress.update(current, visible=False)
                say(_run_line(engine.model, run_id))
            return
        if kind == "run_start":
            progress.update(current, description=f"{shown} starting", completed=0, total=1, visible=True)
        elif kind == "hello":
            total = (run.steps_per_epoch or 1) * run.epochs_planned
            progress.update(current, description=f"{shown} building", total=total, completed=0)
        elif kind == "batch":
            progress.update(
                current,
                description=f"{shown} epoch {run.current_epoch}/{run.epochs_planned}",
                advance=int(event.get("steps") or 1),
            )
        elif kind == "run_end":
            progress.update(overall, completed=engine.model.done_runs)
            say(_run_line(engine.model, run_id))

    engine.listener = listener
    progress.update(overall, total=len(engine.specs), visible=not watch)

    async def main() -> str:
        # Ctrl+C, kill, or the terminal closing: stop the runner's group, keep what was recorded.
        stop_on_signals(asyncio.get_running_loop(), engine.cancel)
        return await engine.run()

    with progress:
        status = run_whole(main, hold)

    refused: fmt.OutputError | None = None
    if on_summary is not None:
        try:
            on_summary(_finished(writer, engine.model), f"benchtui · {writer.path.name}")
        except fmt.OutputError as exc:  # stdout took no table: where the session is still goes to stderr
            refused = exc
    say(f"session {_shown(status)}: [cyan]{_shown(writer.path)}[/]")
    if engine.model.malformed:
        say(f"[yellow]{engine.model.malformed} malformed event line(s) were skipped (see logs/)[/]")
    failure = gone[0] if gone else refused
    if failure is not None:  # said by the command line: quiet for a reader that left, else one line
        raise failure
    return exit_code(status)


def run_follower(
    plan: Plan,
    cluster: Cluster,
    sessions_root: Path,
    use_nvml: bool = True,
    launcher: Any = None,
    hold: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> int:
    """Node k of several: join node 0 (ClusterError, one line, when it cannot), then start each run node 0
    prepares, relaying everything to it; one line per run on stderr and one at the end. Returns 0 when
    node 0's session completed, 1 otherwise (node 0 lost: one line naming its address). ``hold``: as
    ``run_headless``'s."""
    err = _console()
    node = f"node {cluster.node_rank}"

    def say(text: str) -> None:
        with contextlib.suppress(fmt.OutputError):
            err.print(text, soft_wrap=True)

    def listener(event: dict[str, Any]) -> None:
        kind, run = event.get("type"), _shown(event.get("run"))
        if kind == "run_start":
            pid = f" (pid {event['pid']})" if "pid" in event else ""
            say(f"[cyan]{'started':>11}[/] {run} on {node}{pid}")
        elif kind == "run_end":
            status = str(event.get("status"))
            reason = _shown(event.get("reason") or "")
            say(f"[{status_style(status, 'magenta')}]{_shown(f'{status:>11}')}[/] {run} on {node}  {reason}")

    sampler = Sampler(plan.interval, lambda sample: None, use_nvml=use_nvml)
    follower = Follower(
        plan,
        cluster,
        sessions_root,
        sampler=sampler,
        listener=listener,
        launcher=launcher,
        gpus=sampler.gpus(),
    )

    async def main() -> str:
        await follower.join()
        say(
            f"[bold]benchtui[/] {node} of {cluster.nodes} joined node 0 at {_shown(cluster.address)} · "
            f"runners' logs in [cyan]{_shown(follower.writer.path)}[/] · {_shown(sampler.status)}"
        )
        stop_on_signals(asyncio.get_running_loop(), follower.cancel)
        return await follower.run()

    status = run_whole(main, hold)
    if follower.cancelled:
        say(f"{node}: interrupted; node 0's run fails with it")
        return 130
    if follower.lost:
        say(f"benchtui: error: {_shown(follower.lost)}")
        return 1
    say(f"{node}: node 0's session {_shown(status)}")
    return follower.exit_code
