"""GPUs are listed one way (``sampler.list_gpus``): the default plan, the plan screen's devices and the
command line's device checks all see the devices this job was given, in CUDA's order, as a session's
sampler records them. NVML is the sampler tests' fake."""

from __future__ import annotations

from typing import Any

import pytest

from benchtui.core.running import sampler as sampler_module
from benchtui.core.running.sampler import list_gpus
from test_devices_inherited import H100, H200, NAMES, four
from test_sampler import FakeNVML


def _node(monkeypatch: pytest.MonkeyPatch, nvml: Any, visible: str | None) -> None:
    monkeypatch.setattr(sampler_module, "load_nvml", lambda: sampler_module.init_nvml(nvml))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)


def test_the_list_is_the_devices_the_job_was_given_in_cudas_order(monkeypatch: pytest.MonkeyPatch) -> None:
    _node(monkeypatch, four(), None)
    found = list_gpus()
    assert found.names == tuple(NAMES) and found.nvml and found.status == "NVML: 4 GPU(s)"
    _node(monkeypatch, four(), "2,1")
    found = list_gpus()
    assert found.names == (H200, H100)  # cuda:0 is NVML's GPU 2
    assert [g["nvml_index"] for g in found.gpus] == [2, 1]
    assert "this job was given 2 of them" in found.status


def test_no_nvml_or_nothing_given_is_an_empty_list(monkeypatch: pytest.MonkeyPatch) -> None:
    assert list_gpus(use_nvml=False) == sampler_module.GpuList([], "NVML not used", False)
    _node(monkeypatch, FakeNVML(count=0), None)
    assert list_gpus().gpus == [] and list_gpus().status == "NVML found no GPU"
    _node(monkeypatch, four(), "")
    found = list_gpus()
    assert found.gpus == [] and found.nvml and "given none of them" in found.status


def test_the_plan_screen_names_the_devices_as_device_cuda_n_counts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchtui.app import probe_gpus

    _node(monkeypatch, four(), "3")
    probe = probe_gpus()
    assert probe.names == (NAMES[3],)  # "cuda:0 NVIDIA B200": the one --device cuda:0 runs on


def test_the_default_plan_follows_the_gpus_the_job_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job given no GPU runs on the CPU: its default plan is quick, not the study's hours."""
    from benchtui.cli import build_parser
    from benchtui.commands.run import chosen_preset

    args = build_parser().parse_args(["run"])
    _node(monkeypatch, four(), "1")
    assert chosen_preset(args) == "study"
    _node(monkeypatch, four(), "")
    assert chosen_preset(args) == "quick"
