"""Roofline: ridge points, arithmetic intensity, bound and predicted time of a step.

Source: S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance model
for multicore architectures", CACM 52(4), 2009. Attainable FLOP/s = min(peak, AI × bandwidth);
ridge point = peak ÷ bandwidth of the level the operands come from; AI = FLOPs ÷ bytes moved at
that level.

Step time is the sum over operators of each operator's own roofline time,
max(FLOPs ÷ (peak·compute_eff), bytes ÷ (bandwidth·bandwidth_eff)), plus a fixed per-step
overhead: operators run one after another, and an operator cannot overlap with the next.

Two modes (``CostMode``), carried by a ``Pricing`` (``analytic.pricing``): ``ideal`` is that
roofline at the datasheet peaks (the course's); ``calibrated`` applies the accelerator's
calibration terms (``analytic.calibrated``). A bare accelerator in place of a pricing means the
ideal roofline on one chip (the course's step).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from ridgeline.analytic.calibrated import (
    fixed_step_seconds,
    kernel_counts,
    kind_of,
    op_rates,
    op_seconds,
)
from ridgeline.analytic.ops import UniformShape, op_terms
from ridgeline.analytic.pricing import Efficiency as Efficiency  # re-exported: its old home
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import ConfigError
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.html import html_table
from ridgeline.specs.model import ModelSpec


class Bound(StrEnum):
    COMPUTE = "compute"
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class OpCost:
    """One operator (summed over the layers it repeats in) on one accelerator."""

    name: str
    count: int
    flops: float
    weight_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    act_read_bytes: float
    act_write_bytes: float
    level: str
    time_s: float
    bound: Bound

    @property
    def bytes_read(self) -> float:
        return self.weight_bytes + self.kv_read_bytes + self.act_read_bytes

    @property
    def bytes_written(self) -> float:
        return self.kv_write_bytes + self.act_write_bytes

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["bound"] = self.bound.value
        d.update(
            bytes_read=self.bytes_read,
            bytes_written=self.bytes_written,
            bytes=self.bytes,
            arithmetic_intensity=self.arithmetic_intensity,
        )
        return d


@dataclass(frozen=True, slots=True)
class StepCost:
    """Cost of one step of a workload on an accelerator: per-op and totals."""

    model: str
    accelerator: str
    workload: Workload
    ops: tuple[OpCost, ...]
    level: str
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    pricing: Pricing
    fixed_s: float = 0.0  # latencies per layer, step and sequence (calibrated), or the overhead

    @property
    def mode(self) -> CostMode:
        return self.pricing.mode

    @property
    def flops(self) -> float:
        return sum(op.flops for op in self.ops)

    @property
    def bytes_read(self) -> float:
        return sum(op.bytes_read for op in self.ops)

    @property
    def bytes_written(self) -> float:
        return sum(op.bytes_written for op in self.ops)

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def weight_bytes(self) -> float:
        return sum(op.weight_bytes for op in self.ops)

    @property
    def kv_read_bytes(self) -> float:
        return sum(op.kv_read_bytes for op in self.ops)

    @property
    def kv_write_bytes(self) -> float:
        return sum(op.kv_write_bytes for op in self.ops)

    @property
    def act_bytes(self) -> float:
        return sum(op.act_read_bytes + op.act_write_bytes for op in self.ops)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def ridge_point(self) -> float:
        return self.peak_flops_per_s / self.bandwidth_bytes_per_s

    @property
    def bound(self) -> Bound:
        return Bound.COMPUTE if self.arithmetic_intensity >= self.ridge_point else Bound.MEMORY

    @property
    def attainable_flops_per_s(self) -> float:
        """min(peak, AI × bandwidth) (Williams et al. 2009)."""
        return min(self.peak_flops_per_s, self.arithmetic_intensity * self.bandwidth_bytes_per_s)

    @property
    def step_time_s(self) -> float:
        return sum(op.time_s for op in self.ops) + self.fixed_s

    @property
    def tokens_per_s(self) -> float:
        """New tokens per second of the whole batch."""
        return self.workload.num_new_tokens / self.step_time_s

    def _repr_html_(self) -> str:
        rows = [
            (op.name, op.count, op.flops, op.bytes, op.arithmetic_intensity, op.bound, op.time_s)
            for op in self.ops
        ]
        w = self.workload
        title = (
            f"{self.model} {w.phase.value} B={w.batch} T={w.context_len} on {self.accelerator}: "
            f"{self.bound.value}-bound, {self.step_time_s * 1e3:.4g} ms per step"
        )
        headers = ("op", "×", "FLOPs", "bytes", "AI (FLOP/B)", "bound", "time (s)")
        return html_table(headers, rows, title)

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "schema": "ridgeline.roofline/1",
            "model": self.model,
            "accelerator": self.accelerator,
            "phase": w.phase.value,
            "batch": w.batch,
            "context": w.context_len,
            "prompt": w.new_tokens_per_seq if w.phase is Phase.PREFILL else None,
            "dtypes": {k: v.value for k, v in asdict(w.dtypes).items()},
            "level": self.level,
            "peak_flops_per_s": self.peak_flops_per_s,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "ridge_point_flops_per_byte": self.ridge_point,
            "arithmetic_intensity": self.arithmetic_intensity,
            "bound": self.bound.value,
            "flops": self.flops,
            "bytes": self.bytes,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "weight_bytes": self.weight_bytes,
            "kv_read_bytes": self.kv_read_bytes,
            "kv_write_bytes": self.kv_write_bytes,
            "activation_bytes": self.act_bytes,
            "attainable_flops_per_s": self.attainable_flops_per_s,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "mode": self.mode.value,
            "pricing": self.pricing.to_dict(),
            "fixed_s": self.fixed_s,
            "ops": [op.to_dict() for op in self.ops],
        }


def shape_of(workload: Workload) -> UniformShape:
    return UniformShape(
        num_seqs=float(workload.batch),
        new_per_seq=float(workload.new_tokens_per_seq),
        prior_per_seq=float(workload.prior_tokens_per_seq),
    )


def as_pricing(priced: Pricing | Accelerator, dtypes: Dtypes) -> Pricing:
    """``priced`` itself, or the ideal roofline on one chip of an accelerator (the course's).

    Raises:
        ConfigError: a pricing of many chips (one chip's roofline; ``analytic.deploy`` prices
            a deployment).
    """
    if isinstance(priced, Accelerator):
        return Pricing.ideal(priced, dtypes)
    if priced.deployment.chips != 1:
        raise ConfigError(
            f"field deployment: a roofline step is one chip's; {priced.deployment.label} is "
            "priced by analytic.deploy.deployment_cost"
        )
    return priced


def step_cost(model: ModelSpec, priced: Pricing | Accelerator, workload: Workload) -> StepCost:
    """Per-operator and total cost of one step of ``workload`` on one chip's device memory,
    priced by ``priced`` (ideal or calibrated, ``analytic.calibrated``); the workload's data
    types are the step's."""
    pricing = as_pricing(priced, workload.dtypes)
    acc, cal = pricing.accelerator, pricing.calibration
    peak = acc.peak(workload.dtypes.compute)
    ops = []
    for t in op_terms(model, shape_of(workload), workload.dtypes):
        kv = t.kv_read_bytes + t.kv_write_bytes
        rates = op_rates(acc, kind_of(t), cal)
        compute_s, memory_s = op_seconds(
            t.flops, t.bytes_read + t.bytes_written, kv, t.gemm_rows, rates, cal
        )
        ops.append(
            OpCost(
                name=t.name,
                count=t.count,
                flops=float(t.flops),
                weight_bytes=float(t.weight_bytes),
                kv_read_bytes=float(t.kv_read_bytes),
                kv_write_bytes=float(t.kv_write_bytes),
                act_read_bytes=float(t.act_read_bytes),
                act_write_bytes=float(t.act_write_bytes),
                level=acc.device_level,
                time_s=float(max(compute_s, memory_s)),
                bound=Bound.COMPUTE if compute_s > memory_s else Bound.MEMORY,
            )
        )
    return StepCost(
        model=model.name,
        accelerator=acc.name,
        workload=workload,
        ops=tuple(ops),
        level=acc.device_level,
        peak_flops_per_s=peak,
        bandwidth_bytes_per_s=acc.device_bandwidth_bytes_per_s,
        pricing=pricing,
        fixed_s=float(
            fixed_step_seconds(
                model.num_layers, cal, workload.batch, kernel_counts(model, workload.dtypes)
            )
        ),
    )


@dataclass(frozen=True, slots=True)
class Sweep:
    """A sweep over (batch, context) points: one array entry per point."""

    phase: Phase
    batch: np.ndarray
    context: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    weight_bytes: np.ndarray
    kv_bytes: np.ndarray
    step_time_s: np.ndarray
    ridge_point: float

    @property
    def arithmetic_intensity(self) -> np.ndarray:
        return self.flops / self.bytes

    @property
    def compute_bound(self) -> np.ndarray:
        return self.arithmetic_intensity >= self.ridge_point

    @property
    def tokens_per_s(self) -> np.ndarray:
        tokens_per_seq = 1 if self.phase is Phase.DECODE else self.context
        return self.batch * tokens_per_seq / self.step_time_s

    def to_dataframe(self) -> Any:
        """One row per (batch, context) point, whatever the sweep's shape (a scalar, a line or a
        broadcast grid): every array is broadcast to the common shape and flattened in C order.
        pandas is optional (``pip install 'ridgeline[pandas]'``); without it this raises
        ImportError naming it."""
        import pandas as pd

        columns = {
            "batch": self.batch,
            "context": self.context,
            "flops": self.flops,
            "bytes": self.bytes,
            "arithmetic_intensity": self.arithmetic_intensity,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "compute_bound": self.compute_bound,
        }
        shaped = np.broadcast_arrays(*(np.asarray(v) for v in columns.values()))
        return pd.DataFrame({k: a.ravel() for k, a in zip(columns, shaped, strict=True)})

    def _repr_html_(self) -> str:
        shape = "x".join(str(n) for n in np.shape(self.step_time_s)) or "1"
        rows = [
            ("points", shape),
            (
                "step time (s), min / max",
                f"{np.min(self.step_time_s):.4g} / {np.max(self.step_time_s):.4g}",
            ),
            ("compute-bound points", int(np.count_nonzero(self.compute_bound))),
            ("ridge point (FLOP/B)", self.ridge_point),
        ]
        return html_table(("sweep", self.phase.value), rows)


def sweep(
    model: ModelSpec,
    priced: Pricing | Accelerator,
    phase: Phase,
    batch: Any,
    context: Any,
    dtypes: Dtypes | None = None,
) -> Sweep:
    """Vectorised step cost over arrays of batch and context (broadcast together), priced by
    ``priced`` (``step_cost``; ``dtypes`` default to the pricing's).

    Decode reads ``context`` cached tokens per sequence; prefill processes ``context`` new tokens
    per sequence from an empty cache. Same formulas as ``step_cost`` (both call ``op_terms``).
    """
    dt = dtypes or (priced.dtypes if isinstance(priced, Pricing) else Dtypes())
    pricing = as_pricing(priced, dt)
    acc = pricing.accelerator
    b, c = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(context, dtype=float))
    if np.any(b < 1) or np.any(c < (1 if phase is Phase.PREFILL else 0)):
        raise ConfigError("field batch/context: sweep values must be positive")
    if phase is Phase.DECODE:
        shape = UniformShape(num_seqs=b, new_per_seq=np.ones_like(b), prior_per_seq=c)
    else:
        shape = UniformShape(num_seqs=b, new_per_seq=c, prior_per_seq=np.zeros_like(b))
    cal = pricing.calibration
    flops, nbytes, wbytes, kvbytes, time_s = (np.zeros_like(b) for _ in range(5))
    for t in op_terms(model, shape, dt):
        kv = t.kv_read_bytes + t.kv_write_bytes
        rates = op_rates(acc, kind_of(t), cal)
        compute_s, memory_s = op_seconds(
            t.flops, t.bytes_read + t.bytes_written, kv, t.gemm_rows, rates, cal
        )
        flops += t.flops
        nbytes += t.bytes_read + t.bytes_written
        wbytes += t.weight_bytes
        kvbytes += t.kv_read_bytes + t.kv_write_bytes
        time_s += np.maximum(compute_s, memory_s)
    return Sweep(
        phase=phase,
        batch=b,
        context=c,
        flops=flops,
        bytes=nbytes,
        weight_bytes=wbytes,
        kv_bytes=kvbytes,
        step_time_s=time_s + fixed_step_seconds(model.num_layers, cal, b, kernel_counts(model, dt)),
        ridge_point=acc.peak(dt.compute) / acc.device_bandwidth_bytes_per_s,
    )


