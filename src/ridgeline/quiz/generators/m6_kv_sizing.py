"""Module 6, sizing the KV cache: its size, the context where it passes the weights, the bytes
a technique saves, and the bytes one token adds."""

from __future__ import annotations

import random

from ridgeline.analytic.kv import (
    crossover_context,
    kv_bytes,
    kv_bytes_per_token,
    mha_head_dim,
    techniques,
    weights_bytes,
)
from ridgeline.quiz.generators.common import (
    GQA_MODELS,
    givens,
    model_givens,
    numeric_choices,
    pick,
    seqs,
    traps,
)
from ridgeline.quiz.types import Kind, Mistake, Module, Question
from ridgeline.specs import DType, get_model
from ridgeline.specs.units import GB, KB, GiB, KiB


def kv_size_q(rng: random.Random, model: str, batch: int, context: int, kv_dtype: str) -> Question:
    """KV-cache size in GB, multiple choice against the classic mistakes."""
    m, dt = get_model(model), DType.parse(kv_dtype)
    size = kv_bytes(m, batch, context, dt)
    mha = kv_bytes(m.with_kv_heads(m.num_heads), batch, context, dt)
    tol = 0.02
    choices, key = numeric_choices(
        rng,
        size / GB,
        [
            (Mistake.KV_ALL_QUERY_HEADS, mha / GB),
            (Mistake.GIB_FOR_GB, size / GiB),
            (Mistake.KV_WITHOUT_V, size / 2 / GB),
        ],
        lambda v: f"{v:.4g} GB",
        tol,
    )
    return Question(
        generator="kv_size",
        module=Module.KV_SIZING,
        kind=Kind.CHOICE,
        prompt=(
            f"How large is the KV cache of {model} for {seqs(batch)} of {context:,} tokens "
            f"with a {dt.value} cache? (GB = 1e9 bytes)"
        ),
        givens=givens(
            [
                *model_givens(m),
                ("batch", str(batch)),
                ("context", f"{context:,}"),
                ("bytes per element", f"{dt.bytes:g}"),
            ]
        ),
        params={"model": model, "batch": batch, "context": context, "kv_dtype": dt.value},
        answer=key,
        rel_tol=tol,
        choices=choices,
        solution=(
            f"KV = 2 (K,V) × {m.num_layers} layers × {batch} × {context:,} × {m.num_kv_heads} KV "
            f"heads × {m.head_dim} × {dt.bytes:g} B = {size:,.0f} B = {size / GB:.4g} GB "
            f"({size / GiB:.4g} GiB). The {m.num_heads} query heads share {m.num_kv_heads} KV "
            f"heads (GQA), so counting all query heads would give {mha / GB:.4g} GB."
        ),
    )


def kv_size(rng: random.Random) -> Question:
    """Draw a KV-size question on a GQA model, bf16 or fp8 cache."""
    return kv_size_q(
        rng,
        pick(rng, GQA_MODELS),
        pick(rng, (1, 4, 8, 32, 64)),
        pick(rng, (2048, 4096, 8192, 32768)),
        pick(rng, ("bf16", "bf16", "fp8")),
    )


def kv_crossover_q(rng: random.Random, model: str, batch: int) -> Question:
    """Context at which the KV cache of ``batch`` sequences outgrows the bf16 weights."""
    del rng
    m = get_model(model)
    answer = crossover_context(m, batch=batch)
    assert answer is not None
    w = weights_bytes(m)
    per_token = kv_bytes_per_token(m)
    mha_per_token = kv_bytes_per_token(m.with_kv_heads(m.num_heads))
    tol = 0.02
    return Question(
        generator="kv_crossover",
        module=Module.KV_SIZING,
        kind=Kind.NUMERIC,
        prompt=(
            f"With bf16 weights and a bf16 KV cache, at what context length (tokens per "
            f"sequence) does the KV cache of {seqs(batch)} of {model} become as large as "
            f"the weights?"
        ),
        givens=givens([*model_givens(m), ("weights", f"{w:,.0f} B"), ("batch", str(batch))]),
        params={"model": model, "batch": batch},
        answer=float(answer),
        unit="tokens",
        rel_tol=tol,
        choices=traps(
            answer,
            [
                (Mistake.KV_ALL_QUERY_HEADS, w / (batch * mha_per_token)),
                (Mistake.KV_WITHOUT_V, 2 * w / (batch * per_token)),
            ],
            tol,
            lambda v: f"{v:,.0f}",
        ),
        solution=(
            f"KV per token = 2 × {m.num_layers} × {m.num_kv_heads} × {m.head_dim} × 2 B = "
            f"{per_token:,.0f} B; context = weights ÷ (batch × per token) = {w:,.0f} ÷ "
            f"({batch} × {per_token:,.0f}) ≈ {answer:,} tokens."
        ),
    )


