"""Generation (``--task generate``, issue 34): greedy decoding with a key/value cache, timed the same way on
every side.

One step is one generate call on a batch of ``batch_size`` prompts of ``prompt_len`` random token ids (a
few batches drawn once per run from the run's seed, the same ids on every side), given exactly
``new_tokens`` tokens: greedy (argmax), no stop at an end token, the cache as long as the prompt and the new
tokens. Each framework's own generate does it: PyTorch through transformers' ``generate`` with its static
cache, Keras through keras-hub's ``CausalLM.generate`` (:class:`TorchGenerator`, :class:`KerasGenerator`).

Timing (:func:`run_epochs`):

- window timing (the default): call A generates 1 new token, timed to its ids on the host
  (``first_token_s``); call B generates ``new_tokens``, timed the same way; ``decode_s`` is B's time less
  A's. Nothing waits for the device per token beyond what the framework's own generate does.
- ``--timing step``: call B alone, each token stamped once the device has produced it (PyTorch: a
  stopping criterion that waits for the device; Keras: a sampler that calls back to the host with the
  token); ``first_token_s`` is the first stamp less the call's start, ``token_s`` the N-1 gaps between
  stamps, ``decode_s`` the last stamp less the first.

Every step is a window of its own for the run's clock: a generate call ends with its ids on the host, so
the clock's wait at the step's end waits for nothing more. Framework imports are inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from benchtui_runners.catalog import MODELS
from benchtui_runners.config import RunConfig, Unavailable
from benchtui_runners.custom import ModelDefError
from benchtui_runners.protocol import EventWriter
from benchtui_runners.timing import StepClock

#: The prompt and the new tokens where the plan gives none and the context allows.
DEFAULT_LENGTH = 128
#: Distinct prompt batches drawn per run (cycled over the steps), as the device pools of the other tasks.
POOL = 4

#: What each side runs, in words (settings.generation): where the two differ, the cell is flagged.
TORCH_PREFILL = "one forward over the P prompt positions, which gives the first token"
TORCH_DECODE = "N forward passes that each give one token: the prefill, then N-1 one-token steps"
KERAS_PREFILL = (
    "the cache seeded by one forward over all P+N positions (keras-hub's _build_cache), which gives no token"
)
KERAS_DECODE = (
    "N one-token steps that each give one token, the first re-reading the prompt's last token "
    "(keras-hub's sampler loop)"
)
CLOCK = "each step (a generate call, ending with its ids on the host) is a timing window of its own"
FIRST_TOKEN = {"window": "own call of one new token", "step": "each token stamped"}


def lengths(config: RunConfig) -> tuple[int, int]:
    """(prompt length P, new tokens N): the plan's, else 128 each where the context allows, else half the
    context each. One line where they cannot be generated."""
    context = MODELS[config.model].context
    prompt, new = config.prompt_len, config.new_tokens
    fallback = min(DEFAULT_LENGTH, max(1, context // 2))
    prompt = prompt or min(fallback, max(1, context - (new or fallback)))
    new = new or min(fallback, max(0, context - prompt))
    label = MODELS[config.model].label
    if config.world > 1:
        raise Unavailable(f"{label}: generation runs on one device ({config.world} replicas asked)")
    if new < 1:
        raise Unavailable(f"{label}: generation needs at least 1 new token (new_tokens {config.new_tokens})")
    if prompt + new > context:
        raise Unavailable(
            f"{label}: a prompt of {prompt} tokens and {new} new ones ({prompt + new}) is longer than "
            f"the context ({context} positions)"
        )
    return prompt, new


def prompts(config: RunConfig, prompt_len: int) -> list[Any]:
    """The run's prompt batches: NumPy int64 ids of shape (batch, prompt_len) in [0, vocabulary), drawn from
    the run's seed (the same ids on every side)."""
    import numpy as np

    rng = np.random.default_rng(config.seed)
    count = min(config.steps_per_epoch, POOL)
    return [
        rng.integers(0, config.outputs, (config.batch_size, prompt_len), dtype=np.int64) for _ in range(count)
    ]


