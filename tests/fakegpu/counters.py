"""GPU activity counters for machines without a GPU: NVML GPM and DCGM, faked at their narrowest point.

- NVML GPM: the calls the sampler makes are pynvml's own wrappers (``nvmlGpmSampleAlloc``,
  ``nvmlGpmSampleGet``, ``nvmlGpmMetricsGet``, ...), run unchanged over a fake of the C library
  underneath them (``FakeGpmLibrary``): the structs are pynvml's, the version fields, sample handles and
  metric ids are checked as the driver checks them, and a wrong call fails here with the NVMLError
  the driver would give. ``install_gpm`` adds them to a fake NVML module (tests/test_sampler.py's
  ``FakeNVML``), whose device handles are the GPUs' indices.
- DCGM: ``FakeDcgm`` has the surface of DCGM's Python bindings the sampler uses (``pydcgm``'s handle,
  group and field group; ``dcgm_structs``), with a host engine that may or may not answer and GPUs
  that may or may not support the profiling fields.

Every GPM call is counted in ``FakeGpmLibrary.calls``: a test can see what one sample costs.
"""

from __future__ import annotations

import ctypes
import time
import types
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pynvml

#: The GPM calls the fake C library has, by their C names (pynvml's wrappers carry the same names).
GPM_CALLS = (
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
)
#: Activity (percent) of a fake GPU, by GPM metric.
DEFAULT_ACTIVITY = {
    pynvml.NVML_GPM_METRIC_SM_UTIL: 87.5,
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 41.25,
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 63.0,
}


def _address(pointer: Any) -> int | None:
    """The address a ``c_nvmlGpmSample_t`` holds (None for a null one)."""
    return ctypes.cast(pointer, ctypes.c_void_p).value


class FakeGpmLibrary:
    """The GPM part of libnvidia-ml, in Python, with the driver's argument rules.

    ``supported``: the device handles (GPU indices) that have GPM (Hopper and newer); ``activity``:
    per handle, metric id -> percent (``DEFAULT_ACTIVITY`` when a handle is not listed);
    ``driver_has_gpm``: False for a driver older than GPM (every call: FunctionNotFound);
    ``sample_error``: handle -> NVML error code that ``nvmlGpmSampleGet`` returns for it.
    """

    def __init__(
        self,
        supported: set[int] | frozenset[int] = frozenset({0}),
        activity: dict[int, dict[int, float]] | None = None,
        driver_has_gpm: bool = True,
        sample_error: dict[int, int] | None = None,
    ) -> None:
        self.supported = set(supported)
        self.activity = activity or {}
        self.driver_has_gpm = driver_has_gpm
        self.sample_error = sample_error or {}
        self.calls: Counter[str] = Counter()
        self._buffers: dict[int, ctypes.Array[ctypes.c_char]] = {}  # address -> the memory a sample is
        self._taken: dict[int, tuple[int, float, int]] = {}  # address -> (device, time, order) of its sample
        self._order = 0

    @property
    def live_samples(self) -> int:
        """Samples allocated and not freed (a leak shows here)."""
        return len(self._buffers)

    def function(self, name: str) -> Any:
        """What ``_nvmlGetFunctionPointer`` returns: the C function, or FunctionNotFound."""
        if not self.driver_has_gpm or name not in GPM_CALLS:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        call = getattr(self, "_" + name)

        def counted(*args: Any) -> int:
            self.calls[name] += 1
            return int(call(*args))

        return counted

    # -- the C functions (arguments as pynvml passes them: byref(...) or the value) --------
    def _nvmlGpmQueryDeviceSupport(self, device: Any, support_ref: Any) -> int:
        support = support_ref._obj
        if support.version != pynvml.NVML_GPM_SUPPORT_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        if not isinstance(device, int):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        support.isSupportedDevice = 1 if device in self.supported else 0
        return pynvml.NVML_SUCCESS

    def _nvmlGpmSampleAlloc(self, sample_ref: Any) -> int:
        buffer = ctypes.create_string_buffer(64)
        address = ctypes.addressof(buffer)
        self._buffers[address] = buffer
        ctypes.cast(ctypes.pointer(sample_ref._obj), ctypes.POINTER(ctypes.c_void_p)).contents.value = address
        return pynvml.NVML_SUCCESS

    def _nvmlGpmSampleFree(self, sample: Any) -> int:
        address = _address(sample)
        if address not in self._buffers:  # never allocated, or freed already
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        del self._buffers[address]
        self._taken.pop(address, None)
        return pynvml.NVML_SUCCESS

    def _nvmlGpmSampleGet(self, device: Any, sample: Any) -> int:
        address = _address(sample)
        if address not in self._buffers or not isinstance(device, int):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        if device not in self.supported:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        if device in self.sample_error:
            return self.sample_error[device]
        self._order += 1
        self._taken[address] = (device, time.monotonic(), self._order)
        return pynvml.NVML_SUCCESS

    def _nvmlGpmMetricsGet(self, request_ref: Any) -> int:
        request = request_ref._obj
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        if not 0 < request.numMetrics <= pynvml.NVML_GPM_METRIC_MAX:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        first, second = self._taken.get(_address(request.sample1)), self._taken.get(_address(request.sample2))
        if first is None or second is None:  # null, freed, or never filled by nvmlGpmSampleGet
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        if first[0] != second[0] or second[2] <= first[2]:  # two GPUs, or the samples the wrong way round
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        activity = self.activity.get(first[0], DEFAULT_ACTIVITY)
        for i in range(request.numMetrics):
            metric = request.metrics[i]
            if metric.metricId in activity:
                metric.nvmlReturn, metric.value = pynvml.NVML_SUCCESS, activity[metric.metricId]
            else:
                metric.nvmlReturn, metric.value = pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0
        return pynvml.NVML_SUCCESS


