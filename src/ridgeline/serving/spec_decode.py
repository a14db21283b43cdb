"""Speculative decoding: a draft proposes k tokens, the target verifies them in one step.

Each decoding request is scheduled 1 + k tokens (its last sampled token and k drafts) with KV
slots for all of them (lookahead). The verify step accepts the longest prefix of drafts that the
target agrees with, plus one token of its own; the scheduler then rolls ``num_computed_tokens``
back over the rejected drafts and frees the lookahead blocks they no longer need (vLLM v1
``update_from_output``: ``num_computed_tokens -= rejected``).

With each draft accepted independently with probability α, the tokens produced per step are
E = Σ_{i=0..k} α^i = (1 − α^(k+1)) / (1 − α)   (Leviathan, Kalman, Matias, "Fast Inference from
Transformers via Speculative Decoding", ICML 2023, eq. 1).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ridgeline.serving.request import Request
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_DRAFT_TOKENS

DraftProposer = Callable[[Request, int], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class SpecDecodeConfig:
    """k drafts per step, accepted with rate α unless a request gives its own."""

    num_draft_tokens: int
    acceptance_rate: float = 0.7

    def __post_init__(self) -> None:
        check_int("spec_k", self.num_draft_tokens, 1, MAX_DRAFT_TOKENS)
        check_real("spec_accept", self.acceptance_rate, 0.0, 1.0)

    def rate_for(self, request: Request) -> float:
        rate = request.params.spec_acceptance
        return self.acceptance_rate if rate is None else rate


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """E[tokens per verify step] = (1 − α^(k+1)) / (1 − α) (Leviathan et al. 2023, eq. 1)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def draw_accepted(rng: random.Random, alpha: float, k: int) -> int:
    """Drafts accepted: each accepted with probability α until the first rejection."""
    n = 0
    while n < k and rng.random() < alpha:
        n += 1
    return n


def repeat_last_proposer(request: Request, k: int) -> tuple[int, ...]:
    """A stand-in draft: the last token repeated (the simulator only needs the count)."""
    last = request.token(request.num_tokens - 1)
    return (last,) * k
