"""What a plan answers: per accelerator, the best layouts simulated with the copies that carry the
rate; the winner, its check at other rates and its command lines; the Pareto front; and why the
others lost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ridgeline.fidelity.residuals import Interval, NoInterval
from ridgeline.plan.bound import Bound, Limit, Miss, Targets
from ridgeline.plan.engine import EngineCommands
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.units import fmt_seconds
from ridgeline.sweep.point import PointResult
from ridgeline.sweep.search import FrontPoint


@dataclass(frozen=True, slots=True)
class Probe:
    """One simulation of one copy of a layout, at the rate one of ``copies`` copies carries."""

    copies: int
    rate_per_copy_rps: float
    result: PointResult

    def missed(self, targets: Targets) -> str:
        """The targets this probe misses, in words (empty when it meets them)."""
        r, p = self.result, f"p{targets.percentile:g}"
        if r.decided_early:
            return (
                f"TTFT {p} > {fmt_seconds(targets.ttft_s)} (the simulation stopped once that "
                "was certain)"
            )
        out = []
        if r.ttft_p_s > targets.ttft_s:
            out.append(f"TTFT {p} {fmt_seconds(r.ttft_p_s)} > {fmt_seconds(targets.ttft_s)}")
        if r.tpot_p_s > targets.tpot_s:
            out.append(f"TPOT {p} {fmt_seconds(r.tpot_p_s)} > {fmt_seconds(targets.tpot_s)}")
        return ", ".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "copies": self.copies,
            "rate_per_copy_rps": self.rate_per_copy_rps,
            **self.result.to_dict(),
        }


def copies_text(n: int) -> str:
    """``1 copy``, ``3 copies``."""
    return f"{n} copy" if n == 1 else f"{n} copies"


Figure = Interval | NoInterval


@dataclass(frozen=True, slots=True)
class Intervals:
    """How sure each figure of a candidate is (``fidelity.residuals``); ``None`` in ideal mode."""

    tokens_per_s_per_chip: Figure
    ttft_s: Figure
    tpot_s: Figure

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens_per_s_per_chip": self.tokens_per_s_per_chip.to_dict(),
            "ttft_s": self.ttft_s.to_dict(),
            "tpot_s": self.tpot_s.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A layout simulated at the rate: the fewest copies that meet the targets.

    Attributes:
        bound: the layout and its analytic bound.
        copies: fewest copies that met the targets (``None``: none within max chips).
        met: the probe at ``copies``.
        missed: the probe at the most copies that missed (why fewer do not do).
        tokens_per_s_per_chip: output tokens/s the deployment carries, per chip.
        usd_per_hour: the deployment's price, when the user gave one.
        binds: what binds the decode step at the bound's batch (``analytic.binding.Verdict.text``).
        intervals: how sure the figures are.
        beaten: its search stopped once others met the targets on this many chips, fewer than
            it could still need.
    """

    bound: Bound
    copies: int | None
    met: Probe | None
    missed: Probe | None
    tokens_per_s_per_chip: float | None
    usd_per_hour: float | None
    binds: str
    intervals: Intervals | None
    beaten: int | None = None

    @property
    def chips(self) -> int | None:
        return None if self.copies is None else self.copies * self.bound.layout.chips

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Dollars per million output tokens at the rate (price ÷ tokens per hour)."""
        if self.usd_per_hour is None or self.chips is None or not self.tokens_per_s_per_chip:
            return None
        tokens_per_hour = self.tokens_per_s_per_chip * self.chips * 3600.0
        return self.usd_per_hour / tokens_per_hour * 1e6

    def headroom(self, targets: Targets) -> float | None:
        """The tighter target's slack at the rate: 1 − (percentile latency ÷ target)."""
        if self.met is None:
            return None
        r = self.met.result
        return min(1 - r.ttft_p_s / targets.ttft_s, 1 - r.tpot_p_s / targets.tpot_s)

    def tighter(self, targets: Targets) -> str:
        """Which target has less slack at the rate."""
        if self.met is None:
            return ""
        r = self.met.result
        return "TTFT" if r.ttft_p_s / targets.ttft_s >= r.tpot_p_s / targets.tpot_s else "TPOT"

    def to_dict(self, targets: Targets) -> dict[str, Any]:
        layout = self.bound.layout
        return {
            "layout": layout.key,
            "accelerator": layout.accelerator,
            "serving": layout.serving.value,
            "parallel": layout.parallel_label,
            "weight_dtype": layout.formats.weight.value,
            "kv_dtype": layout.formats.kv.value,
            "max_num_seqs": layout.knobs.max_num_seqs,
            "max_num_batched_tokens": layout.knobs.max_num_batched_tokens,
            "chips_per_copy": layout.chips,
            "copies": self.copies,
            "chips": self.chips,
            "tokens_per_s_per_chip": self.tokens_per_s_per_chip,
            "usd_per_hour": self.usd_per_hour,
            "usd_per_million_tokens": self.usd_per_million_tokens,
            "headroom": self.headroom(targets),
            "bound_capacity_rps": self.bound.capacity_rps,
            "bound_limit": self.bound.limit.value,
            "binds": self.binds,
            "beaten_at_chips": self.beaten,
            "met": None if self.met is None else self.met.to_dict(),
            "missed": None if self.missed is None else self.missed.to_dict(),
            "intervals": None if self.intervals is None else self.intervals.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class MissSummary:
    """Layouts the bound ruled out for one reason: how many, and the closest one's story."""

    limit: Limit
    count: int
    example: Miss

    def to_dict(self) -> dict[str, Any]:
        return {
            "limit": self.limit.value,
            "count": self.count,
            "example": self.example.what,
            "reason": self.example.reason,
        }


@dataclass(frozen=True, slots=True)
class AcceleratorPlan:
    """One accelerator's answer: its simulated candidates (best first) and what the bound
    ruled out."""

    accelerator: str
    family: str
    num_layouts: int
    candidates: tuple[Candidate, ...]
    ruled_out: tuple[MissSummary, ...]
    interval_note: str  # empty, or why this family's figures carry no interval

    @property
    def best(self) -> Candidate | None:
        ok = [c for c in self.candidates if c.copies is not None]
        return ok[0] if ok else None

    def to_dict(self, targets: Targets) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "family": self.family,
            "num_layouts": self.num_layouts,
            "candidates": [c.to_dict(targets) for c in self.candidates],
            "ruled_out": [m.to_dict() for m in self.ruled_out],
            "interval_note": self.interval_note or None,
        }


