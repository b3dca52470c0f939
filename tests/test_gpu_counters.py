"""SM, tensor-core and DRAM activity beside NVML's utilization: DCGM, else NVML GPM, else a plain reason.

NVML GPM runs through pynvml's own wrappers over a fake of the C library (tests/fakegpu/counters.py),
so the structs, versions and sample handles are used as on a Hopper GPU; DCGM through a fake of
its Python bindings. The sampler is the real one; a counter that fails never stops the sampling.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pynvml
import pytest

from benchtui.core.plan.plan import Plan
from benchtui.core.running import sampler as sampler_module
from benchtui.core.running.engine import Engine
from benchtui.core.running.sampler import COUNTERS, Sampler
from benchtui.core.store.session import SessionWriter, load_session
from fakegpu.counters import FakeDcgm, FakeGpmLibrary, install_gpm
from test_integration import FakeLauncher
from test_sampler import FakeNVML

NOT_INSTALLED = "SM/tensor/DRAM activity unavailable: DCGM is not installed"
READING = {"sm_active": 87.5, "tensor_active": 41.25, "dram_active": 63.0}  # the fake GPM's activity


@pytest.fixture(autouse=True)
def no_dcgm_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine has no DCGM, whatever is installed where the tests run: its bindings do not import."""
    monkeypatch.setitem(sys.modules, "pydcgm", None)  # None in sys.modules: ImportError
    monkeypatch.setattr(sampler_module, "DCGM_BINDINGS", ())


def gpm_nvml(count: int = 1, **library: Any) -> FakeNVML:
    return install_gpm(FakeNVML(count=count), FakeGpmLibrary(**library))


def counters_of(gpu: dict[str, Any]) -> dict[str, Any]:
    return {k: gpu[k] for k in COUNTERS if k in gpu}


def test_nvml_gpm_reads_sm_tensor_and_dram_activity_at_two_calls_per_gpu_per_sample() -> None:
    nvml = gpm_nvml(count=2, supported={0, 1})
    sampler = Sampler(0.05, lambda s: None, nvml=nvml)
    event = sampler.open_counters()
    assert event["type"] == "counters" and event["run"] is None and isinstance(event["t"], float)
    assert (event["available"], event["source"], event["reason"]) == (True, "NVML GPM", "")
    nvml.gpm.calls.clear()
    for _ in range(3):
        sample = sampler.sample()
        assert [counters_of(g) for g in sample["gpus"]] == [READING, READING]
        assert sample["gpus"][0]["util"] == 97  # NVML's utilization as before, the activity beside it
    # Each sample: one new GPM sample and one metrics call per GPU (the previous sample is reused).
    assert nvml.gpm.calls == {"nvmlGpmSampleGet": 6, "nvmlGpmMetricsGet": 6}
    sampler.stop()
    assert nvml.gpm.live_samples == 0  # every GPM sample freed


def test_gpm_on_some_gpus_says_which_have_none() -> None:
    nvml = gpm_nvml(count=2, supported={1})
    sampler = Sampler(0.05, lambda s: None, nvml=nvml)
    event = sampler.open_counters()
    assert event["available"] and event["source"] == "NVML GPM"
    assert event["reason"] == "no SM/tensor/DRAM activity for GPU 0 (no NVML GPM: Hopper or newer)"
    first, second = sampler.sample()["gpus"]
    assert counters_of(first) == {} and counters_of(second) == READING
    sampler.stop()


def test_a_gpu_without_gpm_and_no_dcgm_say_so_plainly_and_sampling_goes_on() -> None:
    nvml = gpm_nvml(supported=set())  # an A100: NVML answers, the GPU has no GPM
    sampler = Sampler(0.05, lambda s: None, nvml=nvml)
    event = sampler.open_counters()
    assert event == {
        "type": "counters",
        "t": event["t"],
        "run": None,
        "available": False,
        "source": "",
        "reason": f"{NOT_INSTALLED} and this GPU has no NVML GPM (Hopper or newer)",
    }
    (gpu,) = sampler.sample()["gpus"]
    assert gpu["util"] == 97 and counters_of(gpu) == {}
    assert nvml.gpm.live_samples == 0  # nothing allocated for a GPU that cannot use it