def kv_crossover(rng: random.Random) -> Question:
    """Draw a KV-versus-weights crossover question at batch 1, 8 or 32."""
    return kv_crossover_q(rng, pick(rng, GQA_MODELS + ("llama-2-7b",)), pick(rng, (1, 8, 32)))


TECHNIQUES = ("gqa", "mqa", "fp8 kv")


def kv_saving_q(
    rng: random.Random, model: str, batch: int, context: int, technique: str
) -> Question:
    """GB saved against the MHA equivalent by GQA, MQA or an fp8 KV cache."""
    del rng
    m = get_model(model)
    rows = {t.name: t for t in techniques(m, batch, context)}
    base, new = rows["mha"], rows[technique]
    saved = base.kv_bytes - new.kv_bytes
    tol = 0.02
    return Question(
        generator="kv_saving",
        module=Module.KV_SIZING,
        kind=Kind.NUMERIC,
        prompt=(
            f"Take {model} as plain MHA ({m.num_heads} KV heads, bf16 KV) serving {seqs(batch)} "
            f"of {context:,} tokens. How many GB (1e9 B) of KV cache does switching to "
            f"{technique} ({new.description}) save?"
        ),
        givens=givens(
            [
                ("model", model),
                ("layers", str(m.num_layers)),
                ("query heads = MHA KV heads", str(m.num_heads)),
                ("head dim", str(m.head_dim)),
                ("technique", f"{technique}: {new.description}"),
                ("batch", str(batch)),
                ("context", f"{context:,}"),
            ]
        ),
        params={"model": model, "batch": batch, "context": context, "technique": technique},
        answer=saved / GB,
        unit="GB",
        rel_tol=tol,
        choices=traps(
            saved / GB,
            [
                (Mistake.GIB_FOR_GB, saved / GiB),
                (Mistake.REMAINING_NOT_SAVED, new.kv_bytes / GB),
            ],
            tol,
            lambda v: f"{v:.4g} GB",
        ),
        solution=(
            f"MHA KV = {base.kv_bytes / GB:.4g} GB; with {technique} it is "
            f"{new.kv_bytes / GB:.4g} GB ({new.ratio_to_mha:.3g}× MHA), so it saves "
            f"{saved / GB:.4g} GB."
        ),
    )


def kv_saving(rng: random.Random) -> Question:
    """Draw a KV-saving question: GQA, MQA or an fp8 cache against MHA."""
    return kv_saving_q(
        rng,
        pick(rng, ("llama-3.1-8b", "llama-3.1-70b", "llama-2-7b")),
        pick(rng, (1, 8, 16)),
        pick(rng, (4096, 8192, 32768)),
        pick(rng, TECHNIQUES),
    )


def kv_per_token_q(rng: random.Random, model: str) -> Question:
    """KV bytes one token adds across all layers, in KiB (bf16)."""
    del rng
    m = get_model(model)
    per = kv_bytes_per_token(m)
    naive = 2 * m.num_layers * m.num_heads * mha_head_dim(m) * DType.BF16.bytes
    tol = 0.01
    latent = (
        f"MLA caches kv_lora_rank + rope dim = {m.kv_elements_per_token_per_layer} elements per "
        "layer (DeepSeek-V2 Table 1)"
        if m.mla is not None
        else f"2 × {m.num_kv_heads} KV heads × {m.head_dim} per layer"
    )
    extra = (
        [
            ("kv_lora_rank", str(m.mla.kv_lora_rank)),
            ("qk_rope_head_dim", str(m.mla.qk_rope_head_dim)),
        ]
        if m.mla is not None
        else []
    )
    return Question(
        generator="kv_per_token",
        module=Module.KV_SIZING,
        kind=Kind.NUMERIC,
        prompt=(
            f"How many KiB (1 KiB = 1024 B) of bf16 KV cache does one token of {model} add, "
            f"across all layers?"
        ),
        givens=givens([*model_givens(m), ("attention", m.attention.value), *extra]),
        params={"model": model},
        answer=per / KiB,
        unit="KiB",
        rel_tol=tol,
        choices=traps(
            per / KiB,
            [(Mistake.GB_FOR_GIB, per / KB), (Mistake.KV_ALL_QUERY_HEADS, naive / KiB)],
            tol,
            lambda v: f"{v:.4g} KiB",
        ),
        solution=f"{latent} × {m.num_layers} layers × 2 B = {per:,.0f} B = {per / KiB:.4g} KiB.",
    )


def kv_per_token(rng: random.Random) -> Question:
    """Draw a KV-per-token question, DeepSeek-V3's MLA included."""
    return kv_per_token_q(
        rng, pick(rng, ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "deepseek-v3"))
    )
