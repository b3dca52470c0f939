"""Bugs planted in a runner process, to show that the faithful fake catches them.

``BENCHTUI_FAKE_GPU_PLANT=name[,name]`` (read by sitecustomize) applies each named plant right
after the module it patches is imported, in the runner process only: no runner code is edited.
Each plant is the commonest form of a GPU bug, on the runner's real path:

- ``labels-on-cpu``: the PyTorch runner's synthetic labels are left on the CPU (``device``
  dropped), so the loss mixes a CUDA tensor with a CPU one;
- ``item-per-step``: the PyTorch loss is read on the host every step (``loss.item()``, as a
  loop that logs its loss each step does);
- ``gpt2-no-mask``: PyTorch's GPT-2 attends as transformers' stock ``sdpa`` does when it is
  called without an attention mask (its mask builder reads the positions on the host), and any
  ``attention_mask`` passed to it is dropped.
"""

from __future__ import annotations

import functools
from typing import Any

TORCH_RUNNER = "benchtui_runners.torch_runner"


def labels_on_cpu(torch_runner: Any) -> None:
    real = torch_runner._labels

    @functools.wraps(real)
    def labels(config: Any, count: int, device: Any = None) -> Any:
        return real(config, count)  # the device forgotten: a CPU tensor

    torch_runner._labels = labels


def item_per_step(torch_runner: Any) -> None:
    real = torch_runner._loss

    def loss_of(config: Any) -> Any:
        fn = real(config)

        def loss(outputs: Any, targets: Any) -> Any:
            value = fn(outputs, targets)
            loss.last = value.item()  # the planted per-step wait
            return value

        return loss

    torch_runner._loss = loss_of


def gpt2_no_mask(torch_runner: Any) -> None:
    real = torch_runner.build_torch

    @functools.wraps(real)
    def build(*args: Any, **kwargs: Any) -> Any:
        model = real(*args, **kwargs)
        for module in model.modules():
            config = getattr(module, "config", None)
            if config is not None and getattr(config, "model_type", "") == "gpt2":
                config._attn_implementation = "sdpa"  # transformers' stock attention and mask builder
            if type(module).__name__ == "GPT2LMHeadModel":
                forward = module.forward

                def without_mask(*a: Any, _forward: Any = forward, **k: Any) -> Any:
                    k.pop("attention_mask", None)
                    return _forward(*a, **k)

                module.forward = without_mask
        return model

    torch_runner.build_torch = build


#: name -> (module it patches, the patch)
PLANTS = {
    "labels-on-cpu": (TORCH_RUNNER, labels_on_cpu),
    "item-per-step": (TORCH_RUNNER, item_per_step),
    "gpt2-no-mask": (TORCH_RUNNER, gpt2_no_mask),
}
