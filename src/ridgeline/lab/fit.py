"""The lab's calibrated model of one backend's decode step: physical terms, fitted within bounds.

    t̂ = t_fixed + t_gemm(B) + KV bytes ÷ BW_kv + other FLOPs ÷ F + minor faults × t_fault

Each term is what one resource costs; their sum assumes they do not overlap (one core runs them
one after the other: the GEMMs, then attention, then the rest of the step).

| term | what it is | where the number comes from |
|---|---|---|
| t_gemm(B) | the step's linear layers (weights and their FLOPs) at the point's batch | measured: ``gemm_probe`` at that batch (coefficient 1, not fitted) |
| BW_kv | the rate attention reads and writes the KV cache | fitted, at most the STREAM read bandwidth (probe) |
| F | the rate of the FLOPs outside the weight GEMMs (attention's dot products) | fitted, at most the calibrated peak (probe) |
| t_fixed | per-step time independent of the bytes: Python, dispatch, scheduling | fitted, ≥ 0 |
| t_fault | kernel time per minor page fault (re-allocated caches) | fitted, ≥ 0; only where a point faults ``MIN_FAULTS`` times per step |

Where a point has no probe of its GEMMs (older data), t_gemm is the weights at the calibrated
decode-GEMM rate of torch's ``F.linear`` at that batch, else the weights at the read bandwidth.

The bounds make every term physical: no byte is free (it costs at least bytes ÷ the bandwidth
a probe measured), no FLOP runs above the calibrated peak (itself at most the physical peak),
and no term is negative. Writing each rate as its bound plus a non-negative excess turns the
fit into non-negative least squares on the excesses (relative errors, as the points span 20×):
for KV, 1 / BW_kv = 1 / BW_read + d with d ≥ 0. Fewer terms than points, so no backend is
interpolated to a zero error.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MIN_FAULTS = 1000  # per step: 4 MiB of fresh pages, about 2 ms of kernel time on this CPU
TERMS = ("t_fixed", "BW_kv", "F", "t_fault")  # the fitted terms, in column order


@dataclass(frozen=True, slots=True)
class StepTerms:
    """The inputs of one point: what was measured and counted."""

    measured_s: float
    gemm_s: float  # the step's linear layers at this batch (probe, or its fallback)
    kv_bytes: float  # analytic KV read + written per step
    other_flops: float  # analytic FLOPs outside the weight GEMMs
    minor_faults: float = 0.0  # per step (getrusage)


@dataclass(frozen=True, slots=True)
class Bounds:
    """The fastest rates the probes measured: no fitted rate may exceed them."""

    read_bytes_per_s: float  # STREAM read, largest array
    peak_flops_per_s: float  # calibrated peak (fastest kernel)


@dataclass(frozen=True, slots=True)
class FittedModel:
    """One backend's fitted step model; ``fitted`` names the terms moved off their bound."""

    label: str
    gemm_source: str  # "probe", "calibrated F.linear curve" or "read bandwidth"
    overhead_s: float
    kv_bytes_per_s: float
    flops_per_s: float
    fault_s: float
    bounds: Bounds
    fitted: tuple[str, ...]
    median_abs_error: float
    loo_median_abs_error: float | None
    num_points: int

    def predict(self, p: StepTerms) -> float:
        return (
            self.overhead_s
            + p.gemm_s
            + p.kv_bytes / self.kv_bytes_per_s
            + p.other_flops / self.flops_per_s
            + p.minor_faults * self.fault_s
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _nnls_rel(x: np.ndarray, y: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Coefficients c ≥ 0 minimising Σ ((base + x·c − y) / y)², by trying every subset of
    columns (few columns: exact and simple) with fewer columns than points: as many terms as
    points would interpolate them and report an error of zero."""
    norm = np.linalg.norm(x, axis=0)
    norm[norm == 0] = 1.0
    a = x / y[:, None] / norm  # columns scaled to unit norm: bytes and FLOPs span 1e0..1e10
    b = (y - base) / y
    best, best_err = np.zeros(x.shape[1]), float(np.sum(b**2))
    # NOTE: a larger subset must beat a smaller one by more than rounding: on data a subset
    # explains exactly, an extra column otherwise wins by 1e-30 and names a term never fitted
    tol = 1e-12 * best_err
    for k in range(1, min(x.shape[1], len(y) - 1) + 1):
        for cols in itertools.combinations(range(x.shape[1]), k):
            coef, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
            if np.any(coef < 0):
                continue
            err = float(np.sum((a[:, cols] @ coef - b) ** 2))
            if err < best_err - tol:
                best_err = err
                best = np.zeros(x.shape[1])
                best[list(cols)] = coef
    return best / norm


def _design(points: Sequence[StepTerms], bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """(columns of the excesses over the bounds, the time at the bounds) per point."""
    faults = max(p.minor_faults for p in points) >= MIN_FAULTS
    x = np.array(
        [[1.0, p.kv_bytes, p.other_flops, p.minor_faults if faults else 0.0] for p in points]
    )
    base = np.array(
        [
            p.gemm_s
            + p.kv_bytes / bounds.read_bytes_per_s
            + p.other_flops / bounds.peak_flops_per_s
            for p in points
        ]
    )
    return x, base


def _mdape(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.median(np.abs(pred - y) / y))


def fit_step_model(
    label: str, points: Sequence[StepTerms], bounds: Bounds, gemm_source: str = "probe"
) -> FittedModel:
    """Fit one backend's points within ``bounds``; errors in-sample and leave-one-out."""
    x, base = _design(points, bounds)
    y = np.array([p.measured_s for p in points])
    d = _nnls_rel(x, y, base)
    loo = []
    if len(points) > x.shape[1]:
        for i in range(len(points)):
            keep = np.arange(len(points)) != i
            di = _nnls_rel(x[keep], y[keep], base[keep])
            loo.append(abs(float(base[i] + x[i] @ di) - y[i]) / y[i])
    return FittedModel(
        label=label,
        gemm_source=gemm_source,
        overhead_s=float(d[0]),
        kv_bytes_per_s=1.0 / (1.0 / bounds.read_bytes_per_s + float(d[1])),
        flops_per_s=1.0 / (1.0 / bounds.peak_flops_per_s + float(d[2])),
        fault_s=float(d[3]),
        bounds=bounds,
        fitted=tuple(name for name, v in zip(TERMS, d, strict=True) if v > 0),
        median_abs_error=_mdape(base + x @ d, y),
        loo_median_abs_error=statistics.median(loo) if loo else None,
        num_points=len(points),
    )
