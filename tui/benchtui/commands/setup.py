"""``benchtui doctor`` and ``benchtui envs``: what is installed and what each framework sees; one environment per framework."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from benchtui.commands import EXIT_OK, BadInput, say
from benchtui.core.fmt import clean

if TYPE_CHECKING:
    from benchtui.core.running.doctor import Diagnosis, ProbeDone


def _shown(text: object) -> str:
    """A runner's or NVML's text inside markup: no control characters, brackets printed as they are."""
    from rich.markup import escape

    return escape(clean(text))


def _versions(info: dict[str, Any]) -> str:
    return _shown(", ".join(f"{k} {v}" for k, v in info.get("versions", {}).items() if v and k != "python"))


def _devices(info: dict[str, Any]) -> str:
    names = [f"{d.get('type')}: {d.get('name')}" for d in info.get("devices", [])]
    return _shown("; ".join(names) or "none")


def _age(seconds: float) -> str:
    """How long ago, in the largest whole unit: "3 hours ago"."""
    minutes = seconds / 60
    for unit, size in (("day", 1440), ("hour", 60), ("minute", 1)):
        if minutes >= size:
            count = int(minutes // size)
            return f"{count} {unit}{'s' * (count != 1)} ago"
    return "less than a minute ago"


def _answered(done: ProbeDone) -> str:
    """One framework's answer in a few words: its status, and how long it took or that it was kept."""
    status = "ok" if done.ok else "missing"
    how = "cached" if done.cached_at is not None else f"{done.seconds:.1f} s"
    return f"{done.framework} {status} ({how})"


def _ask_with_progress(fresh: bool) -> Diagnosis:
    """``diagnose``, saying on stderr what is being asked and what has answered (stdout keeps the report):
    a live line on a terminal, else one line per framework as its answer comes."""
    from rich.console import Console

    from benchtui.core.running.doctor import diagnose
    from benchtui_runners import catalog

    frameworks = list(catalog.FRAMEWORKS)
    asking = f"asking {', '.join(frameworks)} what they see, each in its own process"
    console = Console(stderr=True)
    if not console.is_terminal:
        say(f"doctor: {asking}")
        return diagnose(
            fresh,
            lambda done: say(f"doctor: {_answered(done)} [{done.total - len(done.pending)}/{done.total}]"),
        )
    answered: list[str] = []

    def update(done: ProbeDone) -> None:
        answered.append(_answered(done))
        waiting = f"; waiting for {', '.join(done.pending)}…" if done.pending else ""
        status.update(_shown(f"Answered: {', '.join(answered)}{waiting}"))

    with console.status(_shown(f"{asking.capitalize()}…")) as status:
        return diagnose(fresh, update)


def cmd_doctor(args: argparse.Namespace | None = None) -> int:
    """A table of the frameworks (installed, sees the GPU, versions, devices), the fixes, then NVML and this Python.

    Progress goes to stderr; ``--fresh`` asks every framework again instead of giving kept answers.
    """
    from rich.console import Console
    from rich.table import Table

    console = Console()
    found = _ask_with_progress(bool(args is not None and args.fresh))
    table = Table(title="benchtui doctor", title_justify="left", header_style="bold")
    for col in ("Framework", "Status", "GPU", "Versions", "Devices"):
        table.add_column(col)
    for row, info in zip(found.verdicts, found.results, strict=True):
        fw = _shown(row["framework"])
        gpu = {
            "sees it": "[green]sees it[/]",
            "no GPU": "[red]no GPU[/]",
            "driver too old": "[red]driver too old[/]",
        }.get(row["gpu"], "–")
        if row["ok"]:
            status = "[green]ok[/] [dim](cached)[/]" if row["framework"] in found.cached else "[green]ok[/]"
            table.add_row(fw, status, gpu, _versions(info), _devices(info))
        else:
            # The reason is the end of a runner's output: cleaned before it is cut.
            table.add_row(
                fw, "[yellow]missing[/]", "–", _shown(row["fix"]), _shown(clean(row["reason"])[:120])
            )
    console.print(table)
    if found.cached:
        oldest = time.time() - min(found.cached.values())
        console.print(
            _shown(
                f"{', '.join(found.cached)}: kept answers, from {_age(oldest)} at most (the interpreter, "
                "its packages, the runner code, the environment and the GPUs are as they were then); "
                "benchtui doctor --fresh asks again"
            )
        )
    for row in found.verdicts:
        if row["gpu"] in ("no GPU", "driver too old"):
            console.print(f"[red]✗[/] {_shown(row['fix'])}")
    for lines in found.cuda_mixes.values():  # two CUDA majors of one library in one environment
        console.print(f"[red]✗[/] {_shown(lines[0])}")
        for line in lines[1:]:
            console.print(_shown(line))
    for fw, python in found.pythons.items():
        if python != sys.executable:
            console.print(f"{_shown(fw)} runs with {_shown(python)} (its own environment)")
    console.print(f"GPU telemetry: {_shown(found.telemetry)}")
    for gpu_info in found.gpus:
        mig = " · MIG enabled" if gpu_info.get("mig_mode") == "enabled" else ""
        console.print(
            _shown(
                f"  GPU {gpu_info['index']}: {gpu_info['name']}, driver {gpu_info['driver']}, "
                f"{gpu_info.get('pci_bus_id')}{mig}"
            )
        )
    if not found.nvml:
        console.print("  Without NVML, the live screen shows the runner's CPU and memory (psutil) instead.")
    console.print(f"Python: {found.python} · CPUs: {found.cpus}")
    return EXIT_OK


def cmd_envs(args: argparse.Namespace) -> int:
    """``benchtui envs [list]`` says where each framework's environment is; ``envs create`` makes them."""
    from benchtui.core.plan import envs
    from benchtui_runners import catalog

    if args.envs_action == "create":
        unknown = [fw for fw in args.frameworks if fw not in catalog.FRAMEWORKS]
        if unknown:
            raise BadInput(f"unknown framework {unknown[0]!r}; choose from {', '.join(catalog.FRAMEWORKS)}")
        return envs.create(args.frameworks or list(catalog.FRAMEWORKS), args.gpu, args.dry_run)
    print(clean(f"Environments in {envs.envs_dir()} (used instead of this Python when present):"))
    for env in envs.describe():
        print(clean(f"  {env['framework']:<12} {env['python'] or 'none (runs use ' + sys.executable + ')'}"))
    return EXIT_OK
