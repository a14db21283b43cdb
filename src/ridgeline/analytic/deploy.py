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

from dataclasses import dataclass
from typing import Any

from ridgeline.analytic.binding import BusyTime, Verdict, share_verdict
from ridgeline.analytic.calibrated import (
    OpKind,
    fixed_step_seconds,
    kernel_counts,
    kind_of,
    op_rates,
    op_seconds,
)
from ridgeline.analytic.collectives import (
    Collective,
    LinkTerms,
    ring_allgather,
    ring_allreduce,
    send_terms,
)
from ridgeline.analytic.deployment import (
    ChipMemory,
    Deployment,
    Schedule,
    auto_deployment,
    bubble_fraction,
    check_deployment,
    chip_memory,
    kv_share,
    min_chips,
    pipeline_slots,
    schedule_of,
    tensor_parallel_degrees,
)
from ridgeline.analytic.memory import MemoryRule, kv_fit
from ridgeline.analytic.ops import OpClass, OpTerms, StepShape, UniformShape, op_terms
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs.calibration import IDEAL, Calibration, CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.model import ModelSpec

__all__ = [
    "ALLREDUCES_OUTSIDE_LAYERS",
    "ALLREDUCES_PER_LAYER",
    "ChipMemory",
    "Collective",
    "Deployment",
    "LinkTerms",
    "DeploymentCost",
    "PassLinks",
    "Schedule",
    "SlotCost",
    "auto_deployment",
    "bubble_fraction",
    "check_deployment",
    "chip_memory",
    "chip_op_costs",
    "deploy_step",
    "deployment_cost",
    "kv_share",
    "microbatch_shape",
    "min_chips",
    "pass_links",
    "pipeline_slots",
    "ring_allgather",
    "ring_allreduce",
    "schedule_of",
    "tensor_parallel_degrees",
]

# Allreduces of one forward pass per layer under Megatron tensor parallelism, and the one of the
# vocab-parallel embedding (Shoeybi et al. 2019, §3).
ALLREDUCES_PER_LAYER = 2
ALLREDUCES_OUTSIDE_LAYERS = 1
# GPipe (Huang et al. 2019, §2.2) finds the fill-and-drain bubble negligible from m >= 4p
# microbatches; more microbatches only re-read the weights, so the search stops there. A steady
# decode pipeline has no bubble from m = p on.
MICROBATCHES_PER_STAGE = 4

_REPLICATED_OPS = ("attn_norm", "mlp_norm", "extra_norms", "final_norm")
# Ops of a MoE layer whose activations every chip of a tensor-parallel group moves in full when
# each chip holds a slice of every expert (no expert parallelism): the permutations copy every
# token's rows, and each chip's expert GEMMs read every routed row whole (the column-parallel
# up/gate input) and write every routed row's full-width partial sum (the row-parallel down
# output, before the all-reduce; Megatron-LM §3). With the experts spread instead, each chip
# moves the rows routed to its own experts.
_EXPERT_SLICE_OPS = ("moe.permute", "moe.experts", "moe.unpermute")


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
    layer_s: float = 0.0  # the stage's share of the per-layer and per-GEMM latencies (calibrated)

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
        return self.compute_s + self.memory_s + self.layer_s + self.interconnect_s

    @property
    def interconnect_bytes_per_pass(self) -> float:
        """Bytes on the links while one microbatch passes every stage, all chips together."""
        tp_bytes = self.allreduces_per_pass * self.allreduce.bytes_sent
        return tp_bytes + self.logits_gather.bytes_sent + (self.stages - 1) * self.send_bytes


@dataclass(frozen=True, slots=True)
class ChipOp:
    """One op's FLOPs and device-memory bytes on one chip, the rows of its GEMM (0 when it
    is not one; a tensor-parallel split leaves the rows whole), and its kind (class and formats,
    which set its compute rate: ``analytic.calibrated.compute_term``)."""

    flops: float
    bytes: float
    gemm_rows: float
    kv_bytes: float = 0.0  # of ``bytes``, the KV cache's
    kind: OpKind = OpKind(OpClass.ELEMENTWISE, DType.BF16)


