"""Canonical model ids -> constructors, one per framework family, with identical heads.

Image models end in the same head on every side: global average pooling, then one
dense layer (no dropout, no auxiliary head): ``num_classes`` logits with softmax
cross-entropy, or (``head="sigmoid"``, the study's) one sigmoid output with binary
cross-entropy. The vision transformers end in their class token through one dense
layer. Token models (GPT-2) end in their tied embedding matrix: logits over the
vocabulary at every position, with softmax cross-entropy against the next tokens.
Weights are random; nothing is ever downloaded (builders of transformer libraries
force their offline switches on before importing them). Framework imports happen
inside the functions so that importing this module costs nothing.

What each side builds, where the two differ (the measured parameters and FLOPs are the proof):

- ConvNeXt-T: both libraries end the network in a LayerNorm (torchvision: on the pooled
  features, in its classifier; keras.applications, ``include_top=False``: on every
  position of the last feature map). Both are kept, so the weights agree exactly; the
  normalisation's position differs, an element-wise cost that is not counted as FLOPs.
- EfficientNet B0/B3: keras.applications' v1 always rescales and normalises its input
  (a ``Normalization`` layer whose mean and variance are statistics, not parameters).
- ResNet101/152 (and the study's ResNet50): keras.applications builds ResNet v1 (stride in
  the first 1x1 convolution, convolutions with bias), torchvision v1.5; ``resnet50_v1_5``
  is the architecture-identical twin, written here from keras.layers.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any

from benchtui_runners.catalog import MODELS, extra_for
from benchtui_runners.config import Unavailable

_TORCHVISION = {
    "inception_v3": "inception_v3",
    "resnet50": "resnet50",
    "densenet121": "densenet121",
    "densenet169": "densenet169",
    "resnet50_v1_5": "resnet50",
    "resnet101": "resnet101",
    "resnet152": "resnet152",
    "densenet201": "densenet201",
    "vgg16": "vgg16",
    "mobilenet_v3_large": "mobilenet_v3_large",
    "efficientnet_b0": "efficientnet_b0",
    "efficientnet_b3": "efficientnet_b3",
    "efficientnet_v2_s": "efficientnet_v2_s",
    "convnext_tiny": "convnext_tiny",
}
_PRETRAINEDMODELS = {
    "inception_resnet_v2": "inceptionresnetv2",
    "nasnet_large": "nasnetalarge",
    "pnasnet_large": "pnasnet5large",
}
#: Keras framework id of each Keras backend (for the pip extra named in an 'unavailable' reason).
_KERAS_FRAMEWORK = {"tensorflow": "tensorflow", "jax": "keras-jax", "torch": "keras-torch"}
#: GPT-2's dropout (embeddings, attention weights, residual branches), on both sides.
GPT2_DROPOUT = 0.1


def _offline() -> None:
    """Switch off every download path of the Hugging Face libraries before they are imported.

    Models are built from configurations, never from presets or hub ids, so nothing should
    be fetched; this makes sure of it (a fetch fails at once instead of reaching the network).
    """
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ[name] = "1"


def _missing(model_id: str, framework: str, package: str, exc: ImportError) -> Unavailable:
    """'ViT-B/16 in Keras needs keras-hub (pip install 'benchtui[keras-hub]')', one line; the
    import error follows when what is missing is not the package itself (a broken install)."""
    info = MODELS[model_id]
    side = "Keras" if framework in ("tensorflow", "keras-jax", "keras-torch") else "PyTorch"
    text = (
        f"{info.label} in {side} needs {package} (pip install 'benchtui[{extra_for(framework, model_id)}]')"
    )
    if (exc.name or "").split(".")[0] != package.replace("-", "_"):
        text += f": {exc}"
    return Unavailable(text.splitlines()[0])


def context_of(model_id: str, seq_len: int = 0) -> int:
    """The sequence length a token model is built for: ``seq_len``, or its context where that is 0."""
    info = MODELS[model_id]
    if seq_len > info.context:
        raise ValueError(f"{info.label} has {info.context} positions; sequence length {seq_len} is longer")
    return seq_len or info.context


# -- PyTorch ----------------------------------------------------------------------------------
def build_torch(
    model_id: str, num_classes: int, image_size: int = 224, seq_len: int = 0, last_only: bool = False
) -> Any:
    """A ``torch.nn.Module`` with random weights and the shared head (``num_classes`` outputs).

    ``image_size``: only the vision transformers need it (their position embeddings are
    sized for it). Token models take ``(batch, tokens)`` int64 ids and return float logits
    ``(batch, tokens, vocabulary)``, or with ``last_only`` the last position's alone
    ``(batch, 1, vocabulary)`` (inference: the first step of generation); ``num_classes``
    and ``seq_len`` do not change them (``seq_len`` is only checked against the context).
    """
    info = MODELS[model_id]
    if info.kind == "tokens":
        context_of(model_id, seq_len)
        return _torch_gpt2(model_id, last_only)
    if info.patch_size:
        return _torch_vit(model_id, num_classes, image_size)
    if model_id in _TORCHVISION:
        return _torch_cnn(model_id, num_classes)

    from torch import nn

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


def _torch_cnn(model_id: str, num_classes: int) -> Any:
    import torchvision
    from torch import nn

    ctor = getattr(torchvision.models, _TORCHVISION[model_id])
    kwargs: dict[str, Any] = {"weights": None, "num_classes": num_classes}
    if model_id == "inception_v3":
        # The study left the auxiliary head on in PyTorch only; it is off on both sides here.
        kwargs.update(aux_logits=False, init_weights=True)
    if model_id == "convnext_tiny":
        # keras.applications' ConvNeXtTiny has drop_path_rate 0.0; torchvision's default is 0.1.
        kwargs.update(stochastic_depth_prob=0.0)
    # EfficientNets: torchvision's stochastic_depth_prob 0.2 and Keras' drop_connect_rate 0.2 are
    # the same rule (rate x block index / blocks, per sample on the residual branch): left as they are.
    model = ctor(**kwargs)
    if model_id == "inception_v3":
        model.dropout = nn.Identity()  # Keras' head has no dropout
    elif model_id.startswith("efficientnet"):
        model.classifier = model.classifier[-1]  # Dropout + Linear -> Linear (its initialisation kept)
    elif model_id == "mobilenet_v3_large":
        # Linear(960, 1280) + Hardswish + Dropout + Linear -> Linear(960, n): keras.applications'
        # include_top=False ends at the 960-channel conv_1 (its 1280-wide conv_2 is in the top).
        model.classifier = _linear(model.classifier[0].in_features, num_classes)
    elif model_id == "vgg16":
        # Keras' include_top=False ends at block5_pool: no 7x7 pooling, no 4096-wide dense layers.
        model.avgpool = nn.AdaptiveAvgPool2d(1)
        model.classifier = _linear(512, num_classes)
    # convnext_tiny keeps LayerNorm2d + Flatten + Linear: keras.applications keeps its last
    # LayerNorm too with include_top=False (see the module's docstring).
    return model


def _linear(features: int, outputs: int) -> Any:
    """A dense layer initialised as torchvision initialises these classifiers (N(0, 0.01), zero bias)."""
    from torch import nn

    layer = nn.Linear(features, outputs)
    nn.init.normal_(layer.weight, 0, 0.01)
    nn.init.zeros_(layer.bias)
    return layer


def _torch_vit(model_id: str, num_classes: int, image_size: int) -> Any:
    from torchvision.models.vision_transformer import VisionTransformer

    arch = MODELS[model_id].config
    return VisionTransformer(
        image_size=image_size,
        patch_size=arch["patch_size"],
        num_layers=arch["layers"],
        num_heads=arch["heads"],
        hidden_dim=arch["width"],
        mlp_dim=arch["mlp"],
        dropout=0.0,
        attention_dropout=0.0,
        num_classes=num_classes,
    )


def _torch_gpt2(model_id: str, last_only: bool) -> Any:
    _offline()
    from torch import nn

    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as exc:
        raise _missing(model_id, "torch", "transformers", exc) from exc
    attention = _sdpa_without_mask()
    config = _gpt2_config(GPT2Config, model_id)
    if attention:  # else transformers' default, 'sdpa'
        config._attn_implementation = attention  # what GPT2LMHeadModel(config) attends with

    class LogitsOnly(nn.Module):
        """GPT2LMHeadModel called with token ids alone, returning only its logits (no cache).

        ``logits_to_keep`` 0: every position's; 1: the last position's (the head's matrix
        product on that position alone, as generation does). No attention mask: every
        position is a real token, and causality is SDPA's ``is_causal`` (see
        :func:`_sdpa_without_mask`). ``attention``: how it attends, in words, for the run's settings.
        """

        def __init__(self, lm: Any, keep: int, attention: str) -> None:
            super().__init__()
            self.lm = lm
            self.keep = keep
            self.attention = attention

        def forward(self, input_ids: Any) -> Any:
            return self.lm(input_ids=input_ids, use_cache=False, logits_to_keep=self.keep).logits

    text = TORCH_GPT2_ATTENTION if attention else TORCH_GPT2_ATTENTION_STOCK
    return LogitsOnly(GPT2LMHeadModel(config), 1 if last_only else 0, text)


def build_torch_lm(model_id: str) -> Any:
    """GPT-2 as transformers' ``GPT2LMHeadModel`` itself, for generation (``--task generate``): its own
    ``generate`` with a key/value cache, the same configuration as :func:`build_torch` (random weights,
    tied output projection), attending with transformers' stock ``'sdpa'`` and its mask builder. A
    cache longer than the tokens so far (the static cache: prompt + new tokens) needs the mask that
    hides its empty slots; the mask-free attention of :func:`build_torch` would read them."""
    _offline()
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as exc:
        raise _missing(model_id, "torch", "transformers", exc) from exc
    return GPT2LMHeadModel(_gpt2_config(GPT2Config, model_id))


def _gpt2_config(config_class: Any, model_id: str) -> Any:
    """The catalog's GPT-2 shape as transformers' ``GPT2Config`` (one statement for training and generation)."""
    arch = MODELS[model_id].config
    return config_class(
        vocab_size=arch["vocab"],
        n_positions=arch["context"],
        n_embd=arch["width"],
        n_layer=arch["layers"],
        n_head=arch["heads"],
        n_inner=arch["mlp"],
        resid_pdrop=GPT2_DROPOUT,
        embd_pdrop=GPT2_DROPOUT,
        attn_pdrop=GPT2_DROPOUT,
        # The defaults, stated: GELU's tanh approximation ("gelu_new", as keras-hub's
        # gelu_approximate), LayerNorm epsilon 1e-5, the output projection tied to the embedding.
        activation_function="gelu_new",
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=True,
    )


#: The name under which transformers' own SDPA attention is registered for benchtui's GPT-2.
SDPA_WITHOUT_MASK = "benchtui_sdpa"
#: How PyTorch's GPT-2 attends, for the run's settings (``attention``).
TORCH_GPT2_ATTENTION = (
    "torch scaled_dot_product_attention, causal by is_causal=True, no mask tensor (transformers' own "
    f"sdpa_attention_forward, registered as '{SDPA_WITHOUT_MASK}': no mask is built, so no step reads "
    "a mask or the positions on the host)"
)
#: The same where this transformers cannot take an attention function without a mask builder.
TORCH_GPT2_ATTENTION_STOCK = (
    "torch scaled_dot_product_attention through transformers' 'sdpa' (its mask builder may read the "
    "positions or the mask on the host each step)"
)
#: How Keras's GPT-2 attends (keras-hub's TransformerDecoder and Keras's MultiHeadAttention).
KERAS_GPT2_ATTENTION = (
    "a causal mask merged with a padding mask of ones, applied in the softmax of QK^T; two einsums "
    "(attention dropout keeps MultiHeadAttention off ops.dot_product_attention)"
)


def _sdpa_without_mask() -> str | None:
    """Register transformers' own SDPA attention under a name with no mask builder; its name, or None.

    Transformers' mask builder (``masking_utils.create_causal_mask``) decides in Python, on the
    host, whether SDPA's ``is_causal`` can stand in for a mask, by reading device values: with
    no ``attention_mask``, whether the positions are packed sequences
    (``find_packed_sequence_indices``: ``(packed_sequence_mask[:, -1] == 0).all()``); with one,
    whether it is all ones (``_ignore_causal_mask_sdpa``: ``fast_all(padding_mask)``). Either
    is a wait for the device at every forward. For an attention implementation that has no mask
    builder, ``_preprocess_mask_arguments`` returns no mask before reading anything ("custom
    attention without equivalent mask creation"), and ``sdpa_attention_forward`` then calls
    ``scaled_dot_product_attention(is_causal=True)``: the call stock 'sdpa' makes for a batch
    without padding, the same kernels and FLOPs, without the wait. A transformers without
    ``masking_utils`` (older than 4.53) decides from the shapes alone when no mask is given
    (``AttentionMaskConverter._ignore_causal_mask_sdpa``): None, and the stock 'sdpa' stays.
    """
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    except ImportError:
        return None
    if SDPA_WITHOUT_MASK in ALL_MASK_ATTENTION_FUNCTIONS:  # a mask builder under the name: it would run
        return None
    AttentionInterface.register(SDPA_WITHOUT_MASK, sdpa_attention_forward)
    return SDPA_WITHOUT_MASK


# -- Keras ------------------------------------------------------------------------------------
def build_keras(
    model_id: str,
    num_classes: int,
    image_size: int,
    head: str = "softmax",
    seq_len: int = 0,
    last_only: bool = False,
) -> Any:
    """A ``keras.Model`` with random weights and the shared head.

    ``head="sigmoid"``: one output through a sigmoid, as the study's Keras scripts
    (``Dense(1, activation="sigmoid")``); otherwise ``num_classes`` logits. Token models take
    ``(batch, seq_len)`` int32 ids (``seq_len`` 0: the model's context) and return float32
    logits ``(batch, seq_len, vocabulary)``, or with ``last_only`` the last position's alone
    ``(batch, 1, vocabulary)``; ``num_classes``, ``image_size`` and ``head`` do not change them.
    """
    import keras

    info = MODELS[model_id]
    if info.keras_app is None:
        raise Unavailable(info.unavailable_reason)
    if info.kind == "tokens":
        return _keras_gpt2(model_id, context_of(model_id, seq_len), last_only)
    shape = (image_size, image_size, 3)
    inputs = keras.Input(shape=shape)
    if info.keras_source == "keras_hub":
        x = _keras_vit(model_id, shape)(inputs)
        x = x[:, 0, :]  # the class token, after the encoder's final LayerNorm (as torchvision's)
    else:
        if info.keras_source == "benchtui":
            x = _keras_resnet50_v1_5(inputs)
        else:
            ctor = getattr(keras.applications, info.keras_app)
            base = ctor(weights=None, include_top=False, input_shape=shape, **dict(info.keras_kwargs))
            x = base(inputs)
        x = keras.layers.GlobalAveragePooling2D()(x)
    # float32 outputs under mixed precision: the PyTorch runner computes its loss in float32 too.
    if head == "sigmoid":
        outputs = keras.layers.Dense(1, activation="sigmoid", dtype="float32")(x)
    else:
        outputs = keras.layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name=model_id)


def _keras_hub(model_id: str) -> Any:
    _offline()
    import keras

    try:
        import keras_hub
    except ImportError as exc:
        framework = _KERAS_FRAMEWORK.get(keras.backend.backend(), "tensorflow")
        raise _missing(model_id, framework, "keras-hub", exc) from exc
    return keras_hub


def _keras_vit(model_id: str, shape: tuple[int, int, int]) -> Any:
    """keras-hub's ViTBackbone, configured as torchvision's VisionTransformer.

    Checked in keras_hub/src/models/vit/vit_layers.py: pre-LN blocks, LayerNorm epsilon
    1e-6, exact GELU in the MLP ("gelu"; torchvision nn.GELU), biases in the attention and
    MLP projections and in the patch convolution, a learned class token and learned
    positions, and the encoder ends in a LayerNorm (torchvision's ``encoder.ln``).
    """
    arch = MODELS[model_id].config
    return _keras_hub(model_id).models.ViTBackbone(
        image_shape=shape,
        patch_size=arch["patch_size"],
        num_layers=arch["layers"],
        num_heads=arch["heads"],
        hidden_dim=arch["width"],
        mlp_dim=arch["mlp"],
        dropout_rate=0.0,
        attention_dropout=0.0,
        layer_norm_epsilon=1e-6,
        use_mha_bias=True,
        use_mlp_bias=True,
        use_class_token=True,
        use_patch_bias=True,
    )


def _keras_gpt2(model_id: str, seq_len: int, last_only: bool) -> Any:
    """keras-hub's GPT2Backbone with the tied output projection GPT2CausalLM puts on it.

    Checked in keras_hub/src/models/gpt2/: pre-LN decoder blocks, LayerNorm epsilon 1e-5,
    GELU's tanh approximation (``gelu_approximate``, as Hugging Face's "gelu_new"), learned
    positions, one dropout rate for embeddings, attention weights and residual branches, and
    logits ``token_embedding(x, reverse=True)`` (the embedding matrix transposed: tied).
    """
    import keras

    backbone = _keras_gpt2_backbone(_keras_hub(model_id), model_id)
    token_ids = keras.Input(shape=(seq_len,), dtype="int32", name="token_ids")
    padding_mask = keras.ops.ones_like(token_ids)  # every position is a real token
    hidden = backbone({"token_ids": token_ids, "padding_mask": padding_mask})
    if last_only:
        hidden = hidden[:, -1:, :]
    logits = backbone.token_embedding(hidden, reverse=True)
    # float32 logits under mixed precision, as the image heads.
    outputs = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
    return keras.Model(token_ids, outputs, name=model_id)


def build_keras_lm(model_id: str) -> Any:
    """GPT-2 as keras-hub's ``GPT2CausalLM`` on the backbone of :func:`build_keras` (random weights, no
    preprocessor: it takes token ids), for generation: keras-hub's own ``generate`` with its cache."""
    keras_hub = _keras_hub(model_id)
    backbone = _keras_gpt2_backbone(keras_hub, model_id)
    return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)


