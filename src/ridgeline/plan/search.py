"""``plan``: the cheapest deployment that meets latency targets, on every accelerator asked::

    model, traffic, rate, targets
      ├─ per accelerator: the analytic screen (``plan.screen``): every layout bounded; those
      │    that cannot meet the targets set aside with why; the rest ranked by the chips they
      │    need for the rate at best
      ├─ shortlist: the ``simulated`` best distinct layouts per accelerator
      ├─ simulate (the sweep's backends: a local process pool, or Ray), in rounds: for each
      │    layout, the fewest copies that meet the targets, from the bound's count up (the
      │    bound never overstates a copy's capacity less than the simulator, so it is where a
      │    search starts, never below it)
      ├─ rank: per accelerator by chips (by price when given), then the winner overall
      └─ the winner simulated at 0.5x, 1x and 1.5x the rate, its vLLM and SGLang command
           lines, and the Pareto front of every probe within the targets

Each round submits one probe per layout still searching and decides the next counts only from
finished rounds, in shortlist order, so a plan is the same on every backend and worker count.
A probe is one copy at rate / copies (each copy sees a Poisson share of the traffic: a router
that picks copies at random; a least-loaded router only does better).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ridgeline.fidelity.residuals import NoInterval, speed_interval, time_interval
from ridgeline.plan.bound import Bound, Targets, Traffic
from ridgeline.plan.engine import EngineCommands, commands
from ridgeline.plan.request import PlanRequest
from ridgeline.plan.result import (
    AcceleratorPlan,
    Candidate,
    Intervals,
    MissSummary,
    Plan,
    Probe,
    RateCheck,
    copies_text,
)
from ridgeline.plan.screen import Question, Screen, screen
from ridgeline.plan.simulator import PlanSimulator, probe_config
from ridgeline.plan.steps import StepPrices
from ridgeline.specs import Accelerator, ModelSpec, get_accelerator, get_model
from ridgeline.specs.calibration import CostMode
from ridgeline.sweep.backends import Backend, LocalBackend, ProbeTask, SharedContext
from ridgeline.sweep.point import Configuration, PointResult, Slo
from ridgeline.sweep.search import FrontPoint, pareto_front
from ridgeline.sweep.workload import RequestTable, load_table

GROWTH = 1.5  # copies grow by this factor until a count meets the targets, then bisect
MAX_ROUNDS = 24
CHECK_FACTORS = (0.5, 1.0, 1.5)
Progress = Callable[[str], None]


def traffic_of(table: RequestTable, percentile: float) -> Traffic:
    """The bound's view of a workload: mean lengths, the prompt at the TTFT percentile, the
    longest request."""
    prompts, outputs = table.prompt_tokens, table.output_tokens
    return Traffic(
        mean_prompt_tokens=float(np.mean(prompts)),
        mean_output_tokens=float(np.mean(outputs)),
        tail_prompt_tokens=int(math.ceil(np.percentile(prompts, percentile))),
        longest_tokens=int(np.max(prompts + outputs)),
    )


@dataclass(slots=True)
class _Search:
    """One layout's search for its fewest copies (runner-private, mutable)."""

    bound: Bound
    config: Configuration
    start: int
    most: int
    missed: int = 0  # most copies seen to miss the targets
    met: int | None = None  # fewest copies seen to meet them
    probes: dict[int, Probe] = field(default_factory=dict)

    def next_copies(self) -> int | None:
        if self.met is None and self.missed == 0:
            return self.start
        if self.met is not None:
            done = self.met == self.start or self.met - self.missed <= 1
            return None if done else (self.missed + self.met) // 2
        if self.missed >= self.most:
            return None
        return min(self.most, max(self.missed + 1, math.ceil(self.missed * GROWTH)))

    def observe(self, probe: Probe) -> None:
        self.probes[probe.copies] = probe
        if probe.result.meets_slo:
            self.met = probe.copies if self.met is None else min(self.met, probe.copies)
        else:
            self.missed = max(self.missed, probe.copies)


class _Runner:
    """Runs probes on a backend, one round at a time, and counts them."""

    def __init__(self, backend: Backend, rate_rps: float, seed: int) -> None:
        self.backend, self.rate_rps, self.seed = backend, rate_rps, seed
        self.num_simulations = 0

    def probes(self, wanted: Sequence[tuple[Configuration, int, float]]) -> list[Probe]:
        """Simulate one copy of each (configuration, copies, per-copy rate), in order."""
        tasks = [
            ProbeTask(f"{c.policy.name} x{n} @{rate:.9g}", c, rate, self.seed)
            for c, n, rate in wanted
        ]
        found: dict[str, PointResult] = {}
        for task, result in self.backend.run(tasks):
            found[task.key] = result
            self.num_simulations += 1
        return [Probe(n, rate, found[t.key]) for t, (_, n, rate) in zip(tasks, wanted, strict=True)]

    def search(self, searches: Sequence[_Search], progress: Progress | None) -> None:
        """Rounds until every search has its fewest copies (or ran out of chips)."""
        for k in range(MAX_ROUNDS):
            planned = [(s, n) for s in searches if (n := s.next_copies()) is not None]
            if not planned:
                return
            if progress is not None:
                progress(f"round {k + 1}: {len(planned)} simulations")
            wanted = [(s.config, n, self.rate_rps / n) for s, n in planned]
            for (s, _), probe in zip(planned, self.probes(wanted), strict=True):
                s.observe(probe)


