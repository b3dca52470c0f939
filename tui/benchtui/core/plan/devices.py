"""The device of a session, chosen once in the parent and the same for every framework.

NVML numbers GPUs in PCI bus order; CUDA, by default, fastest first. The launcher
sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and ``CUDA_VISIBLE_DEVICES`` to the chosen GPU's
NVML index, so every runner sees exactly that GPU as its device 0, and NVML's index,
the runner's CUDA index and the session's record name the same card. A CPU plan hides
every GPU, so no framework maps GPU memory or falls back silently the other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchtui.core.plan.plan import PlanError

#: Recorded with each GPU in the session and sent to the runner with its assignment.
GPU_IDENTITY = ("index", "uuid", "name", "pci_bus_id", "mig_mode")


@dataclass(frozen=True)
class Placement:
    """Where every runner of a session trains."""

    kind: str  # "cuda" or "cpu"; "unchecked" when a GPU was asked for but NVML sees none
    runner_device: str  # what each runner's config says: "cuda:0" under the launcher's mask, or "cpu"
    gpu: dict[str, Any] | None = None  # the chosen GPU as NVML names it
    env: dict[str, str] = field(default_factory=dict)
    reason: str = ""  # how the choice was made, in words
    #: Data parallel: every GPU of the session (the first is ``gpu``), or on a CPU the replicas.
    gpus: list[dict[str, Any]] = field(default_factory=list)
    devices: int = 1

    @property
    def nvml_index(self) -> int | None:
        return None if self.gpu is None else self.gpu.get("index")

    @property
    def nvml_indices(self) -> list[int]:
        """The NVML indices of every GPU the session trains on (one, or the data-parallel set)."""
        gpus = self.gpus or ([self.gpu] if self.gpu else [])
        return [int(g["index"]) for g in gpus if isinstance(g.get("index"), int)]

    def for_devices(self, n: int) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """The environment and the GPUs of a run on the first ``n`` of the session's devices."""
        if self.kind != "cuda" or (n <= 1 and not self.gpus):
            return dict(self.env), [self.gpu] if self.gpu else []
        gpus = self.gpus[:n]
        env = {**self.env, "CUDA_VISIBLE_DEVICES": ",".join(str(g["index"]) for g in gpus)}
        return env, gpus

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "runner_device": self.runner_device,
            "gpu": self.gpu,
            "env": self.env,
            "reason": self.reason,
            "devices": self.devices,
            "gpus": self.gpus,
        }


def place(
    device: str, gpus: list[dict[str, Any]], devices: int = 1, ids: list[int] | None = None
) -> Placement:
    """Resolve a plan's ``--device`` (and ``--devices``) against the GPUs NVML sees (``Sampler.gpus()``).

    Raises PlanError for a GPU index this machine does not have, or more devices than it has.
    """
    if devices > 1 or ids:
        return _place_many(device, gpus, devices, ids or [])
    if device == "cpu":
        return Placement(
            "cpu", "cpu", env={"CUDA_VISIBLE_DEVICES": ""}, reason="--device cpu: every GPU hidden"
        )
    if not gpus:
        if device == "auto":
            return Placement("cpu", "cpu", reason="--device auto: NVML sees no GPU")
        # A GPU asked for without NVML (the CLI refuses this; a program may not): each runner
        # checks for itself and fails with its reason, and ratios check the device kinds.
        return Placement("unchecked", device, reason=f"--device {device}: NVML sees no GPU; not checked here")
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= len(gpus):
        raise PlanError(f"--device {device}: NVML sees {len(gpus)} GPU(s) (cuda:0..cuda:{len(gpus) - 1})")
    gpu = {k: gpus[index].get(k) for k in GPU_IDENTITY}
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(gpu["index"])}
    return Placement("cuda", "cuda:0", gpu, env, reason=f"--device {device}: NVML GPU {index}, {gpu['name']}")


def _place_many(device: str, gpus: list[dict[str, Any]], devices: int, ids: list[int]) -> Placement:
    """Data parallel: ``devices`` GPUs (``ids``, else the first ones), or as many CPU replicas."""
    from benchtui_runners.config import usable_cores

    if device == "cpu" or (device == "auto" and not gpus):
        cores = usable_cores()
        if devices > cores:
            raise PlanError(
                f"--devices {devices}: on the CPU each replica needs a core of its own, and "
                f"{cores} core(s) are usable here"
            )
        env = {"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {}
        return Placement(
            "cpu",
            "cpu",
            env=env,
            devices=devices,
            reason=f"--devices {devices} on the CPU: {devices} replicas",
        )
    if not gpus:
        raise PlanError(f"--devices {devices}: NVML sees no GPU")
    chosen = ids or list(range(devices))
    missing = [i for i in chosen if i >= len(gpus)]
    if devices > len(gpus) or missing:
        raise PlanError(
            f"--devices {','.join(map(str, chosen)) if ids else devices}: NVML sees {len(gpus)} GPU(s) "
            f"(0..{len(gpus) - 1})"
        )
    picked = [{k: gpus[i].get(k) for k in GPU_IDENTITY} for i in chosen]
    env = {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(str(g["index"]) for g in picked),
    }
    names = ", ".join(f"{g['index']} ({g['name']})" for g in picked)
    return Placement(
        "cuda", "cuda:0", picked[0], env, reason=f"--devices: NVML GPUs {names}", gpus=picked, devices=devices
    )
