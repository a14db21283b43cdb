"""Module 7, what the runtime techniques cost: continuous against static batching, chunked
prefill and the decode gap, disaggregation's KV transfer, a tier transfer, the padding of a
compiled bucket, and what a technique becomes on IBM Spyre.

Answers come from ridgeline's own functions: the roofline (``analytic.step_cost``), the KV
formula, ``serving``'s ``Disagg`` link and ``KVTiers``, the ``static`` policy's buckets, and
the sourced table of who provides which technique (``specs.kv_practice``)."""

from __future__ import annotations

import random
from typing import Any

from ridgeline.analytic import Phase, Workload, kv_bytes, kv_bytes_per_token, step_cost
from ridgeline.quiz.generators.common import (
    SMALL_GQA_MODELS,
    givens,
    label_choices,
    model_givens,
    pick,
    traps,
)
from ridgeline.quiz.runtime import static_batch_slot_steps, tier_load_seconds
from ridgeline.quiz.types import Kind, Mistake, Module, Question
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.policies import make_policy
from ridgeline.serving.tiers import TierSpec
from ridgeline.sim.compiled import pow2_ladder
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.kv_practice import Technique, kv_practice
from ridgeline.specs.units import GB, GiB

SLOTS = 32  # compiled batch sizes 1, 2, 4 ... 32, as the simulator's static variants


def _ms(v: float) -> str:
    return f"{v:.4g} ms"


def _numeric(name: str, prompt: str, answer: float, unit: str, tol: float, **kw: Any) -> Question:
    return Question(
        generator=name,
        module=Module.KV_RUNTIME,
        kind=Kind.NUMERIC,
        prompt=prompt,
        answer=answer,
        unit=unit,
        rel_tol=tol,
        **kw,
    )


def static_waste_q(rng: random.Random, outputs: tuple[int, ...]) -> Question:
    """Share of a static batch's decode slot-steps that hold a finished request."""
    del rng
    held, used = static_batch_slot_steps(outputs)
    answer = 100.0 * (held - used) / held
    tol = 0.01
    return _numeric(
        "static_waste",
        f"{len(outputs)} requests decode together as one static batch (no request joins until "
        f"all finish), producing {', '.join(map(str, outputs))} tokens. What percentage of the "
        f"batch's slot-steps (slots × decode steps) hold a request that has already finished? "
        f"Continuous batching would refill those slots.",
        answer,
        "%",
        tol,
        givens=givens([("outputs", ", ".join(map(str, outputs))), ("slots", str(len(outputs)))]),
        params={"outputs": list(outputs)},
        choices=traps(
            answer,
            [(Mistake.WASTE_OVER_USEFUL, 100.0 * (held - used) / used)],
            tol,
            lambda v: f"{v:.3g} %",
        ),
        solution=(
            f"The batch holds {len(outputs)} slots for max = {max(outputs)} steps: "
            f"{held:,} slot-steps; the requests use Σ = {used:,}; idle = {held - used:,} = "
            f"{answer:.3g}% (Orca, Yu et al., OSDI 2022: iteration-level scheduling frees a "
            f"slot as soon as its request ends)."
        ),
    )


def static_waste(rng: random.Random) -> Question:
    """Draw 4 or 8 outputs of 10-500 tokens with distinct maxima."""
    n = pick(rng, (4, 8))
    return static_waste_q(rng, tuple(rng.randrange(10, 500) for _ in range(n)))


def chunked_gap_q(
    rng: random.Random, model: str, accelerator: str, batch: int, prompt: int, chunk: int
) -> Question:
    """Worst inter-token gap of a decoding request while a prompt is prefilled in chunks."""
    del rng
    m, acc = get_model(model), get_accelerator(accelerator)
    d = step_cost(m, acc, Workload(Phase.DECODE, batch, 2048)).step_time_s
    p = step_cost(m, acc, Workload(Phase.PREFILL, 1, prompt)).step_time_s
    answer = (d + p * chunk / prompt) * 1e3
    wrong = [
        (Mistake.WHOLE_PROMPT_GAP, (d + p) * 1e3),
        (Mistake.NO_DECODE_IN_GAP, p * chunk / prompt * 1e3),
    ]
    return _numeric(
        "chunked_gap",
        f"On {accelerator}, {batch} sequences of {model} decode (2,048 cached tokens each); a "
        f"{prompt:,}-token prompt arrives and is prefilled in chunks of {chunk} tokens, one "
        f"chunk per step beside the decodes. To first order a chunk costs its share of the "
        f"whole prefill. How long, in ms, is the longest gap between two tokens of a "
        f"decoding sequence?",
        answer,
        "ms",
        0.02,
        givens=givens(
            [
                ("decode step", _ms(d * 1e3)),
                ("whole-prompt prefill", _ms(p * 1e3)),
                ("prompt", f"{prompt:,} tokens"),
                ("chunk", f"{chunk} tokens"),
            ]
        ),
        params={
            "model": model,
            "accelerator": accelerator,
            "batch": batch,
            "prompt": prompt,
            "chunk": chunk,
        },
        choices=traps(answer, wrong, 0.02, _ms),
        solution=(
            f"gap = decode step + one chunk = {d * 1e3:.4g} + {p * 1e3:.4g} × {chunk}/{prompt:,} "
            f"= {answer:.4g} ms, against {(d + p) * 1e3:.4g} ms with the whole prompt in one "
            f"step. The mean TPOT over the prefill does not change (the same prefill work is "
            f"spread over more steps); the worst gap shrinks (Sarathi-Serve, OSDI 2024)."
        ),
    )


