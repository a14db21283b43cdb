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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.plan.answer import (
    Context,
    Searched,
    accelerator_plan,
    front,
    reasons,
    winner_of,
)
from ridgeline.plan.bound import Bound, Traffic
from ridgeline.plan.engine import EngineCommands, commands
from ridgeline.plan.request import PlanRequest
from ridgeline.plan.result import AcceleratorPlan, Candidate, Plan, Probe, RateCheck
from ridgeline.plan.screen import Question, Screen, screen
from ridgeline.plan.simulator import PlanSimulator, probe_config
from ridgeline.specs import get_accelerator, get_model
from ridgeline.sweep.backends import Backend, LocalBackend, ProbeTask, SharedContext
from ridgeline.sweep.point import Configuration, PointResult, Slo
from ridgeline.sweep.workload import RequestTable, load_table

GROWTH = 1.5  # copies grow by this factor until a count meets the targets, then bisect
FAR_FROM_BOUND = 2  # a layout that misses with twice its bound's copies is not searched further
MIN_PROBE_REQUESTS = 100  # requests of one probe at least (its p90 rests on the last 10)
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
    beaten: int | None = None  # stopped: ``top`` others met the targets on this many chips

    def next_copies(self) -> int | None:
        if self.beaten is not None:
            return None
        if self.met is None and self.missed == 0:
            return self.start
        if self.met is not None:
            done = self.met == self.start or self.met - self.missed <= 1
            return None if done else (self.missed + self.met) // 2
        most = min(self.most, FAR_FROM_BOUND * self.start)
        if self.missed >= most:
            return None
        return min(most, max(self.missed + 1, math.ceil(self.missed * GROWTH)))

    def done(self) -> Searched:
        """What the search found, frozen."""
        probes = tuple(self.probes[n] for n in sorted(self.probes))
        return Searched(self.bound, self.met, self.missed, probes, self.beaten)

    def fewest_chips(self) -> int:
        """The fewest chips this layout can still need: more copies than the most that missed
        (at least the bound's count)."""
        return max(self.start, self.missed + 1) * self.bound.layout.chips

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
        """Simulate one copy of each (configuration, copies, per-copy rate), in order; each
        with at least ``MIN_PROBE_REQUESTS`` requests (a copy that carries a small share of
        the rate gets a longer window of arrivals, so its percentiles mean something)."""
        tasks = [
            ProbeTask(
                f"{c.model}: {c.policy.name} x{n} @{rate:.9g}", _enough(c, rate), rate, self.seed
            )
            for c, n, rate in wanted
        ]
        found: dict[str, PointResult] = {}
        for task, result in self.backend.run(tasks):
            found[task.key] = result
            self.num_simulations += 1
        return [Probe(n, rate, found[t.key]) for t, (_, n, rate) in zip(tasks, wanted, strict=True)]

    def search(
        self, groups: Sequence[Sequence[_Search]], top: int, progress: Progress | None
    ) -> None:
        """Rounds until every search has its fewest copies, ran out of chips, or was beaten:
        within a group (one model on one accelerator), a search stops once ``top`` others
        have met the targets on fewer chips than it can still need (the sweep's early stop)."""
        searches = [s for g in groups for s in g]
        for k in range(MAX_ROUNDS):
            for g in groups:
                _stop_beaten(g, top)
            planned = [(s, n) for s in searches if (n := s.next_copies()) is not None]
            if not planned:
                return
            if progress is not None:
                progress(f"round {k + 1}: {len(planned)} simulations")
            wanted = [(s.config, n, self.rate_rps / n) for s, n in planned]
            for (s, _), probe in zip(planned, self.probes(wanted), strict=True):
                s.observe(probe)


def _stop_beaten(group: Sequence[_Search], top: int) -> None:
    met = sorted(s.met * s.bound.layout.chips for s in group if s.met is not None)
    if len(met) < top:
        return
    for s in group:
        if s.met is None and s.beaten is None and s.fewest_chips() > met[top - 1]:
            s.beaten = met[top - 1]


