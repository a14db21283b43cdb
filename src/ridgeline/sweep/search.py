"""Capacity search: the highest request rate at which a configuration meets its SLOs.

Each configuration keeps a bracket [lo, hi]: ``lo`` is the highest rate seen to meet the SLOs,
``hi`` the lowest seen to miss them. The search first brackets (doubling up from the start rate
while the SLOs hold, halving down while they do not), then bisects geometrically::

    rate  ──●────────●───────●──▶
           lo      √(lo·hi)  hi         stop when hi / lo <= 1 + rel_tolerance

Every probe is a simulation with the sweep's fixed seed, so the sequence of rates is a pure
function of the results: the same on every backend and on a resumed run.

Early stopping: once a configuration's best possible objective, ``hi`` × its factor (capacity is
below ``hi``), is no better than what another configuration of the same model and workload has
*proven* (its ``lo`` × factor), it cannot win and is stopped (status ``dominated``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.sweep.spec import SearchSettings


class Status(StrEnum):
    """Where a configuration's search stands."""

    RUNNING = "running"
    CONVERGED = "converged"  # bracket within tolerance
    CAPPED = "capped"  # meets the SLOs at rate_max_rps
    INFEASIBLE = "infeasible"  # misses the SLOs even at rate_min_rps
    DOMINATED = "dominated"  # stopped early: cannot beat the best configuration
    BUDGET = "budget"  # max_probes spent before convergence
    DOES_NOT_FIT = "does_not_fit"  # the weights do not fit the deployment's memory


@dataclass(frozen=True, slots=True)
class Bracket:
    """What the probes so far say about a configuration's capacity (req/s)."""

    lo_rps: float | None = None  # highest rate that met the SLOs
    hi_rps: float | None = None  # lowest rate that missed them
    num_probes: int = 0

    def observe(self, rate_rps: float, meets_slo: bool) -> Bracket:
        """The bracket after one more probe."""
        if meets_slo:
            lo = rate_rps if self.lo_rps is None else max(self.lo_rps, rate_rps)
            return Bracket(lo, self.hi_rps, self.num_probes + 1)
        hi = rate_rps if self.hi_rps is None else min(self.hi_rps, rate_rps)
        return Bracket(self.lo_rps, hi, self.num_probes + 1)


def next_rate(b: Bracket, s: SearchSettings) -> float | Status:
    """The next rate to probe, or the status the search ends with."""
    if b.lo_rps is None and b.hi_rps is None:
        return min(s.rate_start_rps, s.rate_max_rps)
    if b.num_probes >= s.max_probes:
        return Status.BUDGET
    if b.lo_rps is None:
        assert b.hi_rps is not None
        down = b.hi_rps / 2
        return Status.INFEASIBLE if b.hi_rps <= s.rate_min_rps else max(down, s.rate_min_rps)
    if b.hi_rps is None:
        up = b.lo_rps * 2
        return Status.CAPPED if b.lo_rps >= s.rate_max_rps else min(up, s.rate_max_rps)
    if b.hi_rps <= b.lo_rps * (1 + s.rel_tolerance):
        return Status.CONVERGED
    return math.sqrt(b.lo_rps * b.hi_rps)


def upper_bound(b: Bracket, factor: float) -> float:
    """The best objective a configuration could still reach (capacity < hi)."""
    return math.inf if b.hi_rps is None else b.hi_rps * factor


def proven(b: Bracket, factor: float) -> float:
    """The objective a configuration has shown it reaches (capacity >= lo)."""
    return 0.0 if b.lo_rps is None else b.lo_rps * factor


def dominated(b: Bracket, factor: float, best_proven: float) -> bool:
    """True when the configuration cannot beat ``best_proven`` on the objective."""
    return best_proven > 0 and upper_bound(b, factor) <= best_proven


@dataclass(frozen=True, slots=True)
class FrontPoint:
    """One probe that met the SLOs, placed for the Pareto front."""

    label: str
    rate_rps: float
    throughput_per_chip: float  # output tokens/s per chip
    latency_s: float


def pareto_front(points: Sequence[FrontPoint]) -> list[FrontPoint]:
    """Points not dominated by another (higher or equal throughput per chip *and* lower or
    equal latency, one of them strictly), sorted by throughput per chip.

    A sort by (throughput descending, latency ascending) and one scan keeping each point whose
    latency beats every point before it: O(n log n).
    """
    ordered = sorted(points, key=lambda p: (-p.throughput_per_chip, p.latency_s, p.label))
    front: list[FrontPoint] = []
    best_latency = math.inf
    for p in ordered:
        if p.latency_s < best_latency:
            front.append(p)
            best_latency = p.latency_s
    return sorted(front, key=lambda p: (p.throughput_per_chip, p.label))
