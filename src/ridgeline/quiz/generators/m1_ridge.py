"""Module 1, the memory problem: ridge points and the arithmetic intensity of decode."""

from __future__ import annotations

import random

from ridgeline.analytic.roofline import decode_intensity
from ridgeline.analytic.workload import Phase
from ridgeline.quiz.generators.common import (
    DENSE_MODELS,
    SMALL_GQA_MODELS,
    SPARSE_SPEEDUP,
    fits,
    givens,
    matmul_params,
    model_givens,
    numeric_choices,
    pick,
    sci,
    seqs,
    sparse_givens,
    traps,
)
from ridgeline.quiz.types import Kind, Mistake, Module, Question
from ridgeline.specs import DType, get_accelerator, get_model
from ridgeline.specs.catalog import accelerator_names
from ridgeline.specs.units import GB, GiB

DECODE_GPUS = ("h100-sxm", "h200", "a100-80gb", "b200", "mi300x")


def ridge_point_q(rng: random.Random, accelerator: str, level: str) -> Question:
    """Ridge point (FLOP/B) of ``accelerator`` against one of its memory levels, bf16."""
    del rng  # nothing left to draw
    acc = get_accelerator(accelerator)
    lvl = acc.level(level)
    peak = acc.peak(DType.BF16)
    bw = lvl.bandwidth_bytes_per_s
    assert bw is not None
    answer = acc.ridge_point(DType.BF16, level)
    assert answer is not None
    tol = 0.02
    return Question(
        generator="ridge_point",
        module=Module.RIDGE,
        kind=Kind.NUMERIC,
        prompt=(
            f"What is the ridge point of the {acc.description} for dense 16-bit matmuls whose "
            f"operands come from its {level} level?"
        ),
        givens=givens(
            [
                ("dense bf16 peak", sci(peak, "FLOP/s")),
                *sparse_givens(acc),
                (f"{level} bandwidth", sci(bw, "B/s")),
                (f"{level} bandwidth in GB/s", sci(bw / GB, "GB/s")),
            ]
        ),
        params={"accelerator": accelerator, "level": level, "dtype": "bf16"},
        answer=float(answer),
        unit="FLOP/B",
        rel_tol=tol,
        choices=traps(
            answer,
            [
                (Mistake.SPARSE_PEAK, SPARSE_SPEEDUP * peak / bw),
                (Mistake.GIB_FOR_GB, peak / (bw / GB * GiB)),
            ],
            tol,
            lambda v: sci(v, "FLOP/B"),
        ),
        solution=(
            f"Ridge point = peak ÷ bandwidth of the level (Williams et al., Roofline, 2009) = "
            f"{sci(peak)} FLOP/s ÷ {sci(bw)} B/s = {answer:.4g} FLOP/B. Below that intensity "
            f"a kernel reading from {level} waits on bytes."
        ),
    )


def ridge_point(rng: random.Random) -> Question:
    """Draw a ridge-point question: any catalog accelerator, usually its device level."""
    acc = get_accelerator(pick(rng, accelerator_names()))
    with_bw = [lvl.name for lvl in acc.levels if lvl.bandwidth_bytes_per_s is not None]
    level = acc.device_level if rng.random() < 0.6 else pick(rng, with_bw)
    return ridge_point_q(rng, acc.name, level)


def weights_intensity_q(
    rng: random.Random, accelerator: str, model: str, batch: int, context: int
) -> Question:
    """Decode intensity counting the weights alone."""
    del rng
    m, acc = get_model(model), get_accelerator(accelerator)
    di = decode_intensity(m, acc, batch, context)
    tol = 0.05
    p = matmul_params(m)
    batch1 = decode_intensity(m, acc, 1, context).weights_only
    return Question(
        generator="weights_intensity",
        module=Module.RIDGE,
        kind=Kind.NUMERIC,
        prompt=(
            f"One decode step of {model} in bf16 on the {accelerator}: {seqs(batch)}, "
            f"{context:,} cached tokens each. What is its arithmetic intensity counting the "
            f"weights alone as the bytes moved (FLOPs ÷ weight bytes)?"
        ),
        givens=givens(
            [
                *model_givens(m),
                ("parameters multiplied per token (all but the embedding table)", sci(p)),
                ("batch", str(batch)),
                ("context per sequence", f"{context:,}"),
                ("bytes per weight (bf16)", "2"),
                (
                    "FLOPs",
                    "2 per multiply-add, plus 4·layers·heads·head_dim·context per sequence for QKᵀ and PV",
                ),
            ]
        ),
        params={"accelerator": accelerator, "model": model, "batch": batch, "context": context},
        answer=di.weights_only,
        unit="FLOP/B",
        rel_tol=tol,
        choices=traps(
            di.weights_only,
            [(Mistake.IGNORED_BATCH, batch1)] if batch > 1 else [],
            tol,
            lambda v: sci(v, "FLOP/B"),
        ),
        solution=(
            f"FLOPs per step ≈ 2·batch·params + 4·batch·layers·heads·head_dim·context = "
            f"{sci(di.flops)}; weight bytes ≈ params × 2 = {sci(di.weight_bytes)} B "
            f"(each weight is read once for the whole batch). Intensity = "
            f"{di.weights_only:.4g} FLOP/B, about the batch size: far below the "
            f"{di.ridge_point:.0f} FLOP/B ridge of {accelerator} unless the batch is large."
        ),
    )


