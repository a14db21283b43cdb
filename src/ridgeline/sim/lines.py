"""The sum of per-operator maxima of two lines, as one piecewise-linear function.

A decode step of B sequences holding S cached tokens costs Σ_op max(compute_op, memory_op)
(the roofline, ``sim.executor``), and at a fixed B both sides are affine in S::

    op time  ╲___/‾‾‾      max(a_c + c_c·S, a_m + c_m·S): one kink where the lines cross
    sum      piecewise linear in S, one piece per interval between the kinks

so a decode stretch at a fixed batch prices each step with one multiply-add once the pieces are
known (Williams, Waterman, Patterson, "Roofline", CACM 52(4), 2009, for the max of the two
bounds; the sum of convex piecewise-linear functions is convex piecewise linear).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np


@dataclass(frozen=True, slots=True)
class Horizon:
    """Where a stretch of steps stops for the next arrival at ``at``: through the first step
    that ends at or after it, or, ``lagged`` (async scheduling, ``serving.lookahead``),
    through the first that starts at or after it (the schedule at that step's end is the
    first to see the request)."""

    at: float
    lagged: bool = False

    def reached(self, start: float, end: float) -> bool:
        """Whether a step from ``start`` to ``end`` is the last before the arrival is seen."""
        return (start if self.lagged else end) >= self.at

    def steps(self, acc: Sequence[float]) -> int:
        """How many of the steps with boundaries ``acc`` (acc[0] the first start, acc[j + 1]
        step j's end) run up to the stop: len(acc) − 1 or more when none reaches it."""
        if self.lagged:
            return bisect_left(acc, self.at, 0, len(acc) - 1) + 1
        return bisect_left(acc, self.at, 1)


@dataclass(frozen=True, slots=True)
class Pieces:
    """f(S) = intercepts[p] + slopes[p]·S with p = the number of kinks ≤ S (S ≥ 0)."""

    kinks: tuple[float, ...]
    intercepts: tuple[float, ...]
    slopes: tuple[float, ...]

    def at(self, s: float) -> float:
        p = bisect_right(self.kinks, s) if self.kinks else 0
        return self.intercepts[p] + self.slopes[p] * s

    def piece(self, s: float) -> tuple[float, float, float, float]:
        """(lo, hi, intercept, slope) of the piece holding ``s``: lo ≤ s < hi."""
        k = self.kinks
        p = bisect_right(k, s) if k else 0
        lo = k[p - 1] if p else -math.inf
        hi = k[p] if p < len(k) else math.inf
        return lo, hi, self.intercepts[p], self.slopes[p]


def sum_of_maxima(a1: np.ndarray, c1: np.ndarray, a2: np.ndarray, c2: np.ndarray) -> Pieces:
    """Σ_i max(a1_i + c1_i·S, a2_i + c2_i·S) for S ≥ 0 as pieces."""
    a1, c1, a2, c2 = (np.asarray(v, dtype=float) for v in (a1, c1, a2, c2))
    # the side that dominates just above S = 0: larger value, then larger slope
    first = (a1 > a2) | ((a1 == a2) & (c1 >= c2))
    a0, s0 = np.where(first, a1, a2), np.where(first, c1, c2)
    other_a, other_c = np.where(first, a2, a1), np.where(first, c2, c1)
    steeper = other_c > s0
    with np.errstate(divide="ignore", invalid="ignore"):
        kink = np.where(steeper, (a0 - other_a) / (other_c - s0), np.inf)
    kinks: list[float] = []
    d_a: list[float] = []
    d_c: list[float] = []
    for i in np.argsort(kink, kind="stable"):
        if not np.isfinite(kink[i]):
            break
        kinks.append(float(kink[i]))
        d_a.append(float(other_a[i] - a0[i]))
        d_c.append(float(other_c[i] - s0[i]))
    intercepts = tuple(accumulate(d_a, initial=float(a0.sum())))
    slopes = tuple(accumulate(d_c, initial=float(s0.sum())))
    return Pieces(tuple(kinks), intercepts, slopes)


Terms = tuple[tuple[int, float], ...]  # (variable, coefficient) pairs of one affine form


@dataclass(frozen=True, slots=True)
class AffineMaxima:
    """Σ_op max(F_op·x, G_op·x) for x = (1, x_1, ..., x_d) ≥ 0, in Python floats: the ops that
    read one variable summed as ``Pieces`` of it, the others term by term, the rest constant.

    A step's operators read few of its aggregates (a GEMM its tokens, attention its attended
    and cached tokens), so this takes a handful of multiply-adds where a matrix product over
    every op and aggregate pays numpy's per-call overhead for a dozen numbers."""

    constant: float
    single: tuple[tuple[int, Pieces], ...]
    general: tuple[tuple[Terms, Terms], ...]

    def at(self, x: Sequence[float]) -> float:
        total = self.constant
        for j, pieces in self.single:
            total += pieces.at(x[j])
        for first, second in self.general:
            a = b = 0.0
            for j, c in first:
                a += c * x[j]
            for j, c in second:
                b += c * x[j]
            total += a if a >= b else b
        return total


def affine_maxima(f: np.ndarray, g: np.ndarray) -> AffineMaxima:
    """``AffineMaxima`` of the rows of ``f`` and ``g`` (ops × (1 + d), column 0 constant)."""
    constant = 0.0
    by_var: dict[int, list[int]] = {}
    general: list[tuple[Terms, Terms]] = []
    for op, (fr, gr) in enumerate(zip(f, g, strict=True)):
        used = sorted({int(j) for j in np.flatnonzero((fr != 0) | (gr != 0)) if j > 0})
        if not used:
            constant += max(float(fr[0]), float(gr[0]))
        elif len(used) == 1:
            by_var.setdefault(used[0], []).append(op)
        else:
            general.append((_terms(fr), _terms(gr)))
    single = tuple(
        (j, sum_of_maxima(f[ops, 0], f[ops, j], g[ops, 0], g[ops, j]))
        for j, ops in sorted(by_var.items())
    )
    return AffineMaxima(constant, single, tuple(general))


def _terms(row: np.ndarray) -> Terms:
    return tuple((int(j), float(row[j])) for j in np.flatnonzero(row))


def decode_segments_s(
    segments: Sequence[tuple[int, int, int]],
    known: dict[int, Pieces],
    pieces_of: Callable[[int], Pieces],
    fixed_s: float,
    seq_s: float,
) -> list[float]:
    """Step times of consecutive decode segments (B, S, k): k steps of B sequences holding
    S, S + B, ... cached tokens, each fixed_s + B·seq_s + the pieces of B at its S
    (``StepCostModel.decode_segments_s``); ``known`` caches the pieces per B, ``pieces_of``
    makes missing ones."""
    return list(_step_times(segments, known, pieces_of, fixed_s, seq_s))


def decode_segment_ends(
    segments: Sequence[tuple[int, int, int]],
    known: dict[int, Pieces],
    pieces_of: Callable[[int], Pieces],
    fixed_s: float,
    seq_s: float,
    t: float,
    horizon: Horizon,
) -> tuple[list[float], float]:
    """The ends of the steps of ``decode_segments_s`` from ``t``, each added to the previous
    end as stepping adds it, through the one where ``horizon`` stops; and the time of the
    last of them."""
    ends: list[float] = []
    dt, at, lagged = 0.0, horizon.at, horizon.lagged
    for dt in _step_times(segments, known, pieces_of, fixed_s, seq_s):
        start = t
        t = t + dt
        ends.append(t)
        if (start if lagged else t) >= at:
            break
    return ends, dt


def _step_times(
    segments: Sequence[tuple[int, int, int]],
    known: dict[int, Pieces],
    pieces_of: Callable[[int], Pieces],
    fixed_s: float,
    seq_s: float,
) -> Iterator[float]:
    """One multiply-add a step, the same roundings as numpy's a + c·S + base."""
    for b, s, k in segments:
        pieces = known.get(b)
        if pieces is None:
            pieces = pieces_of(b)
        base = fixed_s + b * seq_s
        if b == 0:
            dt = pieces.at(s) + base
            for _ in range(k):
                yield dt
            continue
        x, stop = s, s + k * b
        while x < stop:
            _, hi, a, c = pieces.piece(x)
            while x < stop and x < hi:
                yield a + c * x + base
                x += b


def grouped_x(
    batch: int, total: int, new: Sequence[int], prior: Sequence[int]
) -> tuple[tuple[float, float, float, float, float, float], bool]:
    """The linear model's aggregates x = (1, seqs, tokens, keys, attended, cached) of a step in
    which ``batch`` decoding sequences holding ``total`` cached tokens take one token each,
    beside sequences adding ``new`` tokens on ``prior`` (``StepCostModel.grouped_step_s``),
    and whether every sequence decodes. Integers below 2**53: any order of summation gives
    the same floats."""
    seqs, tokens, keys, cac = batch, batch, total + batch, total
    att = float(total + batch)
    decode = True
    for n, p in zip(new, prior, strict=True):
        seqs += 1
        tokens += n
        keys += p + n
        att += n * p + n * (n + 1) / 2
        cac += p
        decode = decode and n == 1
    return (1.0, float(seqs), float(tokens), float(keys), att, float(cac)), decode
