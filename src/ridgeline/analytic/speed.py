"""Every quoted speed says which kind it is: the mode it is priced in (``analytic.pricing``),
the other mode beside it, whether the calibrated figure rests on estimates, and nothing at all
when the configuration does not fit its memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ridgeline.analytic.deploy import Deployment, DeploymentCost, chip_memory
from ridgeline.analytic.pricing import EXPECTED_LABEL, Pricing
from ridgeline.analytic.roofline import StepCost, step_cost
from ridgeline.analytic.workload import Workload
from ridgeline.specs.calibration import Calibration, CostMode, Term
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.model import ModelSpec
from ridgeline.specs.units import fmt_bytes, fmt_seconds

LINK_TERMS = (Term.LINK_EFFICIENCY, Term.COLLECTIVE_LATENCY_S, Term.STAGE_LATENCY_S)


@dataclass(frozen=True, slots=True)
class SpeedQuote:
    """One step's time and tokens/s, ideal and calibrated (``None`` speeds when it does not
    fit). ``tokens`` counts the step's new tokens, ``tokens_per_seq`` one sequence's; ``mode``
    is the one quoted first (the pricing's), the other follows."""

    ideal_step_s: float
    calibrated_step_s: float
    tokens: int
    tokens_per_seq: int
    calibration: Calibration
    unfit: str = ""
    multi_chip: bool = False  # whether link terms bear on the figure
    mode: CostMode = CostMode.CALIBRATED

    def step_s(self, mode: CostMode) -> float:
        return self.ideal_step_s if mode is CostMode.IDEAL else self.calibrated_step_s

    @property
    def fits(self) -> bool:
        return not self.unfit

    def tokens_per_s(self, mode: CostMode) -> float | None:
        """New tokens per second of the whole batch, or ``None`` when it does not fit."""
        if not self.fits:
            return None
        return self.tokens / self.step_s(mode)

    def per_user_tokens_per_s(self, mode: CostMode) -> float | None:
        if not self.fits:
            return None
        return self.tokens_per_seq / self.step_s(mode)

    @property
    def basis(self) -> str:
        """What the calibrated figure rests on: fitted terms, estimates, or sources only."""
        cal = self.calibration
        relevant = [t for t in Term if self.multi_chip or t not in LINK_TERMS]
        fitted = [t.value for t in cal.fitted_terms if t in relevant]
        estimated = [t.value for t in cal.estimated_terms if t in relevant]
        parts = []
        if fitted:
            parts.append("fitted " + ", ".join(fitted))
        if estimated:
            parts.append("estimated " + ", ".join(estimated))
        return f"{cal.family}: " + ("; ".join(parts) if parts else "sourced terms only")

    def sentence(self) -> str:
        """``expected ... (calibrated; ideal roofline ...)`` (the quoted mode first), or why
        nothing is quoted."""
        if not self.fits:
            return f"does not fit: {self.unfit}; no tokens/s quoted"
        cal, ideal = self.tokens_per_s(CostMode.CALIBRATED), self.tokens_per_s(CostMode.IDEAL)
        expected = (
            f"{fmt_seconds(self.calibrated_step_s)} per step, {cal:,.0f} tokens/s ({self.basis})"
        )
        roofline = f"{fmt_seconds(self.ideal_step_s)} per step, {ideal:,.0f} tokens/s"
        if self.mode is CostMode.IDEAL:
            return f"ideal roofline {roofline}; {EXPECTED_LABEL} {expected}"
        return f"{EXPECTED_LABEL} {expected}; ideal roofline {roofline}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "fits": self.fits,
            "unfit": self.unfit or None,
            "ideal": {
                "step_time_s": self.ideal_step_s,
                "tokens_per_s": self.tokens_per_s(CostMode.IDEAL),
                "per_user_tokens_per_s": self.per_user_tokens_per_s(CostMode.IDEAL),
            },
            "calibrated": {
                "step_time_s": self.calibrated_step_s,
                "tokens_per_s": self.tokens_per_s(CostMode.CALIBRATED),
                "per_user_tokens_per_s": self.per_user_tokens_per_s(CostMode.CALIBRATED),
                "family": self.calibration.family,
                "fitted_terms": [t.value for t in self.calibration.fitted_terms],
                "estimated_terms": [t.value for t in self.calibration.estimated_terms],
            },
        }


def unfit_reason(model: ModelSpec, acc: Accelerator, workload: Workload) -> str:
    """Why ``workload`` does not fit one chip of ``acc`` ("" when it does)."""
    mem = chip_memory(model, Deployment(acc), workload, None)
    if mem.fits:
        return ""
    return (
        f"{model.name} needs {fmt_bytes(mem.needed_bytes)} of weights + KV and one {acc.name} "
        f"offers {fmt_bytes(mem.available_bytes)} of {acc.device_level}"
    )


def quote_step(
    model: ModelSpec, pricing: Pricing, workload: Workload
) -> tuple[StepCost, SpeedQuote]:
    """One chip's step priced by ``pricing`` (its cost, op by op), and the quote of it beside
    the other mode's."""
    cost = step_cost(model, pricing, workload)
    other = step_cost(model, pricing.counterpart(), workload)
    ideal, calibrated = (cost, other) if pricing.is_ideal else (other, cost)
    acc = pricing.accelerator
    quote = SpeedQuote(
        ideal.step_time_s,
        calibrated.step_time_s,
        workload.num_new_tokens,
        workload.new_tokens_per_seq,
        acc.calibration,
        unfit_reason(model, acc, workload),
        mode=pricing.mode,
    )
    return cost, quote


def quote_deployment(
    ideal: DeploymentCost, calibrated: DeploymentCost, mode: CostMode = CostMode.CALIBRATED
) -> SpeedQuote:
    """A deployment's step both ways, ``mode`` first (``deploy_step`` has already refused one
    that does not fit)."""
    w = ideal.workload
    return SpeedQuote(
        ideal.step_time_s,
        calibrated.step_time_s,
        w.num_new_tokens,
        w.new_tokens_per_seq,
        calibrated.calibration,
        "" if ideal.memory.fits else "weights + KV exceed each chip's memory",
        multi_chip=ideal.deployment.chips > 1,
        mode=mode,
    )
