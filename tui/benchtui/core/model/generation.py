"""Generation (issue 34): a generate run's steps as the parent folds them from the runner's ``tokens``
events (``benchtui_runners.wire.TokensEvent``), for the live screen and the cell's ``GenerationFigures``."""

from __future__ import annotations

from dataclasses import dataclass, field


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
