"""``benchtui doctor``: what is installed, what each framework sees, NVML status."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from typing import Any

from benchtui_runners import catalog
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchtui.core.running.launcher import collect_events, start_runner
from benchtui.core.running.sampler import Sampler


async def probe(
    framework: str, python: str = sys.executable, timeout: float = 120.0, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Ask a runner process what ``framework`` sees: versions and devices, or why it cannot run."""
    with tempfile.TemporaryFile() as log:
        proc = await start_runner(python, ["--doctor", framework], log, env_extra=env)
        try:
            events = await asyncio.wait_for(collect_events(proc), timeout)  # asyncio.timeout is 3.11+
        except asyncio.TimeoutError:
            await proc.terminate()
            return {"ok": False, "reason": f"no answer within {timeout:.0f} s"}
        finally:
            proc.close()
        for event in events:
            if event["type"] == "hello":
                return {"ok": True, **event}
            if event["type"] == "error":
                return {"ok": False, "reason": event.get("message", "error")}
        log.seek(0)
        tail = log.read()[-300:].decode(errors="replace").strip().splitlines()
        return {"ok": False, "reason": tail[-1] if tail else f"runner exited with {proc.process.returncode}"}


def _versions(info: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in info.get("versions", {}).items() if v and k != "python")


def _devices(info: dict[str, Any]) -> str:
    names = [f"{d.get('type')}: {d.get('name')}" for d in info.get("devices", [])]
    return "; ".join(names) or "none"


def verdicts(frameworks: list[str], results: list[dict[str, Any]], gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per framework: installed or not, whether it sees the GPU that NVML sees, and the fix when not.

    ``gpu`` is "sees it", "no GPU" (NVML sees one and this framework cannot use it: its runs
    would fail, never fall back to the CPU) or "" when the machine has no GPU.
    """
    out = []
    for fw, info in zip(frameworks, results, strict=True):
        extra = catalog.FRAMEWORKS[fw][2]
        row: dict[str, Any] = {"framework": fw, "ok": bool(info.get("ok")), "gpu": "", "fix": ""}
        if not info.get("ok"):
            row["fix"] = f"pip install 'benchtui[{extra}]' (or benchtui envs create {fw})"
            row["reason"] = str(info.get("reason", ""))
        elif gpus:
            seen = info.get("gpu") or {}
            if seen.get("sees_gpu"):
                row["gpu"] = "sees it"
            else:
                row["gpu"] = "no GPU"
                row["fix"] = str(seen.get("why") or f"{fw} sees no GPU; benchtui envs create --gpu {fw}")
        out.append(row)
    return out


def run_doctor() -> int:
    from benchtui.core.plan.plan import Plan

    console = Console()
    sampler = Sampler(1.0, lambda s: None)
    gpus = sampler.gpus()
    plan = Plan()
    frameworks = list(catalog.FRAMEWORKS)
    pythons = {fw: plan.python_for(fw) for fw in frameworks}
    # The same view of the GPUs as a run has: PCI order, so CUDA's indices are NVML's.
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    async def gather() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(probe(fw, pythons[fw], env=env) for fw in frameworks)))

    with console.status("Asking each framework what it sees (each one is imported in its own process)…"):
        results = asyncio.run(gather())
    table = Table(title="benchtui doctor", title_justify="left", header_style="bold")
    for col in ("Framework", "Status", "GPU", "Versions", "Devices"):
        table.add_column(col)
    rows = verdicts(frameworks, results, gpus)
    for row, info in zip(rows, results, strict=True):
        fw = row["framework"]
        gpu = {"sees it": "[green]sees it[/]", "no GPU": "[red]no GPU[/]"}.get(row["gpu"], "–")
        if row["ok"]:
            table.add_row(fw, "[green]ok[/]", gpu, _versions(info), _devices(info))
        else:
            table.add_row(fw, "[yellow]missing[/]", "–", row["fix"], escape(row["reason"][:120]))
    console.print(table)
    for row in rows:
        if row["gpu"] == "no GPU":
            console.print(f"[red]✗[/] {escape(row['fix'])}")
    for fw, python in pythons.items():
        if python != sys.executable:
            console.print(f"{fw} runs with {python} (its own environment)")
    console.print(f"GPU telemetry: {sampler.status}")
    for gpu_info in gpus:
        mig = " · MIG enabled" if gpu_info.get("mig_mode") == "enabled" else ""
        console.print(
            f"  GPU {gpu_info['index']}: {gpu_info['name']}, driver {gpu_info['driver']}, "
            f"{gpu_info.get('pci_bus_id')}{mig}"
        )
    if sampler.nvml is None:
        console.print("  Without NVML, the live screen shows the runner's CPU and memory (psutil) instead.")
    sampler.stop()
    console.print(f"Python: {sys.executable} · CPUs: {os.cpu_count()}")
    return 0
