"""GPU telemetry from NVML (``nvidia-ml-py``), sampled in one background thread.

Every NVML call may fail on some GPU, driver or container: that metric becomes
None (shown as N/A) and sampling goes on. Without NVML the sampler says why and
reports the runner's CPU and memory from psutil instead. The runner's CPU and
memory are sampled in every case.

NVML's utilization says "a kernel was running", not "the SMs were busy". Where they can
be read, the SMs', tensor cores' and DRAM's activity go with each sample too: from DCGM's
profiling fields when its bindings import and a host engine answers, else from NVML GPM
(Hopper and newer). When sampling starts, one ``counters`` event says which source reads
them, or plainly why none can; a failing counter never stops the sampling.

Only the GPUs this job was given are sampled: every GPU NVML sees, or, when benchtui was started
with ``CUDA_VISIBLE_DEVICES`` (a scheduler's choice), the devices it names, matched to NVML's by
index, UUID or MIG UUID (``benchtui.core.plan.devices.given_devices``). Each sampled GPU's
``index`` is its place in that list (what ``--device cuda:N`` names); ``nvml_index`` is NVML's
where they differ. A MIG slice is sampled as the card that holds it (NVML reads most figures of
the whole card only).
"""

from __future__ import annotations

import importlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchtui.core.plan.devices import VISIBLE_ENV, given_devices, inherited_visible

# NVML clock-event bits (nvmlClocksEventReason*, formerly ThrottleReason), named for people.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "app_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


#: The activity a GPU sample carries when it can be read: percent of the interval (0-100), from
#: DCGM's profiling field (a ratio, DCGM_FI_PROF_*) or the NVML GPM metric (percent).
COUNTERS = ("sm_active", "tensor_active", "dram_active")
DCGM_FIELDS = {
    "sm_active": 1002,  # DCGM_FI_PROF_SM_ACTIVE: cycles an SM has at least one warp assigned
    "tensor_active": 1004,  # DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: cycles the tensor pipes are active
    "dram_active": 1005,  # DCGM_FI_PROF_DRAM_ACTIVE: cycles device memory is sending or receiving
}
GPM_METRICS = {
    "sm_active": "NVML_GPM_METRIC_SM_UTIL",  # percentage of SMs that were busy
    "tensor_active": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",  # time the SMs did any tensor operation
    "dram_active": "NVML_GPM_METRIC_DRAM_BW_UTIL",  # DRAM bandwidth used vs its maximum
}
#: Where DCGM's packages install its Python bindings (DCGM 4, then 3), when they are not importable as is.
DCGM_BINDINGS = ("/usr/share/datacenter-gpu-manager-4/bindings/python3", "/usr/local/dcgm/bindings/python3")
NO_COUNTERS = "SM/tensor/DRAM activity unavailable"


def _decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _one_line(exc: BaseException) -> str:
    return " ".join(str(_decode(str(exc)) or type(exc).__name__).split())[:200]


def _percent(value: Any, scale: float = 1.0) -> float | None:
    """A reading as a percent in 0-100 (rounding noise clipped), or None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(min(max(float(value) * scale, 0.0), 100.0), 2)


def load_dcgm() -> tuple[Any | None, str]:
    """DCGM's Python bindings (``pydcgm``, ``dcgm_structs``, ``dcgm_fields``), or None and why not."""
    try:
        return _import_dcgm(), ""
    except ImportError:
        pass
    except Exception as exc:  # the bindings load libdcgm as they import
        return None, f"DCGM's bindings do not load ({_one_line(exc)})"
    for folder in DCGM_BINDINGS:
        if (Path(folder) / "pydcgm.py").is_file():
            if folder not in sys.path:
                sys.path.append(folder)  # after everything else: it shadows nothing
            try:
                return _import_dcgm(), ""
            except Exception as exc:
                return None, f"DCGM's bindings in {folder} do not load ({_one_line(exc)})"
    return None, "DCGM is not installed"


def _import_dcgm() -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(
        pydcgm=importlib.import_module("pydcgm"),
        dcgm_structs=importlib.import_module("dcgm_structs"),
        dcgm_fields=importlib.import_module("dcgm_fields"),
    )