def chunked_gap(rng: random.Random) -> Question:
    """Draw an 8B model on an H100 or A100, batch 8-64, a 2-8k prompt, chunks of 256-1024."""
    return chunked_gap_q(
        rng,
        pick(rng, SMALL_GQA_MODELS),
        pick(rng, ("h100-sxm", "a100-80gb")),
        pick(rng, (8, 16, 32, 64)),
        pick(rng, (2048, 4096, 8192)),
        pick(rng, (256, 512, 1024)),
    )


def disagg_transfer_q(
    rng: random.Random, model: str, prompt: int, link_gb_per_s: float, latency_ms: float
) -> Question:
    """Time to ship a prompt's KV from the prefill instance to the decode instance."""
    del rng
    m = get_model(model)
    per, mha = kv_bytes_per_token(m), kv_bytes_per_token(m.with_kv_heads(m.num_heads))
    link = Disagg(1, 1, link_gb_per_s * GB, latency_ms * 1e-3)
    answer = link.transfer_s(prompt, per) * 1e3
    wrong = [
        (Mistake.FORGOT_LATENCY, answer - latency_ms),
        (Mistake.KV_ALL_QUERY_HEADS, link.transfer_s(prompt, mha) * 1e3),
        (Mistake.KV_WITHOUT_V, latency_ms + (answer - latency_ms) / 2),
    ]
    return _numeric(
        "disagg_transfer",
        f"Disaggregated serving of {model} (bf16 KV): after the prefill instance runs a "
        f"{prompt:,}-token prompt, its KV crosses a {link_gb_per_s:g} GB/s link with "
        f"{latency_ms:g} ms of latency to the decode instance. How many ms does the transfer "
        f"take?",
        answer,
        "ms",
        0.02,
        givens=givens(
            [
                *model_givens(m),
                ("prompt", f"{prompt:,} tokens"),
                ("link", f"{link_gb_per_s:g} GB/s (1e9 B/s), {latency_ms:g} ms"),
            ]
        ),
        params={
            "model": model,
            "prompt": prompt,
            "link_gb_per_s": link_gb_per_s,
            "latency_ms": latency_ms,
        },
        choices=traps(answer, wrong, 0.02, _ms),
        solution=(
            f"KV = {prompt:,} tokens × {per:,.0f} B = {prompt * per / GB:.4g} GB; time = "
            f"{latency_ms:g} ms + {prompt * per / GB:.4g} GB ÷ {link_gb_per_s:g} GB/s = "
            f"{answer:.4g} ms (DistServe, OSDI 2024; Splitwise, ISCA 2024)."
        ),
    )


