"""The five questions for any accelerator and workload (course module 1), and what one decode
step reads, by category, at each memory level's bandwidth (module 2).

1. How much memory at each level?  2. How fast is each level?  3. Who decides where data lives
at each level?  4. Where is the ridge point?  5. Which resource is scarce for this model and
workload — capacity, bandwidth or compute — and why?
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ridgeline.analytic.binding import Resource, Verdict, roofline_verdict
from ridgeline.analytic.deploy import deployment_cost
from ridgeline.analytic.kv import kv_bytes, weights_bytes
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.roofline import Bound, StepCost, as_pricing, step_cost
from ridgeline.analytic.speed import SpeedQuote, quote_step
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.hardware import Accelerator, MemoryLevel
from ridgeline.specs.html import html_table
from ridgeline.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class LevelFacts:
    """Questions 1–4 for one memory level."""

    name: str
    scope: str
    instances: int
    capacity_bytes: float
    total_capacity_bytes: float
    usable_total_bytes: float
    bandwidth_bytes_per_s: float | None
    managed_by: str
    ridge_point_flops_per_byte: float | None
    note: str


@dataclass(frozen=True, slots=True)
class FiveAnswers:
    """The five questions answered for one accelerator, model and workload."""

    accelerator: str
    model: str
    levels: tuple[LevelFacts, ...]
    device_level: str
    ridge_point_flops_per_byte: float
    arithmetic_intensity: float
    bound: Bound
    memory_needed_bytes: float
    device_capacity_bytes: float
    roofline: Verdict  # question 5 on the roofline: what the course teaches a learner to find
    reason: str
    expected: Verdict  # the same question in the calibrated model (capacity when it does not fit)
    step_time_s: float  # in the pricing's mode
    speed: SpeedQuote = field(repr=False)  # ideal and calibrated, or none when it does not fit
    mode: CostMode = CostMode.CALIBRATED

    @property
    def scarce(self) -> Resource:
        """Question 5's answer on the roofline (``analytic.binding``)."""
        return self.roofline.resource

    def to_dict(self) -> dict[str, Any]:
        skip = ("speed", "roofline", "expected")
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        d["levels"] = [asdict(lvl) for lvl in self.levels]
        d["bound"] = self.bound.value
        d["scarce"] = self.scarce.value
        d["roofline"] = self.roofline.to_dict()
        d["expected"] = self.expected.to_dict()
        d["mode"] = self.mode.value
        d["speed"] = self.speed.to_dict()
        d["schema"] = "ridgeline.questions/2"
        return d

    def _repr_html_(self) -> str:
        rows = [
            (
                lv.name,
                lv.capacity_bytes * lv.instances,
                lv.bandwidth_bytes_per_s,
                lv.managed_by,
                lv.ridge_point_flops_per_byte,
            )
            for lv in self.levels
        ]
        title = (
            f"{self.accelerator}: scarce on the roofline: {self.roofline.text} ({self.reason}); "
            f"expected to bind: {self.expected.text}"
        )
        headers = ("level", "1. how much (B)", "2. how fast (B/s)", "3. who decides", "4. ridge")
        return html_table(headers, rows, title)


def _facts(acc: Accelerator, lvl: MemoryLevel, workload: Workload) -> LevelFacts:
    return LevelFacts(
        name=lvl.name,
        scope=lvl.scope.value,
        instances=lvl.instances,
        capacity_bytes=lvl.capacity_bytes,
        total_capacity_bytes=lvl.total_capacity_bytes,
        usable_total_bytes=lvl.usable_total_bytes,
        bandwidth_bytes_per_s=lvl.bandwidth_bytes_per_s,
        managed_by=lvl.managed_by.value,
        ridge_point_flops_per_byte=acc.ridge_point(workload.dtypes.compute, lvl.name),
        note=lvl.note,
    )


def memory_needed_bytes(model: ModelSpec, workload: Workload) -> float:
    """Weights plus the KV of every sequence at the end of the step."""
    end_context = workload.prior_tokens_per_seq + workload.new_tokens_per_seq
    return weights_bytes(model, workload.dtypes.weight) + kv_bytes(
        model, workload.batch, end_context, workload.dtypes.kv
    )


