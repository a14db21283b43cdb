"""Module 2, prefill and decode: which bound a step hits, ridge points of five accelerators,
and what one decode step reads on Spyre."""

from __future__ import annotations

import random

from ridgeline.analytic.questions import decode_reads
from ridgeline.analytic.roofline import Bound, step_cost
from ridgeline.analytic.workload import Phase, Workload
from ridgeline.quiz.generators.common import (
    DENSE_MODELS,
    KEYS,
    SMALL_GQA_MODELS,
    SPARSE_SPEEDUP,
    far,
    fits,
    givens,
    label_choices,
    matmul_params,
    model_givens,
    numeric_choices,
    pick,
    sci,
    seqs,
    sparse_givens,
    traps,
)
from ridgeline.quiz.types import Choice, Kind, Mistake, Module, Question
from ridgeline.specs import DType, get_accelerator, get_model
from ridgeline.specs.catalog import accelerator_names
from ridgeline.specs.units import GB, TB, GiB

TFLOP = TB  # 1e12, for FLOP/s shown in TFLOP/s

BOUND_TEXT = {
    Bound.COMPUTE: "compute-bound (intensity above the ridge point)",
    Bound.MEMORY: "bandwidth-bound (intensity below the ridge point)",
}


def phase_bound_q(
    rng: random.Random, accelerator: str, model: str, phase: Phase, batch: int, tokens: int
) -> Question:
    """Is a prefill or decode step compute- or bandwidth-bound? ``tokens`` is the prompt
    (prefill) or the cached context (decode)."""
    m, acc = get_model(model), get_accelerator(accelerator)
    cost = step_cost(m, acc, Workload(phase, batch, tokens))
    other = Bound.MEMORY if cost.bound is Bound.COMPUTE else Bound.COMPUTE
    mistake = Mistake.DECODE_ALWAYS_MEMORY if other is Bound.MEMORY else Mistake.WRONG_RESOURCE
    choices, key = label_choices(rng, BOUND_TEXT[cost.bound], [(mistake, BOUND_TEXT[other])])
    what = f"a {tokens:,}-token prompt" if phase is Phase.PREFILL else f"{tokens:,} cached tokens"
    return Question(
        generator="phase_bound",
        module=Module.ROOFLINE,
        kind=Kind.CHOICE,
        prompt=(
            f"A {phase.value} step of {model} (bf16) on the {accelerator}: {seqs(batch)}, "
            f"each with {what}. Where does it sit on the roofline?"
        ),
        givens=givens(
            [
                *model_givens(m),
                ("parameters multiplied per token", sci(matmul_params(m))),
                ("dense bf16 peak", sci(acc.peak(DType.BF16), "FLOP/s")),
                (f"{acc.device_level} bandwidth", sci(acc.device_bandwidth_bytes_per_s, "B/s")),
            ]
        ),
        params={
            "accelerator": accelerator,
            "model": model,
            "phase": phase.value,
            "batch": batch,
            "tokens": tokens,
        },
        answer=key,
        choices=choices,
        solution=(
            f"FLOPs {sci(cost.flops)} over {sci(cost.bytes)} B moved gives intensity "
            f"{cost.arithmetic_intensity:.4g} FLOP/B; the ridge point is peak ÷ bandwidth = "
            f"{cost.ridge_point:.4g} FLOP/B, so the step is {BOUND_TEXT[cost.bound]}. Prefill "
            f"reuses each weight for every prompt token; decode reuses it only once per sequence."
        ),
    )


def phase_bound(rng: random.Random) -> Question:
    """Draw a compute- or bandwidth-bound question: prefill, or decode at small to huge batch."""
    while True:
        phase = pick(rng, (Phase.PREFILL, Phase.DECODE, Phase.DECODE))
        if phase is Phase.PREFILL:
            batch, tokens = pick(rng, (1, 2, 4)), pick(rng, (16, 64, 512, 2048))
        else:
            batch, tokens = pick(rng, (1, 8, 64, 256, 512, 1024)), pick(rng, (128, 256, 1024, 4096))
        acc = pick(rng, ("h100-sxm", "a100-80gb", "tpu-v5e", "ibm-spyre", "mi300x"))
        model = pick(rng, DENSE_MODELS)
        if fits(model, acc, phase, batch, tokens) and robust_bound(
            acc, model, phase, batch, tokens
        ):
            return phase_bound_q(rng, acc, model, phase, batch, tokens)


ROBUST_MARGIN = 1.25  # intensity at least this factor away from the ridge point