def cache_bytes_per_token(layers: int, width: int, dtype_bytes: int) -> int:
    """The key/value cache of one sequence, per token: a key and a value of ``width`` per layer."""
    return 2 * layers * width * dtype_bytes


def dtype_bytes(precision: str) -> int:
    """Bytes of the compute dtype: 2 under mixed precision (float16 / bfloat16), else 4."""
    return 2 if precision.startswith("amp-") else 4


def arch_cache_bytes(config: RunConfig) -> int:
    """``cache_bytes_per_token`` of the run's model from its catalog shape (0 where it has none: a user's)."""
    arch = MODELS[config.model].config
    if "layers" not in arch or "width" not in arch:
        return 0
    return cache_bytes_per_token(int(arch["layers"]), int(arch["width"]), dtype_bytes(config.precision))


class Generator(Protocol):
    """One side's generate on the run's prompt batches."""

    def generate(self, batch: int, new_tokens: int, stamps: list[float] | None) -> tuple[int, int | None]:
        """Generate ``new_tokens`` tokens for prompt batch ``batch``, returning once the ids are on the host:
        (the new tokens each sequence got, counted from the output; the one-token steps counted, or None).
        ``stamps``: append the moment each token is on the device (waited for), or None: no stamps."""


def run_epochs(
    generator: Generator,
    clock: StepClock,
    config: RunConfig,
    writer: EventWriter,
    batches: int,
    epochs: int,
    epoch_done: Callable[..., None],
) -> None:
    """The timed epochs of a generate run: a ``batch`` event then a ``tokens`` event per step."""
    prompt_len, new_tokens = lengths(config)
    per_token = config.timing == "step"
    perf = time.perf_counter
    for epoch in range(1, epochs + 1):
        clock.epoch_begin(epoch)
        for step in range(1, config.steps_per_epoch + 1):
            batch = (step - 1) % batches
            clock.step_begin()
            fields: dict[str, Any] = {}
            if per_token:
                stamps: list[float] = []
                start = perf()
                tokens, counted = generator.generate(batch, new_tokens, stamps)
                if len(stamps) != new_tokens:
                    raise RuntimeError(
                        f"generate stamped {len(stamps)} tokens for {new_tokens} new tokens (--timing step)"
                    )
                first = max(stamps[0] - start, 1e-9)
                decode = stamps[-1] - stamps[0]
                # Each gap is a measured duration (the wire's TIME: never zero): floored at a nanosecond,
                # perf_counter's resolution. N = 1: no later token, no token_s (the wire's lists are non-empty).
                gaps = [max(b - a, 1e-9) for a, b in zip(stamps, stamps[1:], strict=False)]
                if gaps:
                    fields["token_s"] = gaps
            else:
                start = perf()
                generator.generate(batch, 1, None)
                middle = perf()
                tokens, counted = generator.generate(batch, new_tokens, None)
                end = perf()
                first = max(middle - start, 1e-9)
                decode = max((end - middle) - first, 0.0) if new_tokens > 1 else 0.0
            clock.step_end(step)  # a window of its own: its batch event comes before the tokens event
            writer.tokens(
                epoch,
                step,
                sequences=config.batch_size,
                prompt_len=prompt_len,
                new_tokens=new_tokens,
                first_token_s=first,
                decode_s=decode,
                tokens=tokens,
                decode_steps=counted,
                **fields,
            )
        epoch_done(epoch)


# -- PyTorch: transformers' generate ---------------------------------------------------------------
def torch_model(config: RunConfig) -> Any:
    """The model transformers generates with: GPT-2's ``GPT2LMHeadModel``, or a user's token model whose
    builder returns a model with ``generate`` (a transformers ``GenerationMixin``); else one line."""
    if not config.model_def:
        from benchtui_runners.models import build_torch_lm

        return build_torch_lm(config.model)
    from benchtui_runners import custom as user

    model = user.build("torch", config.framework, config)
    if not callable(getattr(model, "generate", None)):
        raise ModelDefError(
            f"{config.model}: --task generate needs a model with generate (a transformers GenerationMixin, "
            f"such as a *ForCausalLM); its torch builder returned a {type(model).__qualname__}"
        )
    return model


