"""The device of a session, chosen once in the parent and the same for every framework.

NVML numbers GPUs in PCI bus order; CUDA, by default, fastest first. The launcher
sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and ``CUDA_VISIBLE_DEVICES`` to select exactly the
chosen device, so every runner sees that device as its device 0, and NVML's index,
the runner's CUDA index and the session's record name the same card. A CPU plan hides
every GPU, so no framework maps GPU memory or falls back silently the other way.

A scheduler's choice is honoured, never overwritten: when benchtui itself was started with
``CUDA_VISIBLE_DEVICES`` (Slurm, a shared node, a container), the devices it names are the only
ones a plan may use (``given_devices``), ``--device cuda:N`` is the N-th of them, and each
runner is given its device by UUID (a MIG slice by its MIG UUID, the only way CUDA selects one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from benchtui.core.plan.errors import PlanError

#: Recorded with each GPU in the session and sent to the runner with its assignment.
#: ``index`` is the device's place among those the job was given (what ``cuda:N`` names), the NVML
#: index unless a ``CUDA_VISIBLE_DEVICES`` was inherited or a GPU is split by MIG; ``nvml_index`` is
#: NVML's; ``cuda_visible`` what selects exactly this device in ``CUDA_VISIBLE_DEVICES``.
#: ``capability``: the CUDA compute capability ("8.0"), which ``sweep.best_settings`` chooses a precision by.
GPU_IDENTITY = (
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "mig_mode",
    "nvml_index",
    "mig",
    "cuda_visible",
    "capability",
)
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
#: ``place``'s default: read what this process was started with.
_FROM_ENV = "\0from the environment"


def default_preset(gpu_found: bool, device: str = "auto") -> str:
    """The plan a newcomer gets when they name none (the app's plan screen and ``benchtui run`` alike):
    the study where its runs go to a GPU, the quick preset (minutes) where they go to the CPU (the
    study there takes weeks)."""
    on_gpu = device.startswith("cuda") or (device == "auto" and gpu_found)
    return "study" if on_gpu else "quick"


def inherited_visible() -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` this process was started with (a scheduler's choice), or None."""
    return os.environ.get(VISIBLE_ENV)


def _said(inherited: str) -> str:
    return f"{VISIBLE_ENV}={inherited}" if inherited.strip() else f"{VISIBLE_ENV}={inherited!r}"


def given_devices(machine: list[dict[str, Any]], inherited: str | None) -> tuple[list[dict[str, Any]], str]:
    """The devices this job was given, in CUDA's order, and a note when the list stops early.

    ``machine``: every GPU NVML sees, in its order (``index``, ``uuid``, ``mig_mode`` and, for a GPU
    split by MIG, ``mig_devices``: each slice's ``uuid``, ``gpu_instance``, ``compute_instance``,
    ``name``, ``memory_total``). ``inherited``: the ``CUDA_VISIBLE_DEVICES`` benchtui was started
    with (None: unset, every GPU). Its entries are read as CUDA reads them: an index (PCI order, as
    the runners use), a GPU UUID or a unique prefix of one (``GPU-8f3a``), a MIG UUID (``MIG-...``,
    or the older ``MIG-GPU-<uuid>/<gpu instance>/<compute instance>``); the list ends at the first
    entry that names no device here ("" and "-1" give none). A GPU split by MIG stands for its slices.

    Each device: ``nvml_index`` (its GPU's), ``mig`` (the slice, or None) and ``cuda_visible`` (what
    selects exactly it: the NVML index when nothing was inherited, else the UUID; a slice's MIG UUID).
    """
    entries: list[tuple[int, dict[str, Any] | None]] = []
    note = ""

    def whole_or_slices(gpu: dict[str, Any]) -> list[tuple[int, dict[str, Any] | None]]:
        slices = [m for m in gpu.get("mig_devices") or [] if isinstance(m, dict) and m.get("uuid")]
        return [(int(gpu["index"]), m) for m in slices] or [(int(gpu["index"]), None)]

    if inherited is None:
        for gpu in machine:
            entries += whole_or_slices(gpu)
    else:
        for raw in inherited.split(","):
            found = _resolve(raw.strip(), machine)
            if found is None:
                if raw.strip() and raw.strip() != "-1":
                    note = (
                        f"{_said(inherited)}: {raw.strip()!r} names no device NVML sees here, "
                        "and CUDA ignores it and every entry after it"
                    )
                break
            gpu, mig = found
            for item in whole_or_slices(gpu) if mig is None else [(int(gpu["index"]), mig)]:
                if item[1] is None and any(e[0] == item[0] and e[1] is None for e in entries):
                    continue  # the same GPU named twice
                if item[1] is not None and any(e[1] is item[1] for e in entries):
                    continue
                entries.append(item)
    by_index = {int(g["index"]): g for g in machine}
    devices = []
    for nvml_index, mig in entries:
        gpu = by_index[nvml_index]
        if mig is not None:
            visible = str(mig["uuid"])
        elif inherited is None:
            visible = str(nvml_index)
        else:
            visible = str(gpu.get("uuid") or nvml_index)
        devices.append({"nvml_index": nvml_index, "mig": mig, "cuda_visible": visible})
    return devices, note


def _resolve(
    entry: str, machine: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """The GPU (and MIG slice) one ``CUDA_VISIBLE_DEVICES`` entry names, or None."""
    if entry.isdigit():
        index = int(entry)
        return next(((g, None) for g in machine if g.get("index") == index), None)
    if entry.startswith("GPU-"):
        matches = [g for g in machine if str(g.get("uuid") or "").startswith(entry)]
        return (matches[0], None) if len(matches) == 1 else None  # an ambiguous prefix names nothing
    if entry.startswith("MIG-GPU-") and entry.count("/") == 2:  # the older form: GPU UUID / GI / CI
        uuid, gi, ci = entry[len("MIG-") :].split("/")
        for gpu in machine:
            if gpu.get("uuid") == uuid:
                for mig in gpu.get("mig_devices") or []:
                    if str(mig.get("gpu_instance")) == gi and str(mig.get("compute_instance")) == ci:
                        return gpu, mig
        return None
    if entry.startswith("MIG-"):
        found = [
            (g, m)
            for g in machine
            for m in g.get("mig_devices") or []
            if str(m.get("uuid") or "").startswith(entry)
        ]
        return found[0] if len(found) == 1 else None
    return None


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
        """The chosen device's place in the sampler's list (NVML's index unless the job was given a subset)."""
        return None if self.gpu is None else self.gpu.get("index")

    @property
    def nvml_indices(self) -> list[int]:
        """The sampler's indices of every GPU the session trains on (one, or the data-parallel set)."""
        gpus = self.gpus or ([self.gpu] if self.gpu else [])
        return [int(g["index"]) for g in gpus if isinstance(g.get("index"), int)]

    def for_devices(self, n: int) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """The environment and the GPUs of a run on the first ``n`` of the session's devices."""
        if self.kind != "cuda" or (n <= 1 and not self.gpus):
            return dict(self.env), [self.gpu] if self.gpu else []
        gpus = self.gpus[:n]
        env = {**self.env, VISIBLE_ENV: ",".join(_visible(g) for g in gpus)}
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


def _visible(gpu: dict[str, Any]) -> str:
    """What selects exactly this device in ``CUDA_VISIBLE_DEVICES``."""
    return str(gpu.get("cuda_visible") or gpu["index"])


#: Always recorded (None when NVML did not say); the rest of ``GPU_IDENTITY`` when the sampler gave it.
_ALWAYS = ("index", "uuid", "name", "pci_bus_id", "mig_mode")


def _identity(gpu: dict[str, Any]) -> dict[str, Any]:
    return {k: gpu.get(k) for k in GPU_IDENTITY if k in _ALWAYS or k in gpu}


def _none_given(inherited: str | None) -> str:
    """Why a job with an inherited ``CUDA_VISIBLE_DEVICES`` has no GPU to use ('' when none was inherited)."""
    if inherited is None:
        return ""
    if inherited.strip() in ("", "-1"):
        return f"this job was given no GPU ({_said(inherited)})"
    return f"NVML sees none of the GPUs {_said(inherited)} names (CUDA stops at an entry it cannot match)"


def _given(gpus: list[dict[str, Any]], inherited: str | None) -> str:
    """How many devices there are to choose from, and where they come from, in words."""
    if inherited is None:
        return f"NVML sees {len(gpus)} GPU(s)"
    return f"this job was given {len(gpus)} GPU(s) by {_said(inherited)}"


def _named(gpu: dict[str, Any], inherited: str | None) -> str:
    """'NVML GPU 1, NVIDIA H100', or for a device the job was given: 'the job's GPU 0 (NVML GPU 3), ...'."""
    nvml = gpu.get("nvml_index", gpu.get("index"))
    mig = gpu.get("mig") if isinstance(gpu.get("mig"), dict) else None
    slice_ = f", MIG slice {mig.get('uuid')}" if mig else ""
    if inherited is None and nvml == gpu.get("index"):
        return f"NVML GPU {nvml}, {gpu.get('name')}{slice_}"
    return f"the job's GPU {gpu.get('index')} (NVML GPU {nvml}), {gpu.get('name')}{slice_}"


def place(
    device: str,
    gpus: list[dict[str, Any]],
    devices: int = 1,
    ids: list[int] | None = None,
    inherited: str | None = _FROM_ENV,
) -> Placement:
    """Resolve a plan's ``--device`` (and ``--devices``) against the GPUs this job may use (``Sampler.gpus()``:
    every GPU NVML sees, or those an inherited ``CUDA_VISIBLE_DEVICES`` gave it, in that order).

    ``inherited``: the ``CUDA_VISIBLE_DEVICES`` benchtui was started with (read from the environment
    unless given; None: unset). Raises PlanError for a device the job was not given, or more devices
    than it has.
    """
    if inherited == _FROM_ENV:
        inherited = inherited_visible()
    if devices > 1 or ids:
        return _place_many(device, gpus, devices, ids or [], inherited)
    if device == "cpu":
        return Placement("cpu", "cpu", env={VISIBLE_ENV: ""}, reason="--device cpu: every GPU hidden")
    if not gpus:
        none_given = _none_given(inherited)
        if device == "auto":
            return Placement("cpu", "cpu", reason=f"--device auto: {none_given or 'NVML sees no GPU'}")
        if none_given:
            raise PlanError(f"--device {device}: {none_given}")
        # A GPU asked for without NVML (the CLI refuses this; a program may not): each runner
        # checks for itself and fails with its reason, and ratios check the device kinds.
        return Placement("unchecked", device, reason=f"--device {device}: NVML sees no GPU; not checked here")
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= len(gpus):
        raise PlanError(f"--device {device}: {_given(gpus, inherited)} (cuda:0..cuda:{len(gpus) - 1})")
    gpu = _identity(gpus[index])
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", VISIBLE_ENV: _visible(gpu)}
    how = "" if inherited is None else f"; cuda:N is the N-th GPU {_said(inherited)} gave this job"
    return Placement("cuda", "cuda:0", gpu, env, reason=f"--device {device}: {_named(gpu, inherited)}{how}")


def _place_many(
    device: str, gpus: list[dict[str, Any]], devices: int, ids: list[int], inherited: str | None
) -> Placement:
    """Data parallel: ``devices`` GPUs (``ids``, else the first ones), or as many CPU replicas."""
    from benchtui_runners.config import usable_cores

    if device == "cpu" or (device == "auto" and not gpus):
        cores = usable_cores()
        if devices > cores:
            raise PlanError(
                f"--devices {devices}: on the CPU each replica needs a core of its own, and "
                f"{cores} core(s) are usable here"
            )
        env = {VISIBLE_ENV: ""} if device == "cpu" else {}
        return Placement(
            "cpu",
            "cpu",
            env=env,
            devices=devices,
            reason=f"--devices {devices} on the CPU: {devices} replicas",
        )
    if not gpus:
        raise PlanError(f"--devices {devices}: {_none_given(inherited) or 'NVML sees no GPU'}")
    chosen = ids or list(range(devices))
    missing = [i for i in chosen if i >= len(gpus)]
    if devices > len(gpus) or missing:
        raise PlanError(
            f"--devices {','.join(map(str, chosen)) if ids else devices}: {_given(gpus, inherited)} "
            f"(0..{len(gpus) - 1})"
        )
    picked = [_identity(gpus[i]) for i in chosen]
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", VISIBLE_ENV: ",".join(_visible(g) for g in picked)}
    if inherited is None and all(g.get("nvml_index", g["index"]) == g["index"] for g in picked):
        names = ", ".join(f"{g['index']} ({g['name']})" for g in picked)
        reason = f"--devices: NVML GPUs {names}"
    else:
        names = ", ".join(
            f"{g['index']} (NVML GPU {g.get('nvml_index', g['index'])}, {g['name']})" for g in picked
        )
        given = f" of those {_said(inherited)} gave this job" if inherited is not None else ""
        reason = f"--devices: the job's GPUs {names}{given}"
    return Placement("cuda", "cuda:0", picked[0], env, reason=reason, gpus=picked, devices=devices)
