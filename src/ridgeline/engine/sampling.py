"""Token sampling: greedy, temperature, top-k and top-p (nucleus, Holtzman et al. 2020), each
request with its own seeded ``torch.Generator`` so a run is reproducible whatever it is batched
with."""

from __future__ import annotations

import torch

# one class for the simulator and the engine (docs/design.md, "Glossary"); re-exported here
from ridgeline.serving.request import MAX_TEMPERATURE as MAX_TEMPERATURE
from ridgeline.serving.request import SamplingParams as SamplingParams


def probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The distribution ``params`` samples from, for logits ``[N, vocab]`` → ``[N, vocab]``.

    Greedy gives a one-hot on the argmax, so speculative verification treats both cases alike.
    """
    if params.greedy:
        probs = torch.zeros_like(logits)  # [N, vocab]
        return probs.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    scaled = logits / params.temperature  # [N, vocab]
    overflow = ~torch.isfinite(scaled.amax(-1, keepdim=True))  # [N, 1]
    if overflow.any():
        # NOTE: a temperature so small (1e-300; below ~1e-45 it is 0 in fp32) that the largest
        # logit overflows: softmax would make NaN of inf - inf, and its limit is the argmax
        # (ties shared), so those rows get exactly that.
        top = logits == logits.amax(-1, keepdim=True)  # [N, vocab]
        argmax = torch.zeros_like(logits).masked_fill(~top, float("-inf"))  # [N, vocab]
        scaled = torch.where(overflow, argmax, scaled)
    if 0 < params.top_k < scaled.shape[-1]:
        kth = scaled.topk(params.top_k, dim=-1).values[..., -1:]  # [N, 1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < 1.0:
        scaled = _top_p(scaled, params.top_p)
    return torch.softmax(scaled, dim=-1)  # [N, vocab]


def _top_p(scaled: torch.Tensor, top_p: float) -> torch.Tensor:
    """Mask tokens outside the nucleus: keep a token while the mass before it is < top_p, and
    always the most likely one (Holtzman et al. 2020: the nucleus is never empty; HF's
    ``min_tokens_to_keep=1``)."""
    sorted_logits, order = scaled.sort(dim=-1, descending=True)  # [N, vocab]
    probs = torch.softmax(sorted_logits, dim=-1)  # [N, vocab]
    before = probs.cumsum(-1) - probs  # [N, vocab] mass of strictly more likely tokens
    # NOTE: a top_p below fp32's smallest subnormal (1e-320) compares as 0, so "before >= top_p"
    # held for the first token too: every logit -inf, softmax NaN, and the engine thread died.
    outside = before >= top_p  # [N, vocab]
    outside[..., 0] = False
    sorted_logits = sorted_logits.masked_fill(outside, float("-inf"))
    return torch.full_like(scaled, float("-inf")).scatter_(-1, order, sorted_logits)


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """One token from ``logits`` [vocab] under ``params``."""
    if params.greedy:
        return int(logits.argmax())
    probs = probabilities(logits[None], params)[0]  # [vocab]
    return int(torch.multinomial(probs, 1, generator=generator))
