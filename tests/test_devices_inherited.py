"""A scheduler's ``CUDA_VISIBLE_DEVICES`` is honoured, never overwritten (issue 28).

On a shared node a job is given some of the GPUs (Slurm, a container, a user): benchtui may use
those only. NVML lists every physical GPU in PCI order; the devices the job was given are matched
to them by index, GPU UUID (or a prefix of one) or MIG UUID, ``--device cuda:N`` is the N-th of
them, each runner is given exactly its device, and the sampler samples only those. NVML is the
sampler tests' fake (with UUIDs and MIG devices as pynvml names them); runners are real processes
with the device layer faked (tests/fakegpu).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model.efficiency import run_peak
from benchtui.core.model.session_model import RunState
from benchtui.core.plan.devices import given_devices, place
from benchtui.core.plan.plan import Plan, PlanError, RunSpec
from benchtui.core.running import sampler as sampler_module
from benchtui.core.running.engine import Engine
from benchtui.core.running.launcher import EXTRA_PATH_ENV
from benchtui.core.running.sampler import Sampler
from benchtui.core.store.session import SessionWriter
from test_sampler import FakeNVML

FAKEGPU = str(Path(__file__).resolve().parent / "fakegpu")
A100, H100, H200, B200 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200"
NAMES = [A100, H100, H200, B200]
UUIDS = [
    "GPU-0aa11b22-0000-0000-0000-000000000000",
    "GPU-1bb22c33-0000-0000-0000-000000000000",
    "GPU-2cc33d44-0000-0000-0000-000000000000",
    "GPU-2cc99e55-0000-0000-0000-000000000000",  # shares "GPU-2cc" with the one before
]


def four(**kw: Any) -> FakeNVML:
    """A node with four GPUs in PCI order."""
    return FakeNVML(count=4, names=NAMES, uuids=UUIDS, **kw)


def sampled(nvml: FakeNVML, inherited: str | None) -> Sampler:
    return Sampler(0.05, lambda s: None, nvml=nvml, inherited=inherited)


def jobs(inherited: str | None, nvml: FakeNVML | None = None) -> list[tuple[int, str]]:
    """(NVML index, what selects it) of each device the job was given."""
    return [(g["nvml_index"], g["cuda_visible"]) for g in sampled(nvml or four(), inherited).gpus()]


# -- which devices the job was given ------------------------------------------------------------
@pytest.mark.parametrize(
    "inherited, expected",
    [
        (None, [(0, "0"), (1, "1"), (2, "2"), (3, "3")]),  # nothing inherited: every GPU, by index
        ("2,3", [(2, UUIDS[2]), (3, UUIDS[3])]),  # indices in PCI order, each given on by UUID
        ("3,1", [(3, UUIDS[3]), (1, UUIDS[1])]),  # in the order given: cuda:0 is NVML GPU 3
        (f"{UUIDS[1]},{UUIDS[0]}", [(1, UUIDS[1]), (0, UUIDS[0])]),
        ("GPU-1bb2, 2", [(1, UUIDS[1]), (2, UUIDS[2])]),  # a unique prefix, spaces around an entry
        ("1,GPU-2cc,3", [(1, UUIDS[1])]),  # an ambiguous prefix names nothing: CUDA stops there
        ("0,7,1", [(0, UUIDS[0])]),  # no GPU 7 here: the rest is ignored, as CUDA does
        ("", []),  # every GPU hidden
        ("-1", []),
        ("2,2", [(2, UUIDS[2])]),
    ],
)
def test_the_devices_the_job_was_given_in_cudas_order(inherited: str | None, expected: list) -> None:
    assert jobs(inherited) == expected


def test_mig_slices_are_the_devices_of_a_gpu_split_by_mig_and_are_given_by_their_mig_uuid() -> None:
    nvml = four(slices={1: [(1, 0, "3g.40gb"), (2, 0, "3g.40gb")]})
    assert jobs(None, nvml) == [(0, "0"), (1, "MIG-fake-1-0"), (1, "MIG-fake-1-1"), (2, "2"), (3, "3")]
    assert jobs("MIG-fake-1-1", nvml) == [(1, "MIG-fake-1-1")]
    assert jobs("1", nvml) == [(1, "MIG-fake-1-0"), (1, "MIG-fake-1-1")]  # the GPU stands for its slices
    assert jobs(f"MIG-{UUIDS[1]}/2/0", nvml) == [(1, "MIG-fake-1-1")]  # the older MIG-GPU-<uuid>/GI/CI form
    assert jobs("MIG-fake-9", nvml) == []
    (slice_,) = sampled(nvml, "MIG-fake-1-1").gpus()
    assert slice_["index"] == 0 and slice_["nvml_index"] == 1 and slice_["mig_mode"] == "enabled"
    assert slice_["name"] == f"{H100} MIG 3g.40gb" and slice_["memory_total"] == 10 << 30
    assert slice_["mig"] == {
        "uuid": "MIG-fake-1-1",
        "gpu_instance": 2,
        "compute_instance": 0,
        "name": f"{H100} MIG 3g.40gb",
        "memory_total": 10 << 30,
    }


def test_given_devices_notes_an_entry_that_names_no_device() -> None:
    machine = [{"index": 0, "uuid": UUIDS[0], "mig_mode": "disabled"}]
    assert given_devices(machine, "0,GPU-nope")[1] == (
        "CUDA_VISIBLE_DEVICES=0,GPU-nope: 'GPU-nope' names no device NVML sees here, "
        "and CUDA ignores it and every entry after it"
    )
    assert given_devices(machine, "")[1] == "" and given_devices(machine, None)[1] == ""


# -- the sampler samples those --------------------------------------------------------------------
class CountingNVML(FakeNVML):
    """Which GPUs were sampled: the handles utilization was read for."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(count=4, names=NAMES, uuids=UUIDS, **kw)
        self.read: list[int] = []

    def nvmlDeviceGetUtilizationRates(self, h: int):
        self.read.append(h)
        return super().nvmlDeviceGetUtilizationRates(h)