def _split(t: OpTerms, model: ModelSpec, tp: int, ep: int = 1) -> ChipOp:
    """FLOPs and device-memory bytes of one op on one chip of a tensor-parallel group
    (Megatron-LM §3: heads and matrices split, norms replicated, KV heads as ``kv_share``); a
    MoE layer's permutations and expert activations whole on every chip while its experts are
    sliced (``ep`` = 1: ``_EXPERT_SLICE_OPS``)."""
    rows, kind = float(t.gemm_rows), kind_of(t)
    if t.name in _REPLICATED_OPS:
        return ChipOp(float(t.flops), float(t.bytes_read + t.bytes_written), rows, kind=kind)
    kv = float(t.kv_read_bytes + t.kv_write_bytes) * kv_share(model, tp)
    act = t.act_read_bytes + t.act_write_bytes
    if ep == 1 and t.name in _EXPERT_SLICE_OPS:
        flops = t.flops if t.name == "moe.unpermute" else t.flops / tp
        return ChipOp(float(flops), float(kv + t.weight_bytes / tp + act), rows, kv, kind)
    other = t.weight_bytes + act
    return ChipOp(float(t.flops) / tp, float(kv + other / tp), rows, kv, kind)


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
    model: ModelSpec, dep: Deployment, shape: StepShape, dt: Dtypes, cal: Calibration
) -> _ChipWork:
    """One chip's share of a microbatch's ops, each op at its own roofline time
    (max of FLOPs / peak and bytes / bandwidth, calibrated: ``analytic.calibrated``), summed by
    the side that bounds it."""
    acc, tp, pp = dep.accelerator, dep.tensor_parallel, dep.pipeline_parallel
    flops = nbytes = compute_s = memory_s = 0.0
    for op in chip_op_costs(model, tp, shape, dt, dep.expert_parallel):
        f, b = op.flops / pp, op.bytes / pp
        flops, nbytes = flops + f, nbytes + b
        rates = op_rates(acc, op.kind, cal)
        c_s, m_s = op_seconds(f, b, op.kv_bytes / pp, op.gemm_rows, rates, cal)
        if c_s > m_s:
            compute_s += float(c_s)
        else:
            memory_s += float(m_s)
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
    send: LinkTerms = LinkTerms()

    @property
    def tensor_parallel_s(self) -> float:
        return self.allreduces * self.allreduce.time_s + self.logits_gather.time_s

    @property
    def terms(self) -> LinkTerms:
        """``time_s`` split by calibration term (``analytic.collectives.LinkTerms``)."""
        tp = self.allreduce.terms.scaled(self.allreduces) + self.logits_gather.terms
        return tp + self.send.scaled(self.stages)

    @property
    def time_s(self) -> float:
        """Link time on the critical path of a lone microbatch: every all-reduce, the logits
        gather, and one send per stage (the last returns the sampled tokens to the first)."""
        return self.tensor_parallel_s + self.stages * self.send_s


def pass_links(
    model: ModelSpec,
    dep: Deployment,
    num_seqs: float,
    num_tokens: float,
    dt: Dtypes,
    cal: Calibration = IDEAL,
) -> PassLinks:
    """All-reduces of the [tokens, hidden] activations (Megatron-LM §3), the all-gather of the
    logits of ``num_seqs`` rows, and the stage-to-stage sends of one microbatch, all in the
    residual stream's format (``Dtypes.stream``: TensorRT-LLM and vLLM all-reduce in bf16
    beside fp8 GEMMs)."""
    link, pp, tp = dep.accelerator.interconnect, dep.pipeline_parallel, dep.tensor_parallel
    activation = num_tokens * model.hidden_size * dt.stream.bytes
    logits = num_seqs * model.vocab_size * dt.stream.bytes
    send = LinkTerms() if pp == 1 else send_terms(activation, link)
    return PassLinks(
        allreduce=ring_allreduce(tp, activation, link, cal),
        allreduces=ALLREDUCES_PER_LAYER * model.num_layers + ALLREDUCES_OUTSIDE_LAYERS,
        logits_gather=ring_allgather(tp, logits, link, cal),
        send_bytes=activation,
        send_s=send.seconds(cal),
        stages=pp,
        send=send,
    )


def chip_op_costs(
    model: ModelSpec,
    tensor_parallel: int,
    shape: StepShape,
    dt: Dtypes,
    expert_parallel: int = 1,
) -> list[ChipOp]:
    """FLOPs, device bytes and GEMM rows of every op of ``shape`` on one chip of a
    tensor-parallel group, summed over all stages (Megatron-LM §3 split, see ``_split``)."""
    return [_split(t, model, tensor_parallel, expert_parallel) for t in op_terms(model, shape, dt)]