class DcgmCounters:
    """DCGM's profiling fields for some GPUs, watched by the host engine at the sampling interval.

    One ``GetLatest`` call per sample reads every GPU's latest values (DCGM samples them itself).
    """

    source = "DCGM"

    def __init__(self, dcgm: Any, uuids: dict[int, str], interval: float) -> None:
        """``uuids``: NVML index -> UUID of the GPUs to watch (DCGM numbers GPUs its own way)."""
        pydcgm, structs = dcgm.pydcgm, dcgm.dcgm_structs
        self._group: Any = None
        self._fields: Any = None
        # The host engine (nv-hostengine) on this machine, if one runs: never one started in this process.
        self._handle = pydcgm.DcgmHandle(ipAddress="127.0.0.1")
        try:
            discovery = self._handle.GetSystem().discovery
            by_uuid = {uuid: index for index, uuid in uuids.items()}
            self.index: dict[int, int] = {}  # DCGM's GPU id -> NVML index
            for gpu_id in discovery.GetAllSupportedGpuIds():
                uuid = _decode(discovery.GetGpuAttributes(gpu_id).identifiers.uuid)
                if uuid in by_uuid:
                    self.index[gpu_id] = by_uuid[uuid]
            if not self.index:
                raise LookupError("DCGM supports none of the session's GPUs")
            name = f"benchtui-{os.getpid()}-{id(self):x}"
            self._group = pydcgm.DcgmGroup(self._handle, groupName=name, groupType=structs.DCGM_GROUP_EMPTY)
            for gpu_id in self.index:
                self._group.AddGpu(gpu_id)
            self._fields = pydcgm.DcgmFieldGroup(self._handle, name=name, fieldIds=list(DCGM_FIELDS.values()))
            # updateFreq in microseconds, maxKeepAge in seconds, maxKeepSamples (0: up to the age).
            self._group.samples.WatchFields(self._fields, int(interval * 1e6), max(5.0, 3 * interval), 0)
        except BaseException:
            self.close()
            raise

    @property
    def gpus(self) -> list[int]:
        return sorted(self.index.values())

    def read(self) -> dict[int, dict[str, float]]:
        """NVML index -> the latest readings (percent) DCGM holds for that GPU (blank ones left out)."""
        values = self._group.samples.GetLatest(self._fields).values
        out: dict[int, dict[str, float]] = {}
        for gpu_id, fields in values.items():
            index = self.index.get(gpu_id)
            if index is None:
                continue
            reading: dict[str, float] = {}
            for name, field_id in DCGM_FIELDS.items():
                series = fields.get(field_id)
                latest = series[-1] if series is not None and len(series) else None
                if latest is None or latest.isBlank:
                    continue
                value = _percent(latest.value, 100.0)  # DCGM's profiling fields are ratios (0-1)
                if value is not None:
                    reading[name] = value
            out[index] = reading
        return out

    def close(self) -> None:
        steps: tuple[Callable[[], object], ...] = (
            lambda: self._group.samples.UnwatchFields(self._fields),
            lambda: self._fields.Delete(),
            lambda: self._group.Delete(),
            lambda: self._handle.Shutdown(),
        )
        for step in steps:
            try:
                step()
            except Exception:  # half made, or the host engine is gone: nothing to undo
                pass
        self._group = self._fields = None


@dataclass
class _GpmGpu:
    handle: Any
    older: Any  # the previous interval's sample
    newer: Any  # the buffer this interval's sample goes into
    request: Any  # the nvmlGpmMetricsGet_t struct, made once (about 19 KB) and reused


