"""Loaded by Python at start-up when tests/fakegpu is on a runner's path (BENCHTUI_RUNNER_PYTHONPATH): fakes a GPU in a runner process.

``BENCHTUI_FAKE_GPU=torch,tensorflow,jax`` names the frameworks whose device layer is
faked (see fakegpu.py); each is patched right after its own import finishes, so a
runner imports nothing it would not import anyway. A framework not named sees the
machine as it is: no GPU. With any of them, the runner's clock (benchtui_runners.timing)
is followed too, so that each host wait knows the step it happened in.

``BENCHTUI_FAKE_GPU_PLANT=name[,name]`` plants bugs (see plants.py), each right after the
module it patches is imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_FAKES = {n.strip() for n in os.environ.get("BENCHTUI_FAKE_GPU", "").split(",") if n.strip()}
_PLANTS = [n.strip() for n in os.environ.get("BENCHTUI_FAKE_GPU_PLANT", "").split(",") if n.strip()]
#: module name -> what to do right after it is imported
_WANTED: dict[str, list] = {}


def _fake(name: str):
    def install(module):
        import fakegpu

        fakegpu.INSTALLERS[name](module)

    return install


if _FAKES:
    for _name in [*_FAKES, "benchtui_runners.timing"]:
        _WANTED.setdefault(_name, []).append(_fake(_name))
if _PLANTS:
    import plants

    for _name in _PLANTS:
        _module, _plant = plants.PLANTS[_name]  # an unknown name fails the run at start-up
        _WANTED.setdefault(_module, []).append(_plant)


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _WANTED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            for patch in _WANTED[name]:
                patch(module)

        spec.loader.exec_module = exec_module
        return spec


if _WANTED:
    sys.meta_path.insert(0, _PatchAfterImport())
