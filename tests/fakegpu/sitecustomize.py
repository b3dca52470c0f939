"""Loaded by Python at start-up when tests/fakegpu is on a runner's path (BENCHTUI_RUNNER_PYTHONPATH): fakes a GPU in a runner process.

``BENCHTUI_FAKE_GPU=torch,tensorflow,jax`` names the frameworks whose device layer is
faked (see fakegpu.py); each is patched right after its own import finishes, so a
runner imports nothing it would not import anyway. A framework not named sees the
machine as it is: no GPU.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_WANTED = {n.strip() for n in os.environ.get("BENCHTUI_FAKE_GPU", "").split(",") if n.strip()}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name not in _WANTED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module):  # noqa: ANN001, ANN202
            run(module)
            import fakegpu

            fakegpu.INSTALLERS[name](module)

        spec.loader.exec_module = exec_module
        return spec


if _WANTED:
    sys.meta_path.insert(0, _PatchAfterImport())