class GpmCounters:
    """NVML GPM (Hopper and newer): per GPU, one sample each interval and the metrics between it and the
    previous one (one ``nvmlGpmSampleGet`` and one ``nvmlGpmMetricsGet`` per GPU per sample)."""

    source = "NVML GPM"

    def __init__(self, nvml: Any, handles: dict[int, Any]) -> None:
        """``handles``: NVML index -> handle of GPUs that support GPM (``nvmlGpmQueryDeviceSupport``)."""
        self.nvml = nvml
        self._metrics = [(name, getattr(nvml, constant)) for name, constant in GPM_METRICS.items()]
        self._allocated: list[Any] = []
        self._gpus: dict[int, _GpmGpu] = {}
        self.failed: dict[int, str] = {}  # NVML index -> why its first sample failed
        try:
            for index, handle in handles.items():
                older, newer = nvml.nvmlGpmSampleAlloc(), None
                self._allocated.append(older)
                newer = nvml.nvmlGpmSampleAlloc()
                self._allocated.append(newer)
                try:
                    nvml.nvmlGpmSampleGet(handle, older)  # the first interval starts now
                except Exception as exc:  # a MIG slice, a GPU lost: no readings for it
                    self.failed[index] = _one_line(exc)
                    continue
                self._gpus[index] = _GpmGpu(handle, older, newer, self._request())
        except BaseException:
            self.close()
            raise

    def _request(self) -> Any:
        nv = self.nvml
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self._metrics)
        for i, (_, metric) in enumerate(self._metrics):
            request.metrics[i].metricId = metric
        return request

    @property
    def gpus(self) -> list[int]:
        return sorted(self._gpus)

    def read(self) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for index, gpu in self._gpus.items():
            try:
                out[index] = self._read(gpu)
            except Exception:  # this interval's reading is lost; the next one tries again
                out[index] = {}
        return out

    def _read(self, gpu: _GpmGpu) -> dict[str, float]:
        nv = self.nvml
        nv.nvmlGpmSampleGet(gpu.handle, gpu.newer)
        older, newer = gpu.older, gpu.newer
        gpu.older, gpu.newer = newer, older  # this sample starts the next interval; the old buffer is reused
        request = gpu.request
        request.sample1, request.sample2 = older, newer
        nv.nvmlGpmMetricsGet(request)
        success = getattr(nv, "NVML_SUCCESS", 0)
        reading: dict[str, float] = {}
        for i, (name, _) in enumerate(self._metrics):
            metric = request.metrics[i]
            value = _percent(metric.value) if metric.nvmlReturn == success else None
            if value is not None:
                reading[name] = value
        return reading

    def close(self) -> None:
        for sample in self._allocated:
            try:
                self.nvml.nvmlGpmSampleFree(sample)
            except Exception:
                pass
        self._allocated, self._gpus = [], {}


def gpm_support(nvml: Any, handle: Any) -> tuple[bool, str]:
    """Whether a GPU has NVML GPM, and why not."""
    query = getattr(nvml, "nvmlGpmQueryDeviceSupport", None)
    if query is None:
        return False, "this nvidia-ml-py has no NVML GPM calls"
    try:
        return bool(query(handle).isSupportedDevice), ""
    except Exception as exc:  # an older driver (FunctionNotFound), a lost GPU
        return False, f"NVML GPM did not answer ({_one_line(exc)})"


def load_nvml() -> tuple[Any | None, str]:
    """Import and initialise pynvml; return (module or None, status line)."""
    try:
        import pynvml  # the official binding, from the nvidia-ml-py package
    except ImportError:
        return None, "NVML unavailable: nvidia-ml-py is not installed"
    return init_nvml(pynvml)


def init_nvml(nvml: Any) -> tuple[Any | None, str]:
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError or a missing library
        reason = " ".join(str(_decode(str(exc)) or type(exc).__name__).split())
        return None, f"NVML unavailable: {reason} (no NVIDIA driver or GPU?)"
    try:
        count = nvml.nvmlDeviceGetCount()
    except Exception as exc:
        return None, f"NVML unavailable: cannot count GPUs ({exc})"
    if count == 0:
        return None, "NVML found no GPU"
    return nvml, f"NVML: {count} GPU(s)"


