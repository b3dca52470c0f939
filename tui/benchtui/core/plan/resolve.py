"""A plan resolved for this machine: the policies that need the machine applied once, before the runs.

``Plan.resolve`` gives a ``Resolved``: where every run goes (the placement, from the GPUs this job was
given), the CPU threads every framework gets when the plan leaves them to benchtui (the idle cores
measured once), and the batch sizes ``--batch-size auto`` chose. The runner's configuration of each run
is read from it (``Resolved.run_config``); the plan itself is never changed. What it resolved is recorded
in session.json as it was before: ``placement``, ``cpu_threads`` and the plan with its chosen sizes.

The policies a person's flags decide (``--timing``'s default from the task, the learning rate from the
optimizer) are the plan's own (``options.timing_for``, ``Plan.lr``): they need no machine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchtui_runners import catalog
from benchtui_runners.config import RunConfig, usable_cores

if TYPE_CHECKING:
    from benchtui.core.plan.devices import Placement
    from benchtui.core.plan.plan import Plan


@dataclass(frozen=True)
class Resolved:
    """A plan as it runs here. ``plan``: the plan with the batch sizes the search chose (a copy; the
    user's plan as it was when none was searched); ``placement``: where the runs go; ``measured``: the
    idle cores measured before the first run (``threads.measure_idle``; None where none was)."""

    plan: Plan
    placement: Placement
    measured: dict[str, Any] | None = None

    @property
    def cpu_threads(self) -> int:
        """The threads every framework gets on a CPU when the plan names none: the cores other processes
        left idle when the session started, else the cores this process may use."""
        return int(self.measured["threads"]) if self.measured is not None else usable_cores()

    def threads(self, framework: str, devices: int) -> int:
        """The CPU threads of a run of ``framework`` on ``devices`` devices (0: the framework's own).

        On a CPU every framework gets the same pool: left to themselves the frameworks size it
        differently (TensorFlow per logical core, PyTorch per physical one), and the comparison would
        measure that choice; a pool larger than the idle cores stalls on a busy machine. On a GPU each
        keeps its own. PyTorch data parallel is one process per rank: the same cores shared among them
        (TensorFlow's and JAX's replicas share one process's pool).
        """
        if self.plan.threads or self.placement.runner_device != "cpu":
            return self.plan.threads
        if devices > 1 and catalog.family(framework) == "torch":
            return max(1, self.cpu_threads // devices)
        return self.cpu_threads

    def run_config(
        self, framework: str, model: str, run_id: str, devices: int = 1
    ) -> tuple[RunConfig, dict[str, str]]:
        """The run's configuration on the session's device (its first ``devices`` when data parallel),
        and the environment that gives the runner exactly those."""
        config = self.plan.run_config(framework, model, run_id, devices)
        env, gpus = self.placement.for_devices(devices)
        config.device, config.gpu = self.placement.runner_device, self.placement.gpu
        if devices > 1 and gpus:
            config.gpus = gpus
        config.threads = self.threads(framework, devices)
        return config, env


def resolve(
    plan: Plan,
    placement: Placement,
    measured: dict[str, Any] | None = None,
    batch_sizes: dict[str, int] | None = None,
) -> Resolved:
    """``plan`` on ``placement``, its CPU threads from ``measured``, and ``batch_sizes`` (the search's
    choices: model, or "framework:model" -> size) over its own."""
    if batch_sizes:
        plan = dataclasses.replace(plan, batch_sizes={**plan.batch_sizes, **batch_sizes})
    return Resolved(plan, placement, measured)
