"""The sums a step's cost is linear in (``sim.executor``): for sequences adding ``new`` tokens
on ``prior`` cached ones, x = [1, sequences, tokens, keys, keys attended per attention window,
cached tokens per window]. Every term is an integer, so numpy's sums for a large batch are
exact and equal the loop's whatever their order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class StepSums:
    """A ``StepShape`` given directly by its sums (used to read off the linear model)."""

    num_seqs: float
    num_tokens: float
    decode: bool
    attended_by_window: Mapping[int | None, float]
    cached_by_window: Mapping[int | None, float]
    num_keys: float
    experts_hit: float = 0.0
    expert_rows: float = 0.0

    @property
    def is_decode(self) -> bool:
        return self.decode

    def routed(self, num_experts: int, top_k: int) -> tuple[float, float]:
        return self.experts_hit, self.expert_rows

    def attended(self, window: int | None) -> float:
        return self.attended_by_window[window]

    def cached(self, window: int | None) -> float:
        return self.cached_by_window[window]

    def keys(self) -> float:
        return self.num_keys


def step_sums(
    windows: Sequence[int | None], new: Sequence[int], prior: Sequence[int]
) -> list[float]:
    """x of the module docstring (summed by numpy from ``VECTOR_MIN`` sequences)."""
    if len(new) >= VECTOR_MIN:
        return _sums_np(windows, np.asarray(new, dtype=float), np.asarray(prior, dtype=float))
    seqs = tokens = keys = 0.0
    att = [0.0] * len(windows)
    cac = [0.0] * len(windows)
    for n, p in zip(new, prior, strict=True):
        seqs += 1
        tokens += n
        keys += p + n
        for i, w in enumerate(windows):
            if w is None:
                att[i] += n * p + n * (n + 1) / 2
                cac[i] += p
            else:
                att[i] += windowed_sum(p + n, w) - windowed_sum(p, w)
                cac[i] += min(p, w)
    return [1.0, seqs, tokens, keys, *att, *cac]


def _sums_np(windows: Sequence[int | None], n: np.ndarray, p: np.ndarray) -> list[float]:
    if n.shape != p.shape:
        raise ValueError("new and prior differ in length")
    att, cac = [], []
    for w in windows:
        if w is None:
            att.append(float((n * p + n * (n + 1) / 2).sum()))
            cac.append(float(p.sum()))
        else:
            att.append(float((windowed_sums(p + n, w) - windowed_sums(p, w)).sum()))
            cac.append(float(np.minimum(p, w).sum()))
    return [1.0, float(n.size), float(n.sum()), float((p + n).sum()), *att, *cac]


VECTOR_MIN = 32  # sequences from which numpy sums a step's aggregates faster than a loop


def windowed_sums(x: np.ndarray, w: int) -> np.ndarray:
    """``windowed_sum`` of every element of ``x``."""
    return np.where(x <= w, x * (x + 1) / 2, w * (w + 1) / 2 + (x - w) * w)


def windowed_sum(x: float, w: int) -> float:
    """Σ_{t=1..x} min(t, w) (see ``analytic.ops.attended_keys``)."""
    return x * (x + 1) / 2 if x <= w else w * (w + 1) / 2 + (x - w) * w


def attended_decode(ctx: np.ndarray, w: int | None) -> np.ndarray:
    """Σ over sequences of the keys one new token attends to: min(prior + 1, window)."""
    keys = ctx + 1.0
    return (keys if w is None else np.minimum(keys, w)).sum(axis=0)
