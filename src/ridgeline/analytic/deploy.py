"""Deployments of many chips: tensor and pipeline parallelism, and what one step costs on them.

A model too big for one chip runs on a ``Deployment``: ``tensor_parallel`` chips split every layer
(a tensor-parallel group), ``pipeline_parallel`` groups each hold a run of layers (a stage)::

    stage 0            stage 1                 stage p-1
    [chip .. chip] --> [chip .. chip] --> ... [chip .. chip] --(sampled tokens)--> stage 0
     tp chips, ring     tp chips, ring          tp chips, ring
     all-reduces        all-reduces             all-reduces

Formulas (each cited where it is used):

- Tensor parallel, Megatron-LM (Shoeybi et al., arXiv:1909.08053, §3): QKV and the MLP up/gate
  projections are split by columns, O and down by rows, so each chip holds 1/tp of every matrix
  and 1/tp of the heads and does 1/tp of their FLOPs; a layer's forward pass needs two
  all-reduces of the [tokens, hidden] activations (after attention, after the MLP); the
  vocab-parallel embedding needs one more. Norms are replicated. KV heads split while
  tp <= kv_heads and are replicated beyond (each chip then caches ceil(kv_heads/tp) heads).
  The vocab-parallel lm_head leaves each chip 1/tp of the logits, gathered for sampling.
- Ring all-reduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations", JPDC 69(2), 2009): 2(n-1) steps; each chip sends 2(n-1)/n x M bytes;
  time = 2(n-1) x hop latency + 2(n-1)/n x M / egress bandwidth. A ring all-gather is half of
  it: (n-1) steps, (n-1)/n x M bytes per chip.
- Pipeline, two schedules. Prefill fills and drains the pipe (GPipe, Huang et al.,
  arXiv:1811.06965, §2.2): p stages and m microbatches take (m + p - 1) slots of one stage's
  time, and the bubble, the fraction of a chip's step spent idle, is (p - 1)/(m + p - 1).
  Decode runs steady: m microbatches cycle through the stages, each one stage per slot, so every
  sequence gets a token every max(m, p) slots and a stage idles (p - m)/p of the time while the
  batch holds fewer microbatches than stages (derived; the GPipe count with the fill and drain
  of consecutive steps overlapped, as pipelined decoding engines keep microbatches in flight).

NOTE: stages are assumed balanced (each chip holds 1/(tp x pp) of the weights, embedding and
lm_head included): a whole-graph compiler (Groq, Cerebras) balances them; a GPU pipeline puts
the embedding and lm_head on the end stages, which this ignores. Communication does not overlap
with compute, and stages beyond one tensor-parallel domain use the same links (GPU pipelines
across nodes would use InfiniBand, which the catalog does not describe).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ridgeline.analytic.kv import DEFAULT_RESERVE_FRACTION, kv_bytes, weights_bytes
from ridgeline.analytic.ops import OpTerms, StepShape, UniformShape, op_terms
from ridgeline.analytic.roofline import Efficiency
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs.hardware import Accelerator, Interconnect, ManagedBy, Parallelism, Scope
from ridgeline.specs.model import ModelSpec

# Allreduces of one forward pass per layer under Megatron tensor parallelism, and the one of the
# vocab-parallel embedding (Shoeybi et al. 2019, §3).
ALLREDUCES_PER_LAYER = 2
ALLREDUCES_OUTSIDE_LAYERS = 1
# GPipe (Huang et al. 2019, §2.2) finds the fill-and-drain bubble negligible from m >= 4p
# microbatches; more microbatches only re-read the weights, so the search stops there. A steady
# decode pipeline has no bubble from m = p on.
MICROBATCHES_PER_STAGE = 4

_REPLICATED_OPS = ("attn_norm", "mlp_norm", "extra_norms", "final_norm")


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


class Binding(StrEnum):
    """The resource a deployment's step waits on."""

    COMPUTE = "compute"
    DEVICE_MEMORY = "device memory"
    ONCHIP_SRAM = "on-chip SRAM"
    INTERCONNECT = "interconnect"


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