@pytest.mark.parametrize(
    ("nvml", "said"),
    [
        (lambda: gpm_nvml(driver_has_gpm=False), "NVML GPM did not answer"),  # a driver older than GPM
        (lambda: FakeNVML(), "this nvidia-ml-py has no NVML GPM calls"),  # a binding older than GPM
        (lambda: gpm_nvml(sample_error={0: pynvml.NVML_ERROR_NO_PERMISSION}), "NVML GPM sampling failed"),
    ],
)
def test_gpm_that_cannot_be_used_is_unavailable_with_its_reason(nvml: Any, said: str) -> None:
    sampler = Sampler(0.05, lambda s: None, nvml=nvml())
    event = sampler.open_counters()
    assert not event["available"] and event["source"] == ""
    assert event["reason"].startswith(NOT_INSTALLED + " and ") and said in event["reason"]
    assert counters_of(sampler.sample()["gpus"][0]) == {}


def test_without_nvml_or_on_the_cpu_there_is_nothing_to_read() -> None:
    event = Sampler(0.05, lambda s: None, use_nvml=False).open_counters()
    assert not event["available"] and event["reason"].startswith(
        "SM/tensor/DRAM activity unavailable: no NVIDIA GPU is sampled (NVML not used)"
    )
    nvml = gpm_nvml()
    cpu = Sampler(0.05, lambda s: None, nvml=nvml)
    cpu.watch_gpus([])  # the session's placement: the CPU
    event = cpu.open_counters()
    assert not event["available"] and event["reason"].endswith("the session runs on no GPU")
    assert not nvml.gpm.calls  # no GPM asked for a session on the CPU


def test_only_the_sessions_gpus_are_read() -> None:
    nvml = gpm_nvml(count=4, supported={0, 1, 2, 3})
    sampler = Sampler(0.05, lambda s: None, nvml=nvml)
    sampler.watch_gpus([2])
    assert sampler.open_counters()["reason"] == ""
    nvml.gpm.calls.clear()
    gpus = sampler.sample()["gpus"]
    assert [bool(counters_of(g)) for g in gpus] == [False, False, True, False]
    assert nvml.gpm.calls == {"nvmlGpmSampleGet": 1, "nvmlGpmMetricsGet": 1}
    sampler.stop()


def test_a_failing_gpm_reading_loses_that_sample_only() -> None:
    nvml = gpm_nvml()
    sampler = Sampler(0.05, lambda s: None, nvml=nvml)
    assert sampler.open_counters()["available"]
    nvml.gpm.sample_error[0] = pynvml.NVML_ERROR_GPU_IS_LOST
    (gpu,) = sampler.sample()["gpus"]
    assert gpu["util"] == 97 and counters_of(gpu) == {}
    del nvml.gpm.sample_error[0]
    assert counters_of(sampler.sample()["gpus"][0]) == READING
    sampler.stop()


def fake_dcgm(**options: Any) -> FakeDcgm:
    # DCGM numbers GPUs its own way: its GPU 7 is NVML's GPU 1 (matched by UUID). Ratios, 0-1.
    return FakeDcgm({7: ("GPU-fake-1", {1002: 0.5, 1004: None, 1005: 0.255})}, **options)