def torch_compile_record(model: Any, device_type: str, compile_asked: str) -> str:
    """What transformers compiles for generation, in words (settings.generation's ``compile``)."""
    if compile_asked == "off":
        return "eager (--compile off: generation_config.disable_compile)"
    if device_type not in ("cuda", "xpu"):
        return (
            f"eager (transformers compiles the decoding forward only on a GPU; this run is on {device_type})"
        )
    from transformers import CompileConfig

    cc = CompileConfig()
    why = "--compile on" if compile_asked == "on" else "transformers' default with a static cache"
    return (
        f"torch.compile of the decoding forward (transformers' CompileConfig: mode={cc.mode}, "
        f"fullgraph={cc.fullgraph}, backend={cc.backend}; {why}); the prefill runs eager"
    )


def torch_record(config: RunConfig, model: Any, device_type: str) -> dict[str, Any]:
    """settings.generation of a PyTorch run."""
    arch = getattr(model, "config", None)
    layers, width = getattr(arch, "n_layer", None), getattr(arch, "n_embd", None)
    per_token = (
        cache_bytes_per_token(int(layers), int(width), dtype_bytes(config.precision))
        if isinstance(layers, int) and isinstance(width, int)
        else arch_cache_bytes(config)
    )
    return {
        "engine": "transformers GPT2LMHeadModel.generate, greedy, static cache"
        if not config.model_def
        else f"transformers {type(model).__qualname__}.generate, greedy, static cache",
        "cache": "StaticCache (cache_implementation='static'), prompt + new tokens long (max_cache_len P+N)",
        "prefill": TORCH_PREFILL,
        "decode_steps": TORCH_DECODE,
        "compile": torch_compile_record(model, device_type, config.compile),
        "first_token": FIRST_TOKEN.get(config.timing, config.timing),
        "cache_bytes_per_token": per_token,
        "stop": "none: eos_token_id None, exactly N new tokens",
        "clock": CLOCK,
        "host_sync_per_token": (
            "transformers' own: its stop check reads unfinished_sequences.max() on the host after every "
            "token (StopCheck; the deferred check is for mps only)"
            if device_type == "cuda"
            else None
        ),
    }


class TorchGenerator:
    """transformers' ``generate`` on the run's prompt batches (on the device), greedy, static cache."""

    def __init__(
        self,
        model: Any,
        device: Any,
        batches: list[Any],
        prompt_len: int,
        new_tokens: int,
        sync: Callable[[], None],
        compile_asked: str,
        amp_dtype: Any = None,
    ) -> None:
        import torch
        from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

        self.torch = torch
        self.model = model
        self.prompt_len = prompt_len
        self.amp_dtype = amp_dtype
        self.device = device
        self.inputs = [torch.from_numpy(b).to(device) for b in batches]
        self.masks = [torch.ones_like(x) for x in self.inputs]
        # No end token: every sequence gets exactly N tokens (GPT2Config's default eos is 50256).
        gen = model.generation_config
        gen.eos_token_id = None
        gen.pad_token_id = None
        gen.bos_token_id = None
        gen.forced_eos_token_id = None
        self.options: dict[str, Any] = {
            "do_sample": False,
            "num_beams": 1,
            "use_cache": True,
            "cache_implementation": "static",
            "max_cache_len": prompt_len + new_tokens,
            "eos_token_id": None,
            "pad_token_id": None,
            "min_new_tokens": None,
            "return_dict_in_generate": False,
        }
        if compile_asked == "off":
            self.options["disable_compile"] = True
        stamps_holder = self

        class CountSteps(LogitsProcessor):
            """Counts the forward passes that give a token (the processors run once per token, on the host)."""

            def __call__(self, input_ids: Any, scores: Any) -> Any:
                stamps_holder.counted += 1
                return scores

        class StampTokens(StoppingCriteria):
            """--timing step: waits for the device once each token is in, and stamps the moment."""

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                sync()
                if stamps_holder.stamps is not None:
                    stamps_holder.stamps.append(time.perf_counter())
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

        self.counted = 0
        self.stamps: list[float] | None = None
        self.processors = LogitsProcessorList([CountSteps()])
        self.stamping = StoppingCriteriaList([StampTokens()])

    def generate(self, batch: int, new_tokens: int, stamps: list[float] | None) -> tuple[int, int | None]:
        torch = self.torch
        self.counted, self.stamps = 0, stamps
        autocast = (
            torch.autocast(self.device.type, dtype=self.amp_dtype)
            if self.amp_dtype is not None
            else torch.autocast(self.device.type, enabled=False)
        )
        with autocast:
            out = self.model.generate(
                input_ids=self.inputs[batch],
                attention_mask=self.masks[batch],
                max_new_tokens=new_tokens,
                logits_processor=self.processors,
                stopping_criteria=self.stamping if stamps is not None else None,
                **self.options,
            )
        ids = out.cpu()  # the ids on the host: the call has ended
        return int(ids.shape[1]) - self.prompt_len, self.counted


