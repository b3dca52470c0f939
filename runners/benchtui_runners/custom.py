"""A user's own model (``--model-def``, a model file): import its builder, call it, check what it made.

A definition names, per framework, a function ``MODULE:FUNCTION`` that returns the framework's
model: ``build(input_shape, num_classes)``, or ``build(config)`` with one dict of everything the
run knows (see :func:`build`). benchtui adds no head: the model's outputs are what the plan's loss
reads (``num_classes`` logits, one logit for the sigmoid head, logits over the vocabulary at every
position for tokens), and the loss and optimizer are the plan's unless the definition names the
user's own. Everything that goes wrong here is a :class:`ModelDefError`: one line that names the
function and says what happened, which fails the run (never a traceback in the parent).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from benchtui_runners.catalog import FRAMEWORK_LABELS, MODELS, custom_entry


class ModelDefError(Exception):
    """A user's builder, loss or optimizer could not be imported or called, or made the wrong thing."""


def _put_on_path(paths: list[str]) -> None:
    """The definition's folders first on ``sys.path`` (the runner starts in the session's folder)."""
    for folder in reversed(paths):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def load(spec: str, paths: list[str]) -> Any:
    """The object ``MODULE:FUNCTION`` names, imported with ``paths`` first on ``sys.path``."""
    _put_on_path(paths)
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        where = f"; looked first in {', '.join(paths)}" if paths else ""
        raise ModelDefError(f"{spec}: cannot import {module_name} ({exc}){where}") from exc
    except BaseException as exc:  # the user's module ran and raised
        raise ModelDefError(f"{spec}: importing {module_name} raised {_said(exc)}") from exc
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ModelDefError(f"{spec}: {module_name} has no {attr}")
        target = getattr(target, part)
    if not callable(target):
        raise ModelDefError(f"{spec}: {attr} is a {type(target).__name__}, not a function")
    return target


def _said(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def call(spec: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)``; what it raises becomes one line naming ``spec``."""
    try:
        return fn(*args)
    except BaseException as exc:  # the user's code raised
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ModelDefError(f"{spec} raised {_said(exc)}") from exc


def _arguments(spec: str, fn: Any, input_shape: tuple[int, ...], num_classes: int, config: dict) -> tuple:
    """``(input_shape, num_classes)`` when the function takes them, else ``(config,)``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return (input_shape, num_classes)  # a builtin or extension: try the documented form
    for args in ((input_shape, num_classes), (config,)):
        try:
            signature.bind(*args)
        except TypeError:
            continue
        return args
    raise ModelDefError(f"{spec} takes neither (input_shape, num_classes) nor (config): {signature}")


def build(family: str, framework: str, config: Any) -> Any:
    """The user's model for ``framework`` (family "torch" or "keras"), checked to be that framework's.

    ``input_shape``: one sample's shape as the framework lays it out (an image (3, H, W) for
    PyTorch, (H, W, 3) for Keras; tokens (seq_len,); a tensor as declared). ``num_classes``: the
    width of the output the loss reads (the vocabulary for tokens, 1 for the sigmoid head).
    ``config``: those two and the run's framework, input kind, batch size, image size, sequence
    length, vocabulary, head and task.
    """
    definition = MODELS[config.model].custom
    spec = custom_entry(definition["builders"], framework)
    fn = load(spec, definition.get("paths", []))
    shape = config.sample_shape(family)
    details = {
        "framework": framework,
        "input": definition["input"],
        "input_shape": shape,
        "num_classes": config.outputs,
        "batch_size": config.batch_size,
        "image_size": config.image_size if definition["input"] == "image" else 0,
        "seq_len": config.tokens,
        "vocab": definition.get("vocab", 0),
        "head": "lm" if config.tokens else config.head,
        "task": config.task,
    }
    model = call(spec, fn, *_arguments(spec, fn, shape, config.outputs, details))
    kind = _framework_model(family)
    if not isinstance(model, kind):
        raise ModelDefError(
            f"{spec} returned {_describe(model)}, not a {kind.__module__.split('.')[0]} "
            f"{kind.__qualname__} ({FRAMEWORK_LABELS.get(framework, framework)} trains it)"
        )
    return model


def _framework_model(family: str) -> type:
    if family == "torch":
        import torch

        return torch.nn.Module
    import keras

    return keras.Model


def _describe(value: Any) -> str:
    kind = type(value)
    return "None" if value is None else f"a {kind.__module__}.{kind.__qualname__}"


def own(table: str, framework: str, model_id: str) -> tuple[str, Any] | None:
    """The user's own loss or optimizer (``table``: "losses" or "optimizers") for ``framework``, loaded:
    (its spec, the callable); None when the definition names none (the plan's is used)."""
    definition = MODELS[model_id].custom
    spec = custom_entry(definition.get(table) or {}, framework)
    if not spec:
        return None
    return spec, load(spec, definition.get("paths", []))


def own_loss(config: Any) -> Any:
    """A user's own model's loss, for the run's framework: its definition's ``losses``, called with
    what the framework hands a loss (PyTorch: ``(outputs, targets)``; Keras: ``(y_true, y_pred)``)
    through :func:`call`, so that what it raises names it; None where the run uses the plan's loss.
    The same on every side."""
    own_fn = own("losses", config.framework, config.model) if config.model_def else None
    if own_fn is None:
        return None
    spec, fn = own_fn

    @functools.wraps(fn)
    def loss(*args: Any) -> Any:
        return call(spec, fn, *args)

    return loss


def own_optimizer(config: Any, *args: Any) -> Any:
    """A user's own model's optimizer, made: its definition's ``optimizers`` called with ``args``
    (PyTorch: the parameters; Keras: nothing) through :func:`call`; None where the run uses the
    plan's optimizer. The same on every side."""
    own_fn = own("optimizers", config.framework, config.model) if config.model_def else None
    if own_fn is None:
        return None
    return call(own_fn[0], own_fn[1], *args)


def source(framework: str, model_id: str) -> str:
    """Where a user's model came from: its builder, the file it is in and that file's hash (so two
    sessions of different code are told apart), e.g. "mypkg.nets:build_torch (mypkg/nets.py, sha256 1a2b…)"."""
    definition = MODELS[model_id].custom
    spec = custom_entry(definition["builders"], framework)
    module = sys.modules.get(spec.partition(":")[0])
    path = getattr(module, "__file__", None)
    if not path:
        return f"{spec} (your own)"
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    except OSError:
        return f"{spec} ({path})"
    return f"{spec} ({path}, sha256 {digest})"