@dataclass(frozen=True, slots=True)
class RateCheck:
    """The winner simulated at a multiple of the rate."""

    factor: float
    probe: Probe
    meets: bool

    def to_dict(self) -> dict[str, Any]:
        return {"factor": self.factor, "meets": self.meets, **self.probe.to_dict()}


@dataclass(frozen=True, slots=True)
class Plan:
    """A plan's whole answer (``plan.search.run_plan``)."""

    model: str
    workload: str
    rate_rps: float
    targets: Targets
    mode: CostMode
    accelerators: tuple[AcceleratorPlan, ...]
    winner: Candidate | None
    ranked_by: str  # "price" or "chips"
    checks: tuple[RateCheck, ...]
    commands: tuple[EngineCommands, ...]
    front: tuple[FrontPoint, ...]
    reasons: tuple[tuple[str, str], ...]  # (layout key, why it lost to the winner)
    num_simulations: int
    wall_s: float

    @property
    def verdict(self) -> str:
        """One sentence: the winner, or what binds when nothing meets the targets."""
        if self.winner is not None:
            c = self.winner
            return (
                f"{c.chips} x {c.bound.layout.accelerator} ({c.bound.layout.parallel_label}, "
                f"{c.bound.layout.serving.value}, {c.bound.layout.formats.label}) carries "
                f"{self.rate_rps:g} req/s within the targets"
            )
        return "no deployment meets the targets: " + "; ".join(
            f"{a.accelerator}: {_closest(a, self.targets)}" for a in self.accelerators
        )

    def to_dict(self) -> dict[str, Any]:
        t = self.targets
        return {
            "schema": "ridgeline.plan/1",
            "model": self.model,
            "workload": self.workload,
            "rate_rps": self.rate_rps,
            "targets": {"ttft_s": t.ttft_s, "tpot_s": t.tpot_s, "percentile": t.percentile},
            "mode": self.mode.value,
            "verdict": self.verdict,
            "ranked_by": self.ranked_by,
            "winner": None if self.winner is None else self.winner.to_dict(t),
            "checks": [c.to_dict() for c in self.checks],
            "commands": [c.to_dict() for c in self.commands],
            "front": [
                {
                    "layout": p.label,
                    "rate_per_copy_rps": p.rate_rps,
                    "tokens_per_s_per_chip": p.throughput_per_chip,
                    "tpot_s": p.latency_s,
                    "tokens_per_s_per_user": 1.0 / p.latency_s if p.latency_s > 0 else None,
                }
                for p in self.front
            ],
            "reasons": [{"layout": k, "why": why} for k, why in self.reasons],
            "accelerators": [a.to_dict(t) for a in self.accelerators],
            "num_simulations": self.num_simulations,
            "wall_s": self.wall_s,
        }


def _closest(a: AcceleratorPlan, targets: Targets) -> str:
    """What stops an accelerator that has no layout meeting the targets."""
    tried = [c for c in a.candidates if c.missed is not None]
    if tried:
        c = tried[0]
        assert c.missed is not None
        return f"{c.bound.layout.parallel_label} with {copies_text(c.missed.copies)} misses " + (
            c.missed.missed(targets) or "the targets"
        )
    if a.ruled_out:
        m = min(a.ruled_out, key=lambda x: x.example.excess)
        return f"{m.limit.value} binds: the closest, {m.example.what}: {m.example.reason}"
    return "no layout"