def robust_bound(accelerator: str, model: str, phase: Phase, batch: int, tokens: int) -> bool:
    """True when the bound does not hang on bookkeeping the question does not state: the
    intensity with activations and with weights + KV alone are both more than ``ROBUST_MARGIN``
    from the ridge point, on the same side."""
    cost = step_cost(get_model(model), get_accelerator(accelerator), Workload(phase, batch, tokens))
    lean = cost.flops / (cost.weight_bytes + cost.kv_read_bytes + cost.kv_write_bytes)
    ridge = cost.ridge_point
    both = (cost.arithmetic_intensity, lean)
    return all(ai > ridge * ROBUST_MARGIN for ai in both) or all(
        ai < ridge / ROBUST_MARGIN for ai in both
    )


def rank_ridge_q(rng: random.Random, accelerators: tuple[str, ...]) -> Question:
    """Rank five accelerators by the ridge point of their device memory (bf16), highest first."""
    del rng
    accs = [get_accelerator(name) for name in accelerators]
    keys = KEYS[: len(accs)]
    ridge = {k: a.ridge_point(DType.BF16) or 0.0 for k, a in zip(keys, accs, strict=True)}
    peak = {k: a.peak(DType.BF16) for k, a in zip(keys, accs, strict=True)}
    order = tuple(sorted(keys, key=lambda k: -ridge[k]))
    by_peak = tuple(sorted(keys, key=lambda k: -peak[k]))
    lines = [
        (
            f"{k}: {a.name}",
            f"peak {sci(a.peak(DType.BF16), 'FLOP/s')}, {a.device_level} "
            f"{sci(a.device_bandwidth_bytes_per_s, 'B/s')}",
        )
        for k, a in zip(keys, accs, strict=True)
    ]
    return Question(
        generator="rank_ridge",
        module=Module.ROOFLINE,
        kind=Kind.ORDER,
        prompt=(
            "Rank these accelerators by the ridge point of the memory their weights stream from "
            "(dense bf16), highest first. Answer with the keys in order, e.g. C,A,E,B,D."
        ),
        givens=givens(lines),
        params={"accelerators": list(accelerators)},
        answer=order,
        items=tuple(f"{k}: {a.name}" for k, a in zip(keys, accs, strict=True)),
        item_keys=tuple(keys),
        choices=() if by_peak == order else _order_trap(by_peak),
        solution="Ridge = peak ÷ bandwidth: "
        + "; ".join(f"{k} {accs[keys.index(k)].name} {ridge[k]:.4g} FLOP/B" for k in order)
        + ". A big peak over slow memory gives a high ridge; on-chip SRAM machines "
        "(Groq, Cerebras) have the lowest.",
    )


def _order_trap(order: tuple[str, ...]) -> tuple[Choice, ...]:
    return (Choice("A", ",".join(order), None, Mistake.PEAK_ORDER),)


def rank_ridge(rng: random.Random) -> Question:
    """Draw five accelerators whose ridge points differ by more than 5% each."""
    names = list(accelerator_names())
    while True:
        chosen = rng.sample(names, 5)
        ridges = sorted(get_accelerator(n).ridge_point(DType.BF16) or 0.0 for n in chosen)
        if all(b > 1.05 * a for a, b in zip(ridges, ridges[1:], strict=False)):
            return rank_ridge_q(rng, tuple(chosen))


def spyre_reads_q(rng: random.Random, model: str, batch: int, context: int) -> Question:
    """Bytes one decode step moves on IBM Spyre, in GB."""
    del rng
    m, acc = get_model(model), get_accelerator("ibm-spyre")
    reads = decode_reads(m, acc, batch, context)
    total = reads.total_bytes
    mha = decode_reads(m.with_kv_heads(m.num_heads), acc, batch, context)
    tol = 0.03
    bw = acc.device_bandwidth_bytes_per_s
    return Question(
        generator="spyre_reads",
        module=Module.ROOFLINE,
        kind=Kind.NUMERIC,
        prompt=(
            f"One decode step of {model} (bf16 weights, bf16 KV) on IBM Spyre: {seqs(batch)} "
            f"with {context:,} cached tokens each. How many GB (1e9 B) does the step "
            f"move through LPDDR5 (weights + KV read and written + activations)?"
        ),
        givens=givens(
            [
                *model_givens(m),
                ("parameters multiplied per token", sci(matmul_params(m))),
                ("batch", str(batch)),
                ("context per sequence", f"{context:,}"),
                ("LPDDR5 bandwidth", sci(bw, "B/s")),
            ]
        ),
        params={"model": model, "batch": batch, "context": context},
        answer=total / GB,
        unit="GB",
        rel_tol=tol,
        choices=traps(
            total / GB,
            [
                (Mistake.KV_ALL_QUERY_HEADS, mha.total_bytes / GB),
                (Mistake.GIB_FOR_GB, total / GiB),
                (Mistake.WEIGHTS_NOT_KV, reads.weight_bytes / GB),
            ],
            tol,
            lambda v: sci(v, "GB"),
        ),
        solution=(
            f"Weights {reads.weight_bytes / GB:.4g} GB (every matrix once per step) + KV "
            f"{reads.kv_bytes / GB:.4g} GB (2 × {m.num_layers} layers × {m.num_kv_heads} KV "
            f"heads × {m.head_dim} × 2 B × {batch} × {context}, read once, plus the new token) + "
            f"activations {reads.activation_bytes / GB:.3g} GB = {total / GB:.4g} GB; at "
            f"{bw / GB:.0f} GB/s that is {total / bw * 1e3:.4g} ms per token at best."
        ),
    )


