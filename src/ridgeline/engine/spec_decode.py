"""Speculative decoding: a draft model proposes k tokens, the target verifies them in one pass.

Verification is speculative sampling (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023):
draft token x with draft probability q(x) and target probability p(x) is accepted with
probability min(1, p(x)/q(x)); on the first rejection a token is drawn from
norm(max(0, p − q)); when all k are accepted a bonus token is drawn from the target's next
distribution. The output distribution equals the target's; under greedy decoding p and q are
one-hot, so a draft is accepted exactly when it equals the target's argmax and the tokens are
identical to plain decoding.

The draft keeps its KV in a paged cache of the same geometry as the target's, indexed by the
same block tables:

- a **separate draft model** has its own cache and re-runs every batch the target runs
  ("catch-up"), so its KV always covers what the target's does;
- a **self-draft** (the target's first layers, early exit) shares the target's cache for those
  layers and needs no catch-up at all.

Proposing writes K/V for positions the scheduler has not allocated yet, so proposals go to
scratch blocks past the pool's ``num_blocks``; the request's partial last block is first copied
to its scratch block so its earlier keys stay visible::

    block table      [ 7 | 2 | 9 ]          p = 37 (next position), block_size 16
    proposal table   [ 7 | 2 | s0 | s1 ]    s0 ← copy of 9 (positions 32..36), then 37.. in s0, s1
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ridgeline.engine.attention import AttentionMetadata, DecodeKernel, build_metadata
from ridgeline.engine.kv_cache import KVCache
from ridgeline.engine.model import CausalLM
from ridgeline.engine.sampling import SamplingParams, probabilities
from ridgeline.serving.executor import ScheduledRequest


@dataclass(frozen=True, slots=True)
class Proposal:
    """Draft tokens for one request, starting right after position ``position``'s token."""

    position: int
    tokens: tuple[int, ...]
    probs: torch.Tensor  # [k, vocab] the draft distribution each token was drawn from


@dataclass(frozen=True, slots=True)
class ProposeInput:
    """One request to propose for: its newest token, that token's position, its block table."""

    request_id: str
    token: int
    position: int
    block_ids: tuple[int, ...]
    params: SamplingParams
    generator: torch.Generator


class Drafter:
    """Runs the draft model: catch-up on the target's batches, then k proposal steps.

    Args:
        model: the draft ``CausalLM`` (vocabulary shared with the target).
        cache: its paged cache; blocks ``[first_scratch, num_blocks)`` are scratch.
        first_scratch: the first scratch block (= the scheduler pool's block count).
        num_speculative_tokens: k.
        shares_target_cache: True for a self-draft whose cache layers are the target's.
    """

    def __init__(
        self,
        model: CausalLM,
        cache: KVCache,
        first_scratch: int,
        num_speculative_tokens: int,
        shares_target_cache: bool,
    ) -> None:
        self.model, self.cache, self.k = model, cache, num_speculative_tokens
        self.first_scratch = first_scratch
        self.shares_target_cache = shares_target_cache
        bs = cache.shape.block_size
        self.blocks_per_request = 1 + (num_speculative_tokens + bs - 1) // bs
        self.max_requests = (cache.shape.num_blocks - first_scratch) // self.blocks_per_request

    def catch_up(
        self, input_ids: torch.Tensor, meta: AttentionMetadata, kernel: DecodeKernel | None
    ) -> None:
        """Run the target's batch through the draft so its KV covers the same positions."""
        if not self.shares_target_cache:
            self.model(input_ids, self.cache, meta, kernel)

    def _tables(self, reqs: list[ProposeInput]) -> list[tuple[int, ...]]:
        """Proposal block tables; copies each partial last block into its first scratch block."""
        bs, m = self.cache.shape.block_size, self.blocks_per_request
        tables, copies = [], []
        for i, r in enumerate(reqs):
            scratch = tuple(range(self.first_scratch + i * m, self.first_scratch + (i + 1) * m))
            keep = r.position // bs
            if r.position % bs:
                copies.append((r.block_ids[keep], scratch[0]))
            tables.append(tuple(r.block_ids[:keep]) + scratch)
        self.cache.copy_blocks(tuple(copies))
        return tables

    def propose(self, reqs: list[ProposeInput], kernel: DecodeKernel | None) -> dict[str, Proposal]:
        """k batched draft decode steps; returns each request's proposal."""
        reqs = reqs[: self.max_requests]
        if not reqs or self.k == 0:
            return {}
        tables = self._tables(reqs)
        tokens = [[r.token] for r in reqs]
        probs: list[list[torch.Tensor]] = [[] for _ in reqs]
        for j in range(self.k):
            seqs = [
                ScheduledRequest(r.request_id, (tok[-1],), r.position + j, table)
                for r, tok, table in zip(reqs, tokens, tables, strict=True)
            ]
            meta = build_metadata(seqs, self.cache.shape.block_size, self.cache.k[0].device)
            ids = torch.tensor([t[-1] for t in tokens], device=self.cache.k[0].device)  # [R]
            logits = self.model.logits(self.model(ids, self.cache, meta, kernel))  # [R, vocab]
            for i, r in enumerate(reqs):
                q = probabilities(logits[i : i + 1], r.params)[0]  # [vocab]
                tok = _draw(q, r.params, r.generator)
                tokens[i].append(tok)
                probs[i].append(q)
        return {
            r.request_id: Proposal(r.position, tuple(tok[1:]), torch.stack(q))
            for r, tok, q in zip(reqs, tokens, probs, strict=True)
        }


def _draw(probs: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    if params.greedy:
        return int(probs.argmax())
    return int(torch.multinomial(probs, 1, generator=generator))


def verify(
    target_logits: torch.Tensor,
    drafts: tuple[int, ...],
    draft_probs: torch.Tensor | None,
    params: SamplingParams,
    generator: torch.Generator,
) -> tuple[int, ...]:
    """Accepted drafts plus one target token (Leviathan et al. 2023, Algorithm 1).

    Args:
        target_logits: [k + 1, vocab]; row j is the target's prediction after draft j − 1.
        drafts: the k draft tokens.
        draft_probs: [k, vocab] the draft distributions, or None for a deterministic proposer
            (then q is one-hot on each draft, which keeps the rule exact).
    """
    if params.greedy:
        best = target_logits.argmax(-1).tolist()  # [k + 1]
        n = next((j for j, x in enumerate(drafts) if x != best[j]), len(drafts))
        return (*drafts[:n], best[n])
    p = probabilities(target_logits, params)  # [k + 1, vocab]
    q = draft_probs
    if q is None:
        q = torch.zeros_like(p[:-1]).scatter_(-1, torch.tensor(drafts)[:, None], 1.0)  # [k, vocab]
    for j, x in enumerate(drafts):
        u = float(torch.rand((), generator=generator))
        if u * float(q[j, x]) >= float(p[j, x]):  # reject: u >= p(x) / q(x)
            residual = (p[j] - q[j]).clamp_min(0)  # [vocab]
            mass = float(residual.sum())
            residual = residual / mass if mass > 0 else p[j]
            return (*drafts[:j], _draw(residual, params, generator))
    return (*drafts, _draw(p[-1], params, generator))