@dataclass(frozen=True, slots=True)
class DecodeIntensity:
    """Decode arithmetic intensity counting the weights alone, and the weights plus the KV cache
    (course module 1's H100 exercise)."""

    flops: float
    weight_bytes: float
    kv_bytes: float
    weights_only: float
    with_kv: float
    ridge_point: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def decode_intensity(
    model: ModelSpec, acc: Accelerator, batch: int, context: int, dtypes: Dtypes | None = None
) -> DecodeIntensity:
    """FLOPs ÷ weight bytes, and FLOPs ÷ (weight + KV bytes), of one decode step.

    With weights dominating, weights-only intensity → 2·batch / bytes_per_weight
    (each weight read once does one multiply-add per sequence).
    """
    cost = step_cost(model, acc, Workload(Phase.DECODE, batch, context, dtypes=dtypes or Dtypes()))
    kv = cost.kv_read_bytes + cost.kv_write_bytes
    return DecodeIntensity(
        flops=cost.flops,
        weight_bytes=cost.weight_bytes,
        kv_bytes=kv,
        weights_only=cost.flops / cost.weight_bytes,
        with_kv=cost.flops / (cost.weight_bytes + kv),
        ridge_point=cost.ridge_point,
    )


@dataclass(frozen=True, slots=True)
class DecodeBatching:
    """How decode intensity grows with the batch at one context: its limit as the batch grows
    (weights amortised away, each sequence's KV read for its own token only) and the smallest
    batch that reaches the ridge point (``None`` when the limit stays below it)."""

    context: int
    limit_flops_per_byte: float
    ridge_point: float
    batch_at_ridge: int | None

    def sentence(self) -> str:
        """What the numbers say, in one sentence."""
        head = (
            f"at {self.context:,} tokens of context, decode intensity rises with the batch but "
            f"levels off near {self.limit_flops_per_byte:.3g} FLOP/B (the KV read per sequence "
            f"grows with the batch and is never reused)"
        )
        if self.batch_at_ridge is None:
            return f"{head}, below the ridge point of {self.ridge_point:.3g} FLOP/B: decode stays bandwidth-bound at any batch"
        return f"{head}; it crosses the ridge point of {self.ridge_point:.3g} FLOP/B from batch {self.batch_at_ridge:,}"


LIMIT_BATCH = 1_000_000  # a batch large enough that the weights no longer count
MAX_SEARCH_BATCH = 65_536


def decode_batching(
    model: ModelSpec, acc: Accelerator, context: int, dtypes: Dtypes | None = None
) -> DecodeBatching:
    """Decode intensity's limit over the batch at ``context``, and the batch that reaches the
    ridge point (both from the same per-operator FLOPs and bytes as ``step_cost``)."""
    dt = dtypes or Dtypes()
    limit = sweep(model, acc, Phase.DECODE, LIMIT_BATCH, context, dt)
    batches = np.arange(1, MAX_SEARCH_BATCH + 1)
    s = sweep(model, acc, Phase.DECODE, batches, context, dt)
    reached = np.nonzero(s.arithmetic_intensity >= s.ridge_point)[0]
    return DecodeBatching(
        context=context,
        limit_flops_per_byte=float(limit.arithmetic_intensity),
        ridge_point=s.ridge_point,
        batch_at_ridge=int(batches[reached[0]]) if len(reached) else None,
    )
