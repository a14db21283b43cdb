"""The calibrated cost of an operator, a layer stack and a collective (``specs.calibration``).

Ideal and calibrated times come from the same FLOPs and bytes (``analytic.ops``); calibration
only changes the rates and adds fixed latencies::

    compute_s = FLOPs · max(pad(rows), 1 / compute_efficiency) / peak
    memory_s  = other bytes / (bandwidth · bandwidth_efficiency)
              + KV bytes / (bandwidth · kv_bandwidth_efficiency)
    op_s      = max(compute_s, memory_s)                         (roofline, Williams et al. 2009)
                + (1 − overlap) · min(compute_s, memory_s)        (overlap = 1: the roofline)
    step_s    = Σ op_s + layers · layer_latency_s + step_latency_s + seqs · sequence_latency_s

    pad(rows) = ceil(rows / t) · t / rows                        (t = gemm_tile_rows)

``overlap`` spans the two classic bounds of an operator whose loads and arithmetic share one
instruction stream: perfect overlap (the roofline's max) and none (their sum, the bound of a core
that stalls on every cache-missing load; Hennessy & Patterson, "Computer Architecture: A
Quantitative Approach", 6th ed., §2.1, memory stall cycles added to execution cycles). It is
applied by adding (1 − o)·min(compute_s, memory_s) to both sides of the pair: every consumer
keeps taking max(), and the larger side still names the bound.

``pad`` is the tile quantisation of a matrix unit: a weight-stationary systolic array (TPU MXU,
Spyre's PE arrays) spends at least t cycles per weight tile, and a GPU's MMA instruction covers t
rows, so a GEMM of M < t rows runs at M/t of the peak (Jouppi et al., "In-Datacenter Performance
Analysis of a Tensor Processing Unit", ISCA 2017, §2; NVIDIA PTX ISA, warpgroup MMA shapes).
It is a floor at the array's full rate, not a second discount: the t cycles per tile are the
weight tile streaming in (double-buffered under the previous tile's work), a fixed rate of the
array, while ``compute_efficiency`` is the sustained fraction of the peak on the useful FLOPs of
large GEMMs. So a GEMM takes the longer of the two (the roofline's max of two bounds), not their
product: at batch 1 on a TPU v5e the 128-row padding alone costs 128 cycles per weight tile,
which streams weights into the MXUs faster than HBM delivers them, and decode stays
bandwidth-bound as the course teaches.

A collective over n chips (``analytic.deploy``) takes
hops · hop_latency + collective_latency_s + bytes / (egress · link_efficiency), and a pipeline
stage crossing hop_latency + stage_latency_s + bytes / (egress · link_efficiency).

With ``Calibration()`` (efficiencies 1, t = 1, latencies 0) every formula is the ideal roofline,
and because every efficiency is at most 1 and every latency at least 0, a calibrated time is never
below the ideal one (a property test checks it).
"""

from __future__ import annotations

import numpy as np

from ridgeline.analytic.ops import Array
from ridgeline.specs.calibration import IDEAL, Calibration, CostMode
from ridgeline.specs.hardware import Accelerator


def calibration_for(
    acc: Accelerator,
    mode: CostMode,
    bandwidth: float = 1.0,
    compute: float = 1.0,
    step_s: float = 0.0,
    overlap: float = 1.0,
) -> Calibration:
    """The terms a cost uses: the accelerator's calibration in calibrated mode; in ideal mode the
    ideal machine, with any user-given efficiencies and per-step overhead applied."""
    if mode is CostMode.CALIBRATED:
        return acc.calibration
    if (bandwidth, compute, step_s, overlap) == (1.0, 1.0, 0.0, 1.0):
        return IDEAL
    return Calibration(
        family="user",
        bandwidth_efficiency=bandwidth,
        kv_bandwidth_efficiency=bandwidth,
        compute_efficiency=compute,
        step_latency_s=step_s,
        overlap=overlap,
        sources={"bandwidth_efficiency": "user", "compute_efficiency": "user"},
    )


def gemm_padding(rows: Array, tile_rows: int) -> Array:
    """ceil(rows / t) · t / rows: the work a matrix unit of t rows does per useful row (1 for
    t = 1, or for an operator that is not a GEMM, ``rows`` = 0)."""
    if tile_rows == 1:
        return 1.0 if np.ndim(rows) == 0 else np.ones_like(np.asarray(rows, dtype=float))
    r = np.asarray(rows, dtype=float)
    safe = np.where(r > 0, r, 1.0)
    pad = np.where(r > 0, np.ceil(safe / tile_rows) * tile_rows / safe, 1.0)
    return float(pad) if np.ndim(rows) == 0 else pad


def gemm_stretch(rows: Array, tile_rows: int, efficiency: float) -> Array:
    """max(pad(rows), 1 / efficiency) · efficiency: what a GEMM's FLOP seconds at the sustained
    rate (FLOPs ÷ (peak · efficiency)) are multiplied by so that a padded GEMM takes
    max(FLOPs · pad ÷ peak, FLOPs ÷ (peak · efficiency)) (module docstring); 1 without padding."""
    if tile_rows == 1:
        return 1.0 if np.ndim(rows) == 0 else np.ones_like(np.asarray(rows, dtype=float))
    stretch = np.maximum(np.asarray(gemm_padding(rows, tile_rows)) * efficiency, 1.0)
    return float(stretch) if np.ndim(rows) == 0 else stretch


def op_seconds(
    flops: Array,
    nbytes: Array,
    kv_bytes: Array,
    rows: Array,
    rates: tuple[float, float],
    cal: Calibration,
) -> tuple[Array, Array]:
    """(compute_s, memory_s) of an operator moving ``nbytes``, ``kv_bytes`` of them KV, at the
    calibrated rates; ``rates`` = (peak FLOP/s, bandwidth B/s) (module docstring)."""
    peak, bandwidth = rates
    stretch = gemm_stretch(rows, cal.gemm_tile_rows, cal.compute_efficiency)
    compute_s = flops * stretch / (peak * cal.compute_efficiency)
    memory_s = (nbytes - kv_bytes) / (bandwidth * cal.bandwidth_efficiency) + kv_bytes / (
        bandwidth * cal.kv_bandwidth_efficiency
    )
    return overlapped(compute_s, memory_s, cal.overlap)


def overlapped(compute_s: Array, memory_s: Array, overlap: float) -> tuple[Array, Array]:
    """(compute_s, memory_s) with the part that does not overlap added to each side: their max
    is max(c, m) + (1 − overlap)·min(c, m) (module docstring); unchanged at overlap = 1."""
    if overlap == 1.0:
        return compute_s, memory_s
    hidden = (1.0 - overlap) * np.minimum(compute_s, memory_s)
    return compute_s + hidden, memory_s + hidden


def fixed_step_seconds(layers: Array, cal: Calibration, seqs: Array = 0.0) -> Array:
    """layers · layer_latency_s + step_latency_s + seqs · sequence_latency_s."""
    return layers * cal.layer_latency_s + cal.step_latency_s + seqs * cal.sequence_latency_s
