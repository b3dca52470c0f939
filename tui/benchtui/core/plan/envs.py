"""One virtual environment per framework, made by one command and used without ``--python``.

``benchtui envs create [--gpu] [FRAMEWORK ...]`` makes ``<envs dir>/<framework>`` with uv (hard links
from its cache: seconds, not gigabytes), and every plan then runs that framework's runners with that
environment's Python unless ``--python`` says otherwise. A runner needs its framework, NumPy and
the packages its framework's models come from (torchvision, pretrainedmodels and Transformers for
PyTorch; keras-hub for Keras's ViTs and GPT-2): the runner package itself travels on PYTHONPATH.

One CUDA major per environment. NVIDIA's wheels for CUDA 12 and CUDA 13 put cuDNN, NCCL, NVSHMEM
and cuSPARSELt at the same paths (``nvidia/cudnn/lib/libcudnn*.so.9``, ``nvidia/nccl/lib/libnccl.so.2``):
in one environment whichever installed last wins, and a framework built for the other CUDA loads a
library that is not its own. PyTorch (PyPI's Linux wheels from 2.11) and JAX's ``cuda13`` plugin
are CUDA 13 builds; TensorFlow's ``and-cuda`` libraries are CUDA 12, so TensorFlow's GPU build
lives in an environment of its own. ``cuda_major`` and ``cuda_mixes`` tell, from distribution
names and versions alone, which CUDA major a package is built for and where one environment holds
two of the same library (``benchtui doctor``, and the test that resolves every documented install).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from benchtui_runners import catalog

#: The packages each framework's models come from (catalog.TORCH_SOURCES / KERAS_SOURCES): an
#: environment without them cannot run every model its framework offers.
MODEL_PACKAGES: dict[str, list[str]] = {
    "torch": ["torchvision>=0.19", "pretrainedmodels>=0.7.4", "six", "transformers>=4.40"],
    # keras-hub (the ViTs and GPT-2) requires tensorflow-text, which brings a TensorFlow: the plain
    # build, without CUDA libraries of its own, so it adds no CUDA major to a JAX or torch environment.
    "keras": ["keras>=3.5", "keras-hub>=0.20"],
}
#: Which distribution each model source needs (``None``: benchtui's own code, or the user's).
SOURCE_PACKAGES: dict[str, str | None] = {
    "torchvision": "torchvision",
    "pretrainedmodels": "pretrainedmodels",
    "transformers": "transformers",
    "keras.applications": "keras",
    "keras_hub": "keras-hub",
    "benchtui": None,
    "custom": None,
}
#: What each framework's environment installs; ``--gpu`` swaps in the builds that see a GPU.
#: Ranges, as in pyproject.toml (an exact torch pin can pick a local CPU-only build).
REQUIREMENTS: dict[str, list[str]] = {
    "torch": ["torch>=2.4", *MODEL_PACKAGES["torch"], "numpy"],
    "tensorflow": ["tensorflow>=2.16", *MODEL_PACKAGES["keras"], "numpy"],
    "keras-jax": ["jax>=0.4.30", *MODEL_PACKAGES["keras"], "numpy"],
    "keras-torch": ["torch>=2.4", *MODEL_PACKAGES["keras"], "numpy"],
}
GPU_REQUIREMENTS: dict[str, list[str]] = {
    # PyPI's Linux torch wheels are CUDA builds already (CUDA 13 from torch 2.11).
    "torch": REQUIREMENTS["torch"],
    # CUDA 12: TensorFlow's own CUDA libraries, which no other framework here shares.
    "tensorflow": ["tensorflow[and-cuda]>=2.16", *MODEL_PACKAGES["keras"], "numpy"],
    "keras-jax": ["jax[cuda13]>=0.7.2", *MODEL_PACKAGES["keras"], "numpy"],
    "keras-torch": REQUIREMENTS["keras-torch"],
}

#: The oldest NVIDIA driver (Linux) that runs each CUDA major's builds: NVIDIA's minor version
#: compatibility (docs.nvidia.com/deploy/cuda-compatibility): 13.x needs 580+, 12.x 525+, 11.x 450+.
DRIVER_FOR_CUDA = {11: 450, 12: 525, 13: 580}


# -- CUDA majors of installed or resolved packages ----------------------------------------------------
#: NVIDIA's unsuffixed wheels (CUDA 13 on) whose version is the toolkit's: its major is the CUDA major.
#: (cuFFT, cuSOLVER, cuSPARSE, cuRAND and cuFile number their own versions: they say nothing alone.)
TOOLKIT_VERSIONED = {
    "cuda-toolkit",
    "cuda-bindings",
    "cuda-python",
    "nvidia-cublas",
    "nvidia-cuda-runtime",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-cupti",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-crt",
    "nvidia-cuda-cccl",
    "nvidia-cuda-profiler-api",
    "nvidia-cuda-sanitizer-api",
    "nvidia-nvjitlink",
    "nvidia-nvtx",
    "nvidia-nvvm",
    "nvidia-nvfatbin",
    "nvidia-nvptxcompiler",
    "nvidia-nvml-dev",
}
#: Libraries whose wheels for every CUDA major install the same files (so one overwrites the other).
SHARED_PATHS = {
    "nvidia-cudnn": "nvidia/cudnn/lib/libcudnn*.so.9",
    "nvidia-nccl": "nvidia/nccl/lib/libnccl.so.2",
    "nvidia-nvshmem": "nvidia/nvshmem/lib/libnvshmem*.so.3",
    "nvidia-cusparselt": "nvidia/cusparselt/lib/libcusparseLt.so.0",
}
_SUFFIX = re.compile(r"^(?P<lib>.+?)-cu(?P<major>\d{2})$")
_PLUGIN = re.compile(
    r"^(?P<lib>.+?)-cuda(?P<major>\d{2})x?(?P<rest>(-.+)?)$"
)  # jax-cuda12-plugin, cupy-cuda12x


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares them: ``nvidia_cudnn_cu12`` -> ``nvidia-cudnn-cu12``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def cuda_major(name: str, version: str) -> tuple[str, int] | None:
    """(the library, the CUDA major) a distribution is built for, from its name and version; None when
    it is not a CUDA build or says nothing by itself. ``nvidia-cudnn-cu12 9.1`` -> ("nvidia-cudnn", 12);
    ``nvidia-cublas 13.4`` -> ("nvidia-cublas", 13); ``jax-cuda13-plugin`` -> ("jax-plugin", 13)."""
    name = normalize(name)
    found = _SUFFIX.match(name)
    if found:
        return found["lib"], int(found["major"])
    found = _PLUGIN.match(name)
    if found:
        lib = found["lib"] + (found["rest"] or "")
        return lib, int(found["major"])
    if name in TOOLKIT_VERSIONED:
        head = version.split(".")[0]
        return (name, int(head)) if head.isdigit() and int(head) >= 10 else None
    return None


@dataclass(frozen=True)
class CudaMix:
    """A library present for more than one CUDA major in one environment."""

    library: str
    builds: tuple[tuple[int, str, str], ...]  # (CUDA major, distribution, version), oldest major first
    path: str  # the files both install, when they share them ("" when they sit apart)

    @property
    def majors(self) -> list[int]:
        return sorted({major for major, _, _ in self.builds})


def cuda_mixes(dists: list[tuple[str, str]]) -> list[CudaMix]:
    """Every library held for two CUDA majors among ``dists`` ((name, version), as installed or
    resolved), libraries sharing files first."""
    by_lib: dict[str, dict[str, tuple[int, str, str]]] = {}
    for name, version in dists:
        found = cuda_major(name, version)
        if found is not None:
            lib, major = found
            by_lib.setdefault(lib, {}).setdefault(normalize(name), (major, normalize(name), version))
    out = []
    for lib, builds in by_lib.items():
        if len({major for major, _, _ in builds.values()}) > 1:
            out.append(CudaMix(lib, tuple(sorted(builds.values())), SHARED_PATHS.get(lib, "")))
    return sorted(out, key=lambda mix: (not mix.path, mix.library))


def cuda_majors(dists: list[tuple[str, str]]) -> set[int]:
    """The CUDA majors that ``dists`` are built for."""
    return {found[1] for found in (cuda_major(n, v) for n, v in dists) if found is not None}


def dists_of(facts: str) -> list[tuple[str, str]]:
    """The (name, version) of every distribution an interpreter's facts list (doctor's
    ``_INTERPRETER_FACTS``: its ``sys.path`` and the dist-info folders in each), the first of a name only."""
    try:
        data = json.loads(facts)
    except ValueError:
        return []
    seen: dict[str, tuple[str, str]] = {}
    for entry in data.get("path") or [] if isinstance(data, dict) else []:
        for item in entry[2:] if isinstance(entry, list) else []:
            folder = item[0] if isinstance(item, list) and item and isinstance(item[0], str) else ""
            if not folder.endswith(".dist-info") or "-" not in folder:
                continue
            name, _, version = folder[: -len(".dist-info")].partition("-")
            seen.setdefault(normalize(name), (normalize(name), version))
    return list(seen.values())


def envs_dir() -> Path:
    """``$BENCHTUI_ENVS``, else ``$XDG_DATA_HOME/benchtui/envs`` (``~/.local/share/benchtui/envs``)."""
    if os.environ.get("BENCHTUI_ENVS"):
        return Path(os.environ["BENCHTUI_ENVS"]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "benchtui" / "envs"


def interpreter(framework: str) -> str | None:
    """The Python of the framework's own environment, if ``benchtui envs create`` made one."""
    python = envs_dir() / framework / "bin" / "python"
    return str(python) if python.is_file() and os.access(python, os.X_OK) else None


