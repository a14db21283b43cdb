"""``TorchExecutor``: the ``serving.Executor`` that runs a real forward pass.

One ``execute`` = KV block moves (swap out, swap in, copy-on-write) → one forward pass over the
step's mixed batch → logits for the rows that sample → sampling or speculative verification →
draft proposals for the next step. The step time is measured around all of it.

Rows that sample, for a request with n new tokens of which k are drafts::

    token_ids   [ t  d1  d2  d3 ]          n = 4, k = 3
    rows          .   .   .   .  ← all k + 1 rows verify: row j predicts the token after it
    plain         .   .   .   x  ← only the last row (a prompt's end, or a decode token)
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass

import torch

from ridgeline.engine.attention import DecodeKernel, build_metadata
from ridgeline.engine.kv_cache import KVCache
from ridgeline.engine.model import CausalLM
from ridgeline.engine.sampling import SamplingParams, sample
from ridgeline.engine.spec_decode import Drafter, Proposal, ProposeInput, verify
from ridgeline.serving.executor import ScheduledBatch, ScheduledRequest, StepResult


@dataclass(slots=True)
class RequestState:
    """Per-request sampling state the executor keeps between steps."""

    params: SamplingParams
    generator: torch.Generator
    proposal: Proposal | None = None


class TorchExecutor:
    """Runs ``ScheduledBatch``es on a ``CausalLM`` over a paged ``KVCache``.

    Args:
        model: the target model.
        cache: its paged KV cache (same ``block_size`` as the scheduler's pool).
        kernel: in-place paged decode kernel, or None for the gather path.
        drafter: speculative-decoding draft runner, or None.
        seed: derives the generator of a request whose params carry no seed.
    """

    def __init__(
        self,
        model: CausalLM,
        cache: KVCache,
        kernel: DecodeKernel | None = None,
        drafter: Drafter | None = None,
        seed: int = 0,
    ) -> None:
        self.model, self.cache, self.kernel, self.drafter = model, cache, kernel, drafter
        self.seed = seed
        self.device = cache.k[0].device
        self.requests: dict[str, RequestState] = {}

    def add_request(self, request_id: str, params: SamplingParams) -> None:
        """Register how ``request_id`` samples (unregistered requests decode greedily)."""
        seed = params.seed if params.seed is not None else self._derived_seed(request_id)
        self.requests[request_id] = RequestState(params, torch.Generator().manual_seed(seed))

    def remove_request(self, request_id: str) -> None:
        """Forget a finished request's sampling state."""
        self.requests.pop(request_id, None)

    def drafts(self, request_id: str) -> tuple[int, ...]:
        """Tokens the draft model proposed for ``request_id``'s next step (empty if none)."""
        state = self.requests.get(request_id)
        return () if state is None or state.proposal is None else state.proposal.tokens

    def _derived_seed(self, request_id: str) -> int:
        return (self.seed * 1_000_003 + zlib.crc32(request_id.encode())) % (2**63)

    def _state(self, request_id: str) -> RequestState:
        if request_id not in self.requests:
            self.add_request(request_id, SamplingParams())
        return self.requests[request_id]

    def _caches(self) -> list[KVCache]:
        """The target's cache, and a separate draft model's (it follows the same tables)."""
        if self.drafter is None or self.drafter.shares_target_cache:
            return [self.cache]
        return [self.cache, self.drafter.cache]

    @torch.inference_mode()
    def execute(self, batch: ScheduledBatch) -> StepResult:
        """One step: block moves, forward pass, sampling, proposals; timed end to end."""
        start = time.perf_counter()
        for cache in self._caches():
            cache.swap_out(batch.swap_out)  # before swap_in: a freed block may be reused
            cache.swap_in(batch.swap_in)
            cache.copy_blocks(batch.copies)
        sampled: dict[str, tuple[int, ...]] = {}
        if batch.requests:
            sampled = self._forward(batch)
        return StepResult(sampled=sampled, time_s=time.perf_counter() - start)

    def _forward(self, batch: ScheduledBatch) -> dict[str, tuple[int, ...]]:
        meta = build_metadata(batch.requests, batch.block_size, self.device)
        ids = [t for r in batch.requests for t in r.token_ids]
        input_ids = torch.tensor(ids, dtype=torch.long, device=self.device)  # [T]
        hidden = self.model(input_ids, self.cache, meta, self.kernel)  # [T, hidden]
        rows, owners = self._sample_rows(batch.requests)
        logits = self.model.logits(hidden.index_select(0, rows.to(self.device)))  # [N, vocab]
        if self.drafter is not None:
            self.drafter.catch_up(input_ids, meta, self.kernel)
        sampled = self._greedy(owners, logits)
        for req, (lo, hi) in owners:
            if req.request_id not in sampled:
                sampled[req.request_id] = self._pick(req, logits[lo:hi])
        if self.drafter is not None:
            self._propose(batch.requests, sampled)
        return sampled

    @staticmethod
    def _sample_rows(
        reqs: tuple[ScheduledRequest, ...],
    ) -> tuple[torch.Tensor, list[tuple[ScheduledRequest, tuple[int, int]]]]:
        """Rows of the step's tokens that need logits, and each request's range among them."""
        rows: list[int] = []
        owners = []
        row = 0
        for r in reqs:
            row += len(r.token_ids)
            if r.sample:
                n = r.num_draft_tokens + 1
                owners.append((r, (len(rows), len(rows) + n)))
                rows.extend(range(row - n, row))
        return torch.tensor(rows, dtype=torch.long), owners

    def _greedy(
        self, owners: list[tuple[ScheduledRequest, tuple[int, int]]], logits: torch.Tensor
    ) -> dict[str, tuple[int, ...]]:
        """Every greedy request without drafts, from one argmax over the step's logits (per
        request, an argmax and an ``int()`` would cost a dispatch each)."""
        picks = [
            (req.request_id, hi - 1)
            for req, (_, hi) in owners
            if req.num_draft_tokens == 0 and self._state(req.request_id).params.greedy
        ]
        if not picks:
            return {}
        ops = self.model.fused_ops
        if ops is not None and logits.dtype == torch.float32 and logits.device.type == "cpu":
            best = ops.argmax_rows(logits.contiguous()).tolist()  # [N]
        else:
            best = logits.argmax(-1).tolist()  # [N]
        return {rid: (best[row],) for rid, row in picks}

    def _pick(self, req: ScheduledRequest, logits: torch.Tensor) -> tuple[int, ...]:
        """Sample one token, or verify ``num_draft_tokens`` drafts (logits: [k + 1, vocab])."""
        state = self._state(req.request_id)
        k = req.num_draft_tokens
        if k == 0:
            return (sample(logits[-1], state.params, state.generator),)
        drafts = req.token_ids[-k:]
        q = None
        prop = state.proposal
        draft_pos = req.start_position + len(req.token_ids) - k - 1
        if prop is not None and prop.position == draft_pos and prop.tokens[:k] == drafts:
            q = prop.probs[:k]
        return verify(logits, drafts, q, state.params, state.generator)

    def _propose(
        self, reqs: tuple[ScheduledRequest, ...], sampled: dict[str, tuple[int, ...]]
    ) -> None:
        """Ask the drafter for the next step's drafts of every request that sampled."""
        assert self.drafter is not None
        inputs = []
        for r in reqs:
            state = self._state(r.request_id)
            state.proposal = None
            toks = sampled.get(r.request_id)
            if not toks:
                continue
            accepted = len(toks) - 1
            position = r.start_position + len(r.token_ids) - r.num_draft_tokens + accepted
            inputs.append(
                ProposeInput(
                    r.request_id, toks[-1], position, r.block_ids, state.params, state.generator
                )
            )
        for rid, prop in self.drafter.propose(inputs, self.kernel).items():
            self.requests[rid].proposal = prop
