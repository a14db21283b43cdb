"""Deployments of many chips: the split of a model over tensor and pipeline parallel chips,
what each chip holds, and the smallest deployment that fits.

A model too big for one chip runs on a ``Deployment``: ``tensor_parallel`` chips split every layer
(a tensor-parallel group), ``pipeline_parallel`` groups each hold a run of layers (a stage).
Megatron-LM (Shoeybi et al., arXiv:1909.08053, §3) splits each matrix 1/tp per chip and the KV heads
while tp <= kv_heads (beyond, each chip caches ceil(kv_heads/tp) heads). Pipelines: prefill fills
and drains the pipe (GPipe, Huang et al., arXiv:1811.06965, §2.2): p stages and m microbatches
take (m + p - 1) slots of one stage's time; decode runs steady, every sequence getting a token
every max(m, p) slots (``analytic.deploy`` has the derivation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ridgeline.analytic.kv import kv_bytes, weights_bytes
from ridgeline.analytic.memory import ChipBudget, MemoryRule, chip_budget, kv_share
from ridgeline.analytic.workload import Phase, Workload
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs.hardware import Accelerator, ManagedBy, Parallelism
from ridgeline.specs.model import ModelSpec
from ridgeline.specs.runtime_memory import runtime_memory


class Schedule(StrEnum):
    """How microbatches move through pipeline stages within a step."""

    FILL_DRAIN = "fill-drain"  # GPipe: one batch enters, fills the pipe and drains (prefill)
    STEADY = "steady"  # decode: microbatches keep cycling, step after step


def schedule_of(workload: Workload) -> Schedule:
    return Schedule.STEADY if workload.phase is Phase.DECODE else Schedule.FILL_DRAIN


def pipeline_slots(stages: int, microbatches: int, schedule: Schedule) -> int:
    """Slots of one stage's time per step: m + p - 1 filling and draining (GPipe, Huang et al.
    2019, §2.2); max(m, p) in a steady pipeline (derived in the module docstring)."""
    if schedule is Schedule.FILL_DRAIN:
        return microbatches + stages - 1
    return max(microbatches, stages)


def bubble_fraction(
    stages: int, microbatches: int, schedule: Schedule = Schedule.FILL_DRAIN
) -> float:
    """Idle fraction of a chip's step: (p - 1)/(m + p - 1) filling and draining (GPipe, Huang
    et al. 2019, §2.2); (p - m)/p in a steady pipeline with fewer microbatches than stages."""
    slots = pipeline_slots(stages, microbatches, schedule)
    return (slots - microbatches) / slots


@dataclass(frozen=True, slots=True)
class Deployment:
    """``tensor_parallel`` x ``pipeline_parallel`` chips of one accelerator running one model."""

    accelerator: Accelerator
    tensor_parallel: int = 1
    pipeline_parallel: int = 1

    def __post_init__(self) -> None:
        for field in ("tensor_parallel", "pipeline_parallel"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"field {field}: must be an integer >= 1, got {value!r}")

    @property
    def chips(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def label(self) -> str:
        """``8 x h100-sxm (TP 8 x PP 1)``."""
        tp, pp = self.tensor_parallel, self.pipeline_parallel
        return f"{self.chips} x {self.accelerator.name} (TP {tp} x PP {pp})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator.name,
            "chips": self.chips,
            "tensor_parallel": self.tensor_parallel,
            "pipeline_parallel": self.pipeline_parallel,
        }


@dataclass(frozen=True, slots=True)
class ChipMemory:
    """What one chip of a deployment holds (its share of the weights and of this workload's KV)
    against what the KV-pool rule offers it (``analytic.memory``: the usable memory less the
    reserve for activations and workspace)."""

    kv_bytes: float
    budget: ChipBudget

    @property
    def weights_bytes(self) -> float:
        return self.budget.weights_bytes

    @property
    def capacity_bytes(self) -> float:
        return self.budget.capacity_bytes

    @property
    def reserve_bytes(self) -> float:
        return self.budget.reserve_bytes

    @property
    def needed_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes

    @property
    def available_bytes(self) -> float:
        """Usable memory for weights and KV: u x capacity less the reserve."""
        return self.budget.usable_bytes - self.budget.reserve_bytes

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.available_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "weights_bytes": self.weights_bytes,
            "kv_bytes": self.kv_bytes,
            "needed_bytes": self.needed_bytes,
            "capacity_bytes": self.capacity_bytes,
            "memory_utilization": self.budget.memory_utilization,
            "reserve_bytes": self.reserve_bytes,
            "available_bytes": self.available_bytes,
            "fits": self.fits,
        }


def chip_memory(
    model: ModelSpec, deployment: Deployment, workload: Workload, rule: MemoryRule | None = None
) -> ChipMemory:
    """Weights and KV (at the end of the step) per chip, against what the rule offers."""
    dt, tp, pp = workload.dtypes, deployment.tensor_parallel, deployment.pipeline_parallel
    end_context = workload.prior_tokens_per_seq + workload.new_tokens_per_seq
    kv_total = kv_bytes(model, workload.batch, end_context, dt.kv)
    return ChipMemory(
        kv_bytes=kv_total * kv_share(model, tp) / pp,
        budget=chip_budget(model, deployment, dt, rule),
    )


def min_chips(
    model: ModelSpec,
    acc: Accelerator,
    kv_total_bytes: float = 0.0,
    weight_bytes: float | None = None,
) -> int:
    """Fewest chips whose usable device memory (``memory_utilization`` of it, less the
    runtime's workspace) holds the weights plus ``kv_total_bytes``: a lower bound for any split
    (the activation reserve, which shrinks with tensor parallelism, is left out)."""
    weights = weights_bytes(model) if weight_bytes is None else weight_bytes
    rt = runtime_memory(acc)
    per_chip = acc.device_capacity_bytes * rt.memory_utilization - rt.workspace_bytes
    return max(1, math.ceil((weights + kv_total_bytes) / per_chip))


def tensor_parallel_degrees(model: ModelSpec, acc: Accelerator) -> list[int]:
    """Tensor-parallel degrees allowed: divisors of the attention heads (Megatron splits heads)
    no larger than the accelerator's tensor-parallel domain."""
    domain = 1 if acc.interconnect is None else acc.interconnect.domain_chips
    return [d for d in range(1, min(domain, model.num_heads) + 1) if model.num_heads % d == 0]


def check_deployment(model: ModelSpec, deployment: Deployment) -> None:
    """Raise ``ConfigError`` naming the field when the split is impossible for this model."""
    acc, tp, pp = deployment.accelerator, deployment.tensor_parallel, deployment.pipeline_parallel
    link = acc.interconnect
    if deployment.chips > 1 and link is None:
        raise ConfigError(
            f"{acc.name}: field interconnect: the catalog file describes no chip-to-chip links, "
            f"so only 1-chip deployments are possible"
        )
    if model.num_heads % tp:
        raise ConfigError(
            f"field tensor_parallel: {tp} does not divide {model.name}'s {model.num_heads} heads"
        )
    if link is not None and tp > link.domain_chips:
        raise ConfigError(
            f"field tensor_parallel: {tp} exceeds the {link.domain_chips} chips that {acc.name}'s "
            f"{link.kind} joins into one tensor-parallel domain; add pipeline stages instead"
        )
    # NOTE: a whole-graph compiler (Groq, Cerebras) may cut a layer across stages (a 32-layer
    # Mixtral on 576 Groq chips); a runtime pipelines whole layers.
    splits_layers = acc.device.managed_by is ManagedBy.COMPILER
    if pp > model.num_layers and not splits_layers:
        raise ConfigError(
            f"field pipeline_parallel: {pp} stages for {model.num_layers} layers; "
            f"at most one stage per layer"
        )


def _fits(model: ModelSpec, dep: Deployment, workload: Workload, rule: MemoryRule | None) -> bool:
    return chip_memory(model, dep, workload, rule).fits


def auto_deployment(
    model: ModelSpec, acc: Accelerator, workload: Workload, rule: MemoryRule | None = None
) -> Deployment:
    """The smallest deployment whose chips hold the weights plus the KV of ``workload`` under the
    KV-pool rule (``analytic.memory``), split the way
    the accelerator is usually deployed (``interconnect.parallelism``):

    - tensor: the smallest tensor-parallel group that fits (GPUs in an NVLink node, TPUs on
      ICI); pipeline stages of the largest group only when no group fits;
    - pipeline: the fewest stages at the smallest tensor-parallel degree (layers across Groq
      chips, across Cerebras wafers).

    Raises:
        CapacityError: when no split within the tensor-parallel domain and one stage per layer
            holds the model.
    """
    degrees = tensor_parallel_degrees(model, acc)
    link = acc.interconnect
    if link is None or link.parallelism is Parallelism.TENSOR:
        for tp in degrees:
            if _fits(model, Deployment(acc, tp), workload, rule):
                return Deployment(acc, tp)
        degrees = degrees[-1:]
    for tp in degrees:
        for pp in range(1, model.num_layers + 1):
            dep = Deployment(acc, tp, pp)
            if _fits(model, dep, workload, rule):
                return dep
    raise CapacityError(
        f"{model.name} does not fit any deployment of {acc.name}: at most TP {degrees[-1]} x "
        f"PP {model.num_layers} chips, and each holds "
        f"{acc.device_capacity_bytes / 1e9:.3g} GB of {acc.device_level}"
    )