class Sampler:
    """Samples GPU (NVML) and runner-process (psutil) metrics every ``interval`` seconds."""

    def __init__(
        self,
        interval: float,
        on_sample: Callable[[dict[str, Any]], None],
        nvml: Any | None = None,
        use_nvml: bool = True,
        dcgm: Any | None = None,
        use_dcgm: bool = True,
        inherited: str | None = "\0from the environment",
    ) -> None:
        """``inherited``: the ``CUDA_VISIBLE_DEVICES`` benchtui was started with (read from the environment
        unless given; None: unset), which decides the GPUs this job was given and so the ones sampled."""
        # The plan checks --interval; a sampler given anything else still samples at a sane rate
        # (an infinite wait would kill its thread, a microsecond one write thousands of samples a second).
        self.interval = min(max(interval, 0.05), 3600.0) if math.isfinite(interval) else 0.5
        self.on_sample = on_sample
        self.nvml: Any  # the pynvml module (or a fake with its API), None without NVML
        if nvml is not None:
            self.nvml, self.status = init_nvml(nvml)
        elif use_nvml:
            self.nvml, self.status = load_nvml()
        else:
            self.nvml, self.status = None, "NVML not used"
        self.inherited = inherited_visible() if inherited == "\0from the environment" else inherited
        #: Every GPU NVML sees, in its order; and the devices this job was given (``given_devices``),
        #: each sampled through its card's handle (``handles``, in the same order).
        self.nvml_handles: list[Any] = []
        self.devices: list[dict[str, Any]] = []
        self.handles: list[Any] = []
        self.lost: set[int] = set()
        if self.nvml is not None:
            for i in range(self.nvml.nvmlDeviceGetCount()):
                try:
                    self.nvml_handles.append(self.nvml.nvmlDeviceGetHandleByIndex(i))
                except Exception:
                    self.nvml_handles.append(None)
            self.devices, note = given_devices(self._machine(), self.inherited)
            self.handles = [self.nvml_handles[d["nvml_index"]] for d in self.devices]
            if self.inherited is not None:
                said = f"{VISIBLE_ENV}={self.inherited}" if self.inherited.strip() else f"{VISIBLE_ENV}=''"
                given = (
                    f"this job was given {len(self.devices)} of them by {said} "
                    "(--device cuda:N is the N-th; only these are sampled)"
                    if self.devices
                    else f"this job was given none of them ({said}): no GPU is sampled"
                )
                self.status = "; ".join(x for x in (self.status, given, note) if x)
        self._pid: int | None = None
        self._run: str | None = None
        self._watched: int | None = None  # the session's GPU (NVML index): energy, other processes
        self._run_gpus: list[int] = []  # the current run's GPUs, when it trains on several
        self._procs: dict[int, Any] = {}
        self._cpu_seen: tuple[float, float] = (0.0, 0.0)  # (monotonic time, the runner family's CPU seconds)
        # SM/tensor/DRAM activity: DCGM's bindings (None: import them when sampling starts), the
        # session's GPUs (None: every GPU), and the source once opened (``open_counters``).
        self._dcgm = dcgm
        self._use_dcgm = use_dcgm
        self._counter_gpus: list[int] | None = None
        self.counters: DcgmCounters | GpmCounters | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- static information -----------------------------------------------------------
    def _machine(self) -> list[dict[str, Any]]:
        """Every GPU NVML sees: its index, UUID, MIG mode and (split by MIG) its slices."""
        out: list[dict[str, Any]] = []
        for i, handle in enumerate(self.nvml_handles):
            if handle is None:
                out.append({"index": i, "uuid": None, "mig_mode": None})
                continue
            mig = self._first(("nvmlDeviceGetMigMode",), handle)
            enabled = mig is not None and mig[0] == 1
            out.append(
                {
                    "index": i,
                    "uuid": _decode(self._first(("nvmlDeviceGetUUID",), handle)),
                    "mig_mode": None if mig is None else ("enabled" if enabled else "disabled"),
                    "mig_devices": self._mig_devices(handle) if enabled else [],
                }
            )
        return out

    def _mig_devices(self, handle: Any) -> list[dict[str, Any]]:
        """The MIG slices of a GPU split by MIG (NVML's MIG device handles), each named by its MIG UUID."""
        count = self._first(("nvmlDeviceGetMaxMigDeviceCount",), handle)
        out: list[dict[str, Any]] = []
        for i in range(count if isinstance(count, int) else 0):
            found = self._first(
                ("nvmlDeviceGetMigDeviceHandleByIndex",), handle, i
            )  # NotFound: an empty slot
            uuid = _decode(self._first(("nvmlDeviceGetUUID",), found)) if found is not None else None
            if not uuid:
                continue
            mem = self._first(("nvmlDeviceGetMemoryInfo",), found)
            out.append(
                {
                    "uuid": uuid,
                    "gpu_instance": self._first(("nvmlDeviceGetGpuInstanceId",), found),
                    "compute_instance": self._first(("nvmlDeviceGetComputeInstanceId",), found),
                    "name": _decode(self._first(("nvmlDeviceGetName",), found)),
                    "memory_total": getattr(mem, "total", None),
                }
            )
        return out

    def gpus(self) -> list[dict[str, Any]]:
        """Identity, memory, driver, clocks and link of each GPU this job was given, for session.json.

        ``index`` is the device's place among them (what ``--device cuda:N`` names), ``nvml_index``
        NVML's; a MIG slice has its card's figures with the slice's name, memory and ``mig`` identity.
        """
        if self.nvml is None:
            return []
        nv = self.nvml
        driver = self._call(nv.nvmlSystemGetDriverVersion)
        cuda = self._call(nv.nvmlSystemGetCudaDriverVersion)
        out = []
        for i, (device, handle) in enumerate(zip(self.devices, self.handles, strict=True)):
            mem = self._call(nv.nvmlDeviceGetMemoryInfo, handle)
            pci = self._first(("nvmlDeviceGetPciInfo",), handle)
            mig = self._first(("nvmlDeviceGetMigMode",), handle)
            out.append(
                {
                    "index": i,
                    "nvml_index": device["nvml_index"],
                    "cuda_visible": device["cuda_visible"],
                    "name": _decode(self._call(nv.nvmlDeviceGetName, handle)),
                    "uuid": _decode(self._first(("nvmlDeviceGetUUID",), handle)),
                    "pci_bus_id": _decode(getattr(pci, "busId", None)),
                    # MIG enabled: the card is split into slices and a process gets one of them.
                    "mig_mode": None if mig is None else ("enabled" if mig[0] == 1 else "disabled"),
                    "pcie_link": {
                        "gen": self._first(("nvmlDeviceGetCurrPcieLinkGeneration",), handle),
                        "max_gen": self._first(("nvmlDeviceGetMaxPcieLinkGeneration",), handle),
                        "width": self._first(("nvmlDeviceGetCurrPcieLinkWidth",), handle),
                        "max_width": self._first(("nvmlDeviceGetMaxPcieLinkWidth",), handle),
                    },
                    "memory_total": getattr(mem, "total", None),
                    "driver": _decode(driver),
                    "cuda_driver": cuda,
                    "max_sm_clock_mhz": self._call(nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM),
                    "power_limit_w": _milli(self._call(nv.nvmlDeviceGetEnforcedPowerLimit, handle)),
                    "sm_clock_mhz": self._call(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM),
                    "temp_c": self._temperature(handle),
                    "throttle": _reasons(self._clock_events(handle)),
                }
            )
            slice_ = device.get("mig")
            if slice_:
                out[-1]["mig"] = dict(slice_)
                out[-1]["name"] = slice_.get("name") or out[-1]["name"]
                out[-1]["memory_total"] = slice_.get("memory_total") or out[-1]["memory_total"]
            if self.inherited is not None:
                out[-1]["inherited"] = f"{VISIBLE_ENV}={self.inherited}"
            # The CUDA compute capability ("8.0"): which precisions it has (--best reads it); a MIG slice's
            # is its card's. Left out where the binding or driver does not say.
            cc = self._first(("nvmlDeviceGetCudaComputeCapability",), handle)
            if isinstance(cc, (tuple, list)) and len(cc) == 2 and all(isinstance(x, int) for x in cc):
                out[-1]["capability"] = f"{cc[0]}.{cc[1]}"
        return out

    def _first(self, names: tuple[str, ...], *args: Any) -> Any:
        """The first of ``names`` that this binding and driver answer (newest call first), or None."""
        for name in names:
            fn = getattr(self.nvml, name, None)
            if fn is None:
                continue
            try:
                return fn(*args)
            except Exception:  # FunctionNotFound on an older driver: try the older call
                continue
        return None

    def _temperature(self, handle: Any) -> Any:
        return self._first(
            ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"), handle, self.nvml.NVML_TEMPERATURE_GPU
        )

    def _clock_events(self, handle: Any) -> Any:
        return self._first(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), handle
        )

    def watch_gpu(self, index: int | None) -> None:
        """The session's GPU: whose energy is read and whose other processes are flagged."""
        self._watched = index

    def watch_gpus(self, indices: list[int]) -> None:
        """The session's GPUs (data parallel): the first is ``watched``; a run's own are given with its target.
        Their SM/tensor/DRAM activity is read (none: the session runs on the CPU)."""
        self.watch_gpu(indices[0] if indices else None)
        self._counter_gpus = list(indices)

    # -- SM / tensor / DRAM activity ------------------------------------------------------
    def open_counters(self) -> dict[str, Any]:
        """Start reading SM/tensor/DRAM activity (DCGM, else NVML GPM) and return the session's
        ``counters`` event: which source reads them, or plainly why none can. Never raises."""
        self.close_counters()
        try:
            available, reason = self._open_counters()
        except Exception as exc:  # whatever went wrong, sampling goes on without them
            self.close_counters()
            available, reason = False, f"{NO_COUNTERS}: {_one_line(exc)}"
        return {
            "type": "counters",
            "t": time.monotonic(),
            "run": None,
            "available": available,
            "source": self.counters.source if self.counters is not None else "",
            "reason": reason,
        }

    def _open_counters(self) -> tuple[bool, str]:
        if self.nvml is None:
            return False, f"{NO_COUNTERS}: no NVIDIA GPU is sampled ({self.status})"
        indices = self._counter_gpus if self._counter_gpus is not None else list(range(len(self.handles)))
        indices = [i for i in indices if i < len(self.handles) and self.handles[i] is not None]
        if not indices:
            return False, f"{NO_COUNTERS}: the session runs on no GPU"
        if self._dcgm is not None:
            dcgm, dcgm_why = self._dcgm, ""
        elif self._use_dcgm:
            dcgm, dcgm_why = load_dcgm()
        else:
            dcgm, dcgm_why = None, "DCGM not used"
        if dcgm is not None:
            uuids = {i: _decode(self._first(("nvmlDeviceGetUUID",), self.handles[i])) for i in indices}
            try:
                self.counters = DcgmCounters(dcgm, {i: u for i, u in uuids.items() if u}, self.interval)
            except Exception as exc:  # no host engine, no profiling module, GPUs it does not know
                dcgm_why = f"DCGM did not answer ({_one_line(exc)})"
            else:
                missed = [i for i in indices if i not in self.counters.gpus]
                return True, _missing(missed, "DCGM does not profile it")
        # DCGM installed but failing is worth a word even when NVML GPM reads the counters instead.
        note = [dcgm_why] if dcgm is not None else []
        supported: dict[int, Any] = {}
        unsupported: list[int] = []
        gpm_why = ""
        for i in indices:
            ok, why = gpm_support(self.nvml, self.handles[i])
            if ok:
                supported[i] = self.handles[i]
            else:
                unsupported.append(i)
                gpm_why = gpm_why or why
        if supported:
            counters = GpmCounters(self.nvml, supported)
            if counters.gpus:
                self.counters = counters
                parts = [*note, _missing(unsupported, gpm_why or "no NVML GPM: Hopper or newer")]
                parts += [_missing([i], f"NVML GPM failed: {e}") for i, e in counters.failed.items()]
                return True, "; ".join(p for p in parts if p)
            counters.close()
            gpm_why = f"NVML GPM sampling failed ({next(iter(counters.failed.values()))})"
        gpus = "this GPU has" if len(indices) == 1 else "these GPUs have"
        why_not = [dcgm_why, gpm_why or f"{gpus} no NVML GPM (Hopper or newer)"]
        return False, f"{NO_COUNTERS}: {' and '.join(why_not)}"

    def close_counters(self) -> None:
        counters, self.counters = self.counters, None
        if counters is not None:
            counters.close()

    def _read_counters(self) -> dict[int, dict[str, float]]:
        counters = self.counters
        if counters is None:
            return {}
        try:
            return counters.read()
        except Exception:  # a reading lost (the host engine went away): the sample goes on
            return {}

    def energy_mj(self, indices: list[int] | None = None) -> int | None:
        """The energy counter (millijoules since the driver loaded) of the watched GPU, or the sum over
        ``indices`` (a data-parallel run's GPUs); None when any of them cannot be read."""
        if indices is None:
            indices = [] if self._watched is None else [self._watched]
        if self.nvml is None or not indices:
            return None
        total = 0
        for index in indices:
            if index >= len(self.handles) or self.handles[index] is None or index in self.lost:
                return None
            value = self._first(("nvmlDeviceGetTotalEnergyConsumption",), self.handles[index])
            if not isinstance(value, int):
                return None
            total += value
        return total

    # -- the sample -------------------------------------------------------------------
    def set_target(
        self, run_id: str | None, pid: int | None, gpus: list[int] | None = None, listed: bool = False
    ) -> None:
        """The runner process whose memory and CPU are watched (None between runs), and the GPUs its
        run trains on when there are several (each sample names them: ``devices``), or always when
        ``listed`` (a run on several nodes: its run_end carries each GPU's sums, node k's included)."""
        self._run, self._pid = run_id, pid
        self._run_gpus = list(gpus) if gpus and (len(gpus) > 1 or listed) else []

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # NotSupported, NoPermission, GpuIsLost, ...
            return None

    def sample(self) -> dict[str, Any]:
        pid, run = self._pid, self._run
        event: dict[str, Any] = {"type": "gpu", "t": time.monotonic(), "run": run}
        if self.nvml is not None:
            family = self._family_pids(pid) if pid is not None else set()  # once per sample, not per GPU
            event["gpus"] = [self._sample_gpu(i, h, family) for i, h in enumerate(self.handles)]
            if self.counters is not None:
                for index, reading in self._read_counters().items():
                    gpu = event["gpus"][index] if index < len(event["gpus"]) else {}
                    if not gpu.get("lost"):
                        gpu.update(reading)
            event["watched"] = self._watched
            if self._run_gpus:
                event["devices"] = self._run_gpus
        event["host"] = self._sample_process(pid)
        return event

    def _sample_gpu(self, index: int, handle: Any, family: set[int]) -> dict[str, Any]:
        nv = self.nvml
        gpu: dict[str, Any] = {"index": index}
        nvml_index = self.devices[index]["nvml_index"] if index < len(self.devices) else index
        if nvml_index != index or self.inherited is not None:  # a subset of the machine's: say which GPU
            gpu["nvml_index"] = nvml_index
        if handle is None or index in self.lost:
            gpu["lost"] = True
            return gpu
        util = self._call(nv.nvmlDeviceGetUtilizationRates, handle)
        mem = self._call(nv.nvmlDeviceGetMemoryInfo, handle)
        if util is None and mem is None and self._is_lost(handle):
            self.lost.add(index)
            gpu["lost"] = True
            return gpu
        gpu["util"] = getattr(util, "gpu", None)
        gpu["mem_util"] = getattr(util, "memory", None)
        gpu["mem_used"] = getattr(mem, "used", None)
        gpu["mem_total"] = getattr(mem, "total", None)
        gpu["power_w"] = _milli(self._call(nv.nvmlDeviceGetPowerUsage, handle))
        gpu["temp_c"] = self._temperature(handle)
        gpu["sm_clock_mhz"] = self._call(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM)
        gpu["throttle"] = _reasons(self._clock_events(handle))
        gpu["energy_mj"] = self._first(("nvmlDeviceGetTotalEnergyConsumption",), handle)
        gpu["proc_mem"], gpu["other_procs"], gpu["other_mem"] = self._processes(handle, family)
        return gpu

    def _is_lost(self, handle: Any) -> bool:
        try:
            self.nvml.nvmlDeviceGetUtilizationRates(handle)
        except Exception as exc:
            lost_cls = getattr(self.nvml, "NVMLError_GpuIsLost", None)
            return lost_cls is not None and isinstance(exc, lost_cls)
        return False

    def _processes(self, handle: Any, family: set[int]) -> tuple[int | None, int | None, int | None]:
        """(the runner's GPU memory, how many other processes use the GPU, their memory); None: unknown.

        NVML may report pids of another pid namespace (in a container, the host's) and
        ``usedGpuMemory`` may be None: then the runner's figure is N/A, never 0 B.
        """
        compute = self._call(self.nvml.nvmlDeviceGetComputeRunningProcesses, handle)
        graphics = self._first(("nvmlDeviceGetGraphicsRunningProcesses",), handle)
        if compute is None and graphics is None:
            return None, None, None
        procs: dict[int, Any] = {
            p.pid: getattr(p, "usedGpuMemory", None)
            for p in [*(compute or []), *(graphics or [])]
            if isinstance(getattr(p, "pid", None), int)
        }
        if not _pids_visible(procs):
            return None, None, None
        mine = [used for p, used in procs.items() if p in family]
        others = [used for p, used in procs.items() if p not in family]
        known_mine = [u for u in mine if u is not None]
        known_others = [u for u in others if u is not None]
        return (
            sum(known_mine) if known_mine else None,
            len(others),
            sum(known_others) if known_others else (0 if not others else None),
        )

    def _family_pids(self, pid: int) -> set[int]:
        try:
            import psutil

            proc = psutil.Process(pid)
            return {pid} | {c.pid for c in proc.children(recursive=True)}
        except Exception:  # psutil missing or the process is gone
            return {pid}

    def _sample_process(self, pid: int | None) -> dict[str, Any]:
        """The runner's CPU (% of one core) and resident memory, and how busy the whole machine is."""
        out = self._sample_runner(pid)
        out["system_busy_cores"] = self._system_busy_cores()
        return out

    def _system_busy_cores(self) -> float | None:
        """Cores' worth of CPU in use by every process since the last sample (runner included)."""
        try:
            import psutil

            percent: float = psutil.cpu_percent(None)  # machine-wide, since the previous call
            return percent / 100.0 * (psutil.cpu_count() or 1)
        except Exception:
            return None

    def _sample_runner(self, pid: int | None) -> dict[str, Any]:
        """CPU (% of one core) and resident memory of the runner and every process under it: a
        DataLoader's workers, torchrun's ranks, and the short-lived processes they start and reap
        (XLA's ptxas and nvlink while it compiles and autotunes on a GPU). The first sample of a
        runner only primes the count.

        The CPU is the change, since the previous sample, of the family's CPU time: each live
        process's own plus what its reaped children used (``children_user/system``). A process that
        ends between two samples is then counted once, in its parent's reaped time, and its CPU
        never lands among "other processes".
        """
        if pid is None:
            return {"cpu_percent": None, "rss": None}
        try:
            import psutil

            root = self._procs.get(pid)
            if root is None:
                root = psutil.Process(pid)
                self._procs = {pid: root, **{c.pid: c for c in root.children(recursive=True)}}
                self._cpu_seen = (time.monotonic(), _family_cpu_seconds(list(self._procs.values())))
                return {"cpu_percent": None, "rss": root.memory_info().rss}
            with root.oneshot():
                if root.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped: nothing to measure
                    return {"cpu_percent": None, "rss": None}
                rss = root.memory_info().rss
            family = {pid: root}
            for child in root.children(recursive=True):
                known = self._procs.get(child.pid, child)  # the same object keeps psutil's identity check
                try:
                    rss += known.memory_info().rss
                except psutil.Error:  # ended between the listing and the reading
                    continue
                family[child.pid] = known
            self._procs = family
            now, total = time.monotonic(), _family_cpu_seconds(list(family.values()))
            then, before = self._cpu_seen
            self._cpu_seen = (now, total)
            cpu = max(total - before, 0.0) / (now - then) * 100.0 if now > then else None
            return {"cpu_percent": cpu, "rss": rss or None}
        except Exception:  # process ended between samples, or no psutil
            return {"cpu_percent": None, "rss": None}

    # -- the thread -------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="benchtui-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        # In this thread: DCGM's host engine may take a moment to answer, and the caller goes on.
        try:
            self.on_sample(self.open_counters())
        except Exception:
            pass
        try:
            self._sample_loop()
        finally:
            self.close_counters()

    def _sample_loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.on_sample(self.sample())
            except Exception:  # a sampler must never take the app down
                pass
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (suspended?): do not burst to catch up
                next_at, delay = time.monotonic(), 0
            self._stop.wait(delay)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._thread is None or not self._thread.is_alive():  # a stuck thread keeps what it uses
            self.close_counters()
        if self.nvml is not None:
            self._call(self.nvml.nvmlShutdown)