@dataclass(frozen=True, slots=True)
class Collective:
    """One ring collective over ``chips`` chips of a message of ``message_bytes`` (per chip)."""

    chips: int
    message_bytes: float
    bytes_sent_per_chip: float
    steps: int
    time_s: float

    @property
    def bytes_sent(self) -> float:
        """Bytes on the links, all chips of the ring together."""
        return self.chips * self.bytes_sent_per_chip


def ring_allreduce(chips: int, message_bytes: float, link: Interconnect | None) -> Collective:
    """Ring all-reduce (Patarasuk & Yuan 2009): 2(n-1) steps, 2(n-1)/n x M bytes sent per chip,
    time 2(n-1) x latency + 2(n-1)/n x M / egress bandwidth. Free on one chip."""
    steps = 2 * (chips - 1)
    sent = steps / chips * message_bytes
    return Collective(chips, message_bytes, sent, steps, _link_time(steps, sent, link))


def ring_allgather(chips: int, message_bytes: float, link: Interconnect | None) -> Collective:
    """Ring all-gather of a ``message_bytes`` result (Patarasuk & Yuan 2009): n-1 steps,
    (n-1)/n x M bytes sent per chip."""
    steps = chips - 1
    sent = steps / chips * message_bytes
    return Collective(chips, message_bytes, sent, steps, _link_time(steps, sent, link))


def _link_time(hops: int, sent_bytes: float, link: Interconnect | None) -> float:
    if hops == 0:
        return 0.0
    assert link is not None, "validated by check_deployment"
    return hops * link.latency_s + sent_bytes / link.egress_bandwidth_bytes_per_s


