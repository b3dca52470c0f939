"""``benchtui parity``: is each model the same network on every side? Counted, never assumed.

Each (model, framework) is built in a runner process of its own, as a run would build it, and
its runner reports the parameters and the FLOPs of one step at batch 1 (``mode="count"``: no
data, no training, no timed epochs). Nothing is downloaded; weights stay random.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchtui.core.plan.plan import Plan
from benchtui.core.running.launcher import collect_events, config_args, start_runner
from benchtui_runners import catalog

#: Seconds one count may take: building GPT-2 small and one step of it over 1024 tokens on a CPU.
COUNT_TIMEOUT_S = 900.0


@dataclass
class Count:
    """What one framework's runner reported about one model (or why it could not)."""

    framework: str
    model: str
    image_size: int
    tokens: int
    params: int | None = None
    trainable_params: int | None = None
    flops_per_sample: float | None = None
    flops_method: str = ""
    counted: str = ""
    source: str = ""
    architecture: str = ""
    reason: str = ""  # why there is no count (unavailable, failed, no FLOPs)
    versions: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.trainable_params is not None


def count_plan(plan: Plan, image_size: int | None = None) -> list[tuple[str, str, int]]:
    """(framework, model, image size) to count: each model at ``image_size`` or its native size."""
    out = []
    for model in plan.models:
        info = catalog.MODELS[model]
        size = image_size or (info.native_size if info.kind == "image" else plan.image_size)
        out += [(fw, model, size) for fw in plan.frameworks]
    return out


async def count_one(plan: Plan, framework: str, model: str, image_size: int) -> Count:
    """Build ``model`` in ``framework`` in a fresh runner on the CPU and read back its counts."""
    config = plan.run_config(framework, model, f"count-{framework}-{model}")
    config.mode, config.device, config.image_size = "count", "cpu", image_size
    config.profile = False  # a count builds the model and steps it once: nothing to profile
    config.batch_size, config.samples, config.epochs = 1, 1, 1
    result = Count(framework, model, image_size, config.tokens)
    ok, why = catalog.available(framework, model)
    if not ok:
        result.reason = f"unavailable: {why}"
        return result
    env = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    with tempfile.TemporaryFile() as log:
        proc = await start_runner(
            plan.python_for(framework), config_args(config.to_dict()), log, env_extra=env
        )
        try:
            events = await asyncio.wait_for(collect_events(proc), COUNT_TIMEOUT_S)
        except asyncio.TimeoutError:
            await proc.terminate()
            result.reason = f"no answer within {COUNT_TIMEOUT_S:.0f} s"
            return result
        finally:
            proc.close()
        for event in events:
            kind = event["type"]
            if kind == "hello":
                result.versions = dict(event.get("versions") or {})
            elif kind == "model":
                result.params = event.get("params")
                result.trainable_params = event.get("trainable_params")
                result.source = str(event.get("source") or "")
                result.architecture = str(event.get("architecture") or "")
            elif kind == "flops":
                result.flops_per_sample = event.get("per_image")
                result.flops_method = str(event.get("method") or "")
                result.counted = str(event.get("counted") or "")
                if event.get("per_image") is None:
                    result.reason = f"FLOPs not counted: {event.get('reason') or 'unknown'}"
            elif kind == "error":
                prefix = "unavailable: " if event.get("kind") == "unavailable" else "failed: "
                result.reason = prefix + str(event.get("message") or "")
        if not result.ok and not result.reason:
            log.seek(0)
            tail = log.read()[-300:].decode(errors="replace").strip().splitlines()
            result.reason = (
                f"failed: {tail[-1] if tail else 'the runner exited with ' + str(proc.process.returncode)}"
            )
    return result


def count_all(
    plan: Plan,
    image_size: int | None = None,
    jobs: int = 0,
    progress: Callable[[Count, int, int], None] | None = None,
) -> list[Count]:
    """Every (model, framework) of ``plan``, ``jobs`` at a time (default: one per two cores), in plan order."""
    todo = count_plan(plan, image_size)
    jobs = jobs or max(1, (os.cpu_count() or 2) // 2)
    done = 0

    async def gather() -> list[Count]:
        nonlocal done
        gate = asyncio.Semaphore(jobs)

        async def one(fw: str, model: str, size: int) -> Count:
            nonlocal done
            async with gate:
                result = await count_one(plan, fw, model, size)
            done += 1
            if progress is not None:
                progress(result, done, len(todo))
            return result

        return list(await asyncio.gather(*(one(*item) for item in todo)))

    return asyncio.run(gather())
