"""What can be benchmarked: frameworks, models, their limits and architectures. Plain data, stdlib only.

The parent reads this module too (it imports nothing), so plans can be checked
before any runner starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

#: What a model trains on: images (N, 3, H, W) / (N, H, W, 3), or token ids (N, sequence length).
KINDS = ("image", "tokens")
#: Groups of models: the study's seven, and the networks people train today.
GROUPS = ("study", "modern")
#: Where the Keras side comes from: keras.applications, keras-hub (built from a configuration,
#: never from a preset: presets download weights), or benchtui (written here from keras.layers).
KERAS_SOURCES = ("keras.applications", "keras_hub", "benchtui")
#: Where the PyTorch side comes from.
TORCH_SOURCES = ("torchvision", "pretrainedmodels", "transformers")


@dataclass(frozen=True)
class ModelInfo:
    """One network, how each framework family builds it, and what it needs.

    ``arch``: the numbers that define a transformer (layers, heads, widths, patch size,
    vocabulary, context), identical on both sides; builders read them from here.
    ``sides``: the architecture each side builds, in words, where they are known to differ
    (``{"torch": ..., "keras": ...}``); the measured parameters and FLOPs are the proof.
    ``twin``: a model id that trains the architecture-identical network on both sides.
    """

    id: str
    label: str
    study_batch_size: int  # the batch a plan uses when it names none (the study's, for its seven)
    min_image_size: int
    torch_source: str  # TORCH_SOURCES
    keras_app: str | None  # the Keras constructor's name; None: no Keras version
    unavailable_reason: str = ""
    keras_source: str = "keras.applications"  # KERAS_SOURCES
    kind: str = "image"  # KINDS
    group: str = "study"  # GROUPS
    native_size: int = 299  # images: the size it was designed for; tokens: its context
    patch_size: int = 0  # images: the size must be a multiple of it (ViT); 0: any size
    arch: tuple[tuple[str, Any], ...] = ()
    keras_kwargs: tuple[tuple[str, Any], ...] = ()  # passed to the Keras constructor
    sides: tuple[tuple[str, str], ...] = ()
    twin: str = ""

    @property
    def config(self) -> dict[str, Any]:
        """``arch`` as a dict."""
        return dict(self.arch)

    @property
    def context(self) -> int:
        """Token models: the longest sequence (positions) the model has; 0 for images."""
        return int(self.config.get("context", 0))

    def side(self, family: str) -> str:
        """The architecture a framework family builds, in words ('' where both are the same)."""
        return dict(self.sides).get(family, "")


_V1 = (
    "ResNet v1 (keras.applications: stride 2 in the first 1×1 convolution of a block, convolutions with bias)"
)
_V1_5 = "ResNet v1.5 (torchvision: stride 2 in the 3×3 convolution, convolutions without bias)"
_EFFNET_KERAS = (
    "keras.applications' EfficientNet (v1) always rescales and normalises its input inside the model "
    "(element-wise, a few layers; no include_preprocessing switch)"
)


def _image(
    id: str,
    label: str,
    batch: int,
    keras_app: str,
    native: int = 224,
    min_size: int = 32,
    keras_kwargs: tuple[tuple[str, Any], ...] = (),
    sides: tuple[tuple[str, str], ...] = (),
    twin: str = "",
    keras_source: str = "keras.applications",
) -> ModelInfo:
    """A modern CNN from torchvision and keras.applications."""
    return ModelInfo(
        id,
        label,
        batch,
        min_size,
        "torchvision",
        keras_app,
        group="modern",
        native_size=native,
        keras_kwargs=keras_kwargs,
        sides=sides,
        twin=twin,
        keras_source=keras_source,
    )


def _vit(id: str, label: str, batch: int, heads: int, width: int, layers: int = 12) -> ModelInfo:
    """A ViT with 16-pixel patches and the usual 4× MLP, from torchvision and keras-hub."""
    arch = (("patch_size", 16), ("layers", layers), ("heads", heads), ("width", width), ("mlp", 4 * width))
    return ModelInfo(
        id,
        label,
        batch,
        16,
        "torchvision",
        "ViTBackbone",
        keras_source="keras_hub",
        group="modern",
        native_size=224,
        patch_size=16,
        arch=arch,
    )


def _gpt2(id: str, label: str, batch: int, layers: int, heads: int, width: int, context: int) -> ModelInfo:
    """A GPT-2 shape (4× MLP, GPT-2's vocabulary) from Transformers and keras-hub."""
    arch = (
        ("layers", layers),
        ("heads", heads),
        ("width", width),
        ("mlp", 4 * width),
        ("context", context),
        ("vocab", 50257),
    )
    return ModelInfo(
        id,
        label,
        batch,
        0,
        "transformers",
        "GPT2Backbone",
        keras_source="keras_hub",
        kind="tokens",
        group="modern",
        native_size=context,
        arch=arch,
    )


_NO_PREPROCESSING = (("include_preprocessing", False),)

MODELS: dict[str, ModelInfo] = {
    m.id: m
    for m in (
        # The study's seven (their batch sizes are the study's).
        ModelInfo("inception_v3", "InceptionV3", 32, 75, "torchvision", "InceptionV3"),
        ModelInfo(
            "resnet50",
            "ResNet50",
            16,
            32,
            "torchvision",
            "ResNet50",
            sides=(("torch", _V1_5), ("keras", _V1)),
            twin="resnet50_v1_5",
        ),
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
        # Modern CNNs, from each framework's own library.
        _image(
            "resnet50_v1_5",
            "ResNet50 v1.5",
            16,
            "ResNet50V1_5",
            keras_source="benchtui",
            sides=(
                ("torch", _V1_5),
                (
                    "keras",
                    "ResNet v1.5 written from keras.layers the torchvision way (stride 2 in the 3×3 "
                    "convolution, convolutions without bias)",
                ),
            ),
        ),
        _image("resnet101", "ResNet101", 32, "ResNet101", sides=(("torch", _V1_5), ("keras", _V1))),
        _image("resnet152", "ResNet152", 32, "ResNet152", sides=(("torch", _V1_5), ("keras", _V1))),
        _image("densenet201", "DenseNet201", 16, "DenseNet201"),
        _image("vgg16", "VGG16", 32, "VGG16"),
        _image(
            "mobilenet_v3_large",
            "MobileNetV3Large",
            128,
            "MobileNetV3Large",
            keras_kwargs=_NO_PREPROCESSING,
        ),
        _image("efficientnet_b0", "EfficientNetB0", 64, "EfficientNetB0", sides=(("keras", _EFFNET_KERAS),)),
        _image(
            "efficientnet_b3",
            "EfficientNetB3",
            32,
            "EfficientNetB3",
            native=300,
            sides=(("keras", _EFFNET_KERAS),),
        ),
        _image(
            "efficientnet_v2_s",
            "EfficientNetV2S",
            32,
            "EfficientNetV2S",
            native=384,
            keras_kwargs=_NO_PREPROCESSING,
        ),
        _image("convnext_tiny", "ConvNeXtTiny", 64, "ConvNeXtTiny", keras_kwargs=_NO_PREPROCESSING),
        # Vision transformers: torchvision's VisionTransformer, keras-hub's ViTBackbone, one config.
        _vit("vit_b_16", "ViT-B/16", 64, heads=12, width=768),
        _vit("vit_ti_16", "ViT-Ti/16", 128, heads=3, width=192),
        # GPT-style decoders: Hugging Face Transformers' GPT-2, keras-hub's GPT2Backbone, one config.
        _gpt2("gpt2", "GPT-2 small", 8, layers=12, heads=12, width=768, context=1024),
        _gpt2("gpt2_mini", "GPT-2 mini", 16, layers=4, heads=4, width=256, context=256),
    )
}

MODEL_ORDER = list(MODELS)
#: The study's seven, in its order.
STUDY_MODELS = [m for m in MODEL_ORDER if MODELS[m].group == "study"]
#: Names ``--models`` takes for a group of models.
MODEL_GROUPS = {
    "all": MODEL_ORDER,
    "study": STUDY_MODELS,
    "modern": [m for m in MODEL_ORDER if MODELS[m].group == "modern"],
}


def family(framework: str) -> str:
    return FRAMEWORKS[framework][0]


def available(framework: str, model: str) -> tuple[bool, str]:
    """Whether ``framework`` has ``model`` at all (independent of what is installed)."""
    info = MODELS[model]
    if family(framework) == "keras" and info.keras_app is None:
        return False, info.unavailable_reason
    return True, ""


def tokens_per_sample(model: str, seq_len: int) -> int:
    """Tokens in one sample: the sequence length for a token model, 0 for an image model."""
    return seq_len if MODELS[model].kind == "tokens" else 0


def extra_for(framework: str, model: str) -> str:
    """The pip extra that brings what ``framework`` needs to build ``model`` (for 'unavailable' reasons)."""
    info = MODELS[model]
    if family(framework) == "keras" and info.keras_source == "keras_hub":
        return "keras-hub"
    return FRAMEWORKS[framework][2]
