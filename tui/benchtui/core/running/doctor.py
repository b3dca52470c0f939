"""What ``benchtui doctor`` reports, as data: what is installed, what each framework sees, NVML status."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from benchtui.core.running.launcher import collect_events, start_runner
from benchtui.core.running.sampler import Sampler
from benchtui_runners import catalog


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


def verdicts(
    frameworks: list[str], results: list[dict[str, Any]], gpus: list[dict[str, Any]]
) -> list[dict[str, Any]]:
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


@dataclass
class Diagnosis:
    """What ``benchtui doctor`` found: per framework its probe and verdict, the GPUs NVML sees, this Python."""

    frameworks: list[str]
    results: list[dict[str, Any]]  # each framework's probe (see ``probe``)
    verdicts: list[dict[str, Any]]  # each framework's verdict (see ``verdicts``)
    pythons: dict[str, str]  # the interpreter each framework's runners use
    gpus: list[dict[str, Any]]
    telemetry: str  # the sampler's status line
    nvml: bool
    python: str = sys.executable
    cpus: int | None = field(default_factory=os.cpu_count)


def diagnose() -> Diagnosis:
    """Ask every framework, each in its own process, what it sees; and NVML what GPUs there are."""
    from benchtui.core.plan.plan import Plan

    sampler = Sampler(1.0, lambda s: None)
    try:
        gpus = sampler.gpus()
        plan = Plan()
        frameworks = list(catalog.FRAMEWORKS)
        pythons = {fw: plan.python_for(fw) for fw in frameworks}
        # The same view of the GPUs as a run has: PCI order, so CUDA's indices are NVML's.
        env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

        async def gather() -> list[dict[str, Any]]:
            return list(await asyncio.gather(*(probe(fw, pythons[fw], env=env) for fw in frameworks)))

        results = asyncio.run(gather())
        return Diagnosis(
            frameworks=frameworks,
            results=results,
            verdicts=verdicts(frameworks, results, gpus),
            pythons=pythons,
            gpus=gpus,
            telemetry=str(sampler.status),
            nvml=sampler.nvml is not None,
        )
    finally:
        sampler.stop()
