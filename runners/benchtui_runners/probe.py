"""What ``benchtui doctor`` asks a framework besides its own description: the CUDA it was built for.

Run in the doctor's probe process after the framework's runner module has described it (so the
framework is imported already). The parent compares the major with what the NVIDIA driver
supports (NVML's CUDA driver version) and says "driver too old for this build" rather than "no GPU".
"""

from __future__ import annotations

from importlib import metadata

from benchtui_runners import catalog

#: JAX's CUDA builds are plugins, one distribution per CUDA major.
JAX_PLUGINS = ("jax-cuda13-plugin", "jax-cuda12-plugin", "jax-cuda11-plugin")


def cuda_build(framework: str) -> str | None:
    """The CUDA version the framework was built for ("13.2"; "13" when only the major is known),
    or None for a build without CUDA (or when it cannot be told)."""
    family = catalog.family(framework)
    backend = catalog.FRAMEWORKS[framework][1]
    try:
        if family == "torch" or backend == "torch":
            import torch

            return str(torch.version.cuda) if torch.version.cuda else None
        if backend == "tensorflow":
            import tensorflow as tf

            info = tf.sysconfig.get_build_info()
            return (
                str(info["cuda_version"]) if info.get("is_cuda_build") and info.get("cuda_version") else None
            )
        if backend == "jax":
            for name in JAX_PLUGINS:
                try:
                    metadata.version(name)
                except metadata.PackageNotFoundError:
                    continue
                return name.split("-")[1].removeprefix("cuda")
    except Exception:  # a half-installed framework: the doctor says what it can
        return None
    return None