# -- Keras: keras-hub's generate -------------------------------------------------------------------
def keras_model(config: RunConfig) -> Any:
    """keras-hub's ``GPT2CausalLM`` (no preprocessor), or a user's token model whose Keras builder returns a
    keras-hub ``CausalLM``; else one line."""
    if not config.model_def:
        from benchtui_runners.models import build_keras_lm

        return build_keras_lm(config.model)
    from benchtui_runners import custom as user

    model = user.build("keras", config.framework, config)
    try:
        import keras_hub
    except ImportError as exc:
        raise ModelDefError(f"{config.model}: --task generate on Keras needs keras-hub ({exc})") from exc
    if not isinstance(model, keras_hub.models.CausalLM):
        raise ModelDefError(
            f"{config.model}: --task generate on Keras needs a keras_hub CausalLM (its generate); its keras "
            f"builder returned a {type(model).__qualname__}"
        )
    return model


def keras_jit(config: RunConfig, backend: str, on_gpu: bool) -> bool:
    """``jit_compile`` for keras-hub's generate. TensorFlow: XLA as Keras's "auto" resolves it (a GPU) or as
    asked, never under ``--timing step`` (a host call cannot sit in an XLA program). JAX: keras-hub always
    jits generate. torch: eager."""
    if backend == "jax":
        return True
    if backend == "torch":
        return False
    if config.timing == "step":
        return False
    return {"on": True, "off": False}.get(config.compile, on_gpu)


def keras_compile_record(config: RunConfig, backend: str, jit: bool) -> str:
    """What keras-hub's generate is compiled with, in words."""
    if backend == "jax":
        extra = (
            " (--compile off does not apply: keras-hub jits generate on JAX)"
            if config.compile == "off"
            else ""
        )
        return f"xla (jax.jit of generate_step, the sampler's loop a lax.while_loop){extra}"
    if backend == "torch":
        return "eager (keras-hub's generate runs op by op on torch, under torch.no_grad)"
    if config.timing == "step":
        return (
            "tf.function graph, no XLA (--timing step: each token's host call, a tf.py_function, cannot sit "
            "in an XLA program)"
        )
    if jit:
        return "xla (tf.function jit_compile=True)"
    why = "--compile off" if config.compile == "off" else "Keras's 'auto' resolves to no XLA on the CPU"
    return f"tf.function graph, no XLA ({why})"


