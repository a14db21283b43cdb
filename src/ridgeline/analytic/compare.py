"""Five architectures compared for one model and workload (course module 4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ridgeline.analytic.questions import FiveAnswers, five_questions
from ridgeline.analytic.roofline import StepCost, step_cost
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.specs.catalog import get_accelerator
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.model import ModelSpec

# One per architecture of the course: GPU, TPU, wafer-scale, LPU, dataflow.
DEFAULT_ACCELERATORS = ("h100-sxm", "tpu-v5e", "cerebras-wse3", "groq-lpu", "ibm-spyre")


@dataclass(frozen=True, slots=True)
class ArchRow:
    """One accelerator's answers and its prefill and decode steps."""

    accelerator: Accelerator
    answers: FiveAnswers
    prefill: StepCost
    decode: StepCost

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator.name,
            "kind": self.accelerator.kind,
            "questions": self.answers.to_dict(),
            "prefill": _point(self.prefill),
            "decode": _point(self.decode),
        }


def _point(cost: StepCost) -> dict[str, Any]:
    return {
        "arithmetic_intensity": cost.arithmetic_intensity,
        "attainable_flops_per_s": cost.attainable_flops_per_s,
        "bound": cost.bound.value,
        "step_time_s": cost.step_time_s,
        "tokens_per_s": cost.tokens_per_s,
    }


@dataclass(frozen=True, slots=True)
class Comparison:
    model: str
    batch: int
    context: int
    prompt: int
    rows: tuple[ArchRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.compare/1",
            "model": self.model,
            "batch": self.batch,
            "context": self.context,
            "prompt": self.prompt,
            "rows": [row.to_dict() for row in self.rows],
        }


def compare(
    model: ModelSpec,
    accelerators: Sequence[str | Accelerator] = DEFAULT_ACCELERATORS,
    batch: int = 1,
    context: int = 4096,
    prompt: int = 2048,
    dtypes: Dtypes | None = None,
) -> Comparison:
    """The five questions plus a prefill step (``prompt`` tokens) and a decode step (``context``
    cached tokens) for ``model`` on each accelerator."""
    dt = dtypes or Dtypes()
    decode = Workload(Phase.DECODE, batch, context, dtypes=dt)
    prefill = Workload(Phase.PREFILL, batch, prompt, dtypes=dt)
    rows = []
    for name in accelerators:
        acc = get_accelerator(name)
        rows.append(
            ArchRow(
                acc,
                five_questions(model, acc, decode),
                step_cost(model, acc, prefill),
                step_cost(model, acc, decode),
            )
        )
    return Comparison(model.name, batch, context, prompt, tuple(rows))
