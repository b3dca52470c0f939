"""Starting a session one way for the app and the headless run: folder, GPU sampler, engine, signals, exit code."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from benchtui.core.model.status import SessionStatus
from benchtui.core.plan.plan import Plan
from benchtui.core.running.cluster import Head, HeadEngine
from benchtui.core.running.engine import Engine
from benchtui.core.running.launcher import LocalLauncher
from benchtui.core.running.sampler import Sampler
from benchtui.core.running.source import Listener
from benchtui.core.running.watch import WatchEngine
from benchtui.core.store.session import SessionWriter

#: What the command line returns for a session that ended so (the docs' exit codes).
EXIT_CODES: dict[str, int] = {
    SessionStatus.COMPLETE: 0,
    SessionStatus.FAILED: 1,
    SessionStatus.INCOMPLETE: 1,  # runs stopped or skipped: the plan was not carried out whole
    SessionStatus.INTERRUPTED: 130,  # 128 + SIGINT, as shells report a Ctrl+C
}


def exit_code(status: str) -> int:
    """0 when every run succeeded, 130 when interrupted, 1 otherwise (any status this version does not know)."""
    return EXIT_CODES.get(str(status), 1)


@dataclass
class SessionRun:
    """A session ready to run: its folder being written, the sampler the engine starts, the engine."""

    engine: Engine
    writer: SessionWriter
    sampler: Sampler

    @property
    def path(self) -> Path:
        return self.writer.path


def start_session(
    plan: Plan,
    sessions_dir: str | os.PathLike[str] | None = None,
    *,
    writer: SessionWriter | None = None,
    use_nvml: bool = True,
    listener: Listener | None = None,
    launcher: LocalLauncher | None = None,
    head: Head | None = None,
) -> SessionRun:
    """Create the session folder (or take ``writer``'s) and wire the sampler and the engine to it (a
    ``WatchEngine`` for a ``benchtui watch`` plan; on node 0 of several, ``head``: a ``HeadEngine``).

    Nothing runs yet: ``await run.engine.run()`` starts the sampler and the runs. Raises
    OSError or SessionError when the folder cannot be created.
    """
    if writer is None:
        writer = SessionWriter.create(plan, sessions_dir)
    # The engine points the sampler at itself (on_sample) when it starts.
    sampler = Sampler(plan.interval, lambda sample: None, use_nvml=use_nvml)
    if plan.watch:  # benchtui watch: the user's command (or none), not a plan's runners
        engine: Engine = WatchEngine(plan, writer, listener=listener, sampler=sampler)
    elif head is not None:  # node 0 of several: the other nodes met through ``head``
        engine = HeadEngine(plan, writer, head, listener=listener, sampler=sampler, launcher=launcher)
    else:
        engine = Engine(plan, writer, listener=listener, sampler=sampler, launcher=launcher)
    return SessionRun(engine, writer, sampler)


T = TypeVar("T")


def run_whole(
    main: Callable[[], Coroutine[Any, Any, T]],
    hold: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> T:
    """``asyncio.run(main())``, with its event loop made and closed whole under ``hold`` (a headless run's
    ``EarlySignals.held``: a stop signal inside is noted, then raised as it ends).

    Before the loop handles the stop signals, their handlers raise wherever the process is. One raised
    inside ``new_event_loop`` left a loop without its self-pipe, whose finaliser then printed a traceback
    ("no attribute '_ssock'"), and a coroutine made for it was never awaited. Here the loop is whole before
    the signal is raised, ``main`` is called only once it exists, and the loop is closed whatever ends it.
    """
    loop: asyncio.AbstractEventLoop | None = None
    try:
        with hold():
            loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main())
    finally:
        if loop is not None:
            with hold():
                _close(loop)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does on leaving: the loop's tasks cancelled and awaited, its async generators
    and default executor shut down, then the loop closed."""
    try:
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def stop_on_signals(
    loop: asyncio.AbstractEventLoop, stop: Callable[[], object], hang_up: Callable[[], object] | None = None
) -> None:
    """Ctrl+C (SIGINT) and kill (SIGTERM) call ``stop``; the terminal closing (SIGHUP) calls ``hang_up``, else ``stop``.

    Either way the caller cancels the engine, which stops the runner's process group and
    keeps what was recorded, marked interrupted.
    """
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    loop.add_signal_handler(signal.SIGHUP, hang_up or stop)
