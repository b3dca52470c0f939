"""``benchtui doctor``: what is installed, what each framework sees, NVML status."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from typing import Any

from rich.console import Console
from rich.table import Table

from runners import catalog
from tui.core.events import Malformed, parse_line
from tui.core.launcher import start_runner
from tui.core.sampler import Sampler


async def probe(framework: str, python: str = sys.executable, timeout: float = 120.0) -> dict[str, Any]:
    """Ask a runner process what ``framework`` sees: versions and devices, or why it cannot run."""
    with tempfile.TemporaryFile() as log:
        proc = await start_runner(python, ["--doctor", framework], log)
        events: list[dict[str, Any]] = []
        try:
            async with asyncio.timeout(timeout):
                while line := await proc.events.readline():
                    try:
                        events.append(parse_line(line))
                    except Malformed:
                        pass
                await proc.process.wait()
        except TimeoutError:
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


def run_doctor() -> int:
    console = Console()

    async def gather() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(probe(fw) for fw in catalog.FRAMEWORKS)))

    with console.status("Asking each framework what it sees (each one is imported in its own process)…"):
        results = asyncio.run(gather())
    table = Table(title="benchtui doctor", title_justify="left", header_style="bold")
    for col in ("Framework", "Status", "Versions", "Devices"):
        table.add_column(col)
    for fw, info in zip(catalog.FRAMEWORKS, results, strict=True):
        if info["ok"]:
            table.add_row(fw, "[green]ok[/]", _versions(info), _devices(info))
        else:
            extra = catalog.FRAMEWORKS[fw][2]
            table.add_row(fw, "[yellow]missing[/]", f"pip install 'benchtui[{extra}]'", str(info["reason"])[:120])
    console.print(table)
    sampler = Sampler(1.0, lambda s: None)
    console.print(f"GPU telemetry: {sampler.status}")
    for gpu in sampler.gpus():
        console.print(f"  GPU {gpu['index']}: {gpu['name']}, driver {gpu['driver']}")
    if sampler.nvml is None:
        console.print("  Without NVML, the live screen shows the runner's CPU and memory (psutil) instead.")
    sampler.stop()
    console.print(f"Python: {sys.executable} · CPUs: {os.cpu_count()}")
    return 0