def bubble_fraction(
    stages: int, microbatches: int, schedule: Schedule = Schedule.FILL_DRAIN
) -> float:
    """Idle fraction of a chip's step: (p - 1)/(m + p - 1) filling and draining (GPipe, Huang
    et al. 2019, §2.2); (p - m)/p in a steady pipeline with fewer microbatches than stages."""
    slots = pipeline_slots(stages, microbatches, schedule)
    return (slots - microbatches) / slots


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
    if pp > model.num_layers:
        raise ConfigError(
            f"field pipeline_parallel: {pp} stages for {model.num_layers} layers; "
            f"at most one stage per layer"
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


@dataclass(frozen=True, slots=True)
class SlotCost:
    """One pipeline slot: one chip of one stage working on one microbatch.

    Stages are balanced, so every stage does 1/pp of the model and of the collectives.
    """

    flops: float
    bytes: float
    compute_s: float
    memory_s: float
    allreduce: Collective
    allreduces_per_pass: int
    logits_gather: Collective
    send_bytes: float
    send_s: float
    stages: int

    @property
    def tensor_parallel_s(self) -> float:
        """All-reduces and the logits gather of this slot (1/pp of a pass through the model)."""
        per_pass = self.allreduces_per_pass * self.allreduce.time_s + self.logits_gather.time_s
        return per_pass / self.stages

    @property
    def interconnect_s(self) -> float:
        return self.tensor_parallel_s + self.send_s

    @property
    def time_s(self) -> float:
        return self.compute_s + self.memory_s + self.interconnect_s

    @property
    def interconnect_bytes_per_pass(self) -> float:
        """Bytes on the links while one microbatch passes every stage, all chips together."""
        tp_bytes = self.allreduces_per_pass * self.allreduce.bytes_sent
        return tp_bytes + self.logits_gather.bytes_sent + (self.stages - 1) * self.send_bytes


def _split(t: OpTerms, model: ModelSpec, tp: int) -> tuple[float, float]:
    """FLOPs and device-memory bytes of one op on one chip of a tensor-parallel group
    (Megatron-LM §3: heads and matrices split, norms replicated, KV heads as ``kv_share``)."""
    if t.name in _REPLICATED_OPS:
        return float(t.flops), float(t.bytes_read + t.bytes_written)
    kv = t.kv_read_bytes + t.kv_write_bytes
    other = t.weight_bytes + t.act_read_bytes + t.act_write_bytes
    return float(t.flops) / tp, float(kv * kv_share(model, tp) + other / tp)


def microbatch_shape(workload: Workload, microbatches: int) -> UniformShape:
    """The average microbatch of a step split ``microbatches`` ways.

    Decode splits the sequences (GPipe's microbatches). Prefill splits each prompt into
    consecutive chunks that follow each other through the stages (TeraPipe, Li et al., ICML
    2021): chunk j sees j earlier chunks as cached context, so the average chunk has
    prior + new x (m - 1) / (2m) cached tokens, which keeps every sum over chunks exact (without
    sliding windows).
    """
    new, prior, m = workload.new_tokens_per_seq, workload.prior_tokens_per_seq, microbatches
    if workload.phase is Phase.DECODE:
        return UniformShape(workload.batch / m, new, prior)
    return UniformShape(workload.batch, new / m, prior + new * (m - 1) / (2 * m))


def _microbatch_units(workload: Workload) -> int:
    """How many ways a step can be split: its sequences (decode) or prompt tokens (prefill)."""
    return workload.batch if workload.phase is Phase.DECODE else workload.new_tokens_per_seq


@dataclass(frozen=True, slots=True)
class _ChipWork:
    flops: float
    bytes: float
    compute_s: float
    memory_s: float


def _chip_work(
    model: ModelSpec, dep: Deployment, shape: StepShape, dt: Dtypes, eff: Efficiency
) -> _ChipWork:
    """One chip's share of a microbatch's ops, each op at its own roofline time
    (max of FLOPs / peak and bytes / bandwidth), summed by the side that bounds it."""
    acc, tp, pp = dep.accelerator, dep.tensor_parallel, dep.pipeline_parallel
    peak = acc.peak(dt.compute) * eff.compute
    bw = acc.device_bandwidth_bytes_per_s * eff.bandwidth
    flops = nbytes = compute_s = memory_s = 0.0
    for f_all, b_all in chip_op_costs(model, tp, shape, dt):
        f, b = f_all / pp, b_all / pp
        flops, nbytes = flops + f, nbytes + b
        if f / peak > b / bw:
            compute_s += f / peak
        else:
            memory_s += b / bw
    return _ChipWork(flops, nbytes, compute_s, memory_s)


@dataclass(frozen=True, slots=True)
class PassLinks:
    """The link traffic of one microbatch passing every stage once."""

    allreduce: Collective
    allreduces: int
    logits_gather: Collective
    send_bytes: float
    send_s: float
    stages: int

    @property
    def tensor_parallel_s(self) -> float:
        return self.allreduces * self.allreduce.time_s + self.logits_gather.time_s

    @property
    def time_s(self) -> float:
        """Link time on the critical path of a lone microbatch: every all-reduce, the logits
        gather, and one send per stage (the last returns the sampled tokens to the first)."""
        return self.tensor_parallel_s + self.stages * self.send_s


def pass_links(
    model: ModelSpec, dep: Deployment, num_seqs: float, num_tokens: float, dt: Dtypes
) -> PassLinks:
    """All-reduces of the [tokens, hidden] activations (Megatron-LM §3), the all-gather of the
    logits of ``num_seqs`` rows, and the stage-to-stage sends of one microbatch."""
    link, pp, tp = dep.accelerator.interconnect, dep.pipeline_parallel, dep.tensor_parallel
    activation = num_tokens * model.hidden_size * dt.act.bytes
    logits = num_seqs * model.vocab_size * dt.act.bytes
    return PassLinks(
        allreduce=ring_allreduce(tp, activation, link),
        allreduces=ALLREDUCES_PER_LAYER * model.num_layers + ALLREDUCES_OUTSIDE_LAYERS,
        logits_gather=ring_allgather(tp, logits, link),
        send_bytes=activation,
        send_s=0.0 if pp == 1 else _link_time(1, activation, link),
        stages=pp,
    )


def chip_op_costs(
    model: ModelSpec, tensor_parallel: int, shape: StepShape, dt: Dtypes
) -> list[tuple[float, float]]:
    """(FLOPs, device bytes) of every op of ``shape`` on one chip of a tensor-parallel group,
    summed over all stages (Megatron-LM §3 split, see ``_split``)."""
    return [_split(t, model, tensor_parallel) for t in op_terms(model, shape, dt)]


def _slot(
    model: ModelSpec, dep: Deployment, workload: Workload, microbatches: int, eff: Efficiency
) -> SlotCost:
    """Cost of one slot: one chip's work on the average microbatch, its share of the
    tensor-parallel collectives, and the send to the next stage."""
    shape = microbatch_shape(workload, microbatches)
    work = _chip_work(model, dep, shape, workload.dtypes, eff)
    # NOTE: prefill samples once per prompt, so its logits are spread over the chunks.
    rows = workload.batch / microbatches
    links = pass_links(model, dep, rows, float(shape.num_tokens), workload.dtypes)
    return SlotCost(
        flops=work.flops,
        bytes=work.bytes,
        compute_s=work.compute_s,
        memory_s=work.memory_s,
        allreduce=links.allreduce,
        allreduces_per_pass=links.allreduces,
        logits_gather=links.logits_gather,
        send_bytes=links.send_bytes,
        send_s=links.send_s,
        stages=links.stages,
    )


@dataclass(frozen=True, slots=True)
class DeploymentCost:
    """One step of ``workload`` on a deployment: per-chip work, collectives, sends, the
    pipeline bubble, step time, tokens/s per sequence and for the deployment, and what binds.

    The step runs ``microbatches`` microbatches through ``pipeline_parallel`` stages in
    ``pipeline_slots`` slots (fill-drain for prefill, steady for decode); every slot ends with a
    send to the next stage, the last one with the sampled tokens back to the first (NOTE:
    charged as a full activation send).
    """

    model: str
    deployment: Deployment
    workload: Workload
    microbatches: int
    memory: ChipMemory
    slot: SlotCost
    efficiency: Efficiency

    @property
    def schedule(self) -> Schedule:
        return schedule_of(self.workload)

    @property
    def slots(self) -> int:
        return pipeline_slots(self.deployment.pipeline_parallel, self.microbatches, self.schedule)

    @property
    def step_time_s(self) -> float:
        """``slots`` slots of one stage's time plus the fixed per-step overhead."""
        return self.slots * self.slot.time_s + self.efficiency.step_overhead_s

    @property
    def bubble_fraction(self) -> float:
        return bubble_fraction(self.deployment.pipeline_parallel, self.microbatches, self.schedule)

    @property
    def bubble_s(self) -> float:
        """Time a chip idles in the step: slots in which it has no microbatch."""
        return (self.slots - self.microbatches) * self.slot.time_s

    @property
    def chip_flops(self) -> float:
        """FLOPs one chip does in the step (all its microbatches)."""
        return self.microbatches * self.slot.flops

    @property
    def chip_bytes(self) -> float:
        """Device-memory bytes one chip moves in the step (weights re-read per microbatch)."""
        return self.microbatches * self.slot.bytes

    @property
    def interconnect_bytes(self) -> float:
        """Bytes on the chip-to-chip links in the step, all chips together."""
        return self.microbatches * self.slot.interconnect_bytes_per_pass

    @property
    def tokens_per_s_per_seq(self) -> float:
        """New tokens per second one sequence sees (per user)."""
        return self.workload.new_tokens_per_seq / self.step_time_s

    @property
    def tokens_per_s(self) -> float:
        """New tokens per second of the whole deployment (per system)."""
        return self.workload.num_new_tokens / self.step_time_s

    @property
    def binding(self) -> Binding:
        """The largest share of a slot: compute-bound ops, memory-bound ops, or the links."""
        s = self.slot
        shares = {
            Binding.COMPUTE: s.compute_s,
            _memory_binding(self.deployment.accelerator): s.memory_s,
            Binding.INTERCONNECT: s.interconnect_s,
        }
        return max(shares, key=lambda k: shares[k])

    def to_dict(self) -> dict[str, Any]:
        s, w = self.slot, self.workload
        return {
            "schema": "ridgeline.deploy/1",
            "model": self.model,
            "deployment": self.deployment.to_dict(),
            "phase": w.phase.value,
            "batch": w.batch,
            "context": w.context_len,
            "memory_per_chip": self.memory.to_dict(),
            "microbatches": self.microbatches,
            "schedule": self.schedule.value,
            "chip_flops": self.chip_flops,
            "chip_bytes": self.chip_bytes,
            "slot": {
                "compute_s": s.compute_s,
                "memory_s": s.memory_s,
                "tensor_parallel_s": s.tensor_parallel_s,
                "send_s": s.send_s,
                "time_s": s.time_s,
            },
            "allreduce": {
                "chips": s.allreduce.chips,
                "message_bytes": s.allreduce.message_bytes,
                "bytes_sent_per_chip": s.allreduce.bytes_sent_per_chip,
                "time_s": s.allreduce.time_s,
                "per_pass": s.allreduces_per_pass,
            },
            "interconnect_bytes": self.interconnect_bytes,
            "bubble_fraction": self.bubble_fraction,
            "bubble_s": self.bubble_s,
            "step_time_s": self.step_time_s,
            "tokens_per_s_per_seq": self.tokens_per_s_per_seq,
            "tokens_per_s": self.tokens_per_s,
            "binding": self.binding.value,
        }


def _memory_binding(acc: Accelerator) -> Binding:
    """On-chip SRAM where a compiler places weights in per-core or per-chip SRAM (Groq,
    Cerebras); device memory otherwise (HBM, LPDDR5)."""
    dev = acc.device
    on_chip = dev.managed_by is ManagedBy.COMPILER and dev.scope in (Scope.CORE, Scope.CHIP)
    return Binding.ONCHIP_SRAM if on_chip else Binding.DEVICE_MEMORY


def _microbatch_choices(workload: Workload, stages: int, given: int | None) -> range:
    units = _microbatch_units(workload)
    if given is not None:
        if not 1 <= given <= units:
            raise ConfigError(
                f"field microbatches: must be in 1..{units} (sequences at decode, prompt tokens "
                f"at prefill), got {given}"
            )
        return range(given, given + 1)
    if stages == 1:
        return range(1, 2)
    most = stages if workload.phase is Phase.DECODE else MICROBATCHES_PER_STAGE * stages
    return range(1, min(units, most) + 1)


def deployment_cost(
    model: ModelSpec,
    deployment: Deployment,
    workload: Workload,
    efficiency: Efficiency | None = None,
    microbatches: int | None = None,
    reserve_fraction: float | None = None,
) -> DeploymentCost:
    """Cost of one step of ``workload`` on ``deployment`` (whether or not it fits: see
    ``memory.fits``). ``microbatches`` defaults to the count with the shortest step among
    1..min(sequences, p) at decode and 1..min(prompt tokens, 4p) at prefill."""
    check_deployment(model, deployment)
    eff = efficiency or Efficiency()
    memory = chip_memory(model, deployment, workload, reserve_fraction)
    choices = _microbatch_choices(workload, deployment.pipeline_parallel, microbatches)
    costs = [
        DeploymentCost(
            model.name,
            deployment,
            workload,
            m,
            memory,
            _slot(model, deployment, workload, m, eff),
            eff,
        )
        for m in choices
    ]
    return min(costs, key=lambda c: c.step_time_s)


def deploy_step(
    model: ModelSpec,
    acc: Accelerator,
    workload: Workload,
    tensor_parallel: int | None = None,
    pipeline_parallel: int | None = None,
    efficiency: Efficiency | None = None,
    reserve_fraction: float | None = None,
) -> DeploymentCost:
    """The step cost of ``model`` on ``acc``: on the given split, or on the smallest one that
    holds the weights plus the KV of ``workload`` when neither degree is given.

    Raises:
        ConfigError: an impossible split (the message names the field).
        CapacityError: a given split whose chips cannot hold the weights plus the KV.
    """
    if tensor_parallel is None and pipeline_parallel is None:
        dep = auto_deployment(model, acc, workload, reserve_fraction)
    else:
        tp = 1 if tensor_parallel is None else tensor_parallel
        dep = Deployment(acc, tp, 1 if pipeline_parallel is None else pipeline_parallel)
    cost = deployment_cost(model, dep, workload, efficiency, reserve_fraction=reserve_fraction)
    mem = cost.memory
    if not mem.fits:
        raise CapacityError(
            f"{model.name} on {dep.label}: each chip needs {mem.needed_bytes / 1e9:.3g} GB "
            f"(weights + KV) but {acc.device_level} offers {mem.available_bytes / 1e9:.3g} GB "
            f"after the reserve; raise --tp or --pp, or give neither for the smallest that fits"
        )
    return cost
