"""The NVML sampler against a fake NVML module: every failure becomes N/A, never a crash.

The real path (pynvml on an NVIDIA GPU) runs in test_real_nvml_when_a_gpu_is_present.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from benchtui.core.running.sampler import Sampler, load_nvml


class NVMLError(Exception):
    pass


class NotSupported(NVMLError):
    pass


class NoPermission(NVMLError):
    pass


class GpuIsLost(NVMLError):
    pass


class LibraryNotFound(NVMLError):
    pass


class FunctionNotFound(NVMLError):
    """What pynvml raises for a call the installed driver does not have."""


class NotFound(NVMLError):
    """NVML_ERROR_NOT_FOUND: e.g. an empty MIG slot in nvmlDeviceGetMigDeviceHandleByIndex."""


class InvalidArgument(NVMLError):
    pass


@dataclass(frozen=True)
class MigHandle:
    """A MIG device's handle: the slot of a GPU split by MIG (a distinct nvmlDevice_t in pynvml)."""

    gpu: int
    slot: int


#: nvmlDeviceGetMaxMigDeviceCount on an A100/H100: up to 7 slices.
MAX_MIG_DEVICES = 7


class FakeNVML:
    """Just enough of pynvml's surface, with failures where asked.

    ``uuids``: each GPU's UUID (default ``GPU-fake-<index>``). ``slices``: GPU index -> its MIG slices,
    each ``(gpu instance, compute instance, profile)``; a GPU with slices has MIG enabled, and its
    slices are NVML's MIG devices (``nvmlDeviceGetMigDeviceHandleByIndex``, empty slots NotFound), each
    with a UUID ``MIG-fake-<gpu>-<slot>``.
    """

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVMLError_GpuIsLost = GpuIsLost
    NVMLError_NotFound = NotFound

    def __init__(
        self,
        count: int = 1,
        fail: dict[str, Exception] | None = None,
        init_error: Exception | None = None,
        names: list[str] | None = None,
        procs: list | None = None,
        mig: bool = False,
        uuids: list[str] | None = None,
        slices: dict[int, list[tuple[int, int, str]]] | None = None,
        capability: tuple[int, int] | None = (9, 0),
    ):
        self.count = count
        self.fail = fail or {}
        self.init_error = init_error
        self.lost = False
        self.names = names or ["Fake H200"] * count
        self.procs = procs
        self.mig = mig
        self.uuids = uuids or [f"GPU-fake-{h}" for h in range(count)]
        self.slices = slices or {}
        self.capability = capability  # None: a driver that does not say (NVMLError_FunctionNotFound)
        self.calls: dict[str, int] = {}

    def _maybe(self, name: str, value):
        if self.lost:
            raise GpuIsLost("GPU is lost")
        if name in self.fail:
            raise self.fail[name]
        return value

    def nvmlInit(self) -> None:
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._maybe("driver", "560.1")

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12060

    def nvmlDeviceGetName(self, h: int | MigHandle) -> bytes:
        if isinstance(h, MigHandle):  # e.g. "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
            return self._maybe("name", f"{self.names[h.gpu]} MIG {self.slices[h.gpu][h.slot][2]}".encode())
        return self._maybe("name", self.names[h].encode())

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        if self.capability is None:
            raise NotFound("Function Not Found")
        return self._maybe("capability", self.capability)

    def nvmlDeviceGetUUID(self, h: int | MigHandle) -> str:
        if isinstance(h, MigHandle):
            return self._maybe("uuid", f"MIG-fake-{h.gpu}-{h.slot}")
        return self._maybe("uuid", self.uuids[h])

    def nvmlDeviceGetPciInfo(self, h: int):
        return self._maybe("pci", SimpleNamespace(busId=f"00000000:{h + 1:02x}:00.0".encode()))

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        return self._maybe("mig", [1, 1] if self.mig or h in self.slices else [0, 0])

    # -- MIG devices (pynvml's names; each raises as NVML does on a GPU without MIG) --------------------
    def _mig_enabled(self, h: int) -> None:
        if isinstance(h, MigHandle) or self.nvmlDeviceGetMigMode(h)[0] != 1:
            raise InvalidArgument("Invalid Argument")

    def nvmlDeviceGetMaxMigDeviceCount(self, h: int) -> int:
        self._mig_enabled(h)
        return self._maybe("mig", MAX_MIG_DEVICES)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: int, index: int) -> MigHandle:
        self._mig_enabled(h)
        if index >= MAX_MIG_DEVICES:
            raise InvalidArgument("Invalid Argument")
        if index >= len(self.slices.get(h, [])):
            raise NotFound("Not Found")
        return self._maybe("mig", MigHandle(h, index))

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, h: MigHandle) -> int:
        if not isinstance(h, MigHandle):
            raise InvalidArgument("Invalid Argument")
        return h.gpu

    def nvmlDeviceIsMigDeviceHandle(self, h: int | MigHandle) -> int:
        return int(isinstance(h, MigHandle))

    def nvmlDeviceGetGpuInstanceId(self, h: MigHandle) -> int:
        if not isinstance(h, MigHandle):
            raise InvalidArgument("Invalid Argument")
        return self.slices[h.gpu][h.slot][0]

    def nvmlDeviceGetComputeInstanceId(self, h: MigHandle) -> int:
        if not isinstance(h, MigHandle):
            raise InvalidArgument("Invalid Argument")
        return self.slices[h.gpu][h.slot][1]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._maybe("pcie", 5)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self._maybe("pcie", 5)

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._maybe("pcie", 16)

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._maybe("pcie", 16)

    def nvmlDeviceGetTemperatureV(self, h: int, kind: int) -> int:
        return self._maybe("tempv", 61)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._maybe("events", 0x4 | 0x20)

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return self._maybe("energy", int(time.monotonic() * 300_000))  # a steady 300 W, in mJ

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list:
        return self._maybe("procs", [])

    def nvmlDeviceGetMemoryInfo(self, h: int | MigHandle):
        if isinstance(h, MigHandle):  # a slice's own memory
            return self._maybe("memory", SimpleNamespace(used=1 << 30, total=10 << 30))
        return self._maybe("memory", SimpleNamespace(used=2 << 30, total=80 << 30))

    def nvmlDeviceGetUtilizationRates(self, h: int):
        return self._maybe("util", SimpleNamespace(gpu=97, memory=40))

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._maybe("power", 350_000)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self._maybe("power_limit", 700_000)

    def nvmlDeviceGetTemperature(self, h: int, kind: int) -> int:  # deprecated: TemperatureV first
        return self._maybe("temp", 60)

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return self._maybe("clock", 1980)

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return self._maybe("max_clock", 1980)

    def nvmlDeviceGetCurrentClocksThrottleReasons(
        self, h: int
    ) -> int:  # deprecated: ClocksEventReasons first
        return self._maybe("throttle", 0x8)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int):
        if self.procs is not None:
            return self._maybe("procs", self.procs)
        return self._maybe(
            "procs",
            [
                SimpleNamespace(pid=os.getpid(), usedGpuMemory=1 << 30),
                SimpleNamespace(pid=1, usedGpuMemory=5 << 30),
            ],
        )


