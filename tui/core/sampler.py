"""GPU telemetry from NVML (``nvidia-ml-py``), sampled in one background thread.

Every NVML call may fail on some GPU, driver or container: that metric becomes
None (shown as N/A) and sampling goes on. Without NVML the sampler says why and
reports the runner's CPU and memory from psutil instead. The runner's CPU and
memory are sampled in every case.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

# NVML throttle-reason bits (nvmlClocksThrottleReason*), named for people.
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
        self.interval = interval
        self.on_sample = on_sample
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
        self._procs: dict[int, Any] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- static information -----------------------------------------------------------
    def gpus(self) -> list[dict[str, Any]]:
        """Name, memory, driver of each GPU, for session.json."""
        if self.nvml is None:
            return []
        driver = self._call(self.nvml.nvmlSystemGetDriverVersion)
        cuda = self._call(self.nvml.nvmlSystemGetCudaDriverVersion)
        out = []
        for i, handle in enumerate(self.handles):
            mem = self._call(self.nvml.nvmlDeviceGetMemoryInfo, handle)
            out.append({
                "index": i,
                "name": _decode(self._call(self.nvml.nvmlDeviceGetName, handle)),
                "memory_total": getattr(mem, "total", None),
                "driver": _decode(driver),
                "cuda_driver": cuda,
                "max_sm_clock_mhz": self._call(
                    self.nvml.nvmlDeviceGetMaxClockInfo, handle, self.nvml.NVML_CLOCK_SM
                ),
                "power_limit_w": _milli(self._call(self.nvml.nvmlDeviceGetEnforcedPowerLimit, handle)),
                "sm_clock_mhz": self._call(self.nvml.nvmlDeviceGetClockInfo, handle, self.nvml.NVML_CLOCK_SM),
                "temp_c": self._call(self.nvml.nvmlDeviceGetTemperature, handle, self.nvml.NVML_TEMPERATURE_GPU),
                "throttle": _reasons(self._call(self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle)),
            })
        return out

    # -- the sample -------------------------------------------------------------------
    def set_target(self, run_id: str | None, pid: int | None) -> None:
        """The runner process whose memory and CPU are watched (None between runs)."""
        self._run, self._pid = run_id, pid

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - NotSupported, NoPermission, GpuIsLost, ...
            return None

    def sample(self) -> dict[str, Any]:
        pid, run = self._pid, self._run
        event: dict[str, Any] = {"type": "gpu", "t": time.monotonic(), "run": run}
        if self.nvml is not None:
            event["gpus"] = [self._sample_gpu(i, h, pid) for i, h in enumerate(self.handles)]
        event["host"] = self._sample_process(pid)
        return event

    def _sample_gpu(self, index: int, handle: Any, pid: int | None) -> dict[str, Any]:
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
        gpu["temp_c"] = self._call(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU)
        gpu["sm_clock_mhz"] = self._call(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM)
        gpu["throttle"] = _reasons(self._call(nv.nvmlDeviceGetCurrentClocksThrottleReasons, handle))
        gpu["proc_mem"] = self._process_memory(handle, pid)
        return gpu

    def _is_lost(self, handle: Any) -> bool:
        try:
            self.nvml.nvmlDeviceGetUtilizationRates(handle)
        except Exception as exc:  # noqa: BLE001
            lost_cls = getattr(self.nvml, "NVMLError_GpuIsLost", None)
            return lost_cls is not None and isinstance(exc, lost_cls)
        return False

    def _process_memory(self, handle: Any, pid: int | None) -> int | None:
        if pid is None:
            return None
        procs = self._call(self.nvml.nvmlDeviceGetComputeRunningProcesses, handle)
        if procs is None:
            return None
        family = self._family_pids(pid)
        used = [getattr(p, "usedGpuMemory", None) for p in procs if getattr(p, "pid", None) in family]
        used = [u for u in used if u is not None]
        return sum(used) if used else 0

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
        if pid is None:
            return {"cpu_percent": None, "rss": None}
        try:
            import psutil

            proc = self._procs.get(pid)
            if proc is None:
                self._procs = {pid: psutil.Process(pid)}
                proc = self._procs[pid]
                proc.cpu_percent(None)  # the first call only primes the counter
                return {"cpu_percent": None, "rss": proc.memory_info().rss}
            with proc.oneshot():
                if proc.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped: nothing to measure
                    return {"cpu_percent": None, "rss": None}
                cpu = proc.cpu_percent(None)
                rss = proc.memory_info().rss
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


def _reasons(bits: int | None) -> list[str] | None:
    return None if bits is None else [name for bit, name in THROTTLE_REASONS.items() if bits & bit]


def _milli(value: Any) -> float | None:
    return None if value is None else value / 1000.0
