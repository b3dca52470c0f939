"""Generation (``--task generate``, issue 34), the runner side: real frameworks on the CPU, a tiny GPT.

Each side (transformers' GPT2LMHeadModel.generate; keras-hub's GPT2CausalLM.generate on JAX, TensorFlow and
torch) generates exactly N tokens per sequence under both timings, one ``tokens`` event after each step's
``batch`` event; under ``--timing step`` each token is stamped (N-1 gaps) and the token-giving forward
passes are counted. PyTorch and Keras/JAX count the same tokens and decode steps, and say in
settings.generation where their work differs (the prefill). A user's token model whose builder offers no
generate fails in one line; so does a prompt longer than the context.
"""

from __future__ import annotations

import functools
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchtui_runners import catalog
from support import run_runner

P, N = 8, 6
#: Two steps of two sequences, one epoch; one thread.
TINY: dict[str, Any] = {
    "model": "gpt2_mini",
    "task": "generate",
    "prompt_len": P,
    "new_tokens": N,
    "samples": 4,
    "batch_size": 2,
    "epochs": 1,
    "device": "cpu",
    "threads": 1,
}
STEPS = 2
FRAMEWORKS = ("torch", "keras-jax", "tensorflow", "keras-torch")


@functools.cache
def _generated(framework: str, timing: str) -> str:
    return json.dumps(run_runner({**TINY, "framework": framework, "timing": timing}))