def _sampler(nvml: FakeNVML) -> Sampler:
    return Sampler(0.05, lambda s: None, nvml=nvml)


def test_all_metrics_and_the_runner_process_memory() -> None:
    sampler = _sampler(FakeNVML())
    assert sampler.status == "NVML: 1 GPU(s)"
    sampler.set_target("run-1", os.getpid())
    sample = sampler.sample()
    (gpu,) = sample["gpus"]
    assert sample["type"] == "gpu" and sample["run"] == "run-1"
    assert (gpu["util"], gpu["mem_util"], gpu["temp_c"], gpu["sm_clock_mhz"]) == (97, 40, 61, 1980)
    assert gpu["power_w"] == 350.0 and gpu["mem_total"] == 80 << 30
    assert gpu["throttle"] == ["sw_power_cap", "sw_thermal"]
    assert gpu["proc_mem"] == 1 << 30  # only our process, not pid 1
    assert sample["host"]["rss"] > 0
    assert sample["host"]["system_busy_cores"] >= 0  # how busy the whole machine is, runner included
    (info,) = sampler.gpus()
    assert info["name"] == "Fake H200" and info["driver"] == "560.1" and info["power_limit_w"] == 700.0


@pytest.mark.parametrize("error", [NotSupported("Not Supported"), NoPermission("Insufficient Permissions")])
def test_unsupported_or_forbidden_metrics_are_none(error: Exception) -> None:
    fail = {
        name: error for name in ("power", "temp", "tempv", "throttle", "events", "procs", "clock", "energy")
    }
    sampler = _sampler(FakeNVML(fail=fail))
    sampler.set_target("r", os.getpid())
    (gpu,) = sampler.sample()["gpus"]
    assert gpu["util"] == 97  # what works still works
    assert gpu["power_w"] is None and gpu["temp_c"] is None and gpu["throttle"] is None
    assert gpu["proc_mem"] is None and gpu["sm_clock_mhz"] is None and gpu["energy_mj"] is None
    assert gpu["other_procs"] is None


