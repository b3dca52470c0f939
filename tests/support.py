"""Helpers the tests import (``from support import ...``): the CLI in a real subprocess, one real
runner, event-file readers, the tiny plans. A plain module, imported once under one name; the
fixtures and hooks stay in conftest.py, which pytest loads itself and no test imports."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from _pytest.mark.expression import Expression

from benchtui.core.plan.plan import Plan
from benchtui.core.running.launcher import LocalLauncher, collect_events, config_args, start_runner

if TYPE_CHECKING:
    from benchtui.app import BenchApp

ROOT = Path(__file__).resolve().parent.parent
#: The wire format without a framework: the runs of the tests that are not ``slow`` (see its --help).
FAKE_RUNNER = ROOT / "tests" / "data" / "fake_runner.py"

# The smallest plan that still exercises everything: two epochs (first + rest), 2 batches each. One
# thread: two test workers share two cores, and oversubscribed thread pools slow PyTorch down tenfold.
TINY = (
    "--models resnet50 --image-size 32 --samples 16 --batch-size 8 --epochs 2 --runs 1 --device cpu"
    " --threads 1"
).split()
# A real headless run whose one cell is unavailable (no PNASNet in Keras): no framework starts.
UNAVAILABLE_RUN = (
    "run --headless --frameworks tensorflow --models pnasnet_large --image-size 64 --samples 8 --batch-size 4"
    " --epochs 1 --runs 1 --device cpu --no-nvml"
).split()


class FakeLauncher(LocalLauncher):
    """Starts the fake runner (with ``extra``, its own options) instead of ``python -m benchtui_runners``."""

    def __init__(self, *extra: str) -> None:
        self.extra = extra

    def command(self, python: str, args: list[str]) -> list[str]:
        return [python, str(FAKE_RUNNER), *self.extra, *args]


class QuietApp(Protocol):
    """The ``quiet_app`` fixture (conftest.py): the app with no NVML and no GPU, the fake runner when
    ``runner`` gives its options."""

    def __call__(
        self,
        plan: Plan | None = None,
        *,
        runner: tuple[str, ...] | None = None,
        sessions_dir: Path | None = None,
        **options: Any,
    ) -> BenchApp: ...


def benchtui(
    *args: str, timeout: float = 600, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a fresh process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "benchtui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def run_runner(config: dict[str, Any], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One real runner process started by the launcher, as the engine starts it; its events.
    A run without a ``done`` event prints the end of the runner's log."""

    async def go() -> list[dict[str, Any]]:
        with tempfile.TemporaryFile() as log:
            proc = await start_runner(sys.executable, config_args(config), log, env_extra=env)
            try:
                events = await collect_events(proc)
            finally:
                proc.close()
            if not any(e["type"] == "done" for e in events):
                log.seek(0)
                print(log.read().decode(errors="replace")[-3000:])
            return events

    return asyncio.run(go())


def read_events(session: Path) -> list[dict]:
    return [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]


def only_session(root: Path) -> Path:
    folders = [p for p in root.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


T = TypeVar("T")


def _only_slow(name: str, /, **kwargs: str | int | bool | None) -> bool:
    """The marks of a test marked slow, and only that: does ``-m`` keep it?"""
    return name == "slow"


def cases_to_run(markexpr: str, given: str | None, quick: int) -> int | None:
    """How many cases each loop of a ``long`` test runs: None for all of them (no ``-m``, or one that
    keeps the slow tier: ``python -m pytest``, as CI runs), ``quick`` where ``-m`` leaves the slow
    tier out (the fast command), ``given`` (``--long-cases``: a number or ``all``) over both."""
    if given is not None:
        return None if given == "all" else int(given)
    if markexpr and not Expression.compile(markexpr).evaluate(_only_slow):
        return quick
    return None


def sample_cases(every: Sequence[T], n: int | None, seed: str) -> list[T]:
    """All of ``every`` (``n`` None or at least its length), else ``n`` of them drawn with ``seed``,
    in their order: the same cases on every run."""
    if n is None or n >= len(every):
        return list(every)
    picked = sorted(random.Random(seed).sample(range(len(every)), n))
    return [every[i] for i in picked]


def small_plan(**overrides: Any) -> Plan:
    """The tests' plan of a tiny session: PyTorch and tf.keras on ResNet50, 32 px, 16 samples in batches of
    8, 3 epochs, 2 runs; ``overrides`` change any field."""
    fields: dict[str, Any] = dict(
        frameworks=["torch", "tensorflow"],
        models=["resnet50"],
        image_size=32,
        samples=16,
        epochs=3,
        runs=2,
        batch_sizes={"resnet50": 8},
    )
    fields.update(overrides)
    return Plan(**fields)


class Recorder:
    """The runners' EventWriter, keeping each event (its type and fields as sent) instead of writing it."""

    def __init__(self) -> None:
        from benchtui_runners.protocol import EventWriter

        self.events: list[tuple[str, dict[str, Any]]] = []
        writer = EventWriter(None)
        writer.closed = False
        writer.send = lambda data: None  # type: ignore[method-assign]
        real_emit = writer.emit

        def emit(type_: str, **fields: Any) -> None:
            self.events.append((type_, fields))
            real_emit(type_, **fields)

        writer.emit = emit  # type: ignore[method-assign]
        self.writer = writer

    def names(self) -> list[str]:
        """Each event as ``type`` or ``phase:name:edge``, batches as ``batch``."""
        return [
            f"phase:{f['name']}:{f['edge']}" if t == "phase" else t for t, f in self.events if t != "ranks"
        ]

    def settings(self) -> dict[str, Any]:
        """The run's settings as the parent merges them: the hello's, then each settings event's."""
        out: dict[str, Any] = {}
        for type_, fields in self.events:
            if type_ in ("hello", "settings"):
                out.update(fields["settings"])
        return out


class LossStandIn(LocalLauncher):
    """The stand-in runner ``tests/fake_runner.py`` for every run, sending ``losses`` (its ``--losses``: one entry
    per epoch, a number, "nan"/"inf"/"-inf" or [mean, min, max]; the last repeats)."""

    def __init__(self, losses: list[Any]) -> None:
        super().__init__()
        self.losses = losses

    def command(self, python: str, args: list[str]) -> list[str]:
        return [python, str(ROOT / "tests" / "fake_runner.py"), "--losses", json.dumps(self.losses), *args]


def stand_in_session(root: Path, losses: list[Any]) -> tuple[str, Path, Any]:
    """A real engine session of one PyTorch run of ResNet50 on the CPU (3 epochs of 2 steps) by the stand-in
    runner sending ``losses`` (``LossStandIn``): (its status, its folder, the engine)."""
    from benchtui.core.running.engine import Engine
    from benchtui.core.store.session import SessionWriter

    plan = small_plan(frameworks=["torch"], runs=1, device="cpu").validate()
    writer = SessionWriter.create(plan, root)
    engine = Engine(plan, writer, launcher=LossStandIn(losses))
    return asyncio.run(engine.run()), writer.path, engine