def disagg_transfer(rng: random.Random) -> Question:
    """Draw an 8B or 70B model, a 1-16k prompt, a 25-400 GB/s link, 0.01-1 ms latency."""
    return disagg_transfer_q(
        rng,
        pick(rng, ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b")),
        rng.randrange(1000, 16000),
        pick(rng, (25.0, 50.0, 100.0, 400.0)),
        pick(rng, (0.01, 0.1, 1.0)),
    )


def tier_transfer_q(
    rng: random.Random, model: str, accelerator: str, prefix: int, block_size: int
) -> Question:
    """Time to bring an offloaded prefix back from host memory."""
    del rng
    m, host = get_model(model), get_accelerator(accelerator).level("host")
    assert host.bandwidth_bytes_per_s is not None, "the catalog's host level has a bandwidth"
    bw, per = host.bandwidth_bytes_per_s, kv_bytes_per_token(m)
    tier = TierSpec("host", host.total_capacity_bytes, bw)
    answer = tier_load_seconds(prefix, block_size, per, tier) * 1e3
    wrong = [
        (Mistake.PARTIAL_BLOCK_SHARED, prefix * per / bw * 1e3),
        (Mistake.GIB_FOR_GB, answer * GB / GiB),
        (Mistake.KV_WITHOUT_V, answer / 2),
    ]
    full = prefix // block_size
    return _numeric(
        "tier_transfer",
        f"A {prefix:,}-token system prompt of {model} (bf16 KV) was evicted from {accelerator}'s "
        f"device memory to its host memory in blocks of {block_size} tokens (only full blocks "
        f"are cached). A new request hits it. How many ms does loading it back take?",
        answer,
        "ms",
        0.02,
        givens=givens(
            [
                *model_givens(m),
                ("host link", f"{bw / GB:g} GB/s (1e9 B/s)"),
                ("prefix", f"{prefix:,} tokens"),
                ("block", f"{block_size} tokens"),
            ]
        ),
        params={
            "model": model,
            "accelerator": accelerator,
            "prefix": prefix,
            "block_size": block_size,
        },
        choices=traps(answer, wrong, 0.02, _ms),
        solution=(
            f"Full blocks: ⌊{prefix:,} ÷ {block_size}⌋ = {full} ({full * block_size:,} tokens "
            f"× {per:,.0f} B); ÷ {bw / GB:g} GB/s = {answer:.4g} ms — charged to the step that "
            f"admits the request (vLLM OffloadingConnector; the host level: {host.note})."
        ),
    )


def tier_transfer(rng: random.Random) -> Question:
    """Draw a prefix that ends in a partial block, on a TPU v5e or IBM Spyre host link."""
    block = pick(rng, (16, 32))
    prefix = rng.randrange(20, 200) * block + rng.randrange(1, block)
    return tier_transfer_q(
        rng, pick(rng, SMALL_GQA_MODELS), pick(rng, ("tpu-v5e", "ibm-spyre")), prefix, block
    )


def bucket_padding_q(
    rng: random.Random, model: str, batch: int, context: int, buckets: tuple[int, ...]
) -> Question:
    """GB of KV a compiled decode program reads beyond the sequences' own."""
    del rng
    m = get_model(model)
    t = make_policy("static", max(buckets), buckets).bucket_for(context)
    b = next(s for s in pow2_ladder(SLOTS) if s >= batch)
    assert t is not None, "the context fits a bucket"
    answer = (kv_bytes(m, b, t) - kv_bytes(m, batch, context)) / GB
    tol = 0.02
    return _numeric(
        "bucket_padding",
        f"On IBM Spyre every decode step runs a program compiled for (batch, sequence) shapes: "
        f"batch sizes 1, 2, 4, ... {SLOTS} and sequence buckets {', '.join(map(str, buckets))}. "
        f"{batch} sequences of {model} (bf16 KV) hold {context:,} tokens each. How many GB of "
        f"KV does the step's program read beyond the sequences' own?",
        answer,
        "GB",
        tol,
        givens=givens(
            [
                *model_givens(m),
                ("sequences", str(batch)),
                ("tokens each", f"{context:,}"),
                ("buckets", ", ".join(map(str, buckets))),
            ]
        ),
        params={"model": model, "batch": batch, "context": context, "buckets": list(buckets)},
        choices=traps(
            answer,
            [
                (
                    Mistake.CONTEXT_PADDING_ONLY,
                    (kv_bytes(m, batch, t) - kv_bytes(m, batch, context)) / GB,
                ),
                (Mistake.GIB_FOR_GB, answer * GB / GiB),
            ],
            tol,
            lambda v: f"{v:.4g} GB",
        ),
        solution=(
            f"The program is compiled for ({b}, {t}): it reads 2 × {m.num_layers} × "
            f"{m.num_kv_heads} × {m.head_dim} × 2 B × {b} × {t:,} = {kv_bytes(m, b, t) / GB:.4g} "
            f"GB of KV, against {kv_bytes(m, batch, context) / GB:.4g} GB for {batch} × "
            f"{context:,}: {answer:.4g} GB of padding, read every step."
        ),
    )


def bucket_padding(rng: random.Random) -> Question:
    """Draw a batch that is not a power of two and a context inside a bucket."""
    buckets = pick(rng, ((1024, 2048, 4096), (512, 1024, 2048, 4096, 8192), (2048, 8192)))
    batch = pick(rng, (3, 5, 6, 7, 12, 24))
    context = rng.randrange(buckets[0] // 2, buckets[-1] - 64)
    return bucket_padding_q(rng, pick(rng, SMALL_GQA_MODELS), batch, context, buckets)


def spyre_technique_q(rng: random.Random, technique: Technique) -> Question:
    """What a runtime technique becomes on IBM Spyre (compiled shapes)."""
    spyre = kv_practice("dataflow").technique(technique)
    wrong: list[tuple[Mistake, str]] = []
    for kind, mistake in (
        ("gpu", Mistake.RUNTIME_FORM),
        ("tpu", Mistake.RUNTIME_FORM),
        ("lpu", Mistake.WRONG_MANAGER),
    ):
        text = kv_practice(kind).technique(technique).becomes
        if text != spyre.becomes and text not in (w for _, w in wrong):
            wrong.append((mistake, text))
    choices, key = label_choices(rng, spyre.becomes, wrong)
    return Question(
        generator="spyre_technique",
        module=Module.KV_RUNTIME,
        kind=Kind.CHOICE,
        prompt=(
            f"IBM Spyre runs programs compiled ahead of time for fixed shapes, with the KV cache "
            f"in LPDDR5. What does {technique.label} become there?"
        ),
        givens=givens([("technique", technique.label), ("machine", "ibm-spyre")]),
        params={"technique": technique.value},
        answer=key,
        choices=choices,
        solution=(
            f"On Spyre {technique.label} is provided by {spyre.provider.value}: "
            f"{spyre.becomes} ({spyre.source})."
        ),
    )


def spyre_technique(rng: random.Random) -> Question:
    """Draw a technique whose Spyre form differs from at least two others."""
    while True:
        q = spyre_technique_q(rng, pick(rng, list(Technique)))
        if len(q.choices) >= 3:
            return q