def test_missing_library_means_no_nvml_and_psutil_only() -> None:
    sampler = _sampler(FakeNVML(init_error=LibraryNotFound("NVML Shared Library Not Found")))
    assert sampler.nvml is None and "NVML unavailable" in sampler.status and "Not Found" in sampler.status
    sampler.set_target("r", os.getpid())
    sampler.sample()  # primes psutil
    sample = sampler.sample()
    assert "gpus" not in sample and sample["host"]["rss"] > 0 and sample["host"]["cpu_percent"] is not None
    assert sampler.gpus() == []


def test_no_gpu_found() -> None:
    sampler = _sampler(FakeNVML(count=0))
    assert sampler.nvml is None and sampler.status == "NVML found no GPU"


def test_gpu_lost_mid_session_is_reported_not_raised() -> None:
    nvml = FakeNVML()
    sampler = _sampler(nvml)
    assert sampler.sample()["gpus"][0]["util"] == 97
    nvml.lost = True
    (gpu,) = sampler.sample()["gpus"]
    assert gpu == {"index": 0, "lost": True}
    assert sampler.sample()["gpus"][0]["lost"]  # and stays lost without asking NVML again


def test_thread_samples_at_its_interval_and_survives_callback_errors() -> None:
    seen: list[dict] = []

    def on_sample(sample: dict) -> None:
        seen.append(sample)
        if len(seen) == 2:
            raise RuntimeError("a bad consumer")

    sampler = Sampler(0.02, on_sample, nvml=FakeNVML())
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    assert len(seen) >= 5
    count = len(seen)
    time.sleep(0.1)
    assert len(seen) == count  # stopped means stopped


def test_real_nvml_when_a_gpu_is_present() -> None:
    nvml, status = load_nvml()
    if nvml is None:
        pytest.skip(status)
    sampler = Sampler(0.5, lambda s: None)
    sample = sampler.sample()
    assert sample["gpus"] and sample["gpus"][0]["mem_total"] > 0
    assert sampler.gpus()[0]["name"]
    sampler.stop()


def test_newer_nvml_calls_first_deprecated_ones_when_the_driver_lacks_them() -> None:
    sampler = _sampler(FakeNVML())
    (gpu,) = sampler.sample()["gpus"]
    assert gpu["temp_c"] == 61 and gpu["throttle"] == [
        "sw_power_cap",
        "sw_thermal",
    ]  # TemperatureV, ClocksEvent
    old = _sampler(FakeNVML(fail={"tempv": FunctionNotFound(), "events": FunctionNotFound()}))
    (gpu,) = old.sample()["gpus"]
    assert gpu["temp_c"] == 60 and gpu["throttle"] == ["hw_slowdown"]  # the deprecated calls answered


def test_identity_mig_and_link_are_recorded() -> None:
    (info,) = _sampler(FakeNVML(mig=True)).gpus()
    assert info["uuid"] == "GPU-fake-0" and info["pci_bus_id"] == "00000000:01:00.0"
    assert info["mig_mode"] == "enabled" and info["pcie_link"] == {
        "gen": 5,
        "max_gen": 5,
        "width": 16,
        "max_width": 16,
    }
    assert info["temp_c"] == 61


