"""One virtual environment per framework, made by one command and used without ``--python``.

TensorFlow and PyTorch pin different CUDA majors, so on a GPU machine they are best kept
apart: ``benchtui envs create [--gpu] [FRAMEWORK ...]`` makes ``<envs dir>/<framework>``
with uv (hard links from its cache: seconds, not gigabytes), and every plan then runs that
framework's runners with that environment's Python unless ``--python`` says otherwise.
A runner needs only its framework and NumPy: the runner package itself travels on PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from benchtui_runners import catalog

#: What each framework's environment installs; ``--gpu`` swaps in the builds that see a GPU.
#: Ranges, as in pyproject.toml (an exact torch pin can pick a local CPU-only build).
REQUIREMENTS: dict[str, list[str]] = {
    "torch": ["torch>=2.4", "torchvision>=0.19", "pretrainedmodels>=0.7.4", "six", "numpy"],
    "tensorflow": ["tensorflow>=2.16", "keras>=3.5", "numpy"],
    "keras-jax": ["keras>=3.5", "jax>=0.4.30", "numpy"],
    "keras-torch": ["keras>=3.5", "torch>=2.4", "numpy"],
}
GPU_REQUIREMENTS: dict[str, list[str]] = {
    # PyPI's Linux torch wheels are CUDA builds already.
    "torch": REQUIREMENTS["torch"],
    "tensorflow": ["tensorflow[and-cuda]>=2.16", "keras>=3.5", "numpy"],
    "keras-jax": ["keras>=3.5", "jax[cuda12]>=0.4.30", "numpy"],
    "keras-torch": REQUIREMENTS["keras-torch"],
}


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


def create(frameworks: list[str], gpu: bool, dry_run: bool = False, out=sys.stdout) -> int:  # noqa: ANN001
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