def test_the_sampler_samples_only_the_gpus_the_job_was_given() -> None:
    nvml = CountingNVML()
    s = sampled(nvml, "3,1")
    sample = s.sample()
    assert [(g["index"], g["nvml_index"]) for g in sample["gpus"]] == [(0, 3), (1, 1)]
    assert sorted(set(nvml.read)) == [1, 3]
    gpus = s.gpus()
    assert [(g["index"], g["nvml_index"], g["name"], g["uuid"]) for g in gpus] == [
        (0, 3, B200, UUIDS[3]),
        (1, 1, H100, UUIDS[1]),
    ]
    assert all(g["inherited"] == "CUDA_VISIBLE_DEVICES=3,1" for g in gpus)
    assert s.status == (
        "NVML: 4 GPU(s); this job was given 2 of them by CUDA_VISIBLE_DEVICES=3,1 "
        "(--device cuda:N is the N-th; only these are sampled)"
    )
    s.watch_gpus([1])
    assert isinstance(s.energy_mj(), int)  # the job's GPU 1: NVML's GPU 1
    # Nothing inherited: NVML's list as it is, and no nvml_index in a sample (it is the index).
    whole = sampled(four(), None)
    assert [g["index"] for g in whole.sample()["gpus"]] == [0, 1, 2, 3]
    assert not any("nvml_index" in g for g in whole.sample()["gpus"]) and whole.status == "NVML: 4 GPU(s)"
    none = sampled(four(), "")
    assert none.gpus() == [] and none.sample()["gpus"] == []
    assert (
        none.status
        == "NVML: 4 GPU(s); this job was given none of them (CUDA_VISIBLE_DEVICES=''): no GPU is sampled"
    )


# -- the runner is given exactly its device, and a device the job was not given is refused ---------
def test_the_runner_is_given_exactly_the_chosen_device_among_those_inherited() -> None:
    gpus = sampled(four(), "2,3").gpus()
    first = place("auto", gpus, inherited="2,3")
    assert first.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": UUIDS[2]}
    assert first.gpu is not None and first.gpu["nvml_index"] == 2 and first.gpu["name"] == H200
    assert first.reason == (
        f"--device auto: the job's GPU 0 (NVML GPU 2), {H200}; "
        "cuda:N is the N-th GPU CUDA_VISIBLE_DEVICES=2,3 gave this job"
    )
    second = place("cuda:1", gpus, inherited="2,3")
    assert second.env["CUDA_VISIBLE_DEVICES"] == UUIDS[3] and second.gpu["uuid"] == UUIDS[3]  # type: ignore[index]
    assert second.nvml_index == 1 and second.runner_device == "cuda:0"  # the sampler's index: the job's 1
    both = place("cuda", gpus, devices=2, inherited="2,3")
    assert both.env["CUDA_VISIBLE_DEVICES"] == f"{UUIDS[2]},{UUIDS[3]}"
    assert "the job's GPUs 0 (NVML GPU 2" in both.reason and "CUDA_VISIBLE_DEVICES=2,3" in both.reason


@pytest.mark.parametrize(
    "device, devices, ids, message",
    [
        (
            "cuda:2",
            1,
            None,
            r"^--device cuda:2: this job was given 2 GPU\(s\) by CUDA_VISIBLE_DEVICES=2,3 \(cuda:0..cuda:1\)$",
        ),
        (
            "cuda",
            3,
            None,
            r"^--devices 3: this job was given 2 GPU\(s\) by CUDA_VISIBLE_DEVICES=2,3 \(0..1\)$",
        ),
        ("cuda", 2, [0, 2], r"^--devices 0,2: this job was given 2 GPU\(s\)"),
    ],
)
def test_a_device_the_job_was_not_given_is_refused(
    device: str, devices: int, ids: list | None, message: str
) -> None:
    gpus = sampled(four(), "2,3").gpus()  # NVML sees 4: GPU 2 of the node is not the job's cuda:2
    with pytest.raises(PlanError, match=message):
        place(device, gpus, devices, ids, inherited="2,3")


