"""The KV pool: one rule for every path that sizes it (the simulator, ``predict``, sweeps, the
engine, ``kv`` and ``deploy``), in vLLM's ``gpu_memory_utilization`` meaning.

The engine may use ``u`` of each chip's device memory for everything it keeps there: its share of
the weights, a reserve for one step's activations and the runtime's workspace, and the KV cache,
which gets what is left (vLLM ``Worker.determine_available_memory``: profile one step, subtract,
give the rest to the KV cache; the memory profile it logs is quoted in
``data/runtime_memory.toml``)::

    kv per chip = u × capacity − weights / chips − reserve
    reserve     = activation_share × (T × act_bytes × (hidden + m × ffn / tp)   the MLP's widest
                                      + S × vocab × sampler_bytes_per_logit)    point; the sampler
                  + workspace
    KV of a replica = kv per chip × pp / kv_share(tp)    (the chips holding distinct KV heads)

T is the profile step's tokens (``max_num_batched_tokens``), S its sequences (``max_num_seqs``):
vLLM's profile run is one forward pass of T tokens and a sampler run over S sequences. m = 3 for
a gated MLP (the gate and up projections' outputs, 2·ffn, live beside their product, ffn) and 2
otherwise; an MoE layer's ffn is the top-k experts' plus the shared one's. ``u`` defaults to the
runtime's (0.9, vLLM's default, under a runtime allocator; 1 where a whole-graph compiler places
every byte) and the other terms are the runtime's (``specs.runtime_memory``).

Megatron-LM splits the KV heads over the tensor-parallel chips while tp <= kv_heads and
replicates them beyond (Shoeybi et al., arXiv:1909.08053, §3), so one chip holds
ceil(kv_heads/tp)/kv_heads of each token's KV (``kv_share``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ridgeline.analytic.kv import kv_bytes, weights_bytes
from ridgeline.analytic.workload import Dtypes
from ridgeline.errors import CapacityError
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_BATCH, MAX_CONTEXT
from ridgeline.specs.model import ModelSpec
from ridgeline.specs.runtime_memory import runtime_memory
from ridgeline.specs.units import fmt_bytes

if TYPE_CHECKING:
    from ridgeline.analytic.deployment import Deployment

DEFAULT_STEP_TOKENS = 8192  # TensorRT-LLM's max_num_tokens default; vLLM V1's for online serving
DEFAULT_MAX_SEQS = 256  # vLLM's max_num_seqs default
FP32_BYTES = 4


@dataclass(frozen=True, slots=True)
class MemoryRule:
    """How a KV pool is sized: the fraction of each chip the engine may use, and the profile
    step whose activations are reserved.

    Attributes:
        memory_utilization: vLLM's ``gpu_memory_utilization`` (None: the runtime's default).
        step_tokens: tokens of the profile step (the scheduler's ``max_num_batched_tokens``).
        max_seqs: sequences the profile step samples (the scheduler's ``max_num_seqs``).
    """

    memory_utilization: float | None = None
    step_tokens: int = DEFAULT_STEP_TOKENS
    max_seqs: int = DEFAULT_MAX_SEQS

    def __post_init__(self) -> None:
        if self.memory_utilization is not None:
            check_real("memory_utilization", self.memory_utilization, 0, 1, low_open=True)
        check_int("step_tokens", self.step_tokens, 1, MAX_CONTEXT)
        check_int("max_seqs", self.max_seqs, 1, MAX_BATCH)


@dataclass(frozen=True, slots=True)
class ChipBudget:
    """One chip's device memory under the rule: what the engine may use, the weights, the
    reserve (activations and workspace) and the KV cache that gets the rest (which may be
    negative: then nothing fits)."""

    capacity_bytes: float
    memory_utilization: float
    weights_bytes: float
    activation_bytes: float
    workspace_bytes: float
    step_tokens: int
    max_seqs: int

    @property
    def usable_bytes(self) -> float:
        return self.memory_utilization * self.capacity_bytes

    @property
    def reserve_bytes(self) -> float:
        return self.activation_bytes + self.workspace_bytes

    @property
    def kv_bytes(self) -> float:
        return self.usable_bytes - self.weights_bytes - self.reserve_bytes

    @property
    def fits(self) -> bool:
        return self.kv_bytes > 0

    def reserve_text(self) -> str:
        """``reserve 2.56 GB (activations of a step of 8,192 tokens over 256 sequences 1.56 GB,
        workspace 1 GB)``; ``no reserve`` where the runtime keeps none."""
        if not self.reserve_bytes:
            return "no reserve (static placement)"
        return (
            f"reserve {fmt_bytes(self.reserve_bytes)} (activations of a step of "
            f"{self.step_tokens:,} tokens over {self.max_seqs} sequences "
            f"{fmt_bytes(self.activation_bytes)}, workspace {fmt_bytes(self.workspace_bytes)})"
        )

    def sentence(self) -> str:
        """Where one chip's memory goes, in one line."""
        return (
            f"{self.memory_utilization:g} x {fmt_bytes(self.capacity_bytes)} = "
            f"{fmt_bytes(self.usable_bytes)} usable per chip: weights "
            f"{fmt_bytes(self.weights_bytes)}, {self.reserve_text()}, KV "
            f"{fmt_bytes(max(self.kv_bytes, 0.0))}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "capacity_bytes": self.capacity_bytes,
            "memory_utilization": self.memory_utilization,
            "usable_bytes": self.usable_bytes,
            "weights_bytes": self.weights_bytes,
            "activation_bytes": self.activation_bytes,
            "workspace_bytes": self.workspace_bytes,
            "reserve_bytes": self.reserve_bytes,
            "kv_bytes": self.kv_bytes,
            "step_tokens": self.step_tokens,
            "max_seqs": self.max_seqs,
        }


def kv_share(model: ModelSpec, tensor_parallel: int) -> float:
    """Fraction of the KV cache one chip of a tensor-parallel group holds: ceil(kv/tp)/kv heads
    (KV heads replicate once tp exceeds them; MLA's single latent is on every chip)."""
    heads = model.kv_heads_cached
    return math.ceil(heads / tensor_parallel) / heads


def _ffn_per_token(model: ModelSpec) -> int:
    """Width of the MLP a token passes through: the dense ffn, or the top-k experts' plus the
    shared expert's on an MoE layer (the wider of the two where layers mix)."""
    if model.moe is None or not any(layer.moe for layer in model.layers):
        return model.ffn
    moe = model.moe.top_k * model.moe.expert_ffn + model.moe.shared_ffn
    return max(moe, model.ffn) if not all(layer.moe for layer in model.layers) else moe


def activation_bytes(
    model: ModelSpec, deployment: Deployment, dtypes: Dtypes, rule: MemoryRule
) -> float:
    """The profile step's activations on one chip (module docstring), before the runtime's
    ``activation_share``."""
    rt = runtime_memory(deployment.accelerator)
    widths = 3 if model.gated_mlp else 2
    mlp = model.hidden_size + widths * _ffn_per_token(model) / deployment.tensor_parallel
    step = rule.step_tokens * dtypes.act.bytes * mlp
    sampler = rule.max_seqs * model.vocab_size * rt.sampler_bytes_per_logit
    return rt.activation_share * (step + sampler)


def chip_budget(
    model: ModelSpec, deployment: Deployment, dtypes: Dtypes, rule: MemoryRule | None = None
) -> ChipBudget:
    """One chip's memory under the rule (module docstring)."""
    r = rule or MemoryRule()
    acc = deployment.accelerator
    rt = runtime_memory(acc)
    return ChipBudget(
        capacity_bytes=acc.device_capacity_bytes,
        memory_utilization=rt.memory_utilization
        if r.memory_utilization is None
        else r.memory_utilization,
        weights_bytes=weights_bytes(model, dtypes.weight) / deployment.chips,
        activation_bytes=activation_bytes(model, deployment, dtypes, r),
        workspace_bytes=rt.workspace_bytes,
        step_tokens=r.step_tokens,
        max_seqs=r.max_seqs,
    )


def distinct_kv_chips(model: ModelSpec, deployment: Deployment) -> float:
    """How many chips' worth of KV a replica holds: pp / kv_share(tp) (replicated heads count
    once)."""
    return deployment.pipeline_parallel / kv_share(model, deployment.tensor_parallel)


def kv_pool_bytes(
    model: ModelSpec, deployment: Deployment, dtypes: Dtypes, rule: MemoryRule | None = None
) -> float:
    """KV bytes of one replica (module docstring).

    Raises:
        CapacityError: the weights and the reserve leave no room for KV, saying by how much.
    """
    budget = chip_budget(model, deployment, dtypes, rule)
    if not budget.fits:
        raise CapacityError(
            f"{model.name} leaves no room for KV on {deployment.label}: each chip has "
            f"{fmt_bytes(budget.usable_bytes)} (memory_utilization {budget.memory_utilization:g}) "
            f"for {fmt_bytes(budget.weights_bytes)} of weights and a "
            f"{budget.reserve_text()}; short by {fmt_bytes(-budget.kv_bytes)}{_room(budget)}"
        )
    return budget.kv_bytes * distinct_kv_chips(model, deployment)


def _room(budget: ChipBudget) -> str:
    """What would leave room for KV: a higher ``memory_utilization`` where one exists, else
    more chips."""
    need = (budget.weights_bytes + budget.reserve_bytes) / budget.capacity_bytes
    if need < 1:
        return f"; memory_utilization above {need:.3f} leaves some, or more chips"
    return "; more chips (--tp, --pp) are needed"


def kv_pool_blocks(
    model: ModelSpec,
    deployment: Deployment,
    dtypes: Dtypes,
    block_bytes: float,
    rule: MemoryRule | None = None,
) -> int:
    """KV blocks of ``block_bytes`` one replica holds (``kv_pool_bytes``).

    Raises:
        CapacityError: no room for KV, or not for one block.
    """
    blocks = int(kv_pool_bytes(model, deployment, dtypes, rule) // block_bytes)
    if blocks < 1:
        raise CapacityError(
            f"{model.name} on {deployment.label}: the KV left after the weights and the reserve "
            f"holds no block of {fmt_bytes(block_bytes)}"
        )
    return blocks


@dataclass(frozen=True, slots=True)
class KvFit:
    """A direct capacity answer: the largest batch that fits at ``context`` and the longest
    context at ``batch``, on a deployment under the rule.

    Attributes:
        max_batch: sequences of ``context`` tokens the KV pool holds (None: not one).
        max_context: tokens per sequence for ``batch`` sequences (None: not one), at most the
            model's ``context_limit``; ``capped`` says memory would hold more.
        chosen: the deployment was chosen as the smallest that holds the weights.
    """

    model: str
    deployment: Deployment
    budget: ChipBudget
    pool_bytes: float
    context: int
    batch: int
    max_batch: int | None
    max_context: int | None
    context_limit: int
    capped: bool
    chosen: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment.to_dict(),
            "chosen_deployment": self.chosen,
            "memory_per_chip": self.budget.to_dict(),
            "kv_pool_bytes": self.pool_bytes,
            "context": self.context,
            "batch": self.batch,
            "max_batch": self.max_batch,
            "max_context": self.max_context,
            "context_limit": self.context_limit,
            "context_capped": self.capped,
        }


def _longest_context(model: ModelSpec, batch: int, pool: float, kv_dtype: Any) -> int:
    """Largest context whose KV for ``batch`` sequences stays within ``pool`` bytes, searched
    up to the model's limit (sliding windows stop the growth; bisection covers them)."""
    limit = model.max_position_embeddings
    if kv_bytes(model, batch, limit, kv_dtype) <= pool:
        return limit
    lo, hi = 0, limit  # kv(lo) <= pool < kv(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if kv_bytes(model, batch, mid, kv_dtype) <= pool:
            lo = mid
        else:
            hi = mid
    return lo


def kv_fit(
    model: ModelSpec,
    deployment: Deployment,
    dtypes: Dtypes,
    shape: tuple[int, int],
    rule: MemoryRule | None = None,
    chosen: bool = False,
) -> KvFit:
    """The largest batch at ``shape = (context, batch)``'s context and the longest context at its
    batch, under the rule (``kv_pool_bytes``; raises ``CapacityError`` like it)."""
    context, batch = shape
    pool = kv_pool_bytes(model, deployment, dtypes, rule)
    per_seq = kv_bytes(model, 1, context, dtypes.kv)
    most = int(pool // per_seq) if per_seq > 0 else None
    longest = _longest_context(model, batch, pool, dtypes.kv)
    limit = model.max_position_embeddings
    return KvFit(
        model=model.name,
        deployment=deployment,
        budget=chip_budget(model, deployment, dtypes, rule),
        pool_bytes=pool,
        context=context,
        batch=batch,
        max_batch=most or None,
        max_context=longest or None,
        context_limit=limit,
        capped=longest == limit and kv_bytes(model, batch, limit + 1, dtypes.kv) <= pool,
        chosen=chosen,
    )
