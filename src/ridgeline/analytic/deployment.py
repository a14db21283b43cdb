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

from ridgeline.analytic.kv import DEFAULT_RESERVE_FRACTION, kv_bytes, weights_bytes
from ridgeline.analytic.workload import Phase, Workload
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs.hardware import Accelerator, ManagedBy, Parallelism
from ridgeline.specs.model import ModelSpec


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
    """``tensor_parallel`` x ``pipeline_parallel`` chips of one accelerator running one model.

    ``expert_parallel`` (1, or the tensor-parallel degree: vLLM's ``--enable-expert-parallel``
    on one data-parallel rank) puts E / ep whole experts on each chip of a stage instead of
    1/tp of every expert. NOTE: a chip then holds and reads, on average, the same expert bytes
    and FLOPs as under the tensor-parallel split, and its dispatch and combine move the same
    activations as the all-reduce they replace, so it is priced alike; the imbalance between
    chips (the step waits for the chip whose experts drew the most tokens) is not modelled.
    """

    accelerator: Accelerator
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    expert_parallel: int = 1

    def __post_init__(self) -> None:
        for field in ("tensor_parallel", "pipeline_parallel", "expert_parallel"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"field {field}: must be an integer >= 1, got {value!r}")

    @property
    def chips(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def label(self) -> str:
        """``8 x h100-sxm (TP 8 x PP 1)``."""
        tp, pp, ep = self.tensor_parallel, self.pipeline_parallel, self.expert_parallel
        experts = f", EP {ep}" if ep > 1 else ""
        return f"{self.chips} x {self.accelerator.name} (TP {tp} x PP {pp}{experts})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator.name,
            "chips": self.chips,
            "tensor_parallel": self.tensor_parallel,
            "pipeline_parallel": self.pipeline_parallel,
            "expert_parallel": self.expert_parallel,
        }


@dataclass(frozen=True, slots=True)
class ChipMemory:
    """What one chip of a deployment holds, against what its device memory offers."""

    weights_bytes: float
    kv_bytes: float
    capacity_bytes: float
    reserve_bytes: float

    @property
    def needed_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes

    @property
    def available_bytes(self) -> float:
        return self.capacity_bytes - self.reserve_bytes

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.available_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "weights_bytes": self.weights_bytes,
            "kv_bytes": self.kv_bytes,
            "needed_bytes": self.needed_bytes,
            "capacity_bytes": self.capacity_bytes,
            "reserve_bytes": self.reserve_bytes,
            "fits": self.fits,
        }


def default_reserve_fraction(acc: Accelerator) -> float:
    """Headroom kept free on each chip: 10% where a runtime allocator manages device memory
    (vLLM's gpu_memory_utilization = 0.9), none where a compiler places every byte statically.

    NOTE: the compiler-managed case ignores activations (kilobytes per token at decode).
    """
    return DEFAULT_RESERVE_FRACTION if acc.device.managed_by is ManagedBy.RUNTIME else 0.0


def _reserve(acc: Accelerator, reserve_fraction: float | None) -> float:
    r = default_reserve_fraction(acc) if reserve_fraction is None else reserve_fraction
    if not 0 <= r < 1:
        raise ConfigError(f"field reserve_fraction: must be in [0, 1), got {r}")
    return r


def kv_share(model: ModelSpec, tensor_parallel: int) -> float:
    """Fraction of the KV cache one chip of a tensor-parallel group holds: ceil(kv/tp)/kv heads
    (KV heads replicate once tp exceeds them; MLA's single latent is on every chip)."""
    heads = model.kv_heads_cached
    return math.ceil(heads / tensor_parallel) / heads


def chip_memory(
    model: ModelSpec, deployment: Deployment, workload: Workload, reserve_fraction: float | None
) -> ChipMemory:
    """Weights and KV (at the end of the step) per chip, against the usable device memory."""
    dt, tp, pp = workload.dtypes, deployment.tensor_parallel, deployment.pipeline_parallel
    acc = deployment.accelerator
    end_context = workload.prior_tokens_per_seq + workload.new_tokens_per_seq
    kv_total = kv_bytes(model, workload.batch, end_context, dt.kv)
    capacity = acc.device_capacity_bytes
    return ChipMemory(
        weights_bytes=weights_bytes(model, dt.weight) / deployment.chips,
        kv_bytes=kv_total * kv_share(model, tp) / pp,
        capacity_bytes=capacity,
        reserve_bytes=_reserve(acc, reserve_fraction) * capacity,
    )


def min_chips(
    model: ModelSpec,
    acc: Accelerator,
    kv_total_bytes: float = 0.0,
    reserve_fraction: float | None = None,
    weight_bytes: float | None = None,
) -> int:
    """Fewest chips whose device memory holds the weights plus ``kv_total_bytes``:
    ceil((weights + KV) / (usable capacity x (1 - reserve))), a lower bound for any split."""
    weights = weights_bytes(model) if weight_bytes is None else weight_bytes
    per_chip = acc.device_capacity_bytes * (1 - _reserve(acc, reserve_fraction))
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
    _check_experts(model, deployment)
    # NOTE: a whole-graph compiler (Groq, Cerebras) may cut a layer across stages (a 32-layer
    # Mixtral on 576 Groq chips); a runtime pipelines whole layers.
    splits_layers = acc.device.managed_by is ManagedBy.COMPILER
    if pp > model.num_layers and not splits_layers:
        raise ConfigError(
            f"field pipeline_parallel: {pp} stages for {model.num_layers} layers; "
            f"at most one stage per layer"
        )


def _check_experts(model: ModelSpec, deployment: Deployment) -> None:
    ep, tp = deployment.expert_parallel, deployment.tensor_parallel
    if ep == 1:
        return
    if model.moe is None or not model.is_moe:
        raise ConfigError(f"field expert_parallel: {model.name} has no experts to spread")
    if ep != tp:
        raise ConfigError(
            f"field expert_parallel: {ep} must equal tensor_parallel ({tp}): experts spread "
            "over the chips of a stage"
        )
    if model.moe.num_experts % ep:
        raise ConfigError(
            f"field expert_parallel: {ep} does not divide {model.name}'s "
            f"{model.moe.num_experts} experts"
        )


def _fits(model: ModelSpec, dep: Deployment, workload: Workload, reserve: float | None) -> bool:
    return chip_memory(model, dep, workload, reserve).fits


def auto_deployment(
    model: ModelSpec, acc: Accelerator, workload: Workload, reserve_fraction: float | None = None
) -> Deployment:
    """The smallest deployment that holds the weights plus the KV of ``workload``, split the way
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
            if _fits(model, Deployment(acc, tp), workload, reserve_fraction):
                return Deployment(acc, tp)
        degrees = degrees[-1:]
    for tp in degrees:
        for pp in range(1, model.num_layers + 1):
            dep = Deployment(acc, tp, pp)
            if _fits(model, dep, workload, reserve_fraction):
                return dep
    raise CapacityError(
        f"{model.name} does not fit any deployment of {acc.name}: at most TP {degrees[-1]} x "
        f"PP {model.num_layers} chips, and each holds "
        f"{acc.device_capacity_bytes / 1e9:.3g} GB of {acc.device_level}"
    )