def _keras_gpt2_backbone(keras_hub: Any, model_id: str) -> Any:
    """The catalog's GPT-2 shape as keras-hub's ``GPT2Backbone`` (one statement for training and generation)."""
    arch = MODELS[model_id].config
    return keras_hub.models.GPT2Backbone(
        vocabulary_size=arch["vocab"],
        num_layers=arch["layers"],
        num_heads=arch["heads"],
        hidden_dim=arch["width"],
        intermediate_dim=arch["mlp"],
        dropout=GPT2_DROPOUT,
        max_sequence_length=arch["context"],
    )


def _keras_resnet50_v1_5(inputs: Any) -> Any:
    """ResNet50 v1.5 from keras.layers, as torchvision builds it (its weights, exactly).

    A 7x7/2 convolution, 3x3/2 max pooling (zero padding 1, then valid), bottleneck blocks
    [3, 4, 6, 3] of widths 64..512 (x4 out), the stride in the 3x3 convolution, a 1x1
    convolution + batch norm on the first shortcut of each stage; convolutions without bias,
    batch norm with torchvision's epsilon and momentum, convolutions initialised as
    torchvision's (Kaiming normal, fan out).
    """
    import keras
    from keras import layers

    init = keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")

    def conv(x: Any, filters: int, kernel: int, stride: int, name: str) -> Any:
        pad = kernel // 2
        if pad:
            x = layers.ZeroPadding2D(pad, name=f"{name}_pad")(x)
        return layers.Conv2D(
            filters, kernel, strides=stride, use_bias=False, kernel_initializer=init, name=name
        )(x)

    def bn(x: Any, name: str) -> Any:
        return layers.BatchNormalization(epsilon=1e-5, momentum=0.9, name=name)(x)

    x = layers.ReLU(name="relu")(bn(conv(inputs, 64, 7, 2, "conv1"), "bn1"))
    x = layers.ZeroPadding2D(1, name="maxpool_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="maxpool")(x)
    for stage, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True), start=1):
        for block in range(blocks):
            name = f"layer{stage}_{block}"
            stride = 2 if stage > 1 and block == 0 else 1
            y = layers.ReLU()(bn(conv(x, width, 1, 1, f"{name}_conv1"), f"{name}_bn1"))
            y = layers.ReLU()(bn(conv(y, width, 3, stride, f"{name}_conv2"), f"{name}_bn2"))
            y = bn(conv(y, width * 4, 1, 1, f"{name}_conv3"), f"{name}_bn3")
            shortcut = x
            if block == 0:
                shortcut = bn(conv(x, width * 4, 1, stride, f"{name}_downsample"), f"{name}_downsample_bn")
            x = layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([y, shortcut]))
    return x