@dataclass(frozen=True)
class GpuList:
    """The GPUs this job was given, as NVML describes them (``Sampler.gpus``), and NVML's status line."""

    gpus: list[dict[str, Any]]
    status: str
    nvml: bool  # whether NVML answered (False: no driver, no GPU, not installed, or not used)

    @property
    def names(self) -> tuple[str, ...]:
        """Each device's name, in the order ``--device cuda:N`` counts them."""
        return tuple(str(gpu.get("name") or "GPU") for gpu in self.gpus)


def list_gpus(use_nvml: bool = True, nvml: Any | None = None) -> GpuList:
    """The one way benchtui lists GPUs outside a session (the default plan, the plan screen's devices, the
    command line's device checks, ``doctor``): NVML only, since importing a framework to ask would take
    seconds; the devices this job was given (an inherited ``CUDA_VISIBLE_DEVICES``, MIG slices), in
    CUDA's order, as a session's sampler records them. ``nvml``: a binding to use (tests' fake)."""
    sampler = Sampler(1.0, lambda sample: None, nvml=nvml, use_nvml=use_nvml)
    try:
        return GpuList(sampler.gpus(), str(sampler.status), sampler.nvml is not None)
    finally:
        sampler.stop()


def _family_cpu_seconds(procs: list[Any]) -> float:
    """CPU seconds used by these processes and by every child they reaped (a process gone between
    the listing and the reading adds nothing: its time reaches its parent's when it is reaped)."""
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except Exception:  # psutil.Error: ended meanwhile
            continue
        total += t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    return total


def _missing(indices: list[int], why: str) -> str:
    """The GPUs a source leaves out, said (empty when it reads them all)."""
    if not indices:
        return ""
    which = ", ".join(map(str, indices))
    return f"no SM/tensor/DRAM activity for GPU {which} ({why})"


def _pids_visible(procs: dict[int, Any]) -> bool:
    """Whether NVML's pids are pids of this pid namespace (not in a container that hides the host's)."""
    try:
        import psutil

        return all(psutil.pid_exists(pid) for pid in procs)
    except Exception:  # without psutil, take NVML's word
        return True


def _reasons(bits: int | None) -> list[str] | None:
    return None if bits is None else [name for bit, name in THROTTLE_REASONS.items() if bits & bit]


def _milli(value: Any) -> float | None:
    return None if value is None else value / 1000.0
