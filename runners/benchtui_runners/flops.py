"""Counting the floating-point operations of one training step, per framework.

What is counted, on every side alike: the multiply-adds of convolutions and matrix
products (a multiply-add is 2 FLOPs) in the forward pass, the loss and the backward
pass (gradients of the weights, and of every activation that needs one), for one batch
at the run's batch size and image size. Not counted: element-wise work (batch norm,
activations, pooling, the loss's softmax), which is about 1% of a CNN's FLOPs, and the
optimizer's update. Counts are taken from what the framework actually runs or traces,
never from a table:

- PyTorch and Keras on torch: ``torch.utils.flop_counter.FlopCounterMode`` around
  one real forward + loss + backward (aten convolution, convolution_backward, mm,
  addmm, bmm, ...), with its rule for the weight gradient of grouped (depthwise)
  convolutions corrected: it counts them as dense, ``groups`` times too many.
- Keras on TensorFlow: the graph of a ``tf.function`` doing forward + loss +
  gradients is traced (not run). Its forward convolution and matmul ops that the
  gradients depend on are counted by the TF profiler's registered ``flops``
  statistics; their gradient ops by the same rule from their shapes (TF has no
  statistics for depthwise gradients, and its rule for Conv2D gradients drifts from
  the forward count when an input is not a multiple of the stride).
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

COUNTED = "forward+backward"
CONVENTION = "conv + matmul multiply-adds x 2; element-wise ops and the optimizer update not counted"

METHOD_TORCH = "torch.utils.flop_counter.FlopCounterMode (one eager forward + loss + backward)"
METHOD_TF = "traced tf.function graph (forward + loss + gradients): tf profiler flops statistics"
METHOD_JAX = "jaxpr of jax.value_and_grad over model.stateless_call (conv_general_dilated + dot_general)"


def _prod(values: Any) -> int:
    return math.prod(int(v) for v in values)


def emit_flops(writer: EventWriter, counter: Callable[[], dict[str, Any]], batch_size: int) -> None:
    """Run ``counter`` and emit a ``flops`` event; a failure is reported, never raised."""
    writer.phase("flops", "start")
    started = time.perf_counter()
    try:
        result = counter()
    except MemoryError as exc:
        result = {"per_step": None, "reason": f"out of memory while counting ({exc})"}
    except Exception as exc:  # noqa: BLE001 - counting must never fail the run
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
        counted=COUNTED,
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
        display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward_flops}
    )
    with counter:
        run_step()
    by_op = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return {"per_step": int(counter.get_total_flops()), "by_op": by_op}


def count_torch(
    model: Any, x: Any, y: Any, loss_fn: Any, autocast_dtype: Any = None, device_type: str = "cpu"
) -> dict[str, Any]:
    """FLOPs of forward + loss + backward of a ``torch.nn.Module`` on one batch (x, y).

    Runs the step for real (on the run's device, under the run's autocast) and then
    drops the gradients it made; the weights are not updated.
    """
    import contextlib

    import torch

    def step() -> None:
        ctx = (
            torch.autocast(device_type, dtype=autocast_dtype)
            if autocast_dtype is not None
            else contextlib.nullcontext()
        )
        with ctx:
            outputs = model(x)
        loss_fn(outputs.float(), y).backward()  # the loss in float32, as the runner takes it

    try:
        result = _torch_counts(step)
    finally:
        model.zero_grad(set_to_none=True)
    return {**result, "method": METHOD_TORCH}


# -- Keras ------------------------------------------------------------------------------------
def count_keras(
    model: Any, backend: str, batch_size: int, image_size: int, num_classes: int, head: str = "softmax"
) -> dict[str, Any]:
    """FLOPs of forward + loss + gradients of a built Keras model with the run's head, by backend."""
    from benchtui_runners.models import keras_loss

    loss_fn = keras_loss(head)
    shape = (batch_size, image_size, image_size, 3)
    # Targets as the run's: class ids, or (batch, 1) floats for the sigmoid head.
    labels = ((batch_size, 1), "float32") if head == "sigmoid" else ((batch_size,), "int32")
    if backend == "tensorflow":
        return _count_tf(model, loss_fn, shape, labels)
    if backend == "jax":
        return _count_jax(model, loss_fn, shape, labels)
    if backend == "torch":
        return _count_keras_torch(model, loss_fn, shape, labels, num_classes)
    raise ValueError(f"no FLOP counter for Keras backend {backend!r}")