def _enough(config: Configuration, rate_rps: float) -> Configuration:
    """``config`` with a window of arrivals holding at least ``MIN_PROBE_REQUESTS`` at
    ``rate_rps`` (``duration_s`` workloads)."""
    w = config.workload
    if w.duration_s is None or w.duration_s * rate_rps >= MIN_PROBE_REQUESTS:
        return config
    return replace(config, workload=replace(w, duration_s=MIN_PROBE_REQUESTS / rate_rps))


def _shortlist(s: Screen, count: int) -> list[Bound]:
    """The bounds simulated: of distinct (serving, formats, parallel) families, the best
    ``max(count - 1, 1)`` of each serving kind, at most ``count + 1`` in all, in the bound's
    order (both kinds reach the simulator: their bounds are near where they matter most)."""
    per_kind = max(count - 1, 1)
    taken: dict[str, int] = {}
    out: list[Bound] = []
    seen: set[tuple[str, str, str]] = set()
    for b in s.bounds:
        lay = b.layout
        family = (lay.serving.value, lay.formats.label, lay.parallel_label)
        if family in seen or taken.get(lay.serving.value, 0) >= per_kind:
            continue
        seen.add(family)
        taken[lay.serving.value] = taken.get(lay.serving.value, 0) + 1
        out.append(b)
        if len(out) > count:
            break
    return out


def _context(req: PlanRequest) -> tuple[Context, RequestTable]:
    model = get_model(req.model)
    accs = {a.name: a for a in (get_accelerator(x) for x in req.accelerators)}
    table = load_table(req.workload, req.seed)
    return Context(req, model, accs, traffic_of(table, req.targets.percentile)), table


def _question(ctx: Context) -> Question:
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


def _search(b: Bound, ctx: Context) -> _Search:
    config = probe_config(ctx.model.name, b.layout, ctx.req.workload)
    most = ctx.req.max_chips // b.layout.chips
    return _Search(b, config, min(b.copies_for(ctx.req.rate_rps), most), most)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """One model's part of a run: its context, screens and searches."""

    ctx: Context
    screens: tuple[Screen, ...]
    searches: Mapping[str, list[_Search]]  # by accelerator, shortlist order


def _prepare(req: PlanRequest, progress: Progress | None) -> tuple[_Prepared, RequestTable]:
    ctx, table = _context(req)
    screens = tuple(screen(_question(ctx), acc) for acc in ctx.accelerators.values())
    if progress is not None:
        layouts = sum(s.num_layouts for s in screens)
        progress(f"{ctx.model.name}: screened {layouts:,} layouts")
    searches = {
        s.accelerator: [_search(b, ctx) for b in _shortlist(s, req.simulated)] for s in screens
    }
    return _Prepared(ctx, screens, searches), table


def _check_alike(reqs: Sequence[PlanRequest]) -> None:
    """Plans run together share the traffic, the rate, the targets and the seed (one workload
    table and one SLO travel to the workers) and the cost mode."""
    key = [(r.workload, r.rate_rps, r.targets, r.seed, r.mode) for r in reqs]
    if any(k != key[0] for k in key):
        raise ConfigError(
            "field model: plans run together share workload, rate, targets, seed and mode"
        )


def run_plans(
    reqs: Sequence[PlanRequest], backend: Backend | None = None, progress: Progress | None = None
) -> tuple[Plan, ...]:
    """Answer several requests that differ in their model (and in the accelerators, limits and
    formats searched) in one backend session: their simulations share the rounds, so the
    workers stay busy. ``backend`` runs the simulations (in this process by default) and is
    started and closed here.

    Raises:
        ConfigError: the requests do not share workload, rate, targets, seed and mode.
    """
    if not reqs:
        return ()
    start = time.perf_counter()
    _check_alike(reqs)
    prepared = [_prepare(r, progress) for r in reqs]
    parts = [p for p, _ in prepared]
    layouts = {
        (p.ctx.model.name, s.config.policy.name): s.bound.layout
        for p in parts
        for ss in p.searches.values()
        for s in ss
    }
    models = {p.ctx.model.name: p.ctx.model for p in parts}
    accs = {name: a for p in parts for name, a in p.ctx.accelerators.items()}
    first = reqs[0]
    # the plan's pricing value: its mode, moved to each layout's deployment and formats
    sim = PlanSimulator(models, accs, layouts, Pricing.of(next(iter(accs.values())), first.mode))
    slo = Slo(first.targets.ttft_s, first.targets.tpot_s, first.targets.percentile)
    shared = SharedContext(sim, {first.workload.name: prepared[0][1]}, slo)
    return _simulate(parts, shared, backend or LocalBackend(1), progress, start)


