"""Canonical model ids -> constructors, one per framework family, with identical heads.

Every model ends in the same head on every side: global average pooling, then one
dense layer to ``num_classes`` logits (no dropout, no auxiliary head). Weights are
random; nothing is ever downloaded. Framework imports happen inside the functions
so that importing this module costs nothing.
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
    """A ``torch.nn.Module`` with random weights and the shared head."""
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


def build_keras(model_id: str, num_classes: int, image_size: int) -> Any:
    """A ``keras.Model`` from ``keras.applications`` with random weights and the shared head."""
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
    # float32 logits under mixed precision, as PyTorch autocast leaves its loss in float32.
    outputs = keras.layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name=model_id)
