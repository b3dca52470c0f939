"""Counting the floating-point operations of one training step (or one forward), per framework.

What is counted, on every side alike: the multiply-adds of convolutions and matrix
products (a multiply-add is 2 FLOPs) in the forward pass, the loss and the backward
pass (gradients of the weights, and of every activation that needs one), for one batch
at the run's batch size and image size (token models: sequence length). Attention's two
matrix products (QK^T and attention x V) are matrix products: counted, whole (a causal
mask does not halve them: every side computes the full square and masks it). Not counted:
element-wise work (batch norm, layer norm, activations, pooling, softmax, the loss), which
is about 1% of a CNN's FLOPs, embedding lookups (gathers), and the optimizer's update.
``forward_only``: one forward pass in inference mode, no loss, no gradients. Counts are
taken from what the framework actually runs or traces, never from a table:

- PyTorch and Keras on torch: ``torch.utils.flop_counter.FlopCounterMode`` around
  one real forward + loss + backward (aten convolution, convolution_backward, mm,
  addmm, bmm, the fused attention kernels, ...), with its rule for the weight gradient
  of grouped (depthwise) convolutions corrected: it counts them as dense, ``groups``
  times too many; and with a rule for ``_native_multi_head_attention`` (the fused
  inference path of ``nn.MultiheadAttention``), for which it has none.
- Keras on TensorFlow: the graph of a ``tf.function`` doing forward + loss +
  gradients is traced (not run). Its forward convolution ops that the gradients depend
  on are counted by the TF profiler's registered ``flops`` statistics; their gradient
  ops, and every matrix product (MatMul, BatchMatMul, Einsum), by the same rules from
  their shapes (TF has no statistics for depthwise gradients nor for Einsum, which Keras'
  attention uses; its rule for BatchMatMul ignores ``adj_x``, which gradients set; and its
  rule for Conv2D gradients drifts from the forward count when an input is not a multiple
  of the stride).
- Keras on JAX: ``jax.make_jaxpr`` of ``value_and_grad`` over ``model.stateless_call``
  (traced, not compiled); its ``conv_general_dilated`` and ``dot_general`` equations
  are counted from their shapes with the rule PyTorch's counter uses. XLA's own
  ``cost_analysis`` is not used: it leaves out the multiply-adds that fall on padding,
  so at small image sizes it counts 10-20% fewer FLOPs than the other two sides.

Counting happens after the timed epochs, so it never warms up anything being timed.
The framework imports are inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from benchtui_runners.protocol import EventWriter

#: What a count covers: a training step, or one forward pass (inference).
COUNTED_TRAIN = "forward+backward"
COUNTED_FORWARD = "forward"
COUNTED = COUNTED_TRAIN
CONVENTION = (
    "conv + matmul (attention's included) multiply-adds x 2; element-wise ops, embedding lookups "
    "and the optimizer update not counted"
)

METHOD_TORCH = "torch.utils.flop_counter.FlopCounterMode (one eager forward + loss + backward)"
METHOD_TORCH_FORWARD = "torch.utils.flop_counter.FlopCounterMode (one eager forward, inference mode)"
METHOD_TF = (
    "traced tf.function graph (forward + loss + gradients): tf profiler flops statistics for "
    "convolutions, shapes for their gradients and matrix products"
)
METHOD_TF_FORWARD = (
    "traced tf.function graph (forward, training=False): tf profiler flops statistics for "
    "convolutions, shapes for matrix products"
)
METHOD_JAX = "jaxpr of jax.value_and_grad over model.stateless_call (conv_general_dilated + dot_general)"
METHOD_JAX_FORWARD = "jaxpr of model.stateless_call, training=False (conv_general_dilated + dot_general)"


def _prod(values: Any) -> int:
    return math.prod(int(v) for v in values)


def emit_flops(
    writer: EventWriter, counter: Callable[[], dict[str, Any]], batch_size: int, counted: str = COUNTED
) -> None:
    """Run ``counter`` and emit a ``flops`` event; a failure is reported, never raised.

    ``counted``: what the count covers, ``COUNTED_TRAIN`` or ``COUNTED_FORWARD``.
    """
    writer.phase("flops", "start")
    started = time.perf_counter()
    try:
        result = counter()
    except MemoryError as exc:
        result = {"per_step": None, "reason": f"out of memory while counting ({exc})"}
    except Exception as exc:  # counting must never fail the run
        result = {"per_step": None, "reason": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    per_step = result.get("per_step")
    if per_step is not None and per_step <= 0:
        result = {
            **result,
            "per_step": None,
            "reason": result.get("reason") or "no convolution or matmul found",
        }
        per_step = None
    writer.emit(
        "flops",
        per_step=per_step,
        per_image=per_step / batch_size if per_step is not None and batch_size else None,
        batch_size=batch_size,
        method=result.get("method", ""),
        counted=counted,
        convention=CONVENTION,
        by_op=result.get("by_op") or {},
        reason=result.get("reason"),
        seconds=time.perf_counter() - started,
    )
    writer.phase("flops", "end")


# -- PyTorch (and Keras on torch) -------------------------------------------------------------
def _conv_backward_flops(
    grad_out_shape: Any,
    x_shape: Any,
    w_shape: Any,
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    groups: int,
    output_mask: Any,
    out_shape: Any = None,
    **kwargs: Any,
) -> int:
    """PyTorch's rule for ``aten.convolution_backward``, with grouped weight gradients fixed.

    ``torch.utils.flop_counter`` counts the weight gradient of a grouped convolution
    as if it were dense (``groups`` times too many: 256x for a 256-channel depthwise
    convolution); its input gradient and forward rules are right.
    """
    from torch.utils.flop_counter import conv_flop_count

    def t(shape: Any) -> list[int]:
        return [shape[1], shape[0], *list(shape[2:])]

    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(grad_out_shape, w_shape, list(out_shape[0]), not transposed)
    if output_mask[1]:
        grad_weight = list(out_shape[1])
        if transposed:
            dense = conv_flop_count(t(grad_out_shape), t(x_shape), t(grad_weight), transposed=False)
        else:
            dense = conv_flop_count(t(x_shape), t(grad_out_shape), t(grad_weight), transposed=False)
        flops += dense // max(1, int(groups))
    return flops


def _torch_counts(run_step: Callable[[], None]) -> dict[str, Any]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(
        display=False,
        custom_mapping={
            torch.ops.aten.convolution_backward: _conv_backward_flops,
            torch.ops.aten._native_multi_head_attention: _native_mha_flops,
            **{op: _sdpa_backward_flops for op in _sdpa_backward_ops()},
        },
    )
    with counter:
        run_step()
    by_op = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return {"per_step": int(counter.get_total_flops()), "by_op": by_op}


def _sdpa_backward_ops() -> list[Any]:
    """The fused attention kernels' backward ops that torch's counter has a rule for."""
    import torch

    aten = torch.ops.aten
    names = (
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "_scaled_dot_product_cudnn_attention_backward",
    )
    return [getattr(aten, n) for n in names if hasattr(aten, n)]


def _sdpa_backward_flops(
    grad_out_shape: Any, query_shape: Any, key_shape: Any, value_shape: Any, *args: Any, **kwargs: Any
) -> int:
    """The gradients of attention's two matrix products: four products, twice the forward.

    torch's rule adds a fifth, the fused kernels' recomputation of QK^T (they keep no
    attention matrix from the forward). That is work the kernel does, not a gradient: the
    math path (``bmm``, used with dropout on CPU), Keras and every other side have no such
    product, so it is left out here, as for any recomputation.
    """
    batch, heads, target, head_dim = (int(d) for d in query_shape)
    source = int(key_shape[2])
    value_dim = int(value_shape[3])
    # dV = P^T dO and dP = dO V^T (value_dim each), dQ = dS K and dK = dS^T Q (head_dim each).
    return 2 * batch * heads * target * source * (2 * value_dim + 2 * head_dim)


def _native_mha_flops(
    query_shape: Any,
    key_shape: Any,
    value_shape: Any,
    embed_dim: int,
    num_heads: int,
    qkv_weight_shape: Any,
    *args: Any,
    out_shape: Any = None,
    **kwargs: Any,
) -> int:
    """``aten._native_multi_head_attention``: ``nn.MultiheadAttention``'s fused inference path.

    torch's counter has no rule for it, and its projections and attention run inside it
    (nothing of them reaches the counter: a ViT's forward in eval mode would count only its
    MLPs). Counted as its parts: the q, k, v projections (``qkv_weight`` is 3E x E), the
    attention's two matrix products, and the output projection (E x E).
    """
    batch, target, embed = (int(d) for d in query_shape)
    source = int(key_shape[1])
    projections = 2 * batch * embed * embed * (target + 2 * source) + 2 * batch * target * embed * embed
    attention = 2 * 2 * batch * target * source * embed  # QK^T and (softmax) x V, all heads together
    return projections + attention


def count_torch(
    model: Any,
    x: Any,
    y: Any,
    loss_fn: Any,
    autocast_dtype: Any = None,
    device_type: str = "cpu",
    forward_only: bool = False,
) -> dict[str, Any]:
    """FLOPs of forward + loss + backward of a ``torch.nn.Module`` on one batch (x, y).

    Runs the step for real (on the run's device, under the run's autocast) and then
    drops the gradients it made; the weights are not updated. ``forward_only``: one
    forward under ``torch.inference_mode`` (no loss, no backward; ``y`` and ``loss_fn``
    unused); the model's mode (``train``/``eval``) is the caller's, as the run has it.
    """
    import contextlib

    import torch

    def autocast() -> Any:
        if autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type, dtype=autocast_dtype)

    def step() -> None:
        with autocast():
            outputs = model(x)
        loss_fn(outputs.float(), y).backward()  # the loss in float32, as the runner takes it

    def forward() -> None:
        with torch.inference_mode(), autocast():
            model(x)

    if forward_only:
        return {**_torch_counts(forward), "method": METHOD_TORCH_FORWARD}
    try:
        result = _torch_counts(step)
    finally:
        model.zero_grad(set_to_none=True)
    return {**result, "method": METHOD_TORCH}


# -- Keras ------------------------------------------------------------------------------------
def count_keras(
    model: Any,
    backend: str,
    batch_size: int,
    image_size: int,
    num_classes: int,
    head: str = "softmax",
    seq_len: int = 0,
    vocab: int = 0,
    forward_only: bool = False,
    input_shape: tuple[int, ...] = (),
) -> dict[str, Any]:
    """FLOPs of forward + loss + gradients of a built Keras model with the run's head, by backend.

    ``input_shape``: one sample's shape when it is not an ``image_size`` square image (a user's
    tensor input).

    ``seq_len`` > 0: a token model, fed ``(batch, seq_len)`` int32 ids with ``(batch, seq_len)``
    int32 targets in [0, ``vocab``) (0: the model's output width). ``forward_only``: one
    forward pass, ``training=False``, no loss, no gradients.
    """
    from benchtui_runners.models import keras_loss

    x_dtype, x_high = "float32", 0
    labels: tuple[tuple[int, ...], str]
    if seq_len:
        x_high = vocab or int(model.outputs[0].shape[-1])
        shape: tuple[int, ...] = (batch_size, seq_len)
        x_dtype, labels, high = "int32", ((batch_size, seq_len), "int32"), x_high
        loss_fn = keras_loss(head, "tokens")
    else:
        shape = (batch_size, *(input_shape or (image_size, image_size, 3)))
        # Targets as the run's: class ids, or (batch, 1) floats for the sigmoid head.
        labels = ((batch_size, 1), "float32") if head == "sigmoid" else ((batch_size,), "int32")
        high = num_classes
        loss_fn = keras_loss(head)
    if backend == "tensorflow":
        return _count_tf(model, loss_fn, shape, labels, forward_only, x_dtype)
    if backend == "jax":
        return _count_jax(model, loss_fn, shape, labels, forward_only, x_dtype)
    if backend == "torch":
        return _count_keras_torch(model, loss_fn, shape, labels, high, forward_only, x_high)
    raise ValueError(f"no FLOP counter for Keras backend {backend!r}")


def _count_keras_torch(
    model: Any,
    loss_fn: Any,
    shape: tuple[int, ...],
    labels: tuple[tuple[int, ...], str],
    num_classes: int,
    forward_only: bool = False,
    x_high: int = 0,
) -> dict[str, Any]:
    """``x_high`` > 0: inputs are int32 ids in [0, x_high) (token models), else normal floats."""
    import keras
    import torch

    if x_high:
        x = keras.random.randint(shape, 0, x_high, seed=1, dtype="int32")
    else:
        x = keras.random.normal(shape, seed=1)
    high = 2 if labels[1] == "float32" else num_classes
    y = keras.ops.cast(keras.random.randint(labels[0], 0, high, seed=2, dtype="int32"), labels[1])

    def step() -> None:
        loss_fn(y, model(x, training=True)).backward()

    def forward() -> None:
        # inference_mode, not no_grad: under no_grad keras-hub's PositionEmbedding returns a view
        # of its weight that still requires grad with no grad_fn, on which the counter's module
        # tracker fails ("Expected gradient function to be set").
        with torch.inference_mode():
            model(x, training=False)

    if forward_only:
        return {**_torch_counts(forward), "method": METHOD_TORCH_FORWARD + " on the Keras model"}
    try:
        result = _torch_counts(step)
    finally:
        for v in model.trainable_variables:
            v.value.grad = None
    return {**result, "method": METHOD_TORCH + " on the Keras model"}


#: TensorFlow op types whose flops are convolution multiply-adds (the profiler's statistics).
TF_CONV = frozenset({"Conv2D", "Conv3D", "DepthwiseConv2dNative"})
#: Matrix products, counted from their shapes (see ``_tf_matmul_flops``).
TF_MATMUL = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum"})
TF_CONV_MATMUL = TF_CONV | TF_MATMUL
#: Convolution gradients: counted here by the forward op's rule (see ``_tf_conv_grad_flops``).
TF_CONV_GRADS = frozenset(
    {
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
    }
)


def _tf_reachable(graph: Any) -> list[Any]:
    """The graph's ops that the function's outputs depend on (pruned ops never run)."""
    seen: set[str] = set()
    stack = [t.op for t in graph.outputs]
    out = []
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        out.append(op)
        stack += [t.op for t in op.inputs]
        stack += list(op.control_inputs)
    return out


def _tf_conv_grad_flops(op: Any) -> int:
    """A convolution gradient counted like its forward convolution, as PyTorch does.

    2 x elements of the output gradient x filter height x width x input channels
    (per group; 1 for a depthwise convolution). TensorFlow registers no statistics
    for depthwise gradients, and its rule for Conv2D gradients counts the input's
    size divided by the stride, which differs from the forward count when the
    input is not a whole multiple of the stride.
    """
    out_backprop = op.inputs[2].shape
    # The filter is the second input of an input gradient, and the output of a filter gradient.
    filter_tensor = op.inputs[1] if op.type.endswith("BackpropInput") else op.outputs[0]
    filter_shape = filter_tensor.shape.as_list() if filter_tensor.shape.rank == 4 else None
    if not out_backprop.is_fully_defined() or not filter_shape or None in filter_shape[:3]:
        raise ValueError(f"{op.type} {op.name}: shapes not known")
    kh, kw, cin = filter_shape[:3]
    per_output = kh * kw * (1 if op.type.startswith("Depthwise") else cin)
    return 2 * _prod(out_backprop.as_list()) * per_output


def _tf_matmul_flops(op: Any) -> int:
    """2 x output elements x the contracted dimension, from the op's shapes.

    ``MatMul``: its ``transpose_a``; ``BatchMatMul*``: its ``adj_x`` (the profiler's rule
    reads ``transpose_a``, which these ops do not have: the gradients, which set ``adj_x``,
    would be miscounted). ``Einsum`` (Keras' attention; TensorFlow has no statistics for it):
    see ``einsum_flops``.
    """
    shapes = [t.shape for t in op.inputs]
    if not all(s.is_fully_defined() for s in [*shapes, op.outputs[0].shape]):
        raise ValueError(f"{op.type} {op.name}: shapes not known")
    if op.type == "Einsum":
        return einsum_flops(op.get_attr("equation").decode(), [s.as_list() for s in shapes])
    a = shapes[0].as_list()
    if op.type == "MatMul":
        k = a[0] if op.get_attr("transpose_a") else a[1]
    else:
        k = a[-2] if op.get_attr("adj_x") else a[-1]
    return 2 * _prod(op.outputs[0].shape.as_list()) * int(k)


def einsum_flops(equation: str, shapes: list[list[int]]) -> int:
    """2 x the product of the sizes of every index of a two-operand einsum (multiply-adds x 2).

    Every combination of the indices is one multiply-add: the output's indices times the
    contracted ones (``BTNH,BSNH->BNTS``: B x T x N x S output elements, H each). An
    ellipsis stands for the leading dimensions it covers (broadcast as numpy does). A
    one-operand einsum (a transpose or a sum) is no multiply-add: 0.
    """
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    if len(inputs) != 2:
        return 0
    sizes: dict[str, int] = {}
    for labels, shape in zip(inputs, shapes, strict=True):
        if "..." in labels:
            head, tail = labels.split("...")
            covered = len(shape) - len(head) - len(tail)
            # The ellipsis' dimensions, named from the right, as numpy aligns them to broadcast.
            labels = head + "".join(chr(0x2460 + covered - 1 - i) for i in range(covered)) + tail
        for label, dim in zip(labels, shape, strict=True):
            sizes[label] = max(sizes.get(label, 1), int(dim))  # a broadcast dimension of 1 yields
    return 2 * _prod(sizes.values())


#: Ops that call a function of the graph's library: counted through the function's body.
TF_CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def _tf_count_graph(graph: Any, by_op: Counter[str], depth: int = 0) -> None:
    """Add the flops of a graph's reachable ops to ``by_op``, entering the functions it calls.

    Keras runs grouped convolutions (ConvNeXt's depthwise 7x7) in a nested
    ``tf.function(jit_compile=True)``: in the step's graph they are a call, and their
    gradients a call of the backward function; both bodies hold the convolutions.
    """
    from tensorflow.python.framework import ops as tf_ops

    if depth > 16:
        raise ValueError("functions nested more than 16 deep")
    for op in _tf_reachable(graph):
        if op.type in TF_CONV:
            stats = tf_ops.get_stats_for_node_def(graph, op.node_def, "flops")
            if stats.value is None:
                raise ValueError(f"{op.type} {op.name}: the profiler could not count it")
            by_op[op.type] += int(stats.value)
        elif op.type in TF_MATMUL:
            by_op[op.type] += _tf_matmul_flops(op)
        elif op.type in TF_CONV_GRADS:
            by_op[op.type] += _tf_conv_grad_flops(op)
        elif op.type in TF_CALLS:
            function = graph._get_function(op.get_attr("f").name)
            if function is None or getattr(function, "graph", None) is None:
                raise ValueError(f"{op.type} {op.name}: the body of its function is not in the graph")
            _tf_count_graph(function.graph, by_op, depth + 1)


def _count_tf(
    model: Any,
    loss_fn: Any,
    shape: tuple[int, ...],
    labels: tuple[tuple[int, ...], str],
    forward_only: bool = False,
    x_dtype: str = "float32",
) -> dict[str, Any]:
    import tensorflow as tf

    x_spec = tf.TensorSpec(shape, x_dtype)
    if forward_only:

        @tf.function(autograph=False)
        def forward(x: Any) -> Any:
            return model(x, training=False)

        graph = forward.get_concrete_function(x_spec).graph
    else:

        @tf.function(autograph=False)
        def step(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            return loss, tape.gradient(loss, model.trainable_variables)

        graph = step.get_concrete_function(x_spec, tf.TensorSpec(labels[0], labels[1])).graph
    by_op: Counter[str] = Counter()
    _tf_count_graph(graph, by_op)
    method = METHOD_TF_FORWARD if forward_only else METHOD_TF
    return {"per_step": sum(by_op.values()), "by_op": dict(by_op), "method": method}


def _count_jax(
    model: Any,
    loss_fn: Any,
    shape: tuple[int, ...],
    labels: tuple[tuple[int, ...], str],
    forward_only: bool = False,
    x_dtype: str = "float32",
) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    def loss_of(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
        logits, updated = model.stateless_call(trainable, non_trainable, x, training=True)
        return loss_fn(y, logits), updated

    def step(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
        return jax.value_and_grad(loss_of, has_aux=True)(trainable, non_trainable, x, y)

    def forward(trainable: Any, non_trainable: Any, x: Any) -> Any:
        return model.stateless_call(trainable, non_trainable, x, training=False)

    def spec(v: Any) -> Any:
        return jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)

    variables = (
        [spec(v.value) for v in model.trainable_variables],
        [spec(v.value) for v in model.non_trainable_variables],
        jax.ShapeDtypeStruct(shape, jnp.dtype(x_dtype)),
    )
    if forward_only:
        closed = jax.make_jaxpr(forward)(*variables)
    else:
        closed = jax.make_jaxpr(step)(*variables, jax.ShapeDtypeStruct(labels[0], jnp.dtype(labels[1])))
    by_op: Counter[str] = Counter()
    _walk_jaxpr(closed.jaxpr, by_op, 1)
    method = METHOD_JAX_FORWARD if forward_only else METHOD_JAX
    return {"per_step": sum(by_op.values()), "by_op": dict(by_op), "method": method}


def _conv_flops(eqn: Any, transposed: bool = False) -> int:
    """2 x output elements x kernel window x input features per group (PyTorch's rule).

    A transposed convolution, the input gradient of a convolution, is counted as PyTorch
    counts it, per element of its input (the output gradient): 2 x batch x input positions
    x window x in x out features, which is its forward convolution's count. JAX writes
    it with a dilated input (the gradient of a strided convolution) or, stride 1, with
    the kernel flipped (``transposed``): there its output can be larger than its input (the
    gradient of a 'valid' convolution, as after Keras' ZeroPadding2D), and counting by
    output elements would count multiply-adds with the padding that no other side counts.
    """
    params = eqn.params
    lhs_shape = eqn.invars[0].aval.shape
    rhs_shape = eqn.invars[1].aval.shape
    out_shape = eqn.outvars[0].aval.shape
    numbers = params["dimension_numbers"]
    rhs_spec = numbers.rhs_spec  # (out feature, in feature, *spatial)
    window = _prod(rhs_shape[d] for d in rhs_spec[2:])
    if transposed or _prod(params.get("lhs_dilation") or (1,)) > 1:
        lhs_spec = numbers.lhs_spec  # (batch, feature, *spatial)
        positions = lhs_shape[lhs_spec[0]] * _prod(lhs_shape[d] for d in lhs_spec[2:])
        return 2 * positions * window * rhs_shape[rhs_spec[0]] * rhs_shape[rhs_spec[1]]
    return 2 * _prod(out_shape) * rhs_shape[rhs_spec[1]] * window


#: Equations that keep a flipped kernel flipped (JAX reshapes a grouped one after ``rev``).
_KEEPS_FLIP = frozenset({"reshape", "transpose", "convert_element_type", "copy", "copy_p"})


def _dot_flops(eqn: Any) -> int:
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs_shape = eqn.invars[0].aval.shape
    out_shape = eqn.outvars[0].aval.shape
    return 2 * _prod(out_shape) * _prod(lhs_shape[d] for d in lhs_contract)


def _sub_jaxprs(value: Any) -> list[Any]:
    if hasattr(value, "eqns"):
        return [value]
    if hasattr(value, "jaxpr") and hasattr(value, "consts"):
        return [value.jaxpr]
    if isinstance(value, (list, tuple)):
        return [j for v in value for j in _sub_jaxprs(v)]
    return []


def _walk_jaxpr(jaxpr: Any, by_op: Counter[str], times: int) -> None:
    flipped: set[int] = set()  # ids of variables holding a kernel flipped by ``rev`` (input gradients)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "rev" or (name in _KEEPS_FLIP and any(id(v) in flipped for v in eqn.invars)):
            flipped.update(id(v) for v in eqn.outvars)
        if name == "conv_general_dilated":
            by_op[name] += times * _conv_flops(eqn, transposed=id(eqn.invars[1]) in flipped)
        elif name == "dot_general":
            by_op[name] += times * _dot_flops(eqn)
        repeat = times * int(eqn.params.get("length", 1)) if name == "scan" else times
        if name == "cond":
            branches = []
            for branch in _sub_jaxprs(eqn.params.get("branches", ())):
                counts: Counter[str] = Counter()
                _walk_jaxpr(branch, counts, repeat)
                branches.append(counts)
            if branches:
                by_op.update(max(branches, key=lambda c: sum(c.values())))
            continue
        for key, value in eqn.params.items():
            if key in ("jvp_jaxpr_fun", "jvp_jaxpr_thunk", "fwd_jaxpr_thunk", "bwd"):
                continue
            for sub in _sub_jaxprs(value):
                _walk_jaxpr(sub, by_op, repeat)
