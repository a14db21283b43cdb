"""A simulation configured by a serving-engine profile (``specs.engines``).

The profile gives the admission rule, limits and their defaults on the chosen accelerator,
chunked prefill, prefix caching, preemption, the KV block size and memory share, and the host
work added to every step; ``ServingSetup`` overrides any of them, as an engine's command line
does (``--max-num-batched-tokens``, ``--max-num-seqs``, ``--no-enable-prefix-caching``...)::

    vllm on h100-sxm:   fcfs, 8192 tokens / 1024 sequences per step, chunked, prefix caching,
                        blocks of 16, 0.9 of memory, graphs up to min(2 x seqs, 512) sequences
    ServingSetup(max_num_batched_tokens=2048, max_num_seqs=128)   the benchmark's limits
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ridgeline.analytic.pricing import Pricing
from ridgeline.serving.policies import PolicyKind, step_token_budget
from ridgeline.serving.scheduler import PreemptionMode, SchedulerConfig
from ridgeline.serving.tiers import TierSpec
from ridgeline.sim.executor import HostCost
from ridgeline.sim.loop import SimConfig
from ridgeline.sim.options import host_tier
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.specs.engines import EngineProfile


@dataclass(frozen=True, slots=True)
class ServingSetup:
    """What a deployment sets on the engine's command line (None: the engine's default).

    Attributes:
        max_num_batched_tokens: token budget per step.
        max_num_seqs: most requests running at once.
        max_model_len: longest request (default: the model's context).
        num_blocks: KV blocks of the pool (default: what memory leaves, ``sim.loop``).
        prefix_caching: reuse cached prefix blocks.
        memory_utilization: share of device memory for weights and KV.
        chunked_prefill: split prompts over steps (off: the budget becomes max_model_len).
        policy: the admission rule (``serving.policies.PolicyKind``).
        preemption: recompute or swap.
        block_size: tokens per KV block.
        async_scheduling: schedule the next step as a step starts (``serving.lookahead``).
        cpu_kv_blocks: KV blocks offloaded to host memory (vLLM's CPU offloading: evicted
            prefix blocks are stored there and loaded back on a hit, ``serving.tiers``), moved
            over each chip's host link.
    """

    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    num_blocks: int | None = None
    prefix_caching: bool | None = None
    memory_utilization: float | None = None
    chunked_prefill: bool | None = None
    policy: PolicyKind | None = None
    preemption: PreemptionMode | None = None
    block_size: int | None = None
    async_scheduling: bool | None = None
    cpu_kv_blocks: int = 0


def _or(value: int | float | bool | None, default: int | float | bool) -> int | float | bool:
    return default if value is None else value


def engine_scheduler(
    engine: EngineProfile, acc: Accelerator, model: ModelSpec, setup: ServingSetup
) -> SchedulerConfig:
    """The scheduler ``engine`` runs on ``acc`` with ``setup``'s overrides; the token budget
    follows the admission rule (``serving.policies.step_token_budget``: whole prompts need
    ``max_model_len``)."""
    limits = engine.default_limits(acc)
    policy = setup.policy or PolicyKind.parse(engine.policy)
    chunked = bool(_or(setup.chunked_prefill, engine.chunked_prefill))
    max_model_len = int(_or(setup.max_model_len, model.max_position_embeddings))
    budget = int(_or(setup.max_num_batched_tokens, limits.max_num_batched_tokens))
    return SchedulerConfig(
        max_num_batched_tokens=step_token_budget(policy, budget if chunked else 0, max_model_len),
        max_num_seqs=int(_or(setup.max_num_seqs, limits.max_num_seqs)),
        max_model_len=max_model_len,
        long_prefill_token_threshold=engine.long_prefill_token_threshold,
        enable_chunked_prefill=chunked,
        policy=policy,
        preemption=setup.preemption or PreemptionMode(engine.preemption),
        async_scheduling=bool(_or(setup.async_scheduling, engine.async_scheduling)),
    )


@dataclass(frozen=True, slots=True)
class EngineRun:
    """An engine profile and the overrides of a deployment."""

    engine: EngineProfile
    setup: ServingSetup = ServingSetup()


def engine_pricing(engine: EngineProfile, pricing: Pricing) -> Pricing:
    """``pricing`` with the engine's own kernel terms in place of the accelerator family's
    (calibrated mode; the ideal roofline is the hardware's alone)."""
    if pricing.is_ideal or not engine.kernels:
        return pricing
    return replace(pricing, calibration=pricing.calibration.with_values(engine.kernels))


def engine_sim_config(
    model: ModelSpec, pricing: Pricing, run: EngineRun, label: str = ""
) -> SimConfig:
    """The ``SimConfig`` of ``run``'s engine serving ``model`` as ``pricing`` prices it (module
    docstring): the engine's kernel terms join the pricing's calibration and its host work
    every step, in calibrated mode."""
    engine, setup = run.engine, run.setup
    scheduler = engine_scheduler(engine, pricing.accelerator, model, setup)
    # the ideal roofline has no latencies: the engine's host work is priced in calibrated mode
    host = (
        HostCost(engine.host, engine.graph_max_batch(scheduler.max_num_seqs))
        if not pricing.is_ideal
        else HostCost()
    )
    cfg = SimConfig(
        model=model,
        pricing=engine_pricing(engine, pricing),
        scheduler=scheduler,
        block_size=int(_or(setup.block_size, engine.block_size)),
        prefix_caching=bool(_or(setup.prefix_caching, engine.prefix_caching)),
        memory_utilization=(
            engine.memory_utilization
            if setup.memory_utilization is None
            else setup.memory_utilization
        ),
        num_blocks=setup.num_blocks,
        host=host,
        label=label or engine.name,
    )
    if not setup.cpu_kv_blocks:
        return cfg
    return replace(cfg, tiers=(cpu_offload(cfg, setup.cpu_kv_blocks),))


def cpu_offload(cfg: SimConfig, blocks: int) -> TierSpec:
    """``blocks`` KV blocks in host memory, reached over every chip's host link at once (each
    chip moves its share of a block); evicted blocks are stored in the background, and a hit
    pays its load."""
    link = host_tier(cfg.hw)
    chips = cfg.pricing.deployment.chips
    bw = link.bandwidth_bytes_per_s * chips
    return TierSpec("cpu", blocks * cfg.block_bytes, bw, async_writes=True)
