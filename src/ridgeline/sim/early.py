"""Stop a simulation once a TTFT percentile objective is certainly missed.

A capacity search asks one question of each probe: do the SLOs hold at this rate? When the
answer is already "no" before the simulation ends, the rest of it is wasted work. A request is
certainly late once it has waited longer than the TTFT bound without its first token (or got
it later, or was rejected); when enough requests are late, the percentile is over the bound
whatever the others do:

    sorted TTFTs  x_0 ≤ … ≤ x_lo ≤ x_lo+1 ≤ … ≤ x_n-1,   lo = ⌊(n − 1)·q⌋
    the q-th percentile (linear interpolation, numpy's default) lies in [x_lo, x_lo+1], so it
    exceeds the bound once n − lo requests do (they fill x_lo … x_n-1)

``late_limit`` gives that count; ``LateCounter`` checks it at step boundaries, each request
once, in arrival order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ridgeline.errors import ConfigError
from ridgeline.sim.metrics import RequestLog


@dataclass(frozen=True, slots=True)
class LateStop:
    """Stop once ``count`` requests are certain to get their first token more than ``ttft_s``
    after arriving (rejected requests never get one)."""

    ttft_s: float
    count: int

    def __post_init__(self) -> None:
        if not self.ttft_s > 0 or self.count < 1:
            raise ConfigError("LateStop: ttft_s must be > 0 and count >= 1")


def late_limit(num_requests: int, percentile: float) -> int:
    """How many late requests put the ``percentile``-th TTFT of ``num_requests`` over the bound
    for certain: n − ⌊(n − 1)·q⌋ (see the module docstring)."""
    return num_requests - math.floor((num_requests - 1) * percentile / 100)


class LateCounter:
    """Counts requests certain to be late, walking arrivals as their deadlines pass."""

    __slots__ = ("rule", "log", "_next", "late")

    def __init__(self, rule: LateStop, log: RequestLog) -> None:
        self.rule, self.log = rule, log
        self._next = 0
        self.late = 0

    def reached(self, now: float) -> bool:
        """Whether at least ``rule.count`` requests are certainly late at time ``now`` (every
        token up to ``now`` is in the log)."""
        arrival, first, bound = self.log.arrival, self.log.first_tok, self.rule.ttft_s
        i, n = self._next, len(arrival)
        while i < n and arrival[i] + bound < now:
            t = first[i]
            self.late += t is None or t - arrival[i] > bound
            i += 1
        self._next = i
        return self.late >= self.rule.count
