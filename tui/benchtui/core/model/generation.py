"""Generation (issue 34): a generate run's steps as the parent folds them from the runner's ``tokens``
events (``benchtui_runners.wire.TokensEvent``), for the live screen and the cell's ``GenerationFigures``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TokenStep:
    """One generate step: a batch of ``sequences`` prompts given ``new_tokens`` tokens each (seconds)."""

    epoch: int
    step: int
    sequences: int
    prompt_len: int
    new_tokens: int
    first_token_s: float
    decode_s: float
    token_s: tuple[float, ...] = ()  # --timing step: each later token's latency (N - 1 of them)
    tokens: int | None = None
    decode_steps: int | None = None

    @property
    def token_latency_s(self) -> float | None:
        """The mean latency of a token after the first (None: one new token, no later token)."""
        return self.decode_s / (self.new_tokens - 1) if self.new_tokens > 1 and self.decode_s > 0 else None

    @property
    def tokens_per_s(self) -> float | None:
        """One sequence's tokens after the first per second of decoding."""
        latency = self.token_latency_s
        return 1.0 / latency if latency else None

    @property
    def batch_tokens_per_s(self) -> float | None:
        """The batch's tokens after the first per second of decoding."""
        per_sequence = self.tokens_per_s
        return per_sequence * self.sequences if per_sequence is not None else None


@dataclass
class GenerationRun:
    """A run's generate steps in the order they came."""

    steps: list[TokenStep] = field(default_factory=list)

    def latest(self) -> TokenStep | None:
        return self.steps[-1] if self.steps else None


def token_step_of_event(event: Any) -> TokenStep:
    """A ``tokens`` event (checked by the wire's statement) as a ``TokenStep``; ValueError where its numbers
    cannot be one generate step (``token_s`` that is not N - 1 latencies, a sequence's count beyond N)."""
    new_tokens = int(event["new_tokens"])
    gaps = event.get("token_s")
    token_s = tuple(float(v) for v in gaps) if isinstance(gaps, list) else ()
    if token_s and len(token_s) != new_tokens - 1:
        raise ValueError(f"tokens.token_s has {len(token_s)} latencies for {new_tokens} new tokens")
    tokens, steps = event.get("tokens"), event.get("decode_steps")
    return TokenStep(
        epoch=int(event["epoch"]),
        step=int(event["step"]),
        sequences=int(event["sequences"]),
        prompt_len=int(event["prompt_len"]),
        new_tokens=new_tokens,
        first_token_s=float(event["first_token_s"]),
        decode_s=float(event["decode_s"]),
        token_s=token_s,
        tokens=int(tokens) if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        decode_steps=int(steps) if isinstance(steps, int) and not isinstance(steps, bool) else None,
    )
