"""Helpers for the engine tests: tiny twin models (ridgeline and transformers with the same
random weights), a trivial block allocator and a small driver that plays scheduler."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from ridgeline.engine.executor import TorchExecutor
from ridgeline.engine.kv_cache import CacheShape, KVCache
from ridgeline.engine.model import CausalLM
from ridgeline.engine.weights import init_random, to_hf_state
from ridgeline.serving.executor import ScheduledBatch, ScheduledRequest
from ridgeline.specs import parse_config
from ridgeline.specs.model import ModelSpec

VOCAB = 96
INIT_STD = 0.15  # wide logits: top-2 gaps far above fp32 rounding, so argmax is stable


def gpt2_config(layers: int = 2) -> GPT2Config:
    return GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=layers,
        n_head=4,
        n_positions=256,
        attn_implementation="sdpa",
    )


def llama_config(kv_heads: int, layers: int = 2, **extra: Any) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        intermediate_size=48,
        max_position_embeddings=256,
        attn_implementation="sdpa",
        **extra,
    )


def spec_of(config: Any, name: str = "tiny") -> ModelSpec:
    return parse_config(config.to_dict(), name)


def twin(config: Any, seed: int = 0) -> tuple[CausalLM, torch.nn.Module]:
    """A ridgeline model with seeded random weights and a transformers model holding the same."""
    spec = spec_of(config)
    ours = CausalLM(spec, max_positions=256)
    init_random(ours, torch.Generator().manual_seed(seed), std=INIT_STD)
    cls = GPT2LMHeadModel if spec.family == "gpt2" else LlamaForCausalLM
    theirs = cls(config).eval()
    missing, unexpected = theirs.load_state_dict(to_hf_state(ours), strict=False)
    assert unexpected == [] and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    return ours, theirs


def hf_greedy(model: torch.nn.Module, prompt: list[int], n: int) -> list[int]:
    """transformers' greedy continuation of one prompt: argmax of a full forward per token.

    NOTE: not ``generate``: its min-new-tokens processor bans EOS (id 2 in LlamaConfig), which
    these random models do emit; the plain argmax loop has no such processor.
    """
    seq = list(prompt)
    with torch.inference_mode():
        for _ in range(n):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(prompt) :]


def cache_for(model: CausalLM, num_blocks: int, block_size: int, extra: int = 0) -> KVCache:
    s = model.spec
    shape = CacheShape(
        s.num_layers, num_blocks + extra, block_size, s.num_kv_heads, s.head_dim, torch.float32
    )
    return KVCache(shape, torch.device("cpu"))


class Pool:
    """A trivial allocator: shuffled free list (so tables are never contiguous), ref counts."""

    def __init__(self, num_blocks: int, seed: int = 0) -> None:
        self.free = list(range(num_blocks))
        random.Random(seed).shuffle(self.free)
        self.refs = [0] * num_blocks

    def take(self) -> int:
        block = self.free.pop()
        self.refs[block] = 1
        return block

    def share(self, block: int) -> int:
        self.refs[block] += 1
        return block

    def release(self, blocks: list[int]) -> None:
        for b in blocks:
            self.refs[b] -= 1
            assert self.refs[b] >= 0
            if self.refs[b] == 0:
                self.free.append(b)


@dataclass
class Req:
    rid: str
    prompt: list[int]
    max_tokens: int
    arrival: int = 0
    out: list[int] = field(default_factory=list)
    computed: int = 0
    blocks: list[int] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.out

    @property
    def done(self) -> bool:
        return len(self.out) >= self.max_tokens


@dataclass
class Driver:
    """Plays scheduler: FCFS, token budget (chunked prefill), optional preemption and drafts."""

    executor: TorchExecutor
    pool: Pool
    block_size: int
    budget: int
    spec_k: int = 0
    preempt_at: int | None = None
    steps: int = 0
    preemptions: int = 0

    def _grow(self, r: Req, upto: int) -> None:
        while len(r.blocks) * self.block_size < upto:
            r.blocks.append(self.pool.take())

    def _schedule(self, r: Req, left: int) -> ScheduledRequest | None:
        owed = len(r.tokens) - r.computed
        n = min(owed, left)
        if n <= 0:
            return None
        token_ids = r.tokens[r.computed : r.computed + n]
        drafts: tuple[int, ...] = ()
        if owed == 1 and self.spec_k:
            room = r.max_tokens - len(r.out) - 1
            drafts = self.executor.drafts(r.rid)[: max(room, 0)][: max(left - 1, 0)]
        self._grow(r, r.computed + n + len(drafts))
        return ScheduledRequest(
            r.rid,
            (*token_ids, *drafts),
            r.computed,
            tuple(r.blocks),
            len(drafts),
            sample=n == owed,
        )

    def step(self, active: list[Req]) -> None:
        left, scheduled = self.budget, []
        for r in active:
            s = self._schedule(r, left)
            if s is not None:
                scheduled.append(s)
                left -= len(s.token_ids)
        result = self.executor.execute(
            ScheduledBatch(self.steps, tuple(scheduled), self.block_size)
        )
        for s in scheduled:
            r = next(x for x in active if x.rid == s.request_id)
            r.computed += len(s.token_ids) - s.num_draft_tokens
            toks = result.sampled.get(s.request_id, ())
            r.computed += max(len(toks) - 1, 0)
            r.out.extend(toks[: r.max_tokens - len(r.out)])
            if r.done:
                self.pool.release(r.blocks)
                r.blocks = []
        self.steps += 1

    def preempt(self, r: Req) -> None:
        """Recompute preemption: free every block, forget the computed tokens."""
        self.pool.release(r.blocks)
        r.blocks, r.computed = [], 0
        self.preemptions += 1

    def run(self, reqs: list[Req]) -> None:
        while not all(r.done for r in reqs):
            active = [r for r in reqs if r.arrival <= self.steps and not r.done]
            if self.preempt_at == self.steps and active:
                self.preempt(active[-1])
            self.step(active)
