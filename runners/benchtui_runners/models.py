"""Canonical model ids -> constructors, one per framework family, with identical heads.

Every model ends in the same head on every side: global average pooling, then one
dense layer (no dropout, no auxiliary head): ``num_classes`` logits with softmax
cross-entropy, or (``head="sigmoid"``, the study's) one sigmoid output with binary
cross-entropy. Weights are random; nothing is ever downloaded. Framework imports
happen inside the functions so that importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any

from benchtui_runners.catalog import MODELS
from benchtui_runners.config import Unavailable

_TORCHVISION = {
    "inception_v3": "inception_v3",
    "resnet50": "resnet50",
    "densenet121": "densenet121",
    "densenet169": "densenet169",
}
_PRETRAINEDMODELS = {
    "inception_resnet_v2": "inceptionresnetv2",
    "nasnet_large": "nasnetalarge",
    "pnasnet_large": "pnasnet5large",
}


def build_torch(model_id: str, num_classes: int) -> Any:
    """A ``torch.nn.Module`` with random weights and the shared head (``num_classes`` outputs)."""
    from torch import nn

    if model_id in _TORCHVISION:
        import torchvision

        ctor = getattr(torchvision.models, _TORCHVISION[model_id])
        kwargs: dict[str, Any] = {"weights": None, "num_classes": num_classes}
        if model_id == "inception_v3":
            # The study left the auxiliary head on in PyTorch only; it is off on both sides here.
            kwargs.update(aux_logits=False, init_weights=True)
        model = ctor(**kwargs)
        if model_id == "inception_v3":
            model.dropout = nn.Identity()  # Keras' head has no dropout
        return model

    try:
        import pretrainedmodels  # needs `six` at import
    except ImportError as exc:
        raise Unavailable(
            f"{MODELS[model_id].label} in PyTorch needs pretrainedmodels and six ({exc})"
        ) from exc
    model = getattr(pretrainedmodels, _PRETRAINEDMODELS[model_id])(num_classes=num_classes, pretrained=None)
    # Fixed-size pooling in these heads only fits 299/331 px inputs: make it adaptive.
    for attr in ("avgpool_1a", "avg_pool"):
        if hasattr(model, attr):
            setattr(model, attr, nn.AdaptiveAvgPool2d(1))
    if hasattr(model, "dropout"):
        model.dropout = nn.Identity()
    return model


def build_keras(model_id: str, num_classes: int, image_size: int, head: str = "softmax") -> Any:
    """A ``keras.Model`` from ``keras.applications`` with random weights and the shared head.

    ``head="sigmoid"``: one output through a sigmoid, as the study's Keras scripts
    (``Dense(1, activation="sigmoid")``); otherwise ``num_classes`` logits.
    """
    import keras

    info = MODELS[model_id]
    if info.keras_app is None:
        raise Unavailable(info.unavailable_reason)
    ctor = getattr(keras.applications, info.keras_app)
    shape = (image_size, image_size, 3)
    base = ctor(weights=None, include_top=False, input_shape=shape)
    inputs = keras.Input(shape=shape)
    x = base(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    # float32 outputs under mixed precision: the PyTorch runner computes its loss in float32 too.
    if head == "sigmoid":
        outputs = keras.layers.Dense(1, activation="sigmoid", dtype="float32")(x)
    else:
        outputs = keras.layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name=model_id)


def torch_loss(head: str) -> Any:
    """The loss of a head, on the model's float32 outputs: softmax cross-entropy, or the study's
    sigmoid then binary cross-entropy (``F.sigmoid`` + ``nn.BCELoss``, as its PyTorch scripts)."""
    import torch
    from torch import nn

    if head != "sigmoid":
        return nn.CrossEntropyLoss()
    bce = nn.BCELoss()

    def sigmoid_bce(outputs: Any, target: Any) -> Any:
        return bce(torch.sigmoid(outputs), target)

    return sigmoid_bce


def keras_loss(head: str) -> Any:
    """The Keras loss of a head (the sigmoid head's model already ends in its sigmoid)."""
    import keras

    if head == "sigmoid":
        return keras.losses.BinaryCrossentropy()
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)