def _uv() -> list[str] | None:
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    found = shutil.which("uv")
    return [found] if found else None


def create_commands(framework: str, gpu: bool) -> list[list[str]]:
    """The commands that make the framework's environment (uv when there is one, else venv + pip)."""
    target = envs_dir() / framework
    python = str(target / "bin" / "python")
    requirements = (GPU_REQUIREMENTS if gpu else REQUIREMENTS)[framework]
    uv = _uv()
    if uv is not None:
        return [
            [*uv, "venv", "-q", "--allow-existing", "--python", sys.executable, str(target)],
            [*uv, "pip", "install", "-q", "--python", python, *requirements],
        ]
    return [
        [sys.executable, "-m", "venv", str(target)],
        [python, "-m", "pip", "install", "-q", *requirements],
    ]


def create(frameworks: list[str], gpu: bool, dry_run: bool = False, out: TextIO = sys.stdout) -> int:
    """Make each framework's environment; return 0, or 1 if any install failed."""
    failed = []
    for fw in frameworks:
        print(f"{fw}: {envs_dir() / fw}{' (GPU builds)' if gpu else ''}", file=out, flush=True)
        for cmd in create_commands(fw, gpu):
            print("  $ " + shlex.join(cmd), file=out, flush=True)
            if dry_run:
                continue
            if subprocess.run(cmd, stdin=subprocess.DEVNULL).returncode != 0:
                failed.append(fw)
                break
    if failed:
        print(f"could not create: {', '.join(failed)}", file=out)
        return 1
    return 0


def describe() -> list[dict[str, str]]:
    """Each framework's environment: where it is and whether it exists."""
    return [
        {"framework": fw, "path": str(envs_dir() / fw), "python": interpreter(fw) or ""}
        for fw in catalog.FRAMEWORKS
    ]
