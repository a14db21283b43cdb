"""Module 4, five architectures compared: the scarce resource on each machine, chips needed to
hold a model, and device memories ranked by capacity or bandwidth."""

from __future__ import annotations

import math
import random

from ridgeline.analytic.binding import Resource
from ridgeline.analytic.kv import kv_bytes, weights_bytes
from ridgeline.analytic.questions import five_questions
from ridgeline.analytic.workload import Phase, Workload
from ridgeline.quiz.generators.common import (
    FIVE,
    KEYS,
    givens,
    label_choices,
    pick,
    sci,
    seqs,
    traps,
)
from ridgeline.quiz.types import Kind, Mistake, Module, Question
from ridgeline.specs import DType, get_accelerator, get_model
from ridgeline.specs.catalog import accelerator_names
from ridgeline.specs.units import GB, GiB

# The roofline's three answers (``analytic.binding``): what a learner finds from the givens.
RESOURCE_TEXT = {
    Resource.CAPACITY: "capacity: weights + KV do not fit the device memory",
    Resource.BANDWIDTH: "bandwidth: the step waits on bytes from device memory",
    Resource.COMPUTE: "compute: the step waits on FLOPs",
}


def scarce_q(
    rng: random.Random, accelerator: str, model: str, batch: int, context: int
) -> Question:
    """The scarce resource for a decode step on one of the five architectures."""
    m, acc = get_model(model), get_accelerator(accelerator)
    ans = five_questions(m, acc, Workload(Phase.DECODE, batch, context))
    wrong = [(Mistake.WRONG_RESOURCE, t) for r, t in RESOURCE_TEXT.items() if r is not ans.scarce]
    choices, key = label_choices(rng, RESOURCE_TEXT[ans.scarce], wrong)
    need = weights_bytes(m) + kv_bytes(m, batch, context + 1)
    return Question(
        generator="scarce_resource",
        module=Module.ARCHITECTURES,
        kind=Kind.CHOICE,
        prompt=(
            f"Decode of {model} (bf16) on one {accelerator}, {seqs(batch)} with "
            f"{context:,} cached tokens each. On the roofline (datasheet peak and bandwidth, "
            f"no latencies), which resource is scarce?"
        ),
        givens=givens(
            [
                ("weights + KV needed", sci(need, "B")),
                (f"{acc.device_level} usable capacity", sci(acc.device_capacity_bytes, "B")),
                (f"{acc.device_level} bandwidth", sci(acc.device_bandwidth_bytes_per_s, "B/s")),
                ("dense bf16 peak", sci(acc.peak(DType.BF16), "FLOP/s")),
                ("step intensity", f"{ans.arithmetic_intensity:.4g} FLOP/B"),
            ]
        ),
        params={"accelerator": accelerator, "model": model, "batch": batch, "context": context},
        answer=key,
        choices=choices,
        solution=(
            f"{ans.scarce.value}: {ans.reason}. Beyond the roofline, the calibrated model "
            f"expects {ans.expected.text} to bind this step (ridgeline questions)."
        ),
    )