def gpm_wrappers(library: FakeGpmLibrary) -> dict[str, Any]:
    """pynvml's own GPM functions, their C calls going to ``library`` (pynvml itself is not touched)."""
    namespace = dict(vars(pynvml))
    namespace["_nvmlGetFunctionPointer"] = library.function
    return {
        name: types.FunctionType(
            getattr(pynvml, name).__code__, namespace, name, getattr(pynvml, name).__defaults__
        )
        for name in GPM_CALLS
    }


def install_gpm(nvml: Any, library: FakeGpmLibrary) -> Any:
    """Give a fake NVML module pynvml's GPM calls, structs and constants, over ``library``; returns ``nvml``."""
    for name, function in gpm_wrappers(library).items():
        setattr(nvml, name, function)
    for name in dir(pynvml):
        if name.startswith(("NVML_GPM_", "c_nvmlGpm")) or name == "NVML_SUCCESS":
            setattr(nvml, name, getattr(pynvml, name))
    nvml.gpm = library
    return nvml


# -- DCGM ----------------------------------------------------------------------------------
class DCGMError(Exception):
    """What DCGM's bindings raise (dcgm_structs.DCGMError), with its status code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.value = code


DCGM_ST_BADPARAM = -1
DCGM_ST_NOT_SUPPORTED = -6
DCGM_ST_CONNECTION_NOT_VALID = -14
DCGM_ST_DUPLICATE_KEY = -19
DCGM_ST_PROFILING_NOT_SUPPORTED = -41
PROFILING_FIELDS = range(1001, 1100)  # DCGM_FI_PROF_*
DCGM_FP64_BLANK = 140737488355328.0  # what a blank double holds (dcgmvalue.py): isBlank says so


class FakeDcgm:
    """DCGM's bindings as the sampler imports them: ``.pydcgm``, ``.dcgm_structs``, ``.dcgm_fields``.

    ``gpus``: DCGM's GPU id -> (UUID, field id -> ratio 0-1, or None: blank) of the GPUs
    it supports; ``profiling``: the GPU ids whose profiling fields can be watched; ``engine``:
    whether a host engine answers at the address asked for.
    """

    def __init__(
        self,
        gpus: dict[int, tuple[str, dict[int, float | None]]],
        profiling: set[int] | None = None,
        engine: bool = True,
    ) -> None:
        self.gpus = gpus
        self.profiling = set(gpus) if profiling is None else profiling
        self.engine = engine
        self.calls: Counter[str] = Counter()
        self.open_handles = 0
        self.groups: dict[str, set[int]] = {}
        self.field_groups: dict[str, list[int]] = {}
        self.watches: list[tuple[str, str, int, float, int]] = []
        fake = self
        self.dcgm_structs = SimpleNamespace(
            DCGM_GROUP_DEFAULT=0,
            DCGM_GROUP_EMPTY=1,
            DCGM_OPERATION_MODE_AUTO=1,
            DCGM_OPERATION_MODE_MANUAL=2,
            DCGMError=DCGMError,
        )
        self.dcgm_fields = SimpleNamespace(
            DCGM_FI_PROF_SM_ACTIVE=1002, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE=1004, DCGM_FI_PROF_DRAM_ACTIVE=1005
        )

        class DcgmHandle:
            def __init__(
                self,
                handle: Any = None,
                ipAddress: str | None = None,  # DCGM's own argument names
                opMode: int = 1,
                persistAfterDisconnect: bool = False,
                unixSocketPath: str | None = None,
                timeoutMs: int = 0,
            ) -> None:
                fake.calls["connect"] += 1
                if ipAddress is not None and unixSocketPath is not None:
                    raise DCGMError(DCGM_ST_BADPARAM, "Bad parameter passed to function")
                if ipAddress is None and unixSocketPath is None:
                    raise AssertionError(
                        "the sampler must not start an embedded host engine in its own process"
                    )
                if not fake.engine:
                    raise DCGMError(
                        DCGM_ST_CONNECTION_NOT_VALID, "Host engine connection invalid/disconnected"
                    )
                fake.open_handles += 1
                self.handle: Any = object()

            def GetSystem(self) -> Any:
                self._check()
                return SimpleNamespace(
                    discovery=SimpleNamespace(
                        GetAllSupportedGpuIds=lambda: list(fake.gpus),
                        GetGpuAttributes=self._attributes,
                    )
                )

            def _attributes(self, gpu_id: int) -> Any:
                self._check()
                if gpu_id not in fake.gpus:
                    raise DCGMError(DCGM_ST_BADPARAM, "Bad parameter passed to function")
                uuid = fake.gpus[gpu_id][0].encode()  # char arrays come back as bytes
                return SimpleNamespace(identifiers=SimpleNamespace(uuid=uuid))

            def _check(self) -> None:
                if self.handle is None:
                    raise DCGMError(
                        DCGM_ST_CONNECTION_NOT_VALID, "Host engine connection invalid/disconnected"
                    )

            def Shutdown(self) -> None:
                if self.handle is not None:
                    fake.open_handles -= 1
                    self.handle = None

        class DcgmFieldGroup:
            def __init__(
                self, dcgmHandle: Any, name: str = "", fieldIds: Any = None, fieldGroupId: Any = None
            ) -> None:
                dcgmHandle._check()
                if not name or name in fake.field_groups:
                    raise DCGMError(DCGM_ST_DUPLICATE_KEY, "Duplicate key passed to a function")
                if (
                    not isinstance(fieldIds, list)
                    or not fieldIds
                    or not all(isinstance(f, int) for f in fieldIds)
                ):
                    raise DCGMError(DCGM_ST_BADPARAM, "Bad parameter passed to function")
                fake.field_groups[name] = list(fieldIds)
                self.name, self.fieldIds, self.fieldGroupId = name, list(fieldIds), name

            def Delete(self) -> None:
                del fake.field_groups[self.name]

        class Samples:
            def __init__(self, group: Any) -> None:
                self.group = group

            def WatchFields(
                self, fieldGroup: Any, updateFreq: int, maxKeepAge: float, maxKeepSamples: int
            ) -> None:
                if (
                    not isinstance(updateFreq, int)
                    or updateFreq <= 0
                    or maxKeepAge <= 0
                    or maxKeepSamples < 0
                ):
                    raise DCGMError(DCGM_ST_BADPARAM, "Bad parameter passed to function")
                gpus = fake.groups[self.group.name]
                if any(f in PROFILING_FIELDS for f in fieldGroup.fieldIds) and not gpus <= fake.profiling:
                    raise DCGMError(DCGM_ST_PROFILING_NOT_SUPPORTED, "This GPU does not support profiling")
                fake.watches.append(
                    (self.group.name, fieldGroup.name, updateFreq, maxKeepAge, maxKeepSamples)
                )

            def UnwatchFields(self, fieldGroup: Any) -> None:
                fake.watches = [w for w in fake.watches if w[:2] != (self.group.name, fieldGroup.name)]

            def GetLatest(self, fieldGroup: Any) -> Any:
                fake.calls["GetLatest"] += 1
                self.group.handle._check()
                values: dict[int, dict[int, list[Any]]] = {}
                for gpu_id in sorted(fake.groups[self.group.name]):
                    readings = fake.gpus[gpu_id][1]
                    values[gpu_id] = {
                        f: [
                            SimpleNamespace(
                                fieldId=f,
                                value=DCGM_FP64_BLANK if readings.get(f) is None else readings[f],
                                isBlank=readings.get(f) is None,
                                ts=int(time.time() * 1e6),
                            )
                        ]
                        for f in fieldGroup.fieldIds
                    }
                return SimpleNamespace(values=values)

        class DcgmGroup:
            def __init__(
                self, dcgmHandle: Any, groupId: Any = None, groupName: str | None = None, groupType: int = 1
            ) -> None:
                dcgmHandle._check()
                if groupId is None and groupName is None:
                    raise Exception("Either groupId or groupName is required")  # pydcgm.DcgmException
                if groupName in fake.groups:
                    raise DCGMError(DCGM_ST_DUPLICATE_KEY, "Duplicate key passed to a function")
                self.handle, self.name = dcgmHandle, groupName
                fake.groups[str(groupName)] = set()
                self.samples = Samples(self)

            def AddGpu(self, gpuId: int) -> None:
                if gpuId not in fake.gpus:
                    raise DCGMError(DCGM_ST_BADPARAM, "Bad parameter passed to function")
                fake.groups[str(self.name)].add(gpuId)

            def Delete(self) -> None:
                del fake.groups[str(self.name)]

        self.pydcgm = SimpleNamespace(
            DcgmHandle=DcgmHandle, DcgmGroup=DcgmGroup, DcgmFieldGroup=DcgmFieldGroup
        )
