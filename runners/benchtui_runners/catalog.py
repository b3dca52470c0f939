"""What can be benchmarked: frameworks, models, their limits and architectures. Plain data, stdlib only.

The parent reads this module too (it imports nothing), so plans can be checked
before any runner starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
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

#: What a model trains on: images (N, 3, H, W) / (N, H, W, 3), token ids (N, sequence length), or
#: (a user's own model) float tensors of a declared shape, the same layout on every side.
KINDS = ("image", "tokens", "tensor")
#: Groups of models: the study's seven, the networks people train today, and a user's own
#: (``--model-def``, a model file), registered by the plan that names them.
GROUPS = ("study", "modern", "custom")
#: Where the Keras side comes from: keras.applications, keras-hub (built from a configuration,
#: never from a preset: presets download weights), or benchtui (written here from keras.layers).
KERAS_SOURCES = ("keras.applications", "keras_hub", "benchtui", "custom")
#: Where the PyTorch side comes from.
TORCH_SOURCES = ("torchvision", "pretrainedmodels", "transformers", "custom")


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
    #: A user's own model: its definition (:func:`custom_model`), as the plan records it.
    definition: tuple[tuple[str, Any], ...] = ()

    @property
    def custom(self) -> dict[str, Any]:
        """A user's own model's definition as a dict ({} for the catalog's models)."""
        return dict(self.definition)

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

#: The catalog's own models (a user's are added to MODELS by ``register``, never to these).
BUILTIN_MODELS = frozenset(MODELS)
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
    if info.group == "custom":
        if not custom_entry(info.custom.get("builders") or {}, framework):
            return False, (
                f"no {FRAMEWORK_LABELS.get(framework, framework)} builder was given for {info.label} "
                f"(--model-def {framework}=MODULE:FUNCTION)"
            )
        return True, ""
    if family(framework) == "keras" and info.keras_app is None:
        return False, info.unavailable_reason
    return True, ""


# -- A user's own model -------------------------------------------------------------------------
#: ``MODULE:FUNCTION``: a dotted module path and a function in it (or an attribute path to one).
SPEC_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Keys of a definition's builders, losses and optimizers: a framework, or ``keras`` for every Keras backend.
DEF_KEYS = (*FRAMEWORKS, "keras")
CUSTOM_BATCH = 32  # a user's model's batch when neither its definition nor the plan names one
MAX_SHAPE_DIMS = 8
MAX_DIM = 1 << 20


def custom_entry(table: dict[str, str], framework: str) -> str:
    """The entry of ``table`` (builders, losses, optimizers) for ``framework``: its own, else the
    ``keras`` entry for a Keras backend; '' when there is none."""
    if framework in table:
        return table[framework]
    if framework in FRAMEWORKS and family(framework) == "keras":
        return table.get("keras", "")
    return ""


def _whole(value: Any, lo: int, hi: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def check_definition(raw: Any) -> dict[str, Any]:
    """A user's model definition, checked and completed; ValueError (one line) when it cannot be run.

    Plain data, checked without importing anything (the parent does this at plan time, the runner
    again): ``name``, ``label``, ``input`` (a KIND), ``shape`` (tensor: one sample's dimensions),
    ``vocab`` and ``seq_len`` (tokens), ``builders`` / ``losses`` / ``optimizers`` (DEF_KEYS ->
    ``MODULE:FUNCTION``), ``paths`` (folders put first on the runner's ``sys.path``),
    ``batch_size``, ``min_image_size``, ``file`` (the model file it was read from).
    """
    if not isinstance(raw, dict):
        raise ValueError("a model definition is a table of fields (name, input, builders, ...)")
    known = {
        "name",
        "label",
        "input",
        "shape",
        "vocab",
        "seq_len",
        "builders",
        "losses",
        "optimizers",
        "paths",
        "batch_size",
        "min_image_size",
        "file",
    }
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(
            f"unknown field {unknown[0]!r} in the model definition; fields: {', '.join(sorted(known))}"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(
            f"model name {name!r}: letters, digits, '_', '.' and '-', at most 64, starting with a letter or digit"
        )
    if name in BUILTIN_MODELS or name in ("all", "study", "modern"):
        raise ValueError(f"model name {name!r} is taken by benchtui's catalog; choose another")
    kind = raw.get("input", "image")
    if kind not in KINDS:
        raise ValueError(f"{name}: input {kind!r}: choose image, tokens or tensor")
    out: dict[str, Any] = {"name": name, "label": str(raw.get("label") or name)[:80], "input": kind}
    if kind == "tensor":
        shape = raw.get("shape")
        if (
            not isinstance(shape, list)
            or not 1 <= len(shape) <= MAX_SHAPE_DIMS
            or not all(_whole(d, 1, MAX_DIM) for d in shape)
        ):
            raise ValueError(
                f"{name}: a tensor input needs shape, one sample's dimensions (1 to {MAX_SHAPE_DIMS} whole "
                "numbers, e.g. [128] or [16, 64])"
            )
        out["shape"] = list(shape)
    elif "shape" in raw:
        raise ValueError(f"{name}: shape is for a tensor input ({kind} inputs take their size from the plan)")
    if kind == "tokens":
        vocab, seq_len = raw.get("vocab"), raw.get("seq_len")
        if not _whole(vocab, 2, 10**7) or not _whole(seq_len, 1, 1 << 20):
            raise ValueError(
                f"{name}: a tokens input needs vocab (2 or more) and seq_len (the context, 1 or more)"
            )
        out.update(vocab=vocab, seq_len=seq_len)
    for table in ("builders", "losses", "optimizers"):
        entries = raw.get(table, {})
        if not isinstance(entries, dict):
            raise ValueError(f'{name}: {table} is a table of FRAMEWORK = "MODULE:FUNCTION"')
        for key, spec in entries.items():
            if key not in DEF_KEYS:
                raise ValueError(
                    f"{name}: {table}: unknown framework {key!r}; choose from {', '.join(DEF_KEYS)}"
                )
            if not isinstance(spec, str) or not SPEC_RE.match(spec):
                raise ValueError(
                    f"{name}: {table}.{key} = {spec!r} is not MODULE:FUNCTION (e.g. mypkg.nets:build)"
                )
        out[table] = dict(entries)
    if not out["builders"]:
        raise ValueError(f'{name}: no builders: give at least one, e.g. torch = "mypkg.nets:build_torch"')
    paths = raw.get("paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise ValueError(f"{name}: paths is a list of folders")
    out["paths"] = list(paths)
    batch = raw.get("batch_size", CUSTOM_BATCH)
    size = raw.get("min_image_size", 1)
    if not _whole(batch, 1, 10**6) or not _whole(size, 1, 4096):
        raise ValueError(f"{name}: batch_size and min_image_size are whole numbers of 1 or more")
    out.update(batch_size=batch, min_image_size=size)
    if isinstance(raw.get("file"), str) and raw["file"]:
        out["file"] = raw["file"]  # the model file it was read from, for the record
    return out


def custom_model(definition: dict[str, Any]) -> ModelInfo:
    """The catalog entry of a user's own model, from its checked definition (:func:`check_definition`)."""
    kind = definition["input"]
    arch: tuple[tuple[str, Any], ...] = ()
    if kind == "tokens":
        arch = (("context", definition["seq_len"]), ("vocab", definition["vocab"]))
    return ModelInfo(
        definition["name"],
        definition["label"],
        definition["batch_size"],
        definition["min_image_size"],
        "custom",
        "custom",
        keras_source="custom",
        kind=kind,
        group="custom",
        # Images: counted at 224 px by ``benchtui parity`` unless --image-size says (runs use the plan's).
        native_size=definition.get("seq_len", 0) if kind == "tokens" else 224,
        arch=arch,
        definition=tuple(sorted(definition.items())),
    )


def register(definition: dict[str, Any]) -> ModelInfo:
    """Make a user's own model known by its name (to plans, runners and reports); its entry."""
    info = custom_model(check_definition(definition))
    MODELS[info.id] = info
    return info


def tokens_per_sample(model: str, seq_len: int) -> int:
    """Tokens in one sample: the sequence length for a token model, 0 for an image model."""
    return seq_len if MODELS[model].kind == "tokens" else 0


def extra_for(framework: str, model: str) -> str:
    """The pip extra that brings what ``framework`` needs to build ``model`` (for 'unavailable' reasons)."""
    info = MODELS[model]
    if family(framework) == "keras" and info.keras_source == "keras_hub":
        return "keras-hub"
    return FRAMEWORKS[framework][2]


# -- benchtui watch ------------------------------------------------------------------------------
#: ``benchtui watch`` records one run: whatever the user's command trains. Its framework is
#: WATCH_FRAMEWORK until the command's timing hooks say which it is: never in FRAMEWORKS, so no plan,
#: environment or check of the frameworks ever offers it. Its model is WATCH_MODEL: in MODELS (a watch
#: session loads, and every view labels its run) and BUILTIN_MODELS (no user model can take the name),
#: never in MODEL_ORDER or a group (no plan can ask for it; ``Plan.validate`` refuses it by name).
WATCH_FRAMEWORK = "command"
WATCH_MODEL = "watch"
FRAMEWORK_LABELS[WATCH_FRAMEWORK] = "command"
MODELS[WATCH_MODEL] = ModelInfo(
    WATCH_MODEL,
    "watched command",  # ``label_watch`` names it after the session's command
    1,
    1,
    "watch",
    None,
    "benchtui watch times the user's own script: it builds no model",
    keras_source="watch",
    kind="tensor",  # whatever the script feeds its model: counted in samples
    group="watch",
    native_size=0,
)
BUILTIN_MODELS = BUILTIN_MODELS | {WATCH_MODEL}


def label_watch(label: str) -> ModelInfo:
    """Name the watch model after what a session watches (its command, shortened): every view labels its run so."""
    info = replace(MODELS[WATCH_MODEL], label=label)
    MODELS[WATCH_MODEL] = info
    return info
