"""Module 7, managing KV at run time: PagedAttention blocks, the waste of contiguous
reservation, prefix-cache savings, and the tokens per step of speculative decoding.

The block counts come from the serving runtime's own allocator (``quiz.runtime``) and the
speculative-decoding expectation from ``serving.spec_decode``."""

from __future__ import annotations

import random

from ridgeline.analytic.kv import kv_bytes_per_token
from ridgeline.quiz.generators.common import GQA_MODELS, givens, model_givens, pick, traps
from ridgeline.quiz.runtime import paged_table_blocks, prefix_cache_blocks, reservation
from ridgeline.quiz.types import Kind, Mistake, Module, Question
from ridgeline.serving.spec_decode import expected_tokens_per_step
from ridgeline.specs import get_model
from ridgeline.specs.units import GB, MB, GiB, MiB


def paged_blocks_q(rng: random.Random, prompt: int, output: int, block_size: int) -> Question:
    """KV blocks a finished request holds under PagedAttention."""
    del rng
    tokens = prompt + output
    answer = paged_table_blocks(tokens, block_size)
    return Question(
        generator="paged_blocks",
        module=Module.KV_RUNTIME,
        kind=Kind.NUMERIC,
        prompt=(
            f"Under PagedAttention with blocks of {block_size} tokens, a request has a "
            f"{prompt:,}-token prompt and has generated {output:,} tokens. How many KV blocks "
            f"does it hold?"
        ),
        givens=givens(
            [
                ("prompt", f"{prompt:,}"),
                ("generated", f"{output:,}"),
                ("block size", str(block_size)),
            ]
        ),
        params={"prompt": prompt, "output": output, "block_size": block_size},
        answer=float(answer),
        unit="blocks",
        choices=traps(
            answer,
            [
                (Mistake.NO_CEIL, float(tokens // block_size)),
                (Mistake.TOKENS_NOT_BLOCKS, float(tokens)),
            ],
            0.0,
            lambda v: f"{v:.0f}",
        ),
        solution=(
            f"⌈({prompt:,} + {output:,}) ÷ {block_size}⌉ = ⌈{tokens:,} ÷ {block_size}⌉ = "
            f"{answer} blocks; the last one holds {tokens - (answer - 1) * block_size} tokens, so "
            f"{answer * block_size - tokens} slots are unused (Kwon et al., SOSP 2023)."
        ),
    )


def paged_blocks_gen(rng: random.Random) -> Question:
    """Draw a PagedAttention blocks question whose last block is partly filled."""
    block = pick(rng, (8, 16, 32))
    prompt = rng.randrange(50, 4000)
    output = rng.randrange(1, 1000)
    if (prompt + output) % block == 0:
        output += 1
    return paged_blocks_q(rng, prompt, output, block)


def contiguous_waste_q(
    rng: random.Random, model: str, tokens: int, max_len: int, block_size: int
) -> Question:
    """MB of KV that reserving ``max_len`` contiguously wastes, beyond paging's waste."""
    del rng
    m = get_model(model)
    per = kv_bytes_per_token(m)
    slots = reservation(tokens, max_len, block_size)
    waste = slots.reserved_waste_tokens * per
    paged = slots.paged_waste_tokens * per
    mha_per = kv_bytes_per_token(m.with_kv_heads(m.num_heads))
    tol = 0.02
    return Question(
        generator="contiguous_waste",
        module=Module.KV_RUNTIME,
        kind=Kind.NUMERIC,
        prompt=(
            f"A {model} request (bf16 KV) ends with {tokens:,} tokens. A contiguous allocator "
            f"reserved max_len = {max_len:,} token slots for it at admission. How many MB (1e6 B) "
            f"of that reservation were never used?"
        ),
        givens=givens([*model_givens(m), ("tokens", f"{tokens:,}"), ("max_len", f"{max_len:,}")]),
        params={"model": model, "tokens": tokens, "max_len": max_len, "block_size": block_size},
        answer=waste / MB,
        unit="MB",
        rel_tol=tol,
        choices=traps(
            waste / MB,
            [
                (Mistake.GIB_FOR_GB, waste / MiB),
                (
                    Mistake.KV_ALL_QUERY_HEADS,
                    slots.reserved_waste_tokens * mha_per / MB,
                ),
            ],
            tol,
            lambda v: f"{v:.4g} MB",
        ),
        solution=(
            f"KV per token = 2 × {m.num_layers} × {m.num_kv_heads} × {m.head_dim} × 2 B = "
            f"{per:,.0f} B; unused slots = {max_len:,} − {tokens:,} = "
            f"{max_len - tokens:,}, i.e. {waste / MB:.4g} MB. PagedAttention with "
            f"{block_size}-token blocks would waste only {paged / MB:.3g} MB (the last "
            f"block's tail)."
        ),
    )


def contiguous_waste(rng: random.Random) -> Question:
    """Draw a contiguous-reservation waste question with 16-token paged blocks."""
    max_len = pick(rng, (2048, 4096, 8192))
    return contiguous_waste_q(
        rng, pick(rng, GQA_MODELS), rng.randrange(100, max_len // 2), max_len, 16
    )


def prefix_savings_q(
    rng: random.Random,
    model: str,
    num_requests: int,
    prefix_len: int,
    suffix_len: int,
    block_size: int,
) -> Question:
    """GB of KV that prefix caching saves for a shared system prompt, counted by admitting the
    requests into the serving runtime's block pool with and without prefix caching."""
    del rng
    per = kv_bytes_per_token(m := get_model(model))
    without, with_cache = prefix_cache_blocks(num_requests, prefix_len, suffix_len, block_size)
    saved = (without - with_cache) * block_size * per
    shared_tokens = (without - with_cache) // (num_requests - 1) * block_size
    tol = 0.02
    params = {"model": model, "num_requests": num_requests, "prefix_len": prefix_len}
    params |= {"suffix_len": suffix_len, "block_size": block_size}
    mistakes = [
        (Mistake.PARTIAL_BLOCK_SHARED, (num_requests - 1) * prefix_len * per / GB),
        (Mistake.ALL_REQUESTS_SAVE, num_requests * shared_tokens * per / GB),
        (Mistake.GIB_FOR_GB, saved / GiB),
    ]
    return Question(
        generator="prefix_savings",
        module=Module.KV_RUNTIME,
        kind=Kind.NUMERIC,
        prompt=(
            f"{num_requests} concurrent requests to {model} (bf16 KV) start with the same "
            f"{prefix_len:,}-token system prompt, then each adds {suffix_len} tokens of its own. "
            f"With prefix caching over {block_size}-token blocks (only full blocks are shared), "
            f"how many GB (1e9 B) of KV does the cache save compared with every request "
            f"storing its own copy?"
        ),
        givens=givens(
            [
                *model_givens(m),
                ("requests", str(num_requests)),
                ("shared prefix", f"{prefix_len:,} tokens"),
                ("own tokens per request", str(suffix_len)),
                ("block size", str(block_size)),
            ]
        ),
        params=params,
        answer=saved / GB,
        unit="GB",
        rel_tol=tol,
        choices=traps(saved / GB, mistakes, tol, lambda v: f"{v:.4g} GB"),
        solution=_prefix_solution(num_requests, prefix_len, block_size, per, saved),
    )


def _prefix_solution(
    num_requests: int, prefix_len: int, block_size: int, per: float, saved: float
) -> str:
    shared = prefix_len // block_size
    return (
        f"Shared full blocks = ⌊{prefix_len:,} ÷ {block_size}⌋ = {shared} "
        f"({shared * block_size:,} tokens); KV per token = {per:,.0f} B; the first request "
        f"stores them, the other {num_requests - 1} reuse them: saved = {num_requests - 1} × "
        f"{shared * block_size:,} × {per:,.0f} B = {saved / GB:.4g} GB."
    )


def prefix_savings(rng: random.Random) -> Question:
    """Draw a prefix-caching question whose prefix ends in a partial block."""
    block = pick(rng, (16, 32))
    # At most 20 full blocks, so sharing the partial block is a mistake beyond the 2% tolerance.
    prefix = rng.randrange(2, 21) * block + rng.randrange(block // 2, block)
    model, num_requests = pick(rng, GQA_MODELS), pick(rng, (4, 8, 16, 64))
    return prefix_savings_q(rng, model, num_requests, prefix, rng.randrange(20, 200), block)


def spec_decode_q(rng: random.Random, accept_rate: float, num_draft: int) -> Question:
    """Expected tokens per target step of speculative decoding."""
    del rng
    answer = expected_tokens_per_step(accept_rate, num_draft)
    tol = 0.01
    return Question(
        generator="spec_decode",
        module=Module.KV_RUNTIME,
        kind=Kind.NUMERIC,
        prompt=(
            f"Speculative decoding: a draft model proposes k = {num_draft} tokens per step and "
            f"the target accepts each with probability α = {accept_rate} independently, stopping "
            f"at the first rejection (the target then adds one token of its own). How many "
            f"tokens does one target step produce on average?"
        ),
        givens=givens([("k", str(num_draft)), ("α", str(accept_rate))]),
        params={"accept_rate": accept_rate, "num_draft": num_draft},
        answer=answer,
        unit="tokens",
        rel_tol=tol,
        choices=traps(
            answer,
            [(Mistake.LINEAR_ACCEPTANCE, 1 + num_draft * accept_rate)],
            tol,
            lambda v: f"{v:.4g}",
        ),
        solution=(
            f"E[tokens] = (1 − α^(k+1)) ÷ (1 − α) = (1 − {accept_rate}^{num_draft + 1}) ÷ "
            f"(1 − {accept_rate}) = {answer:.4g} (Leviathan et al., ICML 2023, Eq. 1); each "
            f"step also allocates {num_draft} lookahead KV slots and rolls back the rejected ones."
        ),
    )


def spec_decode(rng: random.Random) -> Question:
    """Draw a speculative-decoding question: α from 0.6 to 0.9, k from 3 to 7."""
    return spec_decode_q(rng, pick(rng, (0.6, 0.7, 0.8, 0.9)), pick(rng, (3, 4, 5, 7)))
