"""Run one workload under several named configurations and tabulate them.

Variants (a registry of ``SimConfig -> SimConfig`` edits, applied to a base configuration):

    paged          the base: paged KV, chunked prefill, FCFS
    contiguous     reserve max_model_len per request at admission (pre-PagedAttention)
    static         compiled schedule: 32 fixed batch slots and power-of-two sequence buckets
    prefix         paged + prefix caching
    no-chunk       whole prompts in one step (budget raised to max_model_len)
    priority       priority queue order
    swap           preempt by swapping to host memory instead of recomputing
    spec           speculative decoding, k = 4, α = 0.7, drafts priced as distilgpt2 decode steps
    host-tier      prefix caching with evicted prefix blocks offloaded to host memory
    disagg         one prefill and one decode instance

On a compiled-schedule accelerator (``sim.compiled``) ``static`` and the ``static-*`` variants
of ``sim.static_variants`` run at compiled shapes derived from the workload.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ridgeline.errors import UnknownNameError
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.scheduler import PreemptionMode
from ridgeline.serving.spec_decode import SpecDecodeConfig
from ridgeline.sim.compiled import is_compiled_schedule
from ridgeline.sim.loop import SimConfig, simulate
from ridgeline.sim.metrics import SimResult
from ridgeline.sim.options import host_tier
from ridgeline.sim.static_variants import STATIC_VARIANTS, ShapeOptions, static_variant
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import get_model

DEFAULT_VARIANTS = ("paged", "contiguous", "static", "prefix", "no-chunk")
STATIC_SLOTS = 32  # a compiled batch size, as dataflow accelerators fix it ahead of time
DRAFT = "distilgpt2"  # a small catalog model whose decode steps price the drafts
SPEC_VARIANT = SpecDecodeConfig(4, 0.7)  # the "spec" variant: 4 drafts accepted at rate 0.7


def _sched(cfg: SimConfig, **changes: object) -> SimConfig:
    return replace(cfg, scheduler=replace(cfg.scheduler, **changes))  # type: ignore[arg-type]


def _whole_prompts(cfg: SimConfig) -> SimConfig:
    """No chunked prefill; the budget grows to max_model_len so every prompt fits one step."""
    s = cfg.scheduler
    return _sched(
        cfg,
        enable_chunked_prefill=False,
        max_num_batched_tokens=max(s.max_num_batched_tokens, s.max_model_len),
    )


VARIANTS: dict[str, Callable[[SimConfig], SimConfig]] = {
    "paged": lambda c: c,
    "contiguous": lambda c: _whole_prompts(_sched(c, policy="contiguous")),
    "static": lambda c: _whole_prompts(
        _sched(c, policy="static", static_slots=min(STATIC_SLOTS, c.scheduler.max_num_seqs))
    ),
    "prefix": lambda c: replace(c, prefix_caching=True),
    "no-chunk": lambda c: _whole_prompts(c),
    "priority": lambda c: _sched(c, policy="priority"),
    "swap": lambda c: replace(
        _sched(c, preemption=PreemptionMode.SWAP), tiers=c.tiers or (host_tier(c.hw),)
    ),
    "spec": lambda c: replace(
        _sched(c, spec=SPEC_VARIANT), draft_model=c.draft_model or get_model(DRAFT)
    ),
    "host-tier": lambda c: replace(c, prefix_caching=True, tiers=c.tiers or (host_tier(c.hw),)),
    "disagg": lambda c: replace(c, disagg=Disagg(1, 1)),
}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Results of one workload under several configurations, in the order asked."""

    results: tuple[SimResult, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "schema": "ridgeline.simulate-compare/1",
            "results": [r.to_dict() for r in self.results],
        }


def variant(
    base: SimConfig,
    name: str,
    workload: Sequence[RequestSpec] = (),
    shapes: ShapeOptions = ShapeOptions(),
) -> SimConfig:
    """``base`` edited by the named variant, labelled with the name (the compiled-shape
    variants derive their shapes from ``workload`` under ``shapes``)."""
    compiled = name in STATIC_VARIANTS and (name != "static" or is_compiled_schedule(base.hw))
    if compiled:
        return static_variant(base, name, workload, shapes)
    if name not in VARIANTS:
        raise UnknownNameError("simulate variant", name, [*VARIANTS, *STATIC_VARIANTS])
    return replace(VARIANTS[name](base), label=name)


def compare(
    base: SimConfig,
    workload: Sequence[RequestSpec],
    names: Sequence[str] = DEFAULT_VARIANTS,
    progress: Callable[[str], None] | None = None,
    shapes: ShapeOptions = ShapeOptions(),
) -> Comparison:
    """Simulate ``workload`` under each named variant of ``base``."""
    configs = [variant(base, n, workload, shapes) for n in names]
    out = []
    for cfg in configs:
        if progress is not None:
            progress(cfg.label)
        out.append(simulate(cfg, workload))
    return Comparison(tuple(out))
