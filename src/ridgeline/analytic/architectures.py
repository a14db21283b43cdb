"""Five architectures compared for one model and workload (course module 4), each on the
smallest deployment of its chips that holds the weights plus the KV (``analytic.deploy``),
priced in one mode (``analytic.pricing``: calibrated by default) with the other beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ridgeline.analytic.binding import Resource, Verdict
from ridgeline.analytic.deploy import DeploymentCost, auto_deployment, deployment_cost
from ridgeline.analytic.pricing import EXPECTED_LABEL, IDEAL_LABEL, Pricing
from ridgeline.analytic.questions import FiveAnswers, five_questions
from ridgeline.analytic.speed import SpeedQuote, quote_deployment
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import CapacityError
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.catalog import FIVE_ARCHITECTURES, get_accelerator
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.html import html_table
from ridgeline.specs.model import ModelSpec
from ridgeline.specs.units import fmt_seconds

# One per architecture of the course: GPU, TPU, wafer-scale, LPU, dataflow.
DEFAULT_ACCELERATORS = FIVE_ARCHITECTURES


@dataclass(frozen=True, slots=True)
class ArchRow:
    """One accelerator: the five questions for one chip, and prefill and decode steps on the
    smallest deployment that holds the model, ideal and calibrated (``None`` with ``unfit``
    saying why, when none does); ``mode`` is the one quoted (``decode_quoted``), whose
    binding every table and plot shows."""

    accelerator: Accelerator
    answers: FiveAnswers
    prefill: DeploymentCost | None
    decode: DeploymentCost | None
    unfit: str = ""
    prefill_calibrated: DeploymentCost | None = None
    decode_calibrated: DeploymentCost | None = None
    mode: CostMode = CostMode.CALIBRATED

    def _in_mode(
        self, ideal: DeploymentCost | None, cal: DeploymentCost | None, other: bool
    ) -> DeploymentCost | None:
        quoted_ideal = (self.mode is CostMode.IDEAL) != other
        return ideal if quoted_ideal else cal

    @property
    def decode_quoted(self) -> DeploymentCost | None:
        """The decode step in the quoted mode."""
        return self._in_mode(self.decode, self.decode_calibrated, False)

    @property
    def prefill_quoted(self) -> DeploymentCost | None:
        return self._in_mode(self.prefill, self.prefill_calibrated, False)

    @property
    def decode_other(self) -> DeploymentCost | None:
        """The decode step in the other mode (what tables show in brackets)."""
        return self._in_mode(self.decode, self.decode_calibrated, True)

    @property
    def prefill_other(self) -> DeploymentCost | None:
        return self._in_mode(self.prefill, self.prefill_calibrated, True)

    @property
    def decode_quote(self) -> SpeedQuote | None:
        """The decode step, ideal and calibrated side by side, the quoted mode first."""
        if self.decode is None or self.decode_calibrated is None:
            return None
        return quote_deployment(self.decode, self.decode_calibrated, self.mode)

    @property
    def binds(self) -> str:
        """One sentence on what the decode step waits on, in the quoted mode."""
        quoted = self.decode_quoted
        if quoted is None:
            return f"{self.accelerator.name}: does not fit ({self.unfit})"
        return binding_sentence(quoted)

    @property
    def verdict(self) -> Verdict:
        """What binds the decode step on the deployment in the quoted mode (``analytic.binding``:
        expected when calibrated); capacity when no deployment holds the model."""
        cost = self.decode_quoted
        return Verdict(Resource.CAPACITY, self.mode) if cost is None else cost.binding

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "accelerator": self.accelerator.name,
            "kind": self.accelerator.kind,
            "questions": self.answers.to_dict(),
            "deployment": None if self.decode is None else self.decode.deployment.to_dict(),
            "prefill": None if self.prefill is None else _point(self.prefill),
            "decode": None if self.decode is None else _point(self.decode),
            "prefill_calibrated": _point_or_none(self.prefill_calibrated),
            "decode_calibrated": _point_or_none(self.decode_calibrated),
            "binds": self.binds,
            "verdict": self.verdict.to_dict(),
            "unfit": self.unfit or None,
        }


def _point_or_none(cost: DeploymentCost | None) -> dict[str, Any] | None:
    return None if cost is None else _point(cost)


def _point(cost: DeploymentCost) -> dict[str, Any]:
    return {
        "step_time_s": cost.step_time_s,
        "tokens_per_s_per_seq": cost.tokens_per_s_per_seq,
        "tokens_per_s": cost.tokens_per_s,
        "microbatches": cost.microbatches,
        "bubble_fraction": cost.bubble_fraction,
        "interconnect_bytes": cost.interconnect_bytes,
        "binding": cost.binding.text,
        "mode": cost.mode.value,
        "slot": {
            "compute_s": cost.slot.compute_s,
            "memory_s": cost.slot.memory_s,
            "interconnect_s": cost.slot.interconnect_s,
            "layer_s": cost.slot.layer_s,
        },
    }


def binding_sentence(cost: DeploymentCost) -> str:
    """What binds a step and by how much, in one sentence built from the numbers."""
    s, dep = cost.slot, cost.deployment
    busy = cost.microbatches * s.time_s
    shares = (
        f"compute {_share(s.compute_s, s.time_s)}, {dep.accelerator.device_level} "
        f"{_share(s.memory_s, s.time_s)}, links {_share(s.interconnect_s, s.time_s)}"
    )
    if s.layer_s:
        shares += f", fixed latency {_share(s.layer_s, s.time_s)}"
    bubble = (
        f"; each chip idles {cost.bubble_fraction:.0%} of the step in the pipeline bubble "
        f"({dep.pipeline_parallel} stages, {_count(cost.microbatches, 'microbatch')})"
        if dep.pipeline_parallel > 1
        else ""
    )
    return (
        f"{dep.label}: {cost.binding.text} binds ({_kind(cost)}) — each chip is busy "
        f"{fmt_seconds(busy)} of a {fmt_seconds(cost.step_time_s)} step ({shares}){bubble}."
    )


def _kind(cost: DeploymentCost) -> str:
    return "roofline" if cost.mode is CostMode.IDEAL else "expected"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}es"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "0%"


@dataclass(frozen=True, slots=True)
class Comparison:
    model: str
    batch: int
    context: int
    prompt: int
    rows: tuple[ArchRow, ...]
    mode: CostMode = CostMode.CALIBRATED

    @property
    def label(self) -> str:
        """The quoted figures' kind, for titles: ``expected (calibrated)`` or ``ideal roofline``."""
        return EXPECTED_LABEL if self.mode is CostMode.CALIBRATED else IDEAL_LABEL

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.compare/4",
            "mode": self.mode.value,
            "label": self.label,
            "model": self.model,
            "batch": self.batch,
            "context": self.context,
            "prompt": self.prompt,
            "rows": [row.to_dict() for row in self.rows],
        }

    def _repr_html_(self) -> str:
        rows: list[tuple[Any, ...]] = []
        for r in self.rows:
            d = r.decode_quoted
            if d is None:
                rows.append((r.accelerator.name, "does not fit", None, None, None))
                continue
            dep = d.deployment
            rows.append(
                (
                    r.accelerator.name,
                    f"{dep.chips} (TP {dep.tensor_parallel} x PP {dep.pipeline_parallel})",
                    d.step_time_s,
                    d.tokens_per_s_per_seq,
                    r.verdict.text,
                )
            )
        title = f"{self.model}: batch {self.batch}, context {self.context} ({self.label})"
        headers = ("accelerator", "chips", "decode step (s)", "tok/s per user", "binds")
        return html_table(headers, rows, title)


