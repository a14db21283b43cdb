"""Which shapes to compile: a bucket set searched over a workload's lengths, within a budget.

A compiled-schedule machine runs only the shapes compiled ahead of time, and each costs compile
time and program memory, so a deployment affords a limited number of programs::

    programs  = min(⌊compile budget ÷ compile time per program⌋,
                    ⌊program memory ÷ bytes per program⌋)
    per bucket: one decode program per compiled batch size (+ one verify program with
                speculative decoding) + one prefill-chunk program
    buckets   = ⌊programs ÷ programs per bucket⌋

The buckets are then the optimal 1-D partition of the workload's request lengths (prompt +
output, rounded up to a granule) into that many groups, each served by its largest length, so
that Σ (bucket − length) — the padded KV slots every request reserves — is smallest: the
classic dynamic programme of optimal 1-D quantisation / k-medians on a line (Bellman, "A note
on cluster analysis and dynamic programming", Math. Biosciences 1973), here with the cost of a
group = Σ (max − x).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ridgeline.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CompileBudget:
    """What the deployment can spend on programs.

    NOTE: the defaults are assumptions (20 s to compile one program, a 20-minute warm-up,
    32 MiB per program in 4 GiB of program memory), not measurements: set them for a stack.
    """

    compile_s_per_program: float = 20.0
    compile_budget_s: float = 1200.0
    program_bytes: float = 32 * 2**20
    program_memory_bytes: float = 4 * 2**30

    def __post_init__(self) -> None:
        for name in ("compile_s_per_program", "program_bytes"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"field {name}: must be positive, got {getattr(self, name)}")

    @property
    def max_programs(self) -> int:
        """Programs the compile budget and the program memory both allow."""
        by_time = math.floor(self.compile_budget_s / self.compile_s_per_program)
        by_memory = math.floor(self.program_memory_bytes / self.program_bytes)
        return max(0, min(by_time, by_memory))


def max_buckets(budget: CompileBudget, programs_per_bucket: int) -> int:
    """Sequence buckets the budget affords when each needs ``programs_per_bucket`` programs.

    Raises:
        ConfigError: when not even one bucket's programs fit the budget.
    """
    n = budget.max_programs // max(1, programs_per_bucket)
    if n < 1:
        raise ConfigError(
            f"field compile_budget: {budget.max_programs} programs cannot hold one bucket "
            f"({programs_per_bucket} programs each)"
        )
    return n


def choose_buckets(lengths: Sequence[int], count: int, granule: int = 64) -> tuple[int, ...]:
    """At most ``count`` buckets minimising Σ (bucket − length) over ``lengths``.

    Args:
        lengths: tokens each request holds at its end (prompt + output).
        count: most buckets (the budget's ``max_buckets``).
        granule: buckets are multiples of it (the compiled shapes' alignment).

    Returns:
        Ascending buckets; the last holds the longest request.
    """
    if count < 1 or granule < 1:
        raise ConfigError(
            f"field buckets: need count >= 1 and granule >= 1, got {count}, {granule}"
        )
    if not lengths:
        raise ConfigError("field workload: no request lengths to choose buckets from")
    rounded = np.ceil(np.asarray(lengths, dtype=float) / granule) * granule
    cand = np.unique(rounded)  # (U,) candidate buckets, ascending
    cost = _group_costs(np.asarray(lengths, dtype=float), cand)
    return tuple(int(b) for b in _partition(cand, cost, min(count, cand.size)))


def _group_costs(lengths: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """cost[i, j]: Σ (cand[j] − x) over the lengths x whose rounded value lies in
    cand[i..j] (upper-triangular, i <= j)."""
    order = np.sort(lengths)
    upto = np.searchsorted(order, cand, side="right")  # (U,) lengths <= each candidate
    prefix = np.concatenate(([0.0], np.cumsum(order)))
    lo = np.concatenate(([0], upto[:-1]))  # first length above the previous candidate
    n = upto[None, :] - lo[:, None]  # (U, U) count of lengths in the group
    s = prefix[upto][None, :] - prefix[lo][:, None]  # (U, U) their sum
    out = n * cand[None, :] - s
    return np.where(np.triu(np.ones_like(out, dtype=bool)), out, np.inf)


def _partition(cand: np.ndarray, cost: np.ndarray, k: int) -> list[float]:
    """Optimal split of the candidates into ``k`` groups ending at chosen candidates."""
    u = cand.size
    best = np.full((k + 1, u), np.inf)  # best[g, j]: g groups covering cand[0..j]
    prev = np.zeros((k + 1, u), dtype=int)
    best[1] = cost[0]
    for g in range(2, k + 1):
        for j in range(u):
            totals = best[g - 1, :j] + cost[1 : j + 1, j]  # last group cand[i+1..j]
            if totals.size and np.isfinite(totals.min()):
                i = int(np.argmin(totals))
                best[g, j], prev[g, j] = totals[i], i
    g = int(np.argmin(best[1:, u - 1])) + 1
    ends, j = [], u - 1
    while g >= 1:
        ends.append(cand[j])
        j, g = prev[g, j], g - 1
    return sorted(ends)


def padded_tokens(lengths: Sequence[int], buckets: Sequence[int]) -> int:
    """Σ (bucket − length): the slots the requests reserve and never fill."""
    edges = np.asarray(sorted(buckets))
    x = np.asarray(lengths)
    idx = np.searchsorted(edges, x, side="left")
    if (idx >= edges.size).any():
        raise ConfigError("field buckets: a length is above the largest bucket")
    return int((edges[idx] - x).sum())