def test_a_job_given_no_gpu_trains_on_the_cpu_or_is_refused_one() -> None:
    assert (
        place("auto", [], inherited="").reason
        == "--device auto: this job was given no GPU (CUDA_VISIBLE_DEVICES='')"
    )
    assert place("auto", [], inherited="").kind == "cpu"
    with pytest.raises(
        PlanError, match=r"^--device cuda: this job was given no GPU \(CUDA_VISIBLE_DEVICES=-1\)$"
    ):
        place("cuda", [], inherited="-1")
    # Entries that name nothing NVML sees: CUDA would see no GPU either, so neither is one used here.
    none = sampled(four(), "GPU-nope,0").gpus()
    assert none == [] and place("auto", none, inherited="GPU-nope,0").kind == "cpu"
    with pytest.raises(
        PlanError, match=r"^--device cuda: NVML sees none of the GPUs CUDA_VISIBLE_DEVICES=GPU-nope,0 names"
    ):
        place("cuda", none, inherited="GPU-nope,0")
    assert (
        place("cuda", [], inherited=None).kind == "unchecked"
    )  # no NVML, nothing inherited: each runner checks


def test_a_mig_slice_is_given_by_its_mig_uuid_and_has_no_peak() -> None:
    gpus = sampled(four(slices={1: [(1, 0, "3g.40gb"), (2, 0, "3g.40gb")]}), "MIG-fake-1-1").gpus()
    placement = place("auto", gpus, inherited="MIG-fake-1-1")
    assert placement.env["CUDA_VISIBLE_DEVICES"] == "MIG-fake-1-1"
    assert placement.gpu is not None and placement.gpu["mig"]["uuid"] == "MIG-fake-1-1"
    assert "MIG slice MIG-fake-1-1" in placement.reason
    run = RunState(RunSpec("r", "torch", "resnet50", 1), 2)
    run.hello = {
        "device": {"type": "cuda", "name": H100, "assigned": placement.gpu},
        "settings": {"precision": "fp32"},
    }
    assert run_peak(run) is None  # a slice: some fraction of the card


def test_the_command_line_refuses_a_device_the_job_was_not_given_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2, the refusal as the last line on stderr, nothing started and no session folder made."""
    from benchtui.cli import main

    monkeypatch.setattr(sampler_module, "load_nvml", lambda: sampler_module.init_nvml(four()))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    code = main(
        ["run", "--headless", "--frameworks", "torch", "--models", "resnet50", "--device", "cuda:2",
         "--sessions-dir", str(tmp_path)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.splitlines()[-1] == (
        "benchtui: error: --device cuda:2: this job was given 2 GPU(s) by CUDA_VISIBLE_DEVICES=2,3 (cuda:0..cuda:1)"
    )
    assert "Traceback" not in err
    started = [
        line
        for f in tmp_path.rglob("events.jsonl")
        for line in f.read_text().splitlines()
        if "run_start" in line
    ]
    assert started == []
    assert list(tmp_path.iterdir()) == []  # refused before the session was made


# -- end to end: a real runner on the device it was given ------------------------------------------------
@pytest.mark.slow
def test_a_run_under_an_inherited_mask_trains_on_the_device_it_was_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "fakegpu.log"
    monkeypatch.setenv(EXTRA_PATH_ENV, FAKEGPU)
    monkeypatch.setenv("BENCHTUI_FAKE_GPU", "torch")
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_NAMES", ",".join(NAMES))
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_UUIDS", ",".join(UUIDS))
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_LOG", str(log))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,0")  # the scheduler's: NVML GPUs 3 and 0, in that order
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50"],
        image_size=32,
        samples=16,
        epochs=1,
        runs=1,
        batch_sizes={"resnet50": 8},
        device="cuda:1",
        threads=1,
    ).validate()
    writer = SessionWriter.create(plan, tmp_path)
    engine = Engine(plan, writer, sampler=Sampler(0.05, lambda s: None, nvml=four()))
    assert asyncio.run(engine.run()) == "complete"
    meta = json.loads((writer.path / "session.json").read_text())
    assert meta["placement"]["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": UUIDS[0]}
    assert [(g["index"], g["nvml_index"]) for g in meta["gpus"]] == [(0, 3), (1, 0)]
    events = [json.loads(line) for line in (writer.path / "events.jsonl").read_text().splitlines()]
    (hello,) = [e for e in events if e["type"] == "hello"]
    # The runner saw the job's cuda:1 (NVML's GPU 0, the A100; NVML's GPU 1 is not the job's) as its only device.
    assert hello["device"]["name"] == A100 and hello["device"]["index"] == 0
    assert hello["device"]["assigned"]["nvml_index"] == 0 and hello["device"]["assigned"]["uuid"] == UUIDS[0]
    samples = [e for e in events if e["type"] == "gpu"]
    assert samples and all([g["nvml_index"] for g in s["gpus"]] == [3, 0] for s in samples)
    assert all(s["watched"] == 1 for s in samples)