def _count_keras_torch(
    model: Any, loss_fn: Any, shape: tuple[int, ...], labels: tuple[tuple[int, ...], str], num_classes: int
) -> dict[str, Any]:
    import keras

    x = keras.random.normal(shape, seed=1)
    high = 2 if labels[1] == "float32" else num_classes
    y = keras.ops.cast(keras.random.randint(labels[0], 0, high, seed=2, dtype="int32"), labels[1])

    def step() -> None:
        loss_fn(y, model(x, training=True)).backward()

    try:
        result = _torch_counts(step)
    finally:
        for v in model.trainable_variables:
            v.value.grad = None
    return {**result, "method": METHOD_TORCH + " on the Keras model"}


#: TensorFlow op types whose flops are convolution or matrix multiply-adds.
TF_CONV_MATMUL = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
    }
)
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


def _count_tf(
    model: Any, loss_fn: Any, shape: tuple[int, ...], labels: tuple[tuple[int, ...], str]
) -> dict[str, Any]:
    import tensorflow as tf
    from tensorflow.python.framework import ops as tf_ops

    @tf.function(autograph=False)
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss, tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function(
        tf.TensorSpec(shape, tf.float32), tf.TensorSpec(labels[0], labels[1])
    ).graph
    by_op: Counter[str] = Counter()
    for op in _tf_reachable(graph):
        if op.type in TF_CONV_MATMUL:
            stats = tf_ops.get_stats_for_node_def(graph, op.node_def, "flops")
            if stats.value is None:
                raise ValueError(f"{op.type} {op.name}: the profiler could not count it")
            by_op[op.type] += int(stats.value)
        elif op.type in TF_CONV_GRADS:
            by_op[op.type] += _tf_conv_grad_flops(op)
    return {"per_step": sum(by_op.values()), "by_op": dict(by_op), "method": METHOD_TF}


def _count_jax(
    model: Any, loss_fn: Any, shape: tuple[int, ...], labels: tuple[tuple[int, ...], str]
) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    def loss_of(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
        logits, updated = model.stateless_call(trainable, non_trainable, x, training=True)
        return loss_fn(y, logits), updated

    def step(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
        return jax.value_and_grad(loss_of, has_aux=True)(trainable, non_trainable, x, y)

    def spec(v: Any) -> Any:
        return jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)

    closed = jax.make_jaxpr(step)(
        [spec(v.value) for v in model.trainable_variables],
        [spec(v.value) for v in model.non_trainable_variables],
        jax.ShapeDtypeStruct(shape, jnp.float32),
        jax.ShapeDtypeStruct(labels[0], jnp.dtype(labels[1])),
    )
    by_op: Counter[str] = Counter()
    _walk_jaxpr(closed.jaxpr, by_op, 1)
    return {"per_step": sum(by_op.values()), "by_op": dict(by_op), "method": METHOD_JAX}


def _conv_flops(eqn: Any) -> int:
    """2 x output elements x kernel window x input features per group (PyTorch's rule).

    A convolution with a dilated input is a transposed convolution (the input
    gradient of a strided one): counted, as PyTorch counts it, per element of its
    undilated input: 2 x batch x input positions x window x in x out features.
    """
    params = eqn.params
    lhs_shape = eqn.invars[0].aval.shape
    rhs_shape = eqn.invars[1].aval.shape
    out_shape = eqn.outvars[0].aval.shape
    numbers = params["dimension_numbers"]
    rhs_spec = numbers.rhs_spec  # (out feature, in feature, *spatial)
    window = _prod(rhs_shape[d] for d in rhs_spec[2:])
    if _prod(params.get("lhs_dilation") or (1,)) > 1:
        lhs_spec = numbers.lhs_spec  # (batch, feature, *spatial)
        positions = lhs_shape[lhs_spec[0]] * _prod(lhs_shape[d] for d in lhs_spec[2:])
        return 2 * positions * window * rhs_shape[rhs_spec[0]] * rhs_shape[rhs_spec[1]]
    return 2 * _prod(out_shape) * rhs_shape[rhs_spec[1]] * window


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
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "conv_general_dilated":
            by_op[name] += times * _conv_flops(eqn)
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