def _shortlist(s: Screen, count: int) -> list[Bound]:
    """The best ``count`` bounds of distinct (serving, formats, parallel) families, and the
    best of the other serving kind when none made the list."""
    out: list[Bound] = []
    seen: set[tuple[str, str, str]] = set()
    for b in s.bounds:
        lay = b.layout
        family = (lay.serving.value, lay.formats.label, lay.parallel_label)
        if family not in seen and len(out) < count:
            seen.add(family)
            out.append(b)
    kinds = {b.layout.serving for b in out}
    other = next((b for b in s.bounds if b.layout.serving not in kinds), None)
    return out + ([other] if other is not None else [])


@dataclass(frozen=True, slots=True)
class _Context:
    """What building the answer needs besides the searches."""

    req: PlanRequest
    model: ModelSpec
    accelerators: Mapping[str, Accelerator]
    traffic: Traffic
    progress: Progress | None = None


def _candidate(s: _Search, ctx: _Context) -> Candidate:
    lay = s.bound.layout
    acc = ctx.accelerators[lay.accelerator]
    met = None if s.met is None else s.probes[s.met]
    missed = s.probes.get(s.missed)
    chips = None if s.met is None else s.met * lay.chips
    per_chip = None if chips is None else ctx.req.rate_rps * ctx.traffic.mean_output_tokens / chips
    price = ctx.req.prices.get(lay.accelerator)
    usd = None if price is None or chips is None else price * chips
    binds = StepPrices(ctx.model, acc, ctx.req.mode).binding(
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
    return Candidate(s.bound, s.met, met, missed, per_chip, usd, binds.value, intervals)


def _order(c: Candidate) -> tuple[int, float, float, str]:
    """Met first, by chips, price and headroom (via TPOT); then the rest by their bound."""
    if c.chips is None:
        return (1 << 62, math.inf, math.inf, c.bound.layout.key)
    tpot = c.met.result.tpot_p_s if c.met is not None else math.inf
    return (c.chips, c.usd_per_hour or 0.0, tpot, c.bound.layout.key)


def _accelerator_plan(s: Screen, searches: Sequence[_Search], ctx: _Context) -> AcceleratorPlan:
    acc = ctx.accelerators[s.accelerator]
    family = acc.calibration.family
    candidates = sorted((_candidate(x, ctx) for x in searches), key=_order)
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


def _winner(plans: Sequence[AcceleratorPlan]) -> tuple[Candidate | None, str]:
    """The best candidate overall: by price when every contender has one, else by chips."""
    best = [p.best for p in plans if p.best is not None]
    contenders = [c for c in best if c is not None]
    if not contenders:
        return None, "chips"
    if all(c.usd_per_hour is not None for c in contenders):
        return min(contenders, key=lambda c: (c.usd_per_hour, _order(c))), "price"
    return min(contenders, key=_order), "chips"


def _why(c: Candidate, winner: Candidate, ranked_by: str, targets: Targets) -> str:
    """Why ``c`` lost to ``winner``, in words: what it costs more, and what stops it from
    costing less (the targets it misses with fewer copies, or its bound)."""
    if c.copies is None:
        n = c.missed.copies if c.missed is not None else 0
        what = c.missed.missed(targets) if c.missed is not None else "the targets"
        return f"misses the targets even with {copies_text(n)} ({what}); {c.binds} binds its decode step"
    if ranked_by == "price" and c.usd_per_hour is not None and winner.usd_per_hour is not None:
        head = f"${c.usd_per_hour:,.2f}/h against ${winner.usd_per_hour:,.2f}/h"
    elif c.chips == winner.chips:
        mine, theirs = c.headroom(targets), winner.headroom(targets)
        head = f"as many chips ({c.chips}) with less headroom ({mine:.0%} against {theirs:.0%})"
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


def _reasons(
    plans: Sequence[AcceleratorPlan], winner: Candidate | None, ranked_by: str, req: PlanRequest
) -> tuple[tuple[str, str], ...]:
    if winner is None:
        return ()
    out = []
    for p in plans:
        for c in p.candidates[: req.top]:
            if c is not winner:
                out.append((c.bound.layout.key, _why(c, winner, ranked_by, req.targets)))
    return tuple(out)


def _front(
    searches: Iterable[_Search],
    winner: Candidate | None,
    checks: Sequence[RateCheck],
    traffic: Traffic,
) -> list[FrontPoint]:
    """The Pareto front of every probe within the targets: output tokens/s per chip against
    TPOT (per-user speed is its inverse)."""
    probes = [(s.bound.layout, p) for s in searches for p in s.probes.values()]
    if winner is not None:
        probes += [(winner.bound.layout, c.probe) for c in checks if c.factor != 1.0]
    points = []
    for lay, p in probes:
        if p.result.meets_slo:
            per_chip = p.rate_per_copy_rps * traffic.mean_output_tokens / lay.chips
            label = f"{lay.key} x{p.copies}"
            points.append(FrontPoint(label, p.rate_per_copy_rps, per_chip, p.result.tpot_p_s))
    return pareto_front(points)


def _context(req: PlanRequest) -> tuple[_Context, RequestTable]:
    model = get_model(req.model)
    accs = {a.name: a for a in (get_accelerator(x) for x in req.accelerators)}
    table = load_table(req.workload, req.seed)
    return _Context(req, model, accs, traffic_of(table, req.targets.percentile)), table


def _question(ctx: _Context) -> Question:
    r = ctx.req
    return Question(
        ctx.model,
        ctx.traffic,
        r.targets,
        r.rate_rps,
        r.max_chips,
        r.mode,
        r.weight_dtypes,
        r.kv_dtypes,
    )


@dataclass(frozen=True, slots=True)
class _Simulated:
    """What the simulations decided."""

    plans: tuple[AcceleratorPlan, ...]
    winner: Candidate | None
    ranked_by: str
    checks: tuple[RateCheck, ...]
    front: tuple[FrontPoint, ...]
    num_simulations: int


def _simulate(
    ctx: _Context, screens: Sequence[Screen], shared: SharedContext, backend: Backend
) -> _Simulated:
    """Search every shortlisted layout's copies on ``backend``, then rank and check."""
    shortlist = {s.accelerator: _shortlist(s, ctx.req.simulated) for s in screens}
    backend.start(shared)
    try:
        runner = _Runner(backend, ctx.req.rate_rps, ctx.req.seed)
        searches = {name: [_search(b, ctx) for b in bounds] for name, bounds in shortlist.items()}
        every = [s for ss in searches.values() for s in ss]
        runner.search(every, ctx.progress)
        plans = tuple(_accelerator_plan(s, searches[s.accelerator], ctx) for s in screens)
        winner, ranked_by = _winner(plans)
        checks = _checks(runner, winner, ctx)
    finally:
        backend.close()
    front = tuple(_front(every, winner, checks, ctx.traffic))
    return _Simulated(plans, winner, ranked_by, checks, front, runner.num_simulations)


def run_plan(
    req: PlanRequest, backend: Backend | None = None, progress: Progress | None = None
) -> Plan:
    """Answer ``req`` (module docstring); ``backend`` runs the simulations (in this process
    by default), and is started and closed here."""
    start = time.perf_counter()
    ctx, table = _context(req)
    ctx = replace(ctx, progress=progress)
    screens = [screen(_question(ctx), acc) for acc in ctx.accelerators.values()]
    if progress is not None:
        progress(f"screened {sum(s.num_layouts for s in screens):,} layouts")
    layouts = {b.layout.key: b.layout for s in screens for b in _shortlist(s, req.simulated)}
    sim = PlanSimulator(ctx.model, ctx.accelerators, layouts, req.mode)
    slo = Slo(req.targets.ttft_s, req.targets.tpot_s, req.targets.percentile)
    shared = SharedContext(sim, {req.workload.name: table}, slo)
    done = _simulate(ctx, screens, shared, backend or LocalBackend(1))
    w = done.winner
    return Plan(
        model=ctx.model.name,
        workload=req.workload.name,
        rate_rps=req.rate_rps,
        targets=req.targets,
        mode=req.mode,
        accelerators=done.plans,
        winner=w,
        ranked_by=done.ranked_by,
        checks=done.checks,
        commands=() if w is None else _commands(w, ctx),
        front=done.front,
        reasons=_reasons(done.plans, w, done.ranked_by, req),
        num_simulations=done.num_simulations,
        wall_s=time.perf_counter() - start,
    )


def _commands(w: Candidate, ctx: _Context) -> tuple[EngineCommands, ...]:
    lay = w.bound.layout
    return commands(lay, ctx.accelerators[lay.accelerator], w.copies or 1)


def _search(b: Bound, ctx: _Context) -> _Search:
    config = probe_config(ctx.model.name, b.layout, ctx.req.workload)
    most = ctx.req.max_chips // b.layout.chips
    return _Search(b, config, min(b.copies_for(ctx.req.rate_rps), most), most)


def _checks(runner: _Runner, winner: Candidate | None, ctx: _Context) -> tuple[RateCheck, ...]:
    """The winner at ``CHECK_FACTORS`` times the rate, with its copies (1x from its search)."""
    if winner is None or winner.copies is None or winner.met is None:
        return ()
    n = winner.copies
    config = probe_config(ctx.model.name, winner.bound.layout, ctx.req.workload)
    others = [f for f in CHECK_FACTORS if f != 1.0]
    probes = runner.probes([(config, n, f * ctx.req.rate_rps / n) for f in others])
    by_factor = dict(zip(others, probes, strict=True)) | {1.0: winner.met}
    return tuple(RateCheck(f, by_factor[f], by_factor[f].result.meets_slo) for f in CHECK_FACTORS)