def test_runner_memory_is_na_not_zero_when_nvml_reports_another_pid_namespace() -> None:
    import psutil

    foreign = max(psutil.pids()) + 100_000  # a host pid that this namespace does not have
    sampler = _sampler(FakeNVML(procs=[SimpleNamespace(pid=foreign, usedGpuMemory=3 << 30)]))
    sampler.set_target("r", os.getpid())
    (gpu,) = sampler.sample()["gpus"]
    assert gpu["proc_mem"] is None and gpu["other_procs"] is None  # unknown, never "0 B" or "1 other"
    unknown = _sampler(FakeNVML(procs=[SimpleNamespace(pid=os.getpid(), usedGpuMemory=None)]))
    unknown.set_target("r", os.getpid())
    assert unknown.sample()["gpus"][0]["proc_mem"] is None  # usedGpuMemory None: N/A


def test_other_processes_on_the_gpu_are_counted_and_the_tree_scanned_once_per_sample() -> None:
    sampler = _sampler(FakeNVML(count=4))
    scans = []
    real = sampler._family_pids
    sampler._family_pids = lambda pid: scans.append(pid) or real(pid)  # type: ignore[method-assign]
    sampler.set_target("r", os.getpid())
    sampler.watch_gpu(2)
    sample = sampler.sample()
    assert len(scans) == 1  # not once per GPU
    assert sample["watched"] == 2
    assert all(g["other_procs"] == 1 and g["other_mem"] == 5 << 30 for g in sample["gpus"])  # pid 1


def test_energy_counter_of_the_watched_gpu() -> None:
    sampler = _sampler(FakeNVML(count=2))
    assert sampler.energy_mj() is None  # no GPU chosen yet
    sampler.watch_gpu(1)
    first = sampler.energy_mj()
    time.sleep(0.05)
    assert first is not None and sampler.energy_mj() > first
    unsupported = _sampler(FakeNVML(fail={"energy": NotSupported()}))
    unsupported.watch_gpu(0)
    assert unsupported.energy_mj() is None


def test_runner_cpu_counts_the_children_it_started_and_reaped() -> None:
    """XLA compiles on a GPU through short-lived ptxas and nvlink processes that the runner starts and
    reaps between two samples: their CPU is the runner's, never "other processes" (seen on an H200:
    every Keras/JAX row flagged "other processes kept 1.0-1.9 cores busy" on an idle machine)."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
    runner = (
        "import subprocess, sys, time\n"
        f"for _ in range(3): subprocess.run([sys.executable, '-c', {burn!r}])\n"
        "print('done', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, text=True)
    try:
        sampler = _sampler(FakeNVML(init_error=LibraryNotFound("NVML Shared Library Not Found")))
        sampler.set_target("r", proc.pid)
        sampler.sample()  # primes the count, before the children start their work
        started = time.monotonic()
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        cpu = sampler.sample()["host"]["cpu_percent"]
        wall = time.monotonic() - started
        # 1.2 s of the children's CPU (and their interpreters' start) in `wall` seconds, all of it the runner's.
        assert cpu is not None and cpu >= 1.2 / wall * 100 * 0.8, (cpu, wall)
        idle = sampler.sample()["host"]["cpu_percent"]  # then the runner only sleeps
        time.sleep(0.5)
        idle = sampler.sample()["host"]["cpu_percent"]
        assert idle is not None and idle < 10
    finally:
        proc.kill()
        proc.wait()


def test_the_compute_capability_is_recorded_and_kept_in_the_placement() -> None:
    """--best chooses a precision by the GPU's compute capability: the sampler records NVML's (8, 6) as "8.6",
    the placement's GPU identity keeps it (what each run's config is given), and a driver that does not say
    leaves it out (the plan then takes amp-fp16, which every GPU runs)."""
    from benchtui.core.plan.devices import place
    from benchtui.core.plan.sweep import best_precision

    (info,) = _sampler(FakeNVML(capability=(8, 6))).gpus()
    assert info["capability"] == "8.6"
    placement = place("cuda", [info], inherited=None)
    assert placement.gpu is not None and placement.gpu["capability"] == "8.6"
    assert best_precision("torch", placement.gpu) == "amp-bf16"
    (older,) = _sampler(FakeNVML(capability=None)).gpus()
    assert "capability" not in older and "capability" not in (
        place("cuda", [older], inherited=None).gpu or {}
    )
    assert best_precision("torch", place("cuda", [older], inherited=None).gpu) == "amp-fp16"