# -- Precision --------------------------------------------------------------------------------
#: The first compute capability with bfloat16 arithmetic (Ampere); before it, frameworks emulate it.
BF16_CAPABILITY = (8, 0)


def bf16_refusal(side: str, gpu: str, capability: tuple[int, int] | None) -> str | None:
    """Why ``amp-bf16`` is refused on this GPU, in one line; None where it runs natively (or the
    capability is unknown). ``side``: the framework's label ("PyTorch", "tf.keras", ...).

    Before compute capability 8.0 every framework still runs bfloat16, emulated: PyTorch's
    ``is_bf16_supported()`` counts emulation by default, and XLA (JAX, TensorFlow with XLA)
    computes unsupported bfloat16 operations in float32. The times would then be of neither
    bfloat16 nor a framework's best, so the run is refused rather than measured.
    """
    if capability is None or tuple(capability) >= BF16_CAPABILITY:
        return None
    major, minor = capability
    return (
        f"amp-bf16 refused: {gpu} (compute capability {major}.{minor}) has no bfloat16 arithmetic "
        f"(it came with 8.0, Ampere); {side} would emulate it and the times would mislead: "
        "use --precision amp-fp16 or fp32"
    )


# -- Losses -----------------------------------------------------------------------------------
def torch_loss(head: str, kind: str = "image") -> Any:
    """The loss of a head, on the model's float32 outputs: softmax cross-entropy, or the study's
    sigmoid then binary cross-entropy (``F.sigmoid`` + ``nn.BCELoss``, as its PyTorch scripts).

    ``kind="tokens"``: softmax cross-entropy over the vocabulary at every position
    (:func:`token_loss`); the head does not apply.
    """
    import torch
    from torch import nn

    if kind == "tokens":
        return token_loss()
    if head != "sigmoid":
        return nn.CrossEntropyLoss()
    bce = nn.BCELoss()

    def sigmoid_bce(outputs: Any, target: Any) -> Any:
        return bce(torch.sigmoid(outputs), target)

    return sigmoid_bce