def generated(framework: str, timing: str) -> list[dict[str, Any]]:
    """One real run's events (one run per framework and timing in a test process)."""
    events: list[dict[str, Any]] = json.loads(_generated(framework, timing))
    assert events[-1]["type"] == "done", [e for e in events if e["type"] == "error"]
    return events


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def generation(events: list[dict[str, Any]]) -> dict[str, Any]:
    """settings.generation as the parent merges it (the hello's, then any settings event's)."""
    record: dict[str, Any] = {}
    for e in events:
        if e["type"] in ("hello", "settings") and "generation" in e["settings"]:
            record = e["settings"]["generation"]
    return record


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["window", "step"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_side_generates_exactly_n_tokens(framework: str, timing: str) -> None:
    events = generated(framework, timing)
    tokens = of(events, "tokens")
    assert [(e["epoch"], e["step"]) for e in tokens] == [(1, s) for s in range(1, STEPS + 1)]
    for e in tokens:
        assert e["tokens"] == N and e["new_tokens"] == N and e["prompt_len"] == P and e["sequences"] == 2
        assert e["first_token_s"] > 0 and e["decode_s"] >= 0
        if timing == "step":
            assert len(e["token_s"]) == N - 1 and all(s > 0 for s in e["token_s"])
            assert e["decode_steps"] == N
            assert e["decode_s"] == pytest.approx(sum(e["token_s"]), rel=1e-6)
        else:
            assert "token_s" not in e
    # Each step is a window of its own: its batch event, then its tokens event.
    order = [(e["type"], e.get("step")) for e in events if e["type"] in ("batch", "tokens")]
    assert order == [(kind, s) for s in range(1, STEPS + 1) for kind in ("batch", "tokens")]
    assert all(b["steps"] == 1 for b in of(events, "batch"))
    record = generation(events)
    assert record["first_token"] == (
        "each token stamped" if timing == "step" else "own call of one new token"
    )
    # GPT-2 mini: 4 layers of width 256, float32: a key and a value per layer.
    assert record["cache_bytes_per_token"] == 2 * 4 * 256 * 4
    assert not of(events, "flops")  # no FLOP count of a generate call
    hello = of(events, "hello")[0]
    assert hello["settings"]["task"] == "generate"
    # Nothing is trained: no optimizer, loss or shuffle in the run's settings (the how line).
    assert (hello["settings"]["optimizer"], hello["settings"]["loss"], hello["settings"]["shuffle"]) == (
        None,
    ) * 3


@pytest.mark.slow
def test_torch_and_keras_jax_count_the_same_tokens_and_decode_steps() -> None:
    """Under --timing step both count N token-giving steps; settings.generation says what differs."""
    torch, jax = generated("torch", "step"), generated("keras-jax", "step")
    counts = {
        name: {(e["tokens"], e["decode_steps"], len(e["token_s"])) for e in of(events, "tokens")}
        for name, events in (("torch", torch), ("keras-jax", jax))
    }
    assert counts["torch"] == counts["keras-jax"] == {(N, N, N - 1)}
    t, k = generation(torch), generation(jax)
    assert t["engine"] == "transformers GPT2LMHeadModel.generate, greedy, static cache"
    assert k["engine"] == "keras-hub GPT2CausalLM.generate, GreedySampler, XLA"
    assert t["prefill"] != k["prefill"] and "P+N positions" in k["prefill"] and "P prompt" in t["prefill"]
    assert t["cache_bytes_per_token"] == k["cache_bytes_per_token"]
    # Window timing: PyTorch counts its steps without waiting (a logits processor); Keras cannot.
    window = {e["decode_steps"] for e in of(generated("torch", "window"), "tokens")}
    assert window == {N}


@pytest.mark.slow
def test_tensorflow_stamps_without_xla_even_when_compile_is_asked() -> None:
    """A host call per token cannot sit in an XLA program: --timing step runs generate without XLA, even
    under --compile on (with XLA, the tf.py_function of each token's stamp would not compile)."""
    events = run_runner({**TINY, "framework": "tensorflow", "timing": "step", "compile": "on"})
    assert events[-1]["type"] == "done", of(events, "error")
    assert {(e["tokens"], e["decode_steps"]) for e in of(events, "tokens")} == {(N, N)}
    record = generation(events)
    assert record["compile"].startswith("tf.function graph, no XLA (--timing step")
    assert not record["engine"].endswith("XLA")


@pytest.mark.slow
def test_a_prompt_longer_than_the_context_fails_in_one_line() -> None:
    events = run_runner({**TINY, "framework": "torch", "prompt_len": 250, "new_tokens": 10})
    (error,) = of(events, "error")
    assert error["message"] == (
        "GPT-2 mini: a prompt of 250 tokens and 10 new ones (260) is longer than the context (256 positions)"
    )
    assert "\n" not in error["message"] and not of(events, "tokens")


LM = '''
"""A user's token models: one transformers causal LM (it has generate), one plain module and one plain Keras
model (neither has)."""


def with_generate(config):
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(
        GPT2Config(vocab_size=config["vocab"], n_positions=config["seq_len"], n_embd=16, n_layer=2, n_head=2)
    )


def plain_torch(config):
    from torch import nn

    return nn.Sequential(nn.Embedding(config["vocab"], 16), nn.Linear(16, config["vocab"]))


def plain_keras(config):
    import keras

    ids = keras.Input(shape=(config["seq_len"],), dtype="int32")
    x = keras.layers.Embedding(config["vocab"], 16)(ids)
    return keras.Model(ids, keras.layers.Dense(config["vocab"])(x))
'''


def own_lm(tmp_path: Path, builders: dict[str, str]) -> dict[str, Any]:
    (tmp_path / "userlm.py").write_text(textwrap.dedent(LM))
    return catalog.check_definition(
        {
            "paths": [str(tmp_path)],
            "name": "lm",
            "input": "tokens",
            "vocab": 50,
            "seq_len": 16,
            "builders": builders,
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "builder", "says"),
    [
        (
            "torch",
            "userlm:plain_torch",
            "lm: --task generate needs a model with generate (a transformers GenerationMixin, such as a "
            "*ForCausalLM); its torch builder returned a Sequential",
        ),
        (
            "keras-jax",
            "userlm:plain_keras",
            "lm: --task generate on Keras needs a keras_hub CausalLM (its generate); its keras builder "
            "returned a Functional",
        ),
    ],
)
def test_a_user_token_model_without_generate_fails_in_one_line(
    tmp_path: Path, framework: str, builder: str, says: str
) -> None:
    family = "torch" if framework == "torch" else "keras"
    own = own_lm(tmp_path, {family: builder})
    events = run_runner({**TINY, "framework": framework, "model": "lm", "model_def": own})
    (error,) = of(events, "error")
    assert error["message"] == says
    assert not of(events, "tokens")


@pytest.mark.slow
def test_a_user_token_model_with_generate_generates(tmp_path: Path) -> None:
    own = own_lm(tmp_path, {"torch": "userlm:with_generate"})
    events = run_runner({**TINY, "framework": "torch", "model": "lm", "model_def": own, "timing": "step"})
    assert events[-1]["type"] == "done", of(events, "error")
    assert {(e["tokens"], e["decode_steps"]) for e in of(events, "tokens")} == {(N, N)}
    record = generation(events)
    assert record["engine"] == "transformers GPT2LMHeadModel.generate, greedy, static cache"
    assert record["cache_bytes_per_token"] == 2 * 2 * 16 * 4  # from the model's own config


@pytest.mark.slow
def test_one_new_token_has_no_later_tokens() -> None:
    """N = 1 under --timing step: the first token alone; no token_s (the wire's lists are non-empty: an
    empty one would make the line malformed and the step's tokens lost), decode_s 0."""
    events = run_runner({**TINY, "framework": "torch", "new_tokens": 1, "timing": "step"})
    tokens = of(events, "tokens")
    assert len(tokens) == STEPS and events[-1]["type"] == "done"
    assert all(e["tokens"] == 1 and e["decode_s"] == 0 and "token_s" not in e for e in tokens)