def keras_record(config: RunConfig, backend: str, jit: bool) -> dict[str, Any]:
    """settings.generation of a Keras run."""
    engine = "keras-hub GPT2CausalLM.generate, GreedySampler"
    if config.model_def:
        engine = "keras-hub CausalLM.generate (the model's own), GreedySampler"
    if jit:
        engine += ", XLA"
    return {
        "engine": engine,
        "cache": "one tensor (batch, layers, 2, P+N, heads, head width) made per call, prompt + new tokens long",
        "prefill": KERAS_PREFILL,
        "decode_steps": KERAS_DECODE,
        "compile": keras_compile_record(config, backend, jit),
        "first_token": FIRST_TOKEN.get(config.timing, config.timing),
        "cache_bytes_per_token": arch_cache_bytes(config),
        "stop": "none: stop_token_ids None, exactly N new tokens",
        "clock": CLOCK,
        "host_sync_per_token": None,
    }


def keras_sampler(backend: str, sync: Callable[[], None], stamped: bool) -> Any:
    """keras-hub's GreedySampler, or under ``--timing step`` one whose token choice calls back to the host
    with the token (so the stamp is taken once the device has produced it): JAX ``jax.debug.callback``
    (ordered), TensorFlow ``tf.py_function`` (its output is the token, so it runs in order), torch a wait
    for the device then the stamp."""
    import keras_hub

    if not stamped:
        return keras_hub.samplers.GreedySampler()

    class StampingGreedySampler(keras_hub.samplers.GreedySampler):  # type: ignore[misc]
        stamps: list[float] | None = None

        def stamp(self, *unused: Any) -> None:
            if self.stamps is not None:
                self.stamps.append(time.perf_counter())

        def get_next_token(self, probabilities: Any) -> Any:
            token = super().get_next_token(probabilities)
            if backend == "jax":
                import jax

                jax.debug.callback(self.stamp, token, ordered=True)
                return token
            if backend == "tensorflow":
                import tensorflow as tf

                def passed(value: Any) -> Any:
                    self.stamp()
                    return value

                out = tf.py_function(passed, [token], Tout=token.dtype)
                out.set_shape(token.shape)
                return out
            sync()
            self.stamp()
            return token

    return StampingGreedySampler()


class KerasGenerator:
    """keras-hub's ``generate`` on the run's prompt batches: inputs padded to P+n positions, the prompt's
    padding mask, ``stop_token_ids=None``; its output comes back as NumPy (on the host)."""

    def __init__(
        self, model: Any, backend: str, batches: list[Any], prompt_len: int, new_tokens: int, sampler: Any
    ) -> None:
        self.model = model
        self.backend = backend
        self.batches = batches
        self.prompt_len = prompt_len
        self.sampler = sampler
        self.cached: dict[tuple[int, int], Any] = {}
        for batch in range(len(batches)):  # made on the device once, before the timed epochs
            for new in sorted({1, new_tokens}):
                self.cached[(batch, new)] = self._inputs(batch, new)

    def _inputs(self, batch: int, new_tokens: int) -> dict[str, Any]:
        import keras
        import numpy as np

        prompt = self.batches[batch]
        rows, width = prompt.shape[0], self.prompt_len + new_tokens
        ids = np.zeros((rows, width), dtype=np.int32)
        ids[:, : self.prompt_len] = prompt
        mask = np.zeros((rows, width), dtype=bool)
        mask[:, : self.prompt_len] = True
        return {
            "token_ids": keras.ops.convert_to_tensor(ids),
            "padding_mask": keras.ops.convert_to_tensor(mask),
        }

    def generate(self, batch: int, new_tokens: int, stamps: list[float] | None) -> tuple[int, int | None]:
        inputs = self.cached.get((batch, new_tokens)) or self._inputs(batch, new_tokens)
        if hasattr(self.sampler, "stamps"):
            self.sampler.stamps = stamps
        out = self.model.generate(dict(inputs), stop_token_ids=None)  # NumPy: the ids are on the host
        if stamps is not None and self.backend == "jax":
            import jax

            jax.effects_barrier()  # every token's callback has run
        counted = len(stamps) if stamps is not None else None
        return int(out["token_ids"].shape[1]) - self.prompt_len, counted