def token_loss() -> Any:
    """Cross-entropy of ``(batch, tokens, vocabulary)`` logits against ``(batch, tokens)`` ids,
    averaged over every token (as Keras' SparseCategoricalCrossentropy on the same shapes)."""
    import torch.nn.functional as F

    def cross_entropy(logits: Any, targets: Any) -> Any:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return cross_entropy


def keras_loss(head: str, kind: str = "image", logits: bool = False) -> Any:
    """The Keras loss of a head (the sigmoid head's model already ends in its sigmoid; a user's own
    model, ``logits``, ends in the logit, as the PyTorch side's does).

    Token models: softmax cross-entropy of ``(batch, tokens, vocabulary)`` logits against
    ``(batch, tokens)`` ids, averaged over every token.
    """
    import keras

    if head == "sigmoid" and kind != "tokens":
        return keras.losses.BinaryCrossentropy(from_logits=logits)
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- Parameters and provenance ----------------------------------------------------------------
def torch_params(model: Any) -> tuple[int, int]:
    """(parameters, trainable parameters) of a ``torch.nn.Module``.

    Every ``nn.Parameter`` once (tied weights once); buffers (batch norm's running mean,
    variance and batch count, attention masks) are not parameters and are not counted.
    """
    params = list(model.parameters())  # deduplicated by Module.parameters()
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def keras_params(model: Any) -> tuple[int, int]:
    """(parameters, trainable parameters) of a ``keras.Model``, comparable to :func:`torch_params`.

    Every weight once (tied weights once), except the statistics a layer keeps rather than
    learns: BatchNormalization's moving mean and variance and Normalization's mean, variance
    and count (torch keeps the like as buffers, which :func:`torch_params` leaves out).
    Random seed states are not weights. Parity is judged on the trainable parameters.
    """
    import keras

    statistics: set[int] = set()
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.BatchNormalization):
            statistics.update(id(v) for v in (layer.moving_mean, layer.moving_variance))
        elif isinstance(layer, keras.layers.Normalization):
            statistics.update(id(v) for v in layer.non_trainable_weights)

    def size(v: Any) -> int:
        n = 1
        for d in v.shape:
            n *= int(d)
        return n

    seen: set[int] = set()
    params = trainable = 0
    trainable_ids = {id(v) for v in model.trainable_weights}
    for v in model.weights:
        if id(v) in seen or id(v) in statistics:
            continue
        seen.add(id(v))
        params += size(v)
        trainable += size(v) if id(v) in trainable_ids else 0
    return params, trainable


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def source_text(family: str, model_id: str, framework: str = "") -> str:
    """Where a framework family's version of a model comes from, with the library's version.

    E.g. "torchvision 0.24.1 resnet50", "keras.applications ResNet50 (keras 3.15.1)",
    "keras-hub 0.32.0 ViTBackbone", "transformers 5.23.0 GPT2LMHeadModel". Reads package
    metadata only: imports nothing.
    """
    info = MODELS[model_id]
    if info.group == "custom":
        from benchtui_runners.custom import source

        return source(framework, model_id)
    if family == "keras":
        if info.keras_app is None:
            return ""
        if info.keras_source == "keras_hub":
            return f"keras-hub {_version('keras-hub')} {info.keras_app}"
        if info.keras_source == "benchtui":
            return f"benchtui {info.label} from keras.layers (keras {_version('keras')})"
        return f"keras.applications {info.keras_app} (keras {_version('keras')})"
    if info.torch_source == "transformers":
        return f"transformers {_version('transformers')} GPT2LMHeadModel"
    if info.torch_source == "pretrainedmodels":
        return f"pretrainedmodels {_version('pretrainedmodels')} {_PRETRAINEDMODELS[model_id]}"
    name = "VisionTransformer" if info.patch_size else _TORCHVISION[model_id]
    return f"torchvision {_version('torchvision')} {name}"


def emit_model(writer: Any, family: str, model_id: str, tokens: int, model: Any, framework: str = "") -> None:
    """The ``model`` event: the network built, for parity (its parameters, where it came from, its
    architecture in words). ``family``: "torch" or "keras"; ``framework``: which of the family's
    (a user's own model may have a builder per Keras backend)."""
    params, trainable = torch_params(model) if family == "torch" else keras_params(model)
    info = MODELS[model_id]
    writer.emit(
        "model",
        params=params,
        trainable_params=trainable,
        kind=info.kind,
        tokens_per_sample=tokens,
        source=source_text(family, model_id, framework or family),
        architecture=info.side(family),
    )