def _row(model: ModelSpec, pricing: Pricing, prefill: Workload, decode: Workload) -> ArchRow:
    acc = pricing.accelerator
    answers = five_questions(model, pricing, decode)
    try:
        dep = auto_deployment(model, acc, decode)
    except CapacityError as e:
        return ArchRow(acc, answers, None, None, str(e), mode=pricing.mode)
    quoted = pricing.on(dep)
    ideal, cal = (
        (quoted, quoted.counterpart()) if quoted.is_ideal else (quoted.counterpart(), quoted)
    )
    return ArchRow(
        acc,
        answers,
        deployment_cost(model, ideal, prefill),
        deployment_cost(model, ideal, decode),
        prefill_calibrated=deployment_cost(model, cal, prefill),
        decode_calibrated=deployment_cost(model, cal, decode),
        mode=pricing.mode,
    )


def compare(
    model: ModelSpec,
    accelerators: Sequence[str | Accelerator] = DEFAULT_ACCELERATORS,
    batch: int = 1,
    context: int = 4096,
    prompt: int = 2048,
    dtypes: Dtypes | None = None,
    mode: CostMode = CostMode.CALIBRATED,
) -> Comparison:
    """The five questions for one chip, then a prefill step (``prompt`` tokens) and a decode
    step (``context`` cached tokens) for ``model`` on each accelerator's smallest deployment
    that holds the weights plus the decode KV (``analytic.deploy.auto_deployment``), priced in
    ``mode`` with the other mode beside it."""
    dt = dtypes or Dtypes()
    decode = Workload(Phase.DECODE, batch, context, dtypes=dt)
    prefill = Workload(Phase.PREFILL, batch, prompt, dtypes=dt)
    rows = [
        _row(model, Pricing.of(get_accelerator(name), mode, dt), prefill, decode)
        for name in accelerators
    ]
    return Comparison(model.name, batch, context, prompt, tuple(rows), mode)
