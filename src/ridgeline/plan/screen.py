"""The analytic screen of one accelerator: every layout of ``plan.space`` bounded
(``plan.bound``), those that cannot meet the targets set aside with the reason, the rest ranked
by the chips they would need for the rate at best.

Work is shared across layouts: one cost model per (split, formats) (``plan.steps``), one
prefill rate per (split, formats, budget) and one decode rate per (split, formats), which every
aggregated layout and every pairing of a disaggregated unit reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ridgeline.analytic.pricing import Pricing
from ridgeline.plan.bound import (
    Bound,
    DecodeRate,
    Instance,
    Limit,
    Miss,
    PrefillRate,
    Targets,
    Traffic,
    aggregated,
    best_unit,
    decode_rate,
    disaggregated,
    prefill_rate,
)
from ridgeline.plan.space import TOKEN_BUDGETS, Serving, formats_of, splits_of
from ridgeline.plan.steps import StepPrices
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.units import fmt_seconds


@dataclass(frozen=True, slots=True)
class Question:
    """What every layout of a plan is screened against."""

    model: ModelSpec
    traffic: Traffic
    targets: Targets
    rate_rps: float
    max_chips: int
    mode: CostMode = CostMode.CALIBRATED
    weight_dtypes: tuple[DType, ...] | None = None
    kv_dtypes: tuple[DType, ...] | None = None


@dataclass(frozen=True, slots=True)
class Screen:
    """One accelerator's layouts after the bound: those that may meet the targets, best first,
    and those that cannot, with the reason."""

    accelerator: str
    bounds: tuple[Bound, ...]
    misses: tuple[Miss, ...]

    @property
    def num_layouts(self) -> int:
        return len(self.bounds) + len(self.misses)


def rank_key(bound: Bound, rate_rps: float) -> tuple[int, float, int, str]:
    """Fewest chips for the rate, then the most capacity per chip, then the smaller copy."""
    layout = bound.layout
    per_chip = bound.capacity_rps / layout.chips
    return bound.chips_for(rate_rps), -per_chip, layout.chips, layout.key


def screen(q: Question, acc: Accelerator) -> Screen:
    """Bound every layout of ``q.model`` on ``acc`` (module docstring)."""
    prices = StepPrices(q.model, acc, Pricing.of(acc, q.mode))
    bounds: list[Bound] = []
    misses: list[Miss] = []
    for formats in formats_of(acc, q.weight_dtypes, q.kv_dtypes):
        splits = splits_of(q.model, acc, formats, q.traffic.longest_tokens, q.max_chips)
        if not splits:
            reason = (
                f"no split of at most {q.max_chips} chips holds the {formats.weight.value} "
                f"weights and one {q.traffic.longest_tokens}-token request"
            )
            misses.append(Miss(acc.name, formats.label, Limit.WEIGHTS, reason))
            continue
        instances = [Instance(s, formats) for s in splits]
        for inst in instances:
            for budget in TOKEN_BUDGETS:
                _keep(aggregated(prices, inst, budget, q.traffic, q.targets), bounds, misses)
        if acc.interconnect is not None:
            _disaggregated(prices, q, instances, bounds, misses)
    over = [b for b in bounds if b.chips_for(q.rate_rps) > q.max_chips]
    for b in over:
        need = b.chips_for(q.rate_rps)
        reason = f"needs {need} chips at best for {q.rate_rps:g} req/s"
        misses.append(Miss(acc.name, b.layout.key, Limit.CHIPS, reason, need / q.max_chips))
    kept = sorted((b for b in bounds if b not in over), key=lambda b: rank_key(b, q.rate_rps))
    return Screen(acc.name, tuple(kept), tuple(misses))


def _keep(result: Bound | Miss, bounds: list[Bound], misses: list[Miss]) -> None:
    if isinstance(result, Bound):
        bounds.append(result)
    else:
        misses.append(result)


def _disaggregated(
    prices: StepPrices,
    q: Question,
    instances: Sequence[Instance],
    bounds: list[Bound],
    misses: list[Miss],
) -> None:
    """Every prefill instance (split, budget) paired with every decode split of the same
    formats, each pairing with its best unit for the rate (``bound.best_unit``)."""
    decoders: list[tuple[Instance, DecodeRate]] = []
    for inst in instances:
        rate = decode_rate(prices, inst, q.traffic, q.targets)
        if isinstance(rate, DecodeRate):
            decoders.append((inst, rate))
        else:
            what = inst.what(Serving.DISAGGREGATED.value) + " decode"
            misses.append(Miss(prices.acc.name, what, rate, f"its decode side misses {rate.value}"))
    for p_inst in instances:
        for budget in TOKEN_BUDGETS:
            p_rate: PrefillRate = prefill_rate(prices, p_inst, budget, q.traffic)
            if p_rate.ttft_floor_s > q.targets.ttft_s:
                what = p_inst.what(Serving.DISAGGREGATED.value) + f" prefill budget {budget}"
                floor = p_rate.ttft_floor_s
                reason = f"a {q.traffic.tail_prompt_tokens}-token prompt alone takes {fmt_seconds(floor)}"
                excess = floor / q.targets.ttft_s
                misses.append(Miss(prices.acc.name, what, Limit.TTFT, reason, excess))
                continue
            for d_inst, d_rate in decoders:
                unit = best_unit(
                    (p_rate, p_inst.split.chips),
                    (d_rate, d_inst.split.chips),
                    q.rate_rps,
                    q.max_chips,
                )
                if unit is not None:
                    pair = (p_inst, budget, p_rate)
                    bounds.append(disaggregated(prices.acc.name, pair, (d_inst, d_rate), unit))
