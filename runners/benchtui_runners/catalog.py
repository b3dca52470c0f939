"""What can be benchmarked: frameworks, models, their limits. Plain data, stdlib only.

The parent reads this module too (it imports nothing), so plans can be checked
before any runner starts.
"""

from __future__ import annotations

from dataclasses import dataclass

# Framework id -> (runner family, Keras backend or None, pip extra that installs it).
FRAMEWORKS: dict[str, tuple[str, str | None, str]] = {
    "torch": ("torch", None, "torch"),
    "tensorflow": ("keras", "tensorflow", "tensorflow"),
    "keras-jax": ("keras", "jax", "keras-jax"),
    "keras-torch": ("keras", "torch", "keras-torch"),
}

FRAMEWORK_LABELS = {
    "torch": "PyTorch",
    "tensorflow": "tf.keras",
    "keras-jax": "Keras/JAX",
    "keras-torch": "Keras/torch",
}


@dataclass(frozen=True)
class ModelInfo:
    """One of the study's networks and how each framework family builds it."""

    id: str
    label: str
    study_batch_size: int
    min_image_size: int
    torch_source: str  # "torchvision" or "pretrainedmodels"
    keras_app: str | None  # keras.applications constructor name; None: no Keras version
    unavailable_reason: str = ""


MODELS: dict[str, ModelInfo] = {
    m.id: m
    for m in (
        ModelInfo("inception_v3", "InceptionV3", 32, 75, "torchvision", "InceptionV3"),
        ModelInfo("resnet50", "ResNet50", 16, 32, "torchvision", "ResNet50"),
        ModelInfo("densenet121", "DenseNet121", 12, 32, "torchvision", "DenseNet121"),
        ModelInfo("densenet169", "DenseNet169", 8, 32, "torchvision", "DenseNet169"),
        ModelInfo(
            "inception_resnet_v2",
            "InceptionResNetV2",
            12,
            75,
            "pretrainedmodels",
            "InceptionResNetV2",
        ),
        ModelInfo("nasnet_large", "NASNet", 4, 64, "pretrainedmodels", "NASNetLarge"),
        ModelInfo(
            "pnasnet_large",
            "PNASNet",
            4,
            64,
            "pretrainedmodels",
            None,
            "keras.applications has no PNASNet",
        ),
    )
}

MODEL_ORDER = list(MODELS)


def family(framework: str) -> str:
    return FRAMEWORKS[framework][0]


def available(framework: str, model: str) -> tuple[bool, str]:
    """Whether ``framework`` has ``model`` at all (independent of what is installed)."""
    info = MODELS[model]
    if family(framework) == "keras" and info.keras_app is None:
        return False, info.unavailable_reason
    return True, ""
