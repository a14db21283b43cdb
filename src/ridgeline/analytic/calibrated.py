"""The calibrated cost of an operator, a layer stack and a collective (``specs.calibration``).

Ideal and calibrated times come from the same FLOPs and bytes (``analytic.ops``); calibration
only changes the rates and adds fixed latencies::

    compute_s = FLOPs · pad(rows) / (peak(format) · efficiency(class, format))
    memory_s  = other bytes / (bandwidth · bandwidth_efficiency)
              + KV bytes / (bandwidth · kv_bandwidth_efficiency)
    op_s      = max(compute_s, memory_s)                         (roofline, Williams et al. 2009)
                + (1 − overlap) · min(compute_s, memory_s)        (overlap = 1: the roofline)
    step_s    = Σ op_s + layers · layer_latency_s + step_latency_s + seqs · sequence_latency_s
                + quantised GEMM kernels · quantised_gemm_latency_s

    pad(rows) = ceil(rows / t) · t / rows                        (t = gemm_tile_rows)

``overlap`` spans the two classic bounds of an operator whose loads and arithmetic share one
instruction stream: perfect overlap (the roofline's max) and none (their sum, the bound of a core
that stalls on every cache-missing load; Hennessy & Patterson, "Computer Architecture: A
Quantitative Approach", 6th ed., §2.1, memory stall cycles added to execution cycles). It is
applied by adding (1 − o)·min(compute_s, memory_s) to both sides of the pair: every consumer
keeps taking max(), and the larger side still names the bound.

Each operator runs at the peak of the format its arithmetic uses (a GEMM the format it
multiplies in, attention the residual stream's 16 bits) and at the efficiency of its class and
format (``compute_term``): 16-bit, 8-bit, 4-bit and weight-only GEMMs, fused attention and
grouped MoE expert GEMMs each reach their own fraction of the peak (measured GEMM kernels reach
71-82% of the 16-bit peak and 40-64% of the 8-bit one on an H200; AIConfigurator 0.12's
``gemm_perf`` tables). Elementwise operators are memory traffic; their FLOPs are negligible.

``pad`` is the tile quantisation of a matrix unit: a weight-stationary systolic array (TPU MXU,
Spyre's PE arrays) spends at least t cycles per weight tile, and a GPU's MMA instruction covers t
rows, so a GEMM of M < t rows runs at M/t of the peak (Jouppi et al., "In-Datacenter Performance
Analysis of a Tensor Processing Unit", ISCA 2017, §2; NVIDIA PTX ISA, warpgroup MMA shapes).

A collective over n chips (``analytic.deploy``) takes
hops · hop_latency + collective_latency_s + bytes / (egress · link_efficiency), and a pipeline
stage crossing hop_latency + stage_latency_s + bytes / (egress · link_efficiency).

With ``Calibration()`` (efficiencies 1, t = 1, latencies 0) every formula is the ideal roofline,
and because every efficiency is at most 1 and every latency at least 0, a calibrated time is never
below the ideal one (a property test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ridgeline.analytic.ops import Array, OpClass, UniformShape, op_terms
from ridgeline.analytic.workload import Dtypes
from ridgeline.specs.calibration import COMPUTE_TERMS, IDEAL, Calibration, CostMode, Term
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.model import ModelSpec

_EIGHT_BIT = (DType.FP8, DType.INT8)
_FOUR_BIT = (DType.FP4, DType.INT4)
_QUANTISED = (*_EIGHT_BIT, *_FOUR_BIT)


class _HasKind(Protocol):
    @property
    def op_class(self) -> OpClass: ...

    @property
    def compute_dtype(self) -> DType: ...

    @property
    def weight_dtype(self) -> DType | None: ...


@dataclass(frozen=True, slots=True)
class OpKind:
    """What decides an operator's compute rate: its class and formats (``analytic.ops``)."""

    op_class: OpClass
    compute_dtype: DType
    weight_dtype: DType | None = None