def test_dcgm_comes_first_its_ratios_become_percents_and_blank_values_are_left_out() -> None:
    dcgm = fake_dcgm()
    nvml = gpm_nvml(count=2, supported={0, 1})
    sampler = Sampler(0.25, lambda s: None, nvml=nvml, dcgm=dcgm)
    event = sampler.open_counters()
    assert event["available"] and event["source"] == "DCGM"
    assert event["reason"] == "no SM/tensor/DRAM activity for GPU 0 (DCGM does not profile it)"
    ((group, fields, update_us, keep_s, keep_n),) = dcgm.watches
    assert update_us == 250_000 and keep_s > 0 and keep_n == 0  # sampled by the host engine at our interval
    assert dcgm.field_groups[fields] == [1002, 1004, 1005] and dcgm.groups[group] == {7}
    first, second = sampler.sample()["gpus"]
    assert counters_of(first) == {} and counters_of(second) == {"sm_active": 50.0, "dram_active": 25.5}
    assert not nvml.gpm.calls  # GPM is not asked when DCGM answers
    sampler.stop()
    assert dcgm.groups == {} and dcgm.field_groups == {} and dcgm.watches == [] and dcgm.open_handles == 0


def test_dcgm_without_a_host_engine_falls_back_to_gpm_and_says_why() -> None:
    sampler = Sampler(0.05, lambda s: None, nvml=gpm_nvml(), dcgm=fake_dcgm(engine=False))
    event = sampler.open_counters()
    assert event["available"] and event["source"] == "NVML GPM"
    assert event["reason"].startswith("DCGM did not answer (Host engine connection invalid")
    assert counters_of(sampler.sample()["gpus"][0]) == READING
    sampler.stop()
    unprofiled = Sampler(
        0.05, lambda s: None, nvml=gpm_nvml(count=2, supported=set()), dcgm=fake_dcgm(profiling=set())
    )
    event = unprofiled.open_counters()
    assert not event["available"]
    assert event["reason"] == (
        "SM/tensor/DRAM activity unavailable: DCGM did not answer (This GPU does not support profiling) "
        "and these GPUs have no NVML GPM (Hopper or newer)"
    )


def test_dcgm_going_away_mid_session_loses_readings_not_samples() -> None:
    dcgm = fake_dcgm()
    sampler = Sampler(0.05, lambda s: None, nvml=gpm_nvml(count=2), dcgm=dcgm)
    assert sampler.open_counters()["source"] == "DCGM"
    assert sampler.counters is not None
    sampler.counters._handle.Shutdown()  # the host engine is gone
    sample = sampler.sample()
    assert [g["util"] for g in sample["gpus"]] == [97, 97] and not any(map(counters_of, sample["gpus"]))


def test_the_thread_sends_one_counters_event_before_its_samples() -> None:
    seen: list[dict[str, Any]] = []
    nvml = gpm_nvml()
    sampler = Sampler(0.02, seen.append, nvml=nvml)
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    kinds = [e["type"] for e in seen]
    assert kinds[0] == "counters" and kinds.count("counters") == 1 and kinds.count("gpu") >= 5
    assert seen[0]["available"] and all(counters_of(e["gpus"][0]) == READING for e in seen[1:])
    assert nvml.gpm.live_samples == 0


def test_a_session_records_the_counters_and_the_samples_carry_them(tmp_path: Path) -> None:
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=16,
        batch_sizes={"resnet50": 8},
        epochs=3,
        runs=1,
        device="auto",
        interval=0.05,
    ).validate()
    writer = SessionWriter.create(plan, tmp_path)
    engine = Engine(
        plan, writer, sampler=Sampler(0.05, lambda s: None, nvml=gpm_nvml()), launcher=FakeLauncher()
    )
    assert asyncio.run(engine.run()) == "complete"
    loaded = load_session(writer.path, keep_events=True)
    assert not loaded.warnings
    kinds = [e["type"] for e in loaded.events]
    (counters,) = [e for e in loaded.events if e["type"] == "counters"]
    assert counters["available"] and counters["source"] == "NVML GPM" and counters["reason"] == ""
    assert kinds.index("counters") < kinds.index("gpu")
    samples = [e for e in loaded.events if e["type"] == "gpu"]
    assert samples and all(counters_of(e["gpus"][0]) == READING for e in samples)
