"""Installs that cannot mix CUDA majors (issue 28).

NVIDIA's CUDA 12 and CUDA 13 wheels of cuDNN, NCCL, NVSHMEM and cuSPARSELt install the same files;
an environment holding both loads, for one framework, a library built for another CUDA. Every
documented GPU install (``pip install -e '.[gpu]'``, ``benchtui envs create --gpu FRAMEWORK``) is
resolved by ``uv pip compile`` for a Linux x86_64 machine, without installing anything, and must
hold one CUDA major. The resolution needs the package registry: those tests are slow, and skip
(saying so) only when the registry cannot be reached.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchtui.core.plan import envs
from benchtui_runners import catalog
from support import ROOT


# -- what a package is built for, from its name and version ---------------------------------------
@pytest.mark.parametrize(
    "name, version, expected",
    [
        ("nvidia-cudnn-cu12", "9.28.0.42", ("nvidia-cudnn", 12)),
        ("nvidia_cudnn_cu13", "9.26.0.51", ("nvidia-cudnn", 13)),  # as a dist-info folder names it
        ("nvidia-nccl-cu12", "2.32.3", ("nvidia-nccl", 12)),
        ("nvidia-nvshmem-cu13", "3.7.2", ("nvidia-nvshmem", 13)),
        (
            "nvidia-cublas",
            "13.4.1.3",
            ("nvidia-cublas", 13),
        ),  # CUDA 13's unsuffixed wheels: the toolkit's version
        ("nvidia-cuda-runtime", "13.2.86", ("nvidia-cuda-runtime", 13)),
        ("nvidia-cuda-runtime-cu12", "12.9.79", ("nvidia-cuda-runtime", 12)),
        ("cuda-toolkit", "13.2.2", ("cuda-toolkit", 13)),
        ("cuda-bindings", "12.9.0", ("cuda-bindings", 12)),
        ("jax-cuda12-plugin", "0.7.2", ("jax-plugin", 12)),
        ("jax-cuda13-pjrt", "0.12.0.1", ("jax-pjrt", 13)),
        ("nvidia-cufft", "12.2.0.57", None),  # cuFFT numbers its own versions: CUDA 13's is 12.x
        ("nvidia-ml-py", "13.615.71", None),  # NVML's binding: no CUDA at all
        ("torch", "2.15.0", None),
        ("tensorflow", "2.21.0", None),
    ],
)
def test_the_cuda_major_of_a_package(name: str, version: str, expected: tuple[str, int] | None) -> None:
    assert envs.cuda_major(name, version) == expected


#: What `pip install -e '.[gpu]'` resolved to before issue 28 (torch 2.15, tensorflow[and-cuda] 2.21 and
#: jax[cuda12] in one environment), its NVIDIA part: both majors of cuDNN, NCCL and NVSHMEM.
MIXED = [
    ("cuda-toolkit", "13.2.2"),
    ("jax-cuda12-plugin", "0.12.0.1"),
    ("nvidia-cublas", "13.4.1.3"),
    ("nvidia-cublas-cu12", "12.9.3.13"),
    ("nvidia-cudnn-cu12", "9.28.0.42"),
    ("nvidia-cudnn-cu13", "9.26.0.51"),
    ("nvidia-cufft", "12.2.0.57"),
    ("nvidia-cufft-cu12", "11.4.1.4"),
    ("nvidia-nccl-cu12", "2.32.3"),
    ("nvidia-nccl-cu13", "2.30.7"),
    ("nvidia-nvshmem-cu12", "3.8.0"),
    ("nvidia-nvshmem-cu13", "3.7.2"),
    ("nvidia-ml-py", "13.615.71"),
    ("torch", "2.15.0"),
]


def test_two_majors_of_one_library_are_found_those_sharing_files_first() -> None:
    mixes = envs.cuda_mixes(MIXED)
    assert [m.library for m in mixes] == ["nvidia-cudnn", "nvidia-nccl", "nvidia-nvshmem", "nvidia-cublas"]
    cudnn = mixes[0]
    assert cudnn.majors == [12, 13] and cudnn.path == "nvidia/cudnn/lib/libcudnn*.so.9"
    assert cudnn.builds == ((12, "nvidia-cudnn-cu12", "9.28.0.42"), (13, "nvidia-cudnn-cu13", "9.26.0.51"))
    assert mixes[-1].path == ""  # cuBLAS 12 and 13 sit apart (nvidia/cublas, nvidia/cu13): mixed all the same
    assert envs.cuda_majors(MIXED) == {12, 13}
    one = [d for d in MIXED if "cu12" not in d[0] and "cuda12" not in d[0]]
    assert envs.cuda_mixes(one) == [] and envs.cuda_majors(one) == {13}


def test_an_interpreters_packages_are_read_from_its_facts() -> None:
    facts = {
        "path": [
            [
                "/env/site-packages",
                1,
                ["nvidia_cudnn_cu12-9.28.0.42.dist-info", 2],
                ["torch-2.15.0.dist-info", 3],
            ],
            ["/user/site-packages", 1, ["nvidia_cudnn_cu12-9.1.0.dist-info", 2], ["six.pth", 3]],  # shadowed
            ["/missing", None],
        ]
    }
    assert envs.dists_of(json.dumps(facts)) == [("nvidia-cudnn-cu12", "9.28.0.42"), ("torch", "2.15.0")]
    assert envs.dists_of("not json") == []


# -- each environment runs every model its framework offers -----------------------------------------
def _name(requirement: str) -> str:
    return envs.normalize(re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0])


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
@pytest.mark.parametrize("framework", list(catalog.FRAMEWORKS))
def test_each_environment_installs_what_every_model_of_its_framework_is_built_from(
    framework: str, gpu: bool
) -> None:
    installed = {_name(r) for r in (envs.GPU_REQUIREMENTS if gpu else envs.REQUIREMENTS)[framework]}
    family = catalog.family(framework)
    needed = set()
    for model in catalog.MODEL_ORDER:
        info = catalog.MODELS[model]
        if not catalog.available(framework, model)[0]:
            continue
        source = info.keras_source if family == "keras" else info.torch_source
        package = envs.SOURCE_PACKAGES[source]
        if package is not None:
            needed.add((model, package))
    assert needed, framework
    missing = sorted((model, package) for model, package in needed if package not in installed)
    assert not missing, f"{framework} environment cannot build: {missing}"


# -- every documented GPU install resolves to one CUDA major -----------------------------------------
def _uv() -> list[str]:
    found = envs._uv() or ([shutil.which("uv")] if shutil.which("uv") else None)  # type: ignore[list-item]
    if found is None:
        pytest.skip("uv is not installed here (pip install uv): it resolves installs without installing them")
    return found


#: Signs in uv's output that the registry could not be reached (and nothing else went wrong).
UNREACHABLE = ("dns error", "failed to lookup address", "connection refused", "client error (connect)",
               "operation timed out", "network is unreachable", "failed to fetch")  # fmt: skip


def compile_install(args: list[str], tmp_path: Path) -> list[tuple[str, str]]:
    """``uv pip compile`` for Linux x86_64 at this Python's version: the (name, version) it resolves to."""
    out = tmp_path / "resolved.txt"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    cmd = [*_uv(), "pip", "compile", "-q", "--no-header", "--no-annotate", "--python-version", version,
           "--python-platform", "x86_64-manylinux_2_28", "-o", str(out), *args]  # fmt: skip
    done = subprocess.run(
        cmd, capture_output=True, text=True, cwd=ROOT, timeout=600, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        said = done.stderr.lower()
        if any(sign in said for sign in UNREACHABLE) and "no solution" not in said:
            pytest.skip(f"the package registry cannot be reached: {done.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    pins = []
    for line in out.read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, _, version = line.split(";")[0].strip().partition("==")
            pins.append((envs.normalize(name), version.strip()))
    return pins


def one_major(pins: list[tuple[str, str]], what: str) -> int:
    mixes = envs.cuda_mixes(pins)
    assert not mixes, f"{what} holds two CUDA majors: " + "; ".join(
        f"{m.library}: {', '.join(f'{d} {v}' for _, d, v in m.builds)}" for m in mixes
    )
    majors = envs.cuda_majors(pins)
    cuda = sorted(f"{n} {v}" for n, v in pins if envs.cuda_major(n, v))
    assert len(majors) == 1, f"{what} holds CUDA majors {sorted(majors)}: {cuda}"
    return majors.pop()


@pytest.mark.slow
def test_pip_install_gpu_extra_holds_one_cuda_major(tmp_path: Path) -> None:
    pins = compile_install(["pyproject.toml", "--extra", "gpu"], tmp_path)
    names = dict(pins)
    assert one_major(pins, "pip install -e '.[gpu]'") == 13
    assert (
        "torch" in names and "jax-cuda13-plugin" in names and "keras-hub" in names and "transformers" in names
    )
    assert not any(
        n.endswith("-cu12") for n in names
    )  # TensorFlow's CUDA 12 libraries are in its own environment


@pytest.mark.slow
@pytest.mark.parametrize(
    "framework, major, built", [("torch", 13, "torch"), ("tensorflow", 12, "tensorflow"),
                                ("keras-jax", 13, "jax-cuda13-plugin"), ("keras-torch", 13, "torch")],
)  # fmt: skip
def test_each_gpu_environment_holds_one_cuda_major(
    framework: str, major: int, built: str, tmp_path: Path
) -> None:
    requirements = tmp_path / "requirements.in"
    requirements.write_text("\n".join(envs.GPU_REQUIREMENTS[framework]) + "\n")
    pins = compile_install([str(requirements)], tmp_path)
    assert one_major(pins, f"benchtui envs create --gpu {framework}") == major
    names = dict(pins)
    assert built in names
    if framework == "tensorflow":  # the GPU build: its CUDA libraries come with it
        assert "nvidia-cudnn-cu12" in names and "nvidia-nccl-cu12" in names
