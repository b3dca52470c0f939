"""GPU telemetry from NVML (``nvidia-ml-py``), sampled in one background thread.

Every NVML call may fail on some GPU, driver or container: that metric becomes
None (shown as N/A) and sampling goes on. Without NVML the sampler says why and
reports the runner's CPU and memory from psutil instead. The runner's CPU and
memory are sampled in every case.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

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


def _decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


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
    except Exception as exc:  # noqa: BLE001 - NVMLError or a missing library
        reason = " ".join(str(_decode(str(exc)) or type(exc).__name__).split())
        return None, f"NVML unavailable: {reason} (no NVIDIA driver or GPU?)"
    try:
        count = nvml.nvmlDeviceGetCount()
    except Exception as exc:  # noqa: BLE001
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
    ) -> None:
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
        self.handles: list[Any] = []
        self.lost: set[int] = set()
        if self.nvml is not None:
            for i in range(self.nvml.nvmlDeviceGetCount()):
                try:
                    self.handles.append(self.nvml.nvmlDeviceGetHandleByIndex(i))
                except Exception:  # noqa: BLE001
                    self.handles.append(None)
        self._pid: int | None = None
        self._run: str | None = None
        self._watched: int | None = None  # the session's GPU (NVML index): energy, other processes
        self._run_gpus: list[int] = []  # the current run's GPUs, when it trains on several
        self._procs: dict[int, Any] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- static information -----------------------------------------------------------
    def gpus(self) -> list[dict[str, Any]]:
        """Identity, memory, driver, clocks and link of each GPU, for session.json."""
        if self.nvml is None:
            return []
        nv = self.nvml
        driver = self._call(nv.nvmlSystemGetDriverVersion)
        cuda = self._call(nv.nvmlSystemGetCudaDriverVersion)
        out = []
        for i, handle in enumerate(self.handles):
            mem = self._call(nv.nvmlDeviceGetMemoryInfo, handle)
            pci = self._first(("nvmlDeviceGetPciInfo",), handle)
            mig = self._first(("nvmlDeviceGetMigMode",), handle)
            out.append(
                {
                    "index": i,
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
        return out

    def _first(self, names: tuple[str, ...], *args: Any) -> Any:
        """The first of ``names`` that this binding and driver answer (newest call first), or None."""
        for name in names:
            fn = getattr(self.nvml, name, None)
            if fn is None:
                continue
            try:
                return fn(*args)
            except Exception:  # noqa: BLE001 - FunctionNotFound on an older driver: try the older call
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
        """The session's GPUs (data parallel): the first is ``watched``; a run's own are given with its target."""
        self.watch_gpu(indices[0] if indices else None)

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
    def set_target(self, run_id: str | None, pid: int | None, gpus: list[int] | None = None) -> None:
        """The runner process whose memory and CPU are watched (None between runs), and the GPUs its
        run trains on when there are several (each sample names them: ``devices``)."""
        self._run, self._pid = run_id, pid
        self._run_gpus = list(gpus) if gpus and len(gpus) > 1 else []

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - NotSupported, NoPermission, GpuIsLost, ...
            return None

    def sample(self) -> dict[str, Any]:
        pid, run = self._pid, self._run
        event: dict[str, Any] = {"type": "gpu", "t": time.monotonic(), "run": run}
        if self.nvml is not None:
            family = self._family_pids(pid) if pid is not None else set()  # once per sample, not per GPU
            event["gpus"] = [self._sample_gpu(i, h, family) for i, h in enumerate(self.handles)]
            event["watched"] = self._watched
            if self._run_gpus:
                event["devices"] = self._run_gpus
        event["host"] = self._sample_process(pid)
        return event

    def _sample_gpu(self, index: int, handle: Any, family: set[int]) -> dict[str, Any]:
        nv = self.nvml
        gpu: dict[str, Any] = {"index": index}
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
        except Exception as exc:  # noqa: BLE001
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
        except Exception:  # noqa: BLE001 - psutil missing or the process is gone
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

            percent = psutil.cpu_percent(None)  # machine-wide, since the previous call
            return percent / 100.0 * (psutil.cpu_count() or 1)
        except Exception:  # noqa: BLE001
            return None

    def _sample_runner(self, pid: int | None) -> dict[str, Any]:
        """CPU (% of one core) and resident memory of the runner and every process under it: a
        DataLoader's workers, torchrun's ranks. A process seen for the first time primes its counter."""
        if pid is None:
            return {"cpu_percent": None, "rss": None}
        try:
            import psutil

            root = self._procs.get(pid)
            if root is None:
                root = psutil.Process(pid)
                root.cpu_percent(None)  # the first call only primes the counter
                self._procs = {pid: root}
                return {"cpu_percent": None, "rss": root.memory_info().rss}
            with root.oneshot():
                if root.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped: nothing to measure
                    return {"cpu_percent": None, "rss": None}
                cpu, rss = root.cpu_percent(None), root.memory_info().rss
            family = {pid: root}
            for child in root.children(recursive=True):
                known = self._procs.get(child.pid)
                try:
                    if known is None:
                        child.cpu_percent(None)
                        family[child.pid] = child
                        continue
                    cpu += known.cpu_percent(None)
                    rss += known.memory_info().rss
                    family[child.pid] = known
                except psutil.Error:  # ended between the listing and the reading
                    continue
            self._procs = family
            return {"cpu_percent": cpu, "rss": rss or None}
        except Exception:  # noqa: BLE001 - process ended between samples, or no psutil
            return {"cpu_percent": None, "rss": None}

    # -- the thread -------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="benchtui-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.on_sample(self.sample())
            except Exception:  # noqa: BLE001 - a sampler must never take the app down
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
        if self.nvml is not None:
            self._call(self.nvml.nvmlShutdown)


def _pids_visible(procs: dict[int, Any]) -> bool:
    """Whether NVML's pids are pids of this pid namespace (not in a container that hides the host's)."""
    try:
        import psutil

        return all(psutil.pid_exists(pid) for pid in procs)
    except Exception:  # noqa: BLE001 - without psutil, take NVML's word
        return True


def _reasons(bits: int | None) -> list[str] | None:
    return None if bits is None else [name for bit, name in THROTTLE_REASONS.items() if bits & bit]


def _milli(value: Any) -> float | None:
    return None if value is None else value / 1000.0
