"""Turning a plan's searches into its answer: each searched layout as a candidate (chips,
throughput per chip, price, what binds, intervals), the candidates ranked per accelerator and
overall, why the others lost to the winner, and the Pareto front of the probes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ridgeline.analytic.pricing import Pricing
from ridgeline.fidelity.residuals import NoInterval, speed_interval, time_interval
from ridgeline.plan.bound import Bound, Targets, Traffic
from ridgeline.plan.request import PlanRequest
from ridgeline.plan.result import (
    AcceleratorPlan,
    Candidate,
    Intervals,
    MissSummary,
    Probe,
    RateCheck,
    copies_text,
)
from ridgeline.plan.screen import Screen
from ridgeline.plan.steps import StepPrices
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.specs.calibration import CostMode
from ridgeline.sweep.search import FrontPoint, pareto_front


@dataclass(frozen=True, slots=True)
class Context:
    """One model's question, resolved: the request, the model, the accelerators, the traffic."""

    req: PlanRequest
    model: ModelSpec
    accelerators: Mapping[str, Accelerator]
    traffic: Traffic


@dataclass(frozen=True, slots=True)
class Searched:
    """What a layout's search found: the fewest copies that met the targets (``None``: none
    within max chips), the most that missed (0: none tried), and every probe."""

    bound: Bound
    met: int | None
    missed: int
    probes: tuple[Probe, ...]
    beaten: int | None = None  # stopped: others met the targets on this many chips

    def probe(self, copies: int | None) -> Probe | None:
        return next((p for p in self.probes if p.copies == copies), None)


def candidate(s: Searched, ctx: Context) -> Candidate:
    """A searched layout as the answer shows it: chips, throughput, price, what binds, and how
    sure each figure is."""
    lay = s.bound.layout
    acc = ctx.accelerators[lay.accelerator]
    met = s.probe(s.met)
    missed = s.probe(s.missed)
    chips = None if s.met is None else s.met * lay.chips
    per_chip = None if chips is None else ctx.req.rate_rps * ctx.traffic.mean_output_tokens / chips
    price = ctx.req.prices.get(lay.accelerator)
    usd = None if price is None or chips is None else price * chips
    binds = StepPrices(ctx.model, acc, Pricing.of(acc, ctx.req.mode)).binding(
        lay.decode, lay.formats, s.bound.batch, ctx.traffic.decode_context
    )
    intervals = None
    if ctx.req.mode is CostMode.CALIBRATED and met is not None and per_chip is not None:
        r = met.result
        intervals = Intervals(
            speed_interval(acc, per_chip),
            time_interval(acc, r.ttft_p_s),
            time_interval(acc, r.tpot_p_s),
        )
    return Candidate(s.bound, s.met, met, missed, per_chip, usd, binds.text, intervals, s.beaten)


def order(c: Candidate) -> tuple[int, float, float, str]:
    """Met first, by chips, price and headroom (via TPOT); then the rest by their bound."""
    if c.chips is None:
        return (1 << 62, math.inf, math.inf, c.bound.layout.key)
    tpot = c.met.result.tpot_p_s if c.met is not None else math.inf
    return (c.chips, c.usd_per_hour or 0.0, tpot, c.bound.layout.key)


def accelerator_plan(s: Screen, searches: Sequence[Searched], ctx: Context) -> AcceleratorPlan:
    """One accelerator's candidates, best first, and what the bound ruled out (by limit)."""
    acc = ctx.accelerators[s.accelerator]
    family = acc.calibration.family
    candidates = sorted((candidate(x, ctx) for x in searches), key=order)
    by_limit: dict[str, MissSummary] = {}
    for m in s.misses:  # per limit: how many, and the closest to the targets
        prior = by_limit.get(m.limit.value)
        if prior is None:
            by_limit[m.limit.value] = MissSummary(m.limit, 1, m)
        else:
            closest = m if m.excess < prior.example.excess else prior.example
            by_limit[m.limit.value] = MissSummary(m.limit, prior.count + 1, closest)
    probe = speed_interval(acc, 1.0)
    note = probe.reason if isinstance(probe, NoInterval) else ""
    if ctx.req.mode is CostMode.IDEAL:
        note = "ideal roofline: no interval (the residuals are the calibrated model's)"
    return AcceleratorPlan(
        s.accelerator, family, s.num_layouts, tuple(candidates), tuple(by_limit.values()), note
    )


