"""Recompute or cache: the trade the KV cache makes, priced per context length and accelerator.

Without a KV cache, the next token's attention needs the keys and values of every earlier token,
and rebuilding them takes a forward pass of the whole context through every layer: a prefill of
the context (the last layer's MLP and the vocabulary projection are not needed, so this slightly
overstates it). With the cache, the step reads the context's K and V instead. So the cache
trades, per token of context and per decode step,

    FLOPs recomputed  ≈ 2 × parameters + attention over the earlier tokens    (a prefill's)
    bytes kept (read) = 2 × layers × kv_heads × head_dim × bytes per element  (Pope et al. 2023)

and recomputing pays only where those FLOPs per byte fall below the accelerator's ridge point
(peak ÷ bandwidth of the level the KV lives in; Williams et al., "Roofline", CACM 2009). Both
times are the ideal roofline's (the datasheet peak and bandwidth): the trade is a ratio of
FLOPs to bytes, which calibration would only rescale. For a 7–8B model the FLOPs per byte kept
are in the hundreds of thousands, against ridge points of one to a few hundred: every
accelerator caches, and the cost of the cache is its capacity, not its time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ridgeline.analytic.kv import kv_bytes
from ridgeline.analytic.roofline import step_cost
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.inputs import check_int
from ridgeline.specs.limits import MAX_CONTEXT
from ridgeline.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class RecomputePoint:
    """One context length on one accelerator: the cache read against the recompute.

    Attributes:
        context: tokens already in the sequence.
        kv_bytes: K and V kept for them (one sequence), read every decode step.
        read_s: reading them at the device level's bandwidth.
        recompute_flops: FLOPs of a prefill of the context (rebuilding K and V).
        recompute_s: that prefill on the ideal roofline.
    """

    context: int
    kv_bytes: float
    read_s: float
    recompute_flops: float
    recompute_s: float

    @property
    def flops_per_byte(self) -> float:
        """FLOPs recomputed per byte of KV not kept."""
        return self.recompute_flops / self.kv_bytes

    @property
    def ratio(self) -> float:
        """Recompute time ÷ cache-read time (above 1: caching is faster)."""
        return self.recompute_s / self.read_s

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(flops_per_byte=self.flops_per_byte, ratio=self.ratio)
        return d


@dataclass(frozen=True, slots=True)
class RecomputeTrade:
    """The recompute-or-cache trade of one model on one accelerator, per context length."""

    model: str
    accelerator: str
    level: str  # where the KV lives: the device level
    ridge_point: float  # FLOP/B of that level at the compute dtype
    points: tuple[RecomputePoint, ...]

    @property
    def caches(self) -> bool:
        """Whether keeping K and V is faster at every context length."""
        return all(p.ratio > 1.0 for p in self.points)

    def sentence(self) -> str:
        worst = min(self.points, key=lambda p: p.ratio)
        verdict = "cache" if self.caches else "recompute where the ratio is below 1"
        return (
            f"{self.accelerator}: recomputing costs {worst.flops_per_byte:,.0f} FLOP per byte of "
            f"KV not kept, against a ridge point of {self.ridge_point:,.3g} FLOP/B of "
            f"{self.level}: {verdict} (recompute is {worst.ratio:,.0f}x the cache read at "
            f"{worst.context:,} tokens, the closest it comes)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "accelerator": self.accelerator,
            "level": self.level,
            "ridge_point_flops_per_byte": self.ridge_point,
            "caches": self.caches,
            "mode": "ideal",
            "points": [p.to_dict() for p in self.points],
        }


def recompute_point(
    model: ModelSpec, acc: Accelerator, context: int, dtypes: Dtypes | None = None
) -> RecomputePoint:
    """Cache read against recompute for one sequence at ``context`` tokens."""
    check_int("context", context, 1, MAX_CONTEXT)
    dt = dtypes or Dtypes()
    kv = float(kv_bytes(model, 1, context, dt.kv))
    prefill = step_cost(model, acc, Workload(Phase.PREFILL, 1, context, dtypes=dt))
    read_s = kv / acc.device_bandwidth_bytes_per_s
    return RecomputePoint(context, kv, read_s, prefill.flops, prefill.step_time_s)


def recompute_trade(
    model: ModelSpec,
    acc: Accelerator,
    contexts: Sequence[int],
    dtypes: Dtypes | None = None,
) -> RecomputeTrade:
    """The trade at each of ``contexts`` on ``acc`` (module docstring)."""
    dt = dtypes or Dtypes()
    points = tuple(recompute_point(model, acc, t, dt) for t in contexts)
    ridge = acc.peak(dt.compute) / acc.device_bandwidth_bytes_per_s
    return RecomputeTrade(model.name, acc.name, acc.device_level, ridge, points)


@dataclass(frozen=True, slots=True)
class RecomputeReport:
    """The trade on several accelerators."""

    model: str
    trades: tuple[RecomputeTrade, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.recompute/1",
            "model": self.model,
            "trades": [t.to_dict() for t in self.trades],
        }


def recompute_report(
    model: ModelSpec,
    accelerators: Sequence[Accelerator],
    contexts: Sequence[int],
    dtypes: Dtypes | None = None,
) -> RecomputeReport:
    """``recompute_trade`` for each accelerator."""
    return RecomputeReport(
        model.name, tuple(recompute_trade(model, a, contexts, dtypes) for a in accelerators)
    )