def _slot(
    model: ModelSpec, dep: Deployment, workload: Workload, microbatches: int, cal: Calibration
) -> SlotCost:
    """Cost of one slot: one chip's work on the average microbatch, its layers' fixed latency,
    its share of the tensor-parallel collectives, and the send to the next stage."""
    shape = microbatch_shape(workload, microbatches)
    work = _chip_work(model, dep, shape, workload.dtypes, cal)
    # NOTE: prefill samples once per prompt, so its logits are spread over the chunks.
    rows = workload.batch / microbatches
    links = pass_links(model, dep, rows, float(shape.num_tokens), workload.dtypes, cal)
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
        layer_s=float(
            fixed_step_seconds(model.num_layers, cal, kernels=kernel_counts(model, workload.dtypes))
            - cal.step_latency_s
        )
        / dep.pipeline_parallel,
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
    pricing: Pricing

    @property
    def mode(self) -> CostMode:
        return self.pricing.mode

    @property
    def calibration(self) -> Calibration:
        return self.pricing.calibration

    @property
    def schedule(self) -> Schedule:
        return schedule_of(self.workload)

    @property
    def slots(self) -> int:
        return pipeline_slots(self.deployment.pipeline_parallel, self.microbatches, self.schedule)

    @property
    def step_time_s(self) -> float:
        """``slots`` slots of one stage's time plus the fixed per-step overhead."""
        cal = self.calibration
        host = cal.step_latency_s + self.workload.batch * cal.sequence_latency_s
        return self.slots * self.slot.time_s + host

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
    def binding(self) -> Verdict:
        """The largest share of a slot: compute-bound ops, memory-bound ops, the links or the
        fixed latency (``analytic.binding.share_verdict``, in this cost's mode)."""
        s = self.slot
        busy = BusyTime(s.compute_s, s.memory_s, s.interconnect_s, s.layer_s)
        return share_verdict(busy, self.mode, self.deployment.accelerator.device_level)

    def to_dict(self) -> dict[str, Any]:
        s, w = self.slot, self.workload
        return {
            "schema": "ridgeline.deploy/2",
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
                "layer_s": s.layer_s,
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
            "mode": self.mode.value,
            "pricing": self.pricing.to_dict(),
            "tokens_per_s_per_seq": self.tokens_per_s_per_seq,
            "tokens_per_s": self.tokens_per_s,
            "binding": self.binding.text,
        }


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
    pricing: Pricing,
    workload: Workload,
    microbatches: int | None = None,
    rule: MemoryRule | None = None,
) -> DeploymentCost:
    """Cost of one step of ``workload`` on ``pricing``'s deployment (whether or not it fits:
    see ``memory.fits``, under the KV-pool rule ``rule``), ideal or calibrated as ``pricing``
    says; the workload's data types are the step's. ``microbatches`` defaults to the count with
    the shortest step among 1..min(sequences, p) at decode and 1..min(prompt tokens, 4p) at
    prefill."""
    deployment, cal = pricing.deployment, pricing.calibration
    check_deployment(model, deployment)
    memory = chip_memory(model, deployment, workload, rule)
    choices = _microbatch_choices(workload, deployment.pipeline_parallel, microbatches)
    costs = [
        DeploymentCost(
            model.name,
            deployment,
            workload,
            m,
            memory,
            _slot(model, deployment, workload, m, cal),
            pricing,
        )
        for m in choices
    ]
    return min(costs, key=lambda c: c.step_time_s)


def deploy_step(
    model: ModelSpec,
    pricing: Pricing,
    workload: Workload,
    choose: bool = False,
    rule: MemoryRule | None = None,
) -> DeploymentCost:
    """The step cost of ``model`` on ``pricing``'s deployment, or (``choose``) on the smallest
    deployment of its accelerator that holds the weights plus the KV of ``workload``.

    Raises:
        ConfigError: an impossible split (the message names the field).
        CapacityError: a given split whose chips cannot hold the weights plus the KV.
    """
    acc = pricing.accelerator
    if choose:
        pricing = pricing.on(auto_deployment(model, acc, workload, rule))
    dep = pricing.deployment
    cost = deployment_cost(model, pricing, workload, rule=rule)
    mem = cost.memory
    if not mem.fits:
        raise CapacityError(
            f"{model.name} on {dep.label}: each chip needs {mem.needed_bytes / 1e9:.3g} GB "
            f"(weights + KV) but {acc.device_level} offers {mem.available_bytes / 1e9:.3g} GB "
            f"under the KV-pool rule ({mem.budget.sentence()}){_what_fits(model, cost, rule)}; "
            f"raise --tp or --pp, or give neither for the smallest that fits"
        )
    return cost


def _what_fits(model: ModelSpec, cost: DeploymentCost, rule: MemoryRule | None) -> str:
    """``; the largest batch that fits at 4,096 tokens is 2``, or, when the weights and the
    reserve leave no KV at all, the ``memory_utilization`` that would leave some."""
    w, budget = cost.workload, cost.memory.budget
    if not budget.fits:
        need = (budget.weights_bytes + budget.reserve_bytes) / budget.capacity_bytes
        if need >= 1:
            return "; the weights and the reserve alone exceed each chip"
        return (
            f"; the weights and the reserve leave no KV at all (memory_utilization above "
            f"{need:.3f} would leave some)"
        )
    context = w.prior_tokens_per_seq + w.new_tokens_per_seq
    fit = kv_fit(model, cost.deployment, w.dtypes, (context, w.batch), rule)
    return f"; the largest batch that fits at {context:,} tokens is {fit.max_batch or 0:,}"