def scarce_resource(rng: random.Random) -> Question:
    """Draw a decode step on one of the five architectures of the course."""
    return scarce_q(
        rng,
        pick(rng, FIVE),
        pick(rng, ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b")),
        pick(rng, (1, 16, 512)),
        pick(rng, (1024, 8192)),
    )


def chips_q(rng: random.Random, accelerator: str, model: str, weight_dtype: str) -> Question:
    """Chips needed just to hold a model's weights in device memory."""
    del rng
    m, acc = get_model(model), get_accelerator(accelerator)
    dtype = DType.parse(weight_dtype)
    w = weights_bytes(m, dtype)
    usable = acc.device_capacity_bytes
    raw = acc.device.total_capacity_bytes
    answer = math.ceil(w / usable)
    candidates = [(Mistake.GIB_FOR_GB, math.ceil(w / GiB / (usable / GB)))]
    if raw != usable:
        candidates.append((Mistake.RAW_CAPACITY, math.ceil(w / raw)))
    return Question(
        generator="chips_to_hold",
        module=Module.ARCHITECTURES,
        kind=Kind.NUMERIC,
        prompt=(
            f"How many {accelerator} chips are needed just to hold the weights of {model} in "
            f"{dtype.value} in their {acc.device_level} (usable capacity, no KV, no reserve)?"
        ),
        givens=givens(
            [
                ("weights", f"{w:,.0f} B ({w / GB:.4g} GB)"),
                (f"{acc.device_level} capacity", f"{raw:,.0f} B"),
                (f"{acc.device_level} usable", f"{usable:,.0f} B"),
            ]
        ),
        params={"accelerator": accelerator, "model": model, "weight_dtype": dtype.value},
        answer=float(answer),
        unit="chips",
        choices=traps(answer, [(k, float(v)) for k, v in candidates], 0.0, lambda v: f"{v:.0f}"),
        solution=(
            f"⌈weights ÷ usable capacity⌉ = ⌈{w:,.0f} ÷ {usable:,.0f}⌉ = {answer}. Both numbers "
            f"in bytes: mixing GB (1e9) and GiB (2^30) is a 7% error."
        ),
    )


def chips_to_hold(rng: random.Random) -> Question:
    """Draw a chips-to-hold question for an 8B to 70B model on one of five machines."""
    return chips_q(
        rng,
        pick(rng, ("groq-lpu", "cerebras-wse3", "ibm-spyre", "h100-sxm", "tpu-v5e")),
        pick(rng, ("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b")),
        pick(rng, ("bf16", "fp8")),
    )


def rank_memory_q(rng: random.Random, accelerators: tuple[str, ...], quantity: str) -> Question:
    """Rank device memories by capacity (usable bytes) or bandwidth, largest first."""
    del rng
    accs = [get_accelerator(n) for n in accelerators]
    keys = KEYS[: len(accs)]

    def value(i: int) -> float:
        a = accs[i]
        return a.device_capacity_bytes if quantity == "capacity" else a.device_bandwidth_bytes_per_s

    order = tuple(keys[i] for i in sorted(range(len(accs)), key=lambda i: -value(i)))
    unit = "B" if quantity == "capacity" else "B/s"
    return Question(
        generator="rank_memory",
        module=Module.ARCHITECTURES,
        kind=Kind.ORDER,
        prompt=(
            f"Rank these accelerators by the {quantity} of the memory that holds their weights "
            f"and KV cache (one chip or card), largest first. Answer with keys, e.g. B,A,D,C,E."
        ),
        givens=givens(
            [
                (f"{k}: {a.name}", f"device memory = {a.device_level}")
                for k, a in zip(keys, accs, strict=True)
            ]
        ),
        params={"accelerators": list(accelerators), "quantity": quantity},
        answer=order,
        items=tuple(f"{k}: {a.name}" for k, a in zip(keys, accs, strict=True)),
        item_keys=tuple(keys),
        solution="; ".join(
            f"{k} {accs[keys.index(k)].name} {accs[keys.index(k)].device_level} "
            f"{sci(value(keys.index(k)), unit)}"
            for k in order
        ),
    )


def rank_memory(rng: random.Random) -> Question:
    """Draw five accelerators whose device capacity (or bandwidth) differ by over 10%."""
    quantity = pick(rng, ("capacity", "bandwidth"))
    names = [n for n in accelerator_names() if n != "xeon-spr"]
    while True:
        chosen = tuple(rng.sample(names, 5))
        accs = [get_accelerator(n) for n in chosen]
        vals = sorted(
            a.device_capacity_bytes if quantity == "capacity" else a.device_bandwidth_bytes_per_s
            for a in accs
        )
        if all(b > 1.1 * a for a, b in zip(vals, vals[1:], strict=False)):
            return rank_memory_q(rng, chosen, quantity)
