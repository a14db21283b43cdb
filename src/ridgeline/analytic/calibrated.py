"""The calibrated cost of an operator, a layer stack and a collective (``specs.calibration``).

Ideal and calibrated times come from the same FLOPs and bytes (``analytic.ops``); calibration
only changes the rates and adds fixed latencies::

    kv_s      = KV bytes / (bandwidth · kv_bandwidth_efficiency)
    compute_s = FLOPs · max(pad(rows), 1 / efficiency(class, format)) / peak(format)
                + (1 − kv_overlap) · kv_s
    memory_s  = other bytes / (bandwidth · bandwidth_efficiency) + kv_s
    op_s      = max(compute_s, memory_s)                         (roofline, Williams et al. 2009)
                + (1 − overlap) · min(compute_s, memory_s)        (overlap = 1: the roofline)
    step_s    = Σ op_s + Σ_kernels latency(kernel kind)
                + layers · layer_latency_s + step_latency_s + seqs · sequence_latency_s

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

``kv_overlap`` = 0 keeps the KV cache's traffic out from under an operator's compute: in a mixed
step the decoding sequences' attention reads their caches in kernels of their own, after the
prompt's attention (TensorRT-LLM runs context FMHA and generation XQA as separate kernels), so
max(compute, memory) + kv_s; at 1 (the ideal machine) the roofline's max hides them.

Every kernel a step launches pays a fixed time beyond its roofline time, by kind (``KernelCounts``:
GEMMs ``gemm_latency_s``, attention ``attention_latency_s``, elementwise kernels
``kernel_latency_s``, and 8- and 4-bit GEMMs ``quantised_gemm_latency_s`` more): a memory-bound
kernel's time is latency + bytes / bandwidth, as the GEMM tables measured for AIConfigurator 0.12
show (decode GEMMs of Llama shapes on H100 and H200: 4.0-4.6 µs + weight bytes / (0.83-0.86 of
the bandwidth), bf16, M ≤ 16). The kernel counts do not change with tensor parallelism, so as
kernels shrink the fixed part stays: what is left per layer is ``layer_latency_s``.

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

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ridgeline.analytic.ops import Array, OpClass, OpTerms, UniformShape, op_terms
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


def gemm_stretch(rows: Array, tile_rows: int, efficiency: Array) -> Array:
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
    rates: Rates,
    cal: Calibration,
) -> tuple[Array, Array]:
    """(compute_s, memory_s) of an operator moving ``nbytes``, ``kv_bytes`` of them KV, at the
    calibrated rates (module docstring)."""
    peak, bandwidth = rates.peak_flops_per_s, rates.bandwidth_bytes_per_s
    eff = rates.compute_efficiency
    kv_s = kv_bytes / (bandwidth * cal.kv_bandwidth_efficiency)
    compute_s = flops * gemm_stretch(rows, cal.gemm_tile_rows, eff) / (peak * eff)
    compute_s = compute_s + (1.0 - cal.kv_overlap) * kv_s
    memory_s = (nbytes - kv_bytes) / (bandwidth * cal.bandwidth_efficiency) + kv_s
    return overlapped(compute_s, memory_s, cal.overlap)


def overlapped(compute_s: Array, memory_s: Array, overlap: float) -> tuple[Array, Array]:
    """(compute_s, memory_s) with the part that does not overlap added to each side: their max
    is max(c, m) + (1 − overlap)·min(c, m) (module docstring); unchanged at overlap = 1."""
    if overlap == 1.0:
        return compute_s, memory_s
    hidden = (1.0 - overlap) * np.minimum(compute_s, memory_s)
    return compute_s + hidden, memory_s + hidden


@dataclass(frozen=True, slots=True)
class KernelCounts:
    """Kernels one step launches (all layers, one chip), by the fixed time each pays
    (module docstring); ``quantised`` of the GEMMs run in 8 or 4 bits."""

    gemm: float = 0.0
    attention: float = 0.0
    elementwise: float = 0.0
    quantised: float = 0.0

    def as_array(self) -> np.ndarray:
        """(gemm, attention, elementwise, quantised), as ``fixed_step_seconds`` reads them."""
        return np.array([self.gemm, self.attention, self.elementwise, self.quantised])


NO_KERNELS = KernelCounts()

# Kernels of the grouped MoE expert op beyond its two grouped GEMMs: the gated activation
# between them (vLLM's fused_moe: silu_and_mul; TensorRT-LLM's CUTLASS MoE: doActivation). The
# token permutation and un-permutation around them are ops of their own ("moe.permute",
# "moe.unpermute" in ``analytic.ops``), each one elementwise kernel.
_EXPERT_GEMMS, _EXPERT_ELEMENTWISE = 2, 1


def _kernels_of(t: OpTerms) -> tuple[int, int, int]:
    """(GEMM, attention, elementwise) kernels of one instance of ``t``."""
    if t.op_class is OpClass.GEMM:
        return 1, 0, 0
    if t.op_class is OpClass.ATTENTION:
        return 0, 1, 0
    if t.op_class is OpClass.EXPERTS:
        return _EXPERT_GEMMS, 0, _EXPERT_ELEMENTWISE
    return 0, 0, 1


def kernel_counts(model: ModelSpec, dt: Dtypes) -> KernelCounts:
    """The kernels one step of ``model`` launches (each op once per layer it repeats in)."""
    gemm = attention = elementwise = quantised = 0.0
    for t in op_terms(model, UniformShape(1.0, 1.0, 0.0), dt):
        g, a, e = _kernels_of(t)
        gemm, attention, elementwise = (
            gemm + g * t.count,
            attention + a * t.count,
            elementwise + e * t.count,
        )
        if compute_term(kind_of(t)) in _QUANTISED_TERMS:
            quantised += g * t.count
    return KernelCounts(gemm, attention, elementwise, quantised)


def fixed_step_seconds(
    layers: Array, cal: Calibration, seqs: Array = 0.0, kernels: Array | KernelCounts = NO_KERNELS
) -> Array:
    """layers · layer_latency_s + step_latency_s + seqs · sequence_latency_s + each kernel's
    latency (``kernels``: a ``KernelCounts``, or its ``as_array`` with a column per step)."""
    k = kernels.as_array() if isinstance(kernels, KernelCounts) else np.asarray(kernels)
    latency = (
        k[0] * cal.gemm_latency_s
        + k[1] * cal.attention_latency_s
        + k[2] * cal.kernel_latency_s
        + k[3] * cal.quantised_gemm_latency_s
    )
    fixed = layers * cal.layer_latency_s + cal.step_latency_s + seqs * cal.sequence_latency_s
    return fixed + latency


_QUANTISED_TERMS = (Term.FP8_COMPUTE_EFFICIENCY, Term.FP4_COMPUTE_EFFICIENCY)
