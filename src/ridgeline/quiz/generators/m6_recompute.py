"""Module 6, why the KV cache exists: recomputing K and V of the context against reading them,
priced on the roofline (``analytic.recompute``, the ``ridgeline recompute`` command)."""

from __future__ import annotations

import random

from ridgeline.analytic.recompute import recompute_point
from ridgeline.quiz.generators.common import FIVE, GQA_MODELS, givens, model_givens, pick, traps
from ridgeline.quiz.types import Given, Kind, Mistake, Module, Question
from ridgeline.specs import Accelerator, DType, ModelSpec, get_accelerator, get_model
from ridgeline.specs.units import GiB, fmt_seconds


def _givens(m: ModelSpec, acc: Accelerator, context: int, recompute_s: float) -> tuple[Given, ...]:
    bw = acc.device_bandwidth_bytes_per_s
    return givens(
        [
            *model_givens(m),
            ("context", f"{context:,}"),
            ("bytes per element", "2"),
            (f"{acc.device_level} bandwidth", f"{bw:.4e} B/s"),
            ("prefill of the context (roofline)", f"{recompute_s:.4e} s"),
        ]
    )


def recompute_q(rng: random.Random, model: str, accelerator: str, context: int) -> Question:
    """How many times longer rebuilding the context's K and V takes than reading them."""
    del rng
    m, acc = get_model(model), get_accelerator(accelerator)
    p = recompute_point(m, acc, context)
    bw = acc.device_bandwidth_bytes_per_s
    mha = p.kv_bytes * m.num_heads / m.num_kv_heads
    tol = 0.03
    return Question(
        generator="recompute_cache",
        module=Module.KV_SIZING,
        kind=Kind.NUMERIC,
        prompt=(
            f"Decode of {model} (bf16 weights and KV) on one {accelerator}, one sequence with "
            f"{context:,} tokens of context. Without a KV cache, each step must rebuild the K "
            f"and V of the context: a prefill of its {context:,} tokens, which takes "
            f"{fmt_seconds(p.recompute_s)} on the roofline. How many times longer is that than "
            f"reading the cached K and V from {acc.device_level} at its bandwidth?"
        ),
        givens=_givens(m, acc, context, p.recompute_s),
        params={"model": model, "accelerator": accelerator, "context": context},
        answer=p.ratio,
        unit="x",
        rel_tol=tol,
        choices=traps(
            p.ratio,
            [
                (Mistake.KV_ALL_QUERY_HEADS, p.recompute_s / (mha / bw)),
                (Mistake.KV_WITHOUT_V, p.recompute_s / (p.kv_bytes / 2 / bw)),
                (Mistake.GIB_FOR_GB, p.recompute_s / (p.kv_bytes / GiB / (bw / 1e9))),
            ],
            tol,
            lambda v: f"{v:,.4g}",
        ),
        solution=(
            f"KV kept = 2 (K,V) × {m.num_layers} layers × {context:,} × {m.num_kv_heads} KV "
            f"heads × {m.head_dim} × 2 B = {p.kv_bytes:,.0f} B; reading it takes "
            f"{fmt_seconds(p.read_s)}, so recomputing is {p.ratio:,.4g}× slower. The prefill "
            f"does {p.recompute_flops:.3e} FLOPs: {p.flops_per_byte:,.0f} FLOP per byte of KV "
            f"not kept, far above the ridge point of "
            f"{acc.peak(DType.BF16) / bw:,.3g} FLOP/B: every accelerator caches, "
            f"and what the cache costs is capacity (ridgeline recompute)."
        ),
    )


def recompute_cache(rng: random.Random) -> Question:
    """Draw a model, one of the five architectures and a context."""
    return recompute_q(
        rng,
        pick(rng, GQA_MODELS),
        pick(rng, FIVE),
        pick(rng, (1024, 4096, 16384)),
    )