def weights_intensity(rng: random.Random) -> Question:
    """Draw a weights-only decode intensity question on a GPU (the H100 most often)."""
    while True:
        acc = pick(rng, DECODE_GPUS[:1] * 3 + DECODE_GPUS)
        model = pick(rng, DENSE_MODELS)
        batch, context = pick(rng, (2, 4, 8, 16, 32, 64)), pick(rng, (512, 1024, 2048, 4096))
        if fits(model, acc, Phase.DECODE, batch, context):
            return weights_intensity_q(rng, acc, model, batch, context)


def kv_intensity_q(
    rng: random.Random, accelerator: str, model: str, batch: int, context: int
) -> Question:
    """Decode intensity with the KV cache counted, against the classic mistakes."""
    m, acc = get_model(model), get_accelerator(accelerator)
    di = decode_intensity(m, acc, batch, context)
    mha = decode_intensity(m.with_kv_heads(m.num_heads), acc, batch, context)
    mha_kv = di.flops / (di.weight_bytes + mha.kv_bytes)
    twice = di.flops / (di.weight_bytes + 2 * di.kv_bytes)
    tol = 0.03
    mistakes = [
        (Mistake.WEIGHTS_ONLY, di.weights_only),
        (Mistake.KV_ALL_QUERY_HEADS, mha_kv),
        (Mistake.KV_TWICE, twice),
    ]
    choices, key = numeric_choices(rng, di.with_kv, mistakes, lambda v: f"{v:.3g} FLOP/B", tol)
    return Question(
        generator="kv_intensity",
        module=Module.RIDGE,
        kind=Kind.CHOICE,
        prompt=(
            f"Decode of {model} (bf16 weights and KV) on the {accelerator}: {seqs(batch)} "
            f"with {context:,} cached tokens each. What is the step's arithmetic intensity once "
            f"the KV cache is counted (FLOPs ÷ (weight bytes + KV bytes))?"
        ),
        givens=givens(
            [
                *model_givens(m),
                ("batch", str(batch)),
                ("context per sequence", f"{context:,}"),
                ("FLOPs of the step", sci(di.flops)),
                ("weight bytes", sci(di.weight_bytes, "B")),
            ]
        ),
        params={"accelerator": accelerator, "model": model, "batch": batch, "context": context},
        answer=key,
        rel_tol=tol,
        choices=choices,
        solution=(
            f"KV read per step = 2 (K,V) × {m.num_layers} layers × {m.num_kv_heads} KV heads × "
            f"{m.head_dim} × 2 B × {batch} × {context} (+ the new token's write) = "
            f"{sci(di.kv_bytes)} B. Intensity = {sci(di.flops)} ÷ ({sci(di.weight_bytes)} + "
            f"{sci(di.kv_bytes)}) = {di.with_kv:.3g} FLOP/B, against {di.weights_only:.3g} for "
            f"the weights alone: the KV cache pushes decode further below the ridge "
            f"({di.ridge_point:.0f} FLOP/B)."
        ),
    )


def kv_intensity(rng: random.Random) -> Question:
    """Draw a with-KV decode intensity question on the H100, KV comparable to the weights."""
    while True:
        model = pick(rng, SMALL_GQA_MODELS)
        batch, context = pick(rng, (4, 8, 16, 32)), pick(rng, (8192, 16384, 32768))
        if fits(model, "h100-sxm", Phase.DECODE, batch, context):
            return kv_intensity_q(rng, "h100-sxm", model, batch, context)
