"""``benchtui doctor`` and ``benchtui envs``: what is installed and what each framework sees; one environment per framework."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from benchtui.commands import EXIT_OK, BadInput
from benchtui.core.fmt import clean


def _shown(text: object) -> str:
    """A runner's or NVML's text inside markup: no control characters, brackets printed as they are."""
    from rich.markup import escape

    return escape(clean(text))


def _versions(info: dict[str, Any]) -> str:
    return _shown(", ".join(f"{k} {v}" for k, v in info.get("versions", {}).items() if v and k != "python"))


def _devices(info: dict[str, Any]) -> str:
    names = [f"{d.get('type')}: {d.get('name')}" for d in info.get("devices", [])]
    return _shown("; ".join(names) or "none")


def cmd_doctor(args: argparse.Namespace | None = None) -> int:
    """A table of the frameworks (installed, sees the GPU, versions, devices), the fixes, then NVML and this Python."""
    from rich.console import Console
    from rich.table import Table

    from benchtui.core.running.doctor import diagnose

    console = Console()
    with console.status("Asking each framework what it sees (each one is imported in its own process)…"):
        found = diagnose()
    table = Table(title="benchtui doctor", title_justify="left", header_style="bold")
    for col in ("Framework", "Status", "GPU", "Versions", "Devices"):
        table.add_column(col)
    for row, info in zip(found.verdicts, found.results, strict=True):
        fw = _shown(row["framework"])
        gpu = {"sees it": "[green]sees it[/]", "no GPU": "[red]no GPU[/]"}.get(row["gpu"], "–")
        if row["ok"]:
            table.add_row(fw, "[green]ok[/]", gpu, _versions(info), _devices(info))
        else:
            # The reason is the end of a runner's output: cleaned before it is cut.
            table.add_row(
                fw, "[yellow]missing[/]", "–", _shown(row["fix"]), _shown(clean(row["reason"])[:120])
            )
    console.print(table)
    for row in found.verdicts:
        if row["gpu"] == "no GPU":
            console.print(f"[red]✗[/] {_shown(row['fix'])}")
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