def _scarce(acc: Accelerator, cost: StepCost, needed: float) -> tuple[Verdict, str]:
    """Question 5 on the roofline, and why (``analytic.binding.roofline_verdict``)."""
    device = acc.device_capacity_bytes
    ai, ridge = cost.arithmetic_intensity, cost.ridge_point
    verdict = roofline_verdict(ai, ridge, acc.device_level, needed <= device)
    if verdict.resource is Resource.CAPACITY:
        chips = -(-needed // device)
        return verdict, (
            f"weights + KV need {needed / 1e9:.3g} GB but {acc.device_level} holds "
            f"{device / 1e9:.3g} GB: at least {int(chips)} chips just to hold the model"
        )
    if verdict.resource is Resource.BANDWIDTH:
        return verdict, (
            f"intensity {ai:.3g} FLOP/B is below the ridge point {ridge:.3g} FLOP/B of "
            f"{acc.device_level}: the step waits on bytes, not FLOPs"
        )
    return verdict, (
        f"intensity {ai:.3g} FLOP/B is above the ridge point {ridge:.3g} FLOP/B: the step "
        f"waits on FLOPs"
    )


def expected_verdict(model: ModelSpec, acc: Accelerator, workload: Workload, fits: bool) -> Verdict:
    """Which resource the calibrated model expects to bind the step on one chip: the largest
    share of its busy time (the same rule and numbers as ``compare`` on a one-chip deployment);
    capacity when it does not fit."""
    if not fits:
        return Verdict(Resource.CAPACITY, CostMode.CALIBRATED)
    pricing = Pricing.expected(acc, workload.dtypes)
    return deployment_cost(model, pricing, workload).binding


def five_questions(
    model: ModelSpec, priced: Pricing | Accelerator, workload: Workload
) -> FiveAnswers:
    """Answer the five questions for ``workload`` of ``model`` on one chip, its step priced by
    ``priced`` (an accelerator alone: the ideal roofline) with the other mode beside it; question
    5 both on the roofline and as the calibrated model expects it (``analytic.binding``)."""
    pricing = as_pricing(priced, workload.dtypes)
    acc = pricing.accelerator
    cost, quote = quote_step(model, pricing, workload)
    needed = memory_needed_bytes(model, workload)
    roofline, reason = _scarce(acc, cost, needed)
    expected = expected_verdict(model, acc, workload, roofline.resource is not Resource.CAPACITY)
    return FiveAnswers(
        accelerator=acc.name,
        model=model.name,
        levels=tuple(_facts(acc, lvl, workload) for lvl in acc.levels),
        device_level=acc.device_level,
        ridge_point_flops_per_byte=cost.ridge_point,
        arithmetic_intensity=cost.arithmetic_intensity,
        bound=cost.bound,
        memory_needed_bytes=needed,
        device_capacity_bytes=acc.device_capacity_bytes,
        roofline=roofline,
        reason=reason,
        expected=expected,
        step_time_s=cost.step_time_s,
        speed=quote,
        mode=pricing.mode,
    )


@dataclass(frozen=True, slots=True)
class LevelTime:
    """How long the step's bytes take at one level's bandwidth, and whether they fit there."""

    level: str
    bandwidth_bytes_per_s: float
    time_s: float
    fits: bool


@dataclass(frozen=True, slots=True)
class StepReads:
    """What one decode step reads, by category, and its time at each level's bandwidth."""

    accelerator: str
    model: str
    batch: int
    context: int
    weight_bytes: float
    kv_bytes: float
    activation_bytes: float
    per_level: tuple[LevelTime, ...]

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["total_bytes"] = self.total_bytes
        d["schema"] = "ridgeline.reads/1"
        return d


def decode_reads(
    model: ModelSpec, acc: Accelerator, batch: int, context: int, dtypes: Dtypes | None = None
) -> StepReads:
    """Bytes one decode step moves (weights read, KV read + written, activations read +
    written) and how long they take at every level with a known bandwidth."""
    cost = step_cost(model, acc, Workload(Phase.DECODE, batch, context, dtypes=dtypes or Dtypes()))
    kv = cost.kv_read_bytes + cost.kv_write_bytes
    total = cost.weight_bytes + kv + cost.act_bytes
    per_level = tuple(
        LevelTime(
            lvl.name,
            lvl.bandwidth_bytes_per_s,
            total / lvl.bandwidth_bytes_per_s,
            total <= lvl.usable_total_bytes,
        )
        for lvl in acc.levels
        if lvl.bandwidth_bytes_per_s is not None
    )
    return StepReads(
        acc.name, model.name, batch, context, cost.weight_bytes, kv, cost.act_bytes, per_level
    )