def compute_term(kind: OpKind) -> Term:
    """The calibration term of an operator's compute efficiency (module docstring)."""
    if kind.op_class is OpClass.ATTENTION:
        return Term.ATTENTION_COMPUTE_EFFICIENCY
    if kind.op_class is OpClass.EXPERTS:
        return Term.MOE_COMPUTE_EFFICIENCY
    if kind.op_class is OpClass.GEMM:
        if kind.compute_dtype in _EIGHT_BIT:
            return Term.FP8_COMPUTE_EFFICIENCY
        if kind.compute_dtype in _FOUR_BIT:
            return Term.FP4_COMPUTE_EFFICIENCY
        if kind.weight_dtype in _QUANTISED:
            return Term.WEIGHT_ONLY_COMPUTE_EFFICIENCY
    return Term.COMPUTE_EFFICIENCY


@dataclass(frozen=True, slots=True)
class Rates:
    """An operator's ideal peak (of its format), the device bandwidth, and its calibrated
    compute efficiency."""

    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    compute_efficiency: float = 1.0


def kind_of(op: OpKind | _HasKind) -> OpKind:
    """The ``OpKind`` of an operator (``analytic.ops.OpTerms`` or ``analytic.deploy.ChipOp``)."""
    return OpKind(op.op_class, op.compute_dtype, op.weight_dtype)


def op_rates(acc: Accelerator, kind: OpKind, cal: Calibration) -> Rates:
    """``Rates`` of an operator of ``kind`` on ``acc``'s device memory under ``cal``."""
    return Rates(
        acc.peak(kind.compute_dtype),
        acc.device_bandwidth_bytes_per_s,
        cal.value(compute_term(kind)),
    )


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
    user = Calibration(
        family="user",
        bandwidth_efficiency=bandwidth,
        kv_bandwidth_efficiency=bandwidth,
        step_latency_s=step_s,
        overlap=overlap,
        sources={"bandwidth_efficiency": "user"},
    )
    return user.with_values({t: compute for t in COMPUTE_TERMS}, "user")


def gemm_padding(rows: Array, tile_rows: int) -> Array:
    """ceil(rows / t) · t / rows: the work a matrix unit of t rows does per useful row (1 for
    t = 1, or for an operator that is not a GEMM, ``rows`` = 0)."""
    if tile_rows == 1:
        return 1.0 if np.ndim(rows) == 0 else np.ones_like(np.asarray(rows, dtype=float))
    r = np.asarray(rows, dtype=float)
    safe = np.where(r > 0, r, 1.0)
    pad = np.where(r > 0, np.ceil(safe / tile_rows) * tile_rows / safe, 1.0)
    return float(pad) if np.ndim(rows) == 0 else pad


def op_seconds(
    flops: Array,
    nbytes: Array,
    kv_bytes: Array,
    rows: Array,
    rates: Rates,
    cal: Calibration,
) -> tuple[Array, Array]:
    """(compute_s, memory_s) of an operator moving ``nbytes``, ``kv_bytes`` of them KV, at the
    calibrated rates (module docstring)."""
    peak, bandwidth = rates.peak_flops_per_s, rates.bandwidth_bytes_per_s
    compute_s = flops * gemm_padding(rows, cal.gemm_tile_rows) / (peak * rates.compute_efficiency)
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


def fixed_step_seconds(
    layers: Array, cal: Calibration, seqs: Array = 0.0, quantised: Array = 0.0
) -> Array:
    """layers · layer_latency_s + step_latency_s + seqs · sequence_latency_s
    + quantised · quantised_gemm_latency_s (``quantised``: 8- and 4-bit GEMM kernels a step runs,
    ``quantised_gemms``)."""
    fixed = layers * cal.layer_latency_s + cal.step_latency_s + seqs * cal.sequence_latency_s
    return fixed + quantised * cal.quantised_gemm_latency_s


_QUANTISED_TERMS = (Term.FP8_COMPUTE_EFFICIENCY, Term.FP4_COMPUTE_EFFICIENCY)


def quantised_gemms(model: ModelSpec, dt: Dtypes) -> float:
    """GEMM kernels of one step that run in 8 or 4 bits (each op once per layer it repeats in):
    each pays ``quantised_gemm_latency_s``."""
    ops = op_terms(model, UniformShape(1.0, 1.0, 0.0), dt)
    return float(sum(t.count for t in ops if compute_term(kind_of(t)) in _QUANTISED_TERMS))