def winner_of(plans: Sequence[AcceleratorPlan]) -> tuple[Candidate | None, str]:
    """The best candidate overall: by price when every contender has one, else by chips."""
    best = [p.best for p in plans if p.best is not None]
    contenders = [c for c in best if c is not None]
    if not contenders:
        return None, "chips"
    if all(c.usd_per_hour is not None for c in contenders):
        return min(contenders, key=lambda c: (c.usd_per_hour, order(c))), "price"
    return min(contenders, key=order), "chips"


def _why(c: Candidate, winner: Candidate, ranked_by: str, targets: Targets) -> str:
    """Why ``c`` lost to ``winner``, in words: what it costs more, and what stops it from
    costing less (the targets it misses with fewer copies, or its bound)."""
    if c.copies is None and c.beaten is not None:
        tried = (
            f" ({c.missed.missed(targets)} with {copies_text(c.missed.copies)})" if c.missed else ""
        )
        return (
            f"needs more than {c.beaten} chips{tried}, where others meet the targets on "
            f"{c.beaten}: its search stopped there; {c.binds} binds its decode step"
        )
    if c.copies is None:
        n = c.missed.copies if c.missed is not None else 0
        what = c.missed.missed(targets) if c.missed is not None else "the targets"
        return f"misses the targets even with {copies_text(n)} ({what}); {c.binds} binds its decode step"
    priced = ranked_by == "price" and c.usd_per_hour is not None
    tied = c.usd_per_hour == winner.usd_per_hour if priced else c.chips == winner.chips
    if priced and not tied:
        head = f"${c.usd_per_hour:,.2f}/h against ${winner.usd_per_hour:,.2f}/h"
    elif tied:
        mine, theirs = c.headroom(targets), winner.headroom(targets)
        same = (
            f"the same price (${c.usd_per_hour:,.2f}/h)" if priced else f"as many chips ({c.chips})"
        )
        head = f"{same} with less headroom ({mine:.0%} against {theirs:.0%})"
        return f"{head}; {c.binds} binds its decode step"
    else:
        head = f"{c.chips} chips against {winner.chips}"
    if c.missed is not None:
        tail = f"with {copies_text(c.missed.copies)} it misses {c.missed.missed(targets)}"
    else:
        tail = (
            f"one copy carries at most {c.bound.capacity_rps:.3g} req/s "
            f"({c.bound.limit.value} binds it)"
        )
    return f"{head}: {tail}; {c.binds} binds its decode step"


def reasons(
    plans: Sequence[AcceleratorPlan], winner: Candidate | None, ranked_by: str, req: PlanRequest
) -> tuple[tuple[str, str], ...]:
    """Why each shown candidate lost to the winner."""
    if winner is None:
        return ()
    out = []
    for p in plans:
        for c in p.candidates[: req.top]:
            if c is not winner:
                out.append((c.bound.layout.key, _why(c, winner, ranked_by, req.targets)))
    return tuple(out)


def front(
    searches: Iterable[Searched],
    winner: Candidate | None,
    checks: Sequence[RateCheck],
    traffic: Traffic,
) -> list[FrontPoint]:
    """The Pareto front of every probe within the targets: output tokens/s per chip against
    TPOT (per-user speed is its inverse)."""
    probes = [(s.bound.layout, p) for s in searches for p in s.probes]
    if winner is not None:
        probes += [(winner.bound.layout, c.probe) for c in checks if c.factor != 1.0]
    points = []
    for lay, p in probes:
        if p.result.meets_slo:
            per_chip = p.rate_per_copy_rps * traffic.mean_output_tokens / lay.chips
            label = f"{lay.key} x{p.copies}"
            points.append(FrontPoint(label, p.rate_per_copy_rps, per_chip, p.result.tpot_p_s))
    return pareto_front(points)