def spyre_reads(rng: random.Random) -> Question:
    """Draw a Spyre decode-reads question for a model that fits one card."""
    return spyre_reads_q(
        rng,
        pick(rng, (*SMALL_GQA_MODELS, "llama-2-7b")),
        pick(rng, (1, 4, 16)),
        pick(rng, (2048, 4096, 8192)),
    )


def attainable_q(
    rng: random.Random, accelerator: str, model: str, phase: Phase, batch: int, tokens: int
) -> Question:
    """Attainable FLOP/s of a step: min(peak, intensity × bandwidth), multiple choice."""
    m, acc = get_model(model), get_accelerator(accelerator)
    cost = step_cost(m, acc, Workload(phase, batch, tokens))
    peak, bw, ai = cost.peak_flops_per_s, cost.bandwidth_bytes_per_s, cost.arithmetic_intensity
    tol = 0.03
    choices, key = numeric_choices(
        rng,
        cost.attainable_flops_per_s / TFLOP,
        [
            (Mistake.SPARSE_PEAK, min(SPARSE_SPEEDUP * peak, ai * bw) / TFLOP),
            (Mistake.NO_COMPUTE_ROOF, ai * bw / TFLOP),
            (Mistake.NO_MEMORY_ROOF, peak / TFLOP),
            (Mistake.SPARSE_PEAK, SPARSE_SPEEDUP * peak / TFLOP),
        ],
        lambda v: f"{v:.4g} TFLOP/s",
        tol,
    )
    what = f"a {tokens:,}-token prompt" if phase is Phase.PREFILL else f"{tokens:,} cached tokens"
    return Question(
        generator="attainable",
        module=Module.ROOFLINE,
        kind=Kind.CHOICE,
        prompt=(
            f"A {phase.value} step of {model} (bf16, dense) on the {accelerator}, {seqs(batch)} "
            f"with {what}, has arithmetic intensity {ai:.4g} FLOP/B. What FLOP/s can it attain "
            f"on the roofline?"
        ),
        givens=givens(
            [
                ("arithmetic intensity", f"{ai:.4g} FLOP/B"),
                ("dense bf16 peak", sci(peak, "FLOP/s")),
                *sparse_givens(acc),
                (f"{acc.device_level} bandwidth", sci(bw, "B/s")),
            ]
        ),
        params={
            "accelerator": accelerator,
            "model": model,
            "phase": phase.value,
            "batch": batch,
            "tokens": tokens,
        },
        answer=key,
        rel_tol=tol,
        choices=choices,
        solution=(
            f"Attainable = min(peak, intensity × bandwidth) = min({sci(peak)}, {ai:.4g} × "
            f"{sci(bw)}) = {sci(cost.attainable_flops_per_s)} FLOP/s (Williams et al. 2009). "
            f"The roofline uses the dense peak: the 2:4-sparse headline needs sparse weights."
        ),
    )


def attainable(rng: random.Random) -> Question:
    """Draw an attainable-FLOP/s question on a GPU, prefill or decode."""
    while True:
        phase = pick(rng, (Phase.PREFILL, Phase.DECODE))
        if phase is Phase.PREFILL:
            batch, tokens = 1, pick(rng, (512, 1024, 2048))
        else:
            batch, tokens = pick(rng, (1, 4, 16, 64)), pick(rng, (1024, 4096))
        acc = pick(rng, ("h100-sxm", "a100-80gb", "h200", "b200", "mi300x"))
        model = pick(rng, DENSE_MODELS)
        if not fits(model, acc, phase, batch, tokens):
            continue
        cost = step_cost(get_model(model), get_accelerator(acc), Workload(phase, batch, tokens))
        memory_roof = cost.arithmetic_intensity * cost.bandwidth_bytes_per_s
        # Redraw when the uncapped memory roof lands on the sparse peak: two options alike.
        if far(SPARSE_SPEEDUP * cost.peak_flops_per_s, memory_roof, 0.1):
            return attainable_q(rng, acc, model, phase, batch, tokens)