def run_plan(
    req: PlanRequest, backend: Backend | None = None, progress: Progress | None = None
) -> Plan:
    """Answer ``req`` (module docstring; ``run_plans`` answers several models at once)."""
    return run_plans([req], backend, progress)[0]


_Ranked = tuple[tuple[AcceleratorPlan, ...], Candidate | None, str]


def _simulate(
    parts: Sequence[_Prepared],
    shared: SharedContext,
    backend: Backend,
    progress: Progress | None,
    start: float,
) -> tuple[Plan, ...]:
    """Search every shortlisted layout's copies on ``backend``, then rank and check."""
    first = parts[0].ctx.req
    backend.start(shared)
    try:
        runner = _Runner(backend, first.rate_rps, first.seed)
        groups = [ss for p in parts for ss in p.searches.values()]
        runner.search(groups, first.top, progress)
        ranked = [_ranked(p) for p in parts]
        checks = _checks(runner, [(p.ctx, r[1]) for p, r in zip(parts, ranked, strict=True)])
    finally:
        backend.close()
    wall_s = time.perf_counter() - start
    return tuple(
        _plan(p, r, c, (runner.num_simulations, wall_s))
        for p, r, c in zip(parts, ranked, checks, strict=True)
    )


def _ranked(p: _Prepared) -> _Ranked:
    plans = tuple(
        accelerator_plan(s, [x.done() for x in p.searches[s.accelerator]], p.ctx) for s in p.screens
    )
    winner, ranked_by = winner_of(plans)
    return plans, winner, ranked_by


def _plan(
    p: _Prepared, ranked: _Ranked, checks: tuple[RateCheck, ...], cost: tuple[int, float]
) -> Plan:
    ctx, (plans, w, ranked_by) = p.ctx, ranked
    every = [x.done() for ss in p.searches.values() for x in ss]
    return Plan(
        model=ctx.model.name,
        workload=ctx.req.workload.name,
        rate_rps=ctx.req.rate_rps,
        targets=ctx.req.targets,
        mode=ctx.req.mode,
        accelerators=plans,
        winner=w,
        ranked_by=ranked_by,
        checks=checks,
        commands=() if w is None else _commands(w, ctx),
        front=tuple(front(every, w, checks, ctx.traffic)),
        reasons=reasons(plans, w, ranked_by, ctx.req),
        num_simulations=cost[0],
        wall_s=cost[1],
    )


def _commands(w: Candidate, ctx: Context) -> tuple[EngineCommands, ...]:
    lay = w.bound.layout
    return commands(lay, ctx.accelerators[lay.accelerator], w.copies or 1)


def _checks(
    runner: _Runner, winners: Sequence[tuple[Context, Candidate | None]]
) -> list[tuple[RateCheck, ...]]:
    """Each winner at ``CHECK_FACTORS`` times the rate with its copies (1x from its search),
    all in one round."""
    others = [f for f in CHECK_FACTORS if f != 1.0]
    wanted: list[tuple[Configuration, int, float]] = []
    for ctx, w in winners:
        if w is not None and w.copies is not None and w.met is not None:
            config = probe_config(ctx.model.name, w.bound.layout, ctx.req.workload)
            wanted += [(config, w.copies, f * ctx.req.rate_rps / w.copies) for f in others]
    probes = iter(runner.probes(wanted))
    out: list[tuple[RateCheck, ...]] = []
    for _, w in winners:
        if w is None or w.copies is None or w.met is None:
            out.append(())
            continue
        by_factor = {f: next(probes) for f in others} | {1.0: w.met}
        out.append(
            tuple(RateCheck(f, by_factor[f], by_factor[f].result.meets_slo) for f in CHECK_FACTORS)
        )
    return out
