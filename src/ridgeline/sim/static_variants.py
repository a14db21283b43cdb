"""The seven runtime techniques on a compiled-schedule machine, as ``simulate compare`` variants.

What each becomes when every step runs a program compiled for fixed shapes (``sim.compiled``):

    static              continuous batching into fixed slots: a request waits for a free slot
                        and reserves a whole sequence bucket; each decode step runs the program
                        of (compiled batch ≥ running, bucket ≥ longest context)
    static-paged        PagedAttention's allocator (blocks on demand, no bucket reserved), but
                        the compiled attention still reads the whole bucket
    static-chunk        chunked prefill with one compiled chunk shape (C tokens, last one padded)
    static-prefix       prefix caching read in place: the compiled program reads the shared
                        prefix blocks; the request's bucket counts them
    static-prefix-copy  prefix caching by copy: the cached prefix is copied into the request's
                        own bucket-sized buffer (2 × prefix KV bytes at device bandwidth)
    static-host-tier    prefix caching with evicted prefix blocks kept in host memory over PCIe
    static-spec         speculative decoding with a fixed verify width W = k + 1 for every slot
    static-disagg       one prefill card and one decode card; KV crosses the card link

The shapes come from the workload: batch sizes 1, 2, 4 ... up to the slots, and the sequence
buckets the budget affords, chosen by ``sim.buckets.choose_buckets`` over the requests' lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ridgeline.errors import ConfigError
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.spec_decode import SpecDecodeConfig
from ridgeline.sim.buckets import CompileBudget, choose_buckets, max_buckets
from ridgeline.sim.compiled import CompiledShapes, PriceCache, pow2_ladder, static_scheduler
from ridgeline.sim.loop import SimConfig
from ridgeline.sim.metrics import SimResult
from ridgeline.sim.options import host_tier
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import Accelerator, get_model

STATIC_SLOTS = 32  # a compiled batch size, as dataflow accelerators fix it ahead of time
SPEC_K = 4
SPEC_ALPHA = 0.7
DRAFT = "distilgpt2"  # a small catalog model whose decode steps price the drafts


@dataclass(frozen=True, slots=True)
class ShapeOptions:
    """How to derive compiled shapes from a workload."""

    budget: CompileBudget = CompileBudget()
    chunk_tokens: int = 512
    granule_tokens: int = 64
    slots: int = STATIC_SLOTS
    recompile: bool = False
    prices: PriceCache | None = field(default=None, compare=False)


def shapes_for(
    cfg: SimConfig,
    workload: Sequence[RequestSpec],
    opts: ShapeOptions = ShapeOptions(),
    verify_width: int = 0,
) -> CompiledShapes:
    """Compiled shapes for ``workload`` under ``cfg``: a batch ladder up to the slots and the
    buckets the budget affords, searched over the lengths that fit ``max_model_len``."""
    slots = min(opts.slots, cfg.scheduler.max_num_seqs)
    batch = pow2_ladder(slots)
    limit = cfg.scheduler.max_model_len
    lengths = [n for r in workload if (n := r.prompt_len + r.output_len) <= limit]
    if not lengths:
        raise ConfigError("field workload: no request fits max_model_len; nothing to compile")
    per_bucket = len(batch) + 1 + (1 if verify_width else 0)
    buckets = choose_buckets(lengths, max_buckets(opts.budget, per_bucket), opts.granule_tokens)
    return CompiledShapes(
        batch_sizes=batch,
        seq_buckets=buckets,
        chunk_tokens=opts.chunk_tokens,
        verify_width=verify_width,
        recompile=opts.recompile,
        compile_s_per_program=opts.budget.compile_s_per_program,
        prices=opts.prices,
    )


def card_link(hw: Accelerator) -> Disagg:
    """One prefill and one decode card joined by the accelerator's own link (its catalog
    interconnect: PCIe Gen5 x16 for Spyre); the default link when the catalog has none."""
    link = hw.interconnect
    if link is None:
        return Disagg(1, 1)
    return Disagg(1, 1, link.link_bandwidth_bytes_per_s, link.latency_s)


def _on(cfg: SimConfig, shapes: CompiledShapes, chunked: bool = False) -> SimConfig:
    return replace(cfg, compiled=shapes, scheduler=static_scheduler(cfg.scheduler, shapes, chunked))


def _copying(s: CompiledShapes) -> CompiledShapes:
    return replace(s, prefix_copy=True)


def _spec(cfg: SimConfig, wl: Sequence[RequestSpec], opts: ShapeOptions) -> SimConfig:
    shapes = shapes_for(cfg, wl, opts, verify_width=SPEC_K + 1)
    out = _on(cfg, shapes)
    spec = SpecDecodeConfig(SPEC_K, SPEC_ALPHA)
    return replace(
        out,
        scheduler=replace(out.scheduler, spec=spec),
        draft_model=cfg.draft_model or get_model(DRAFT),
    )


def _paged(cfg: SimConfig, shapes: CompiledShapes) -> SimConfig:
    """Paged allocation (the base scheduler in the compiled slots), compiled pricing."""
    sched = replace(
        cfg.scheduler, max_num_seqs=min(cfg.scheduler.max_num_seqs, shapes.batch_sizes[-1])
    )
    return replace(cfg, compiled=shapes, scheduler=sched)


_Edit = Callable[[SimConfig, Sequence[RequestSpec], ShapeOptions], SimConfig]

STATIC_VARIANTS: dict[str, _Edit] = {
    "static": lambda c, w, o: _on(c, shapes_for(c, w, o)),
    "static-paged": lambda c, w, o: _paged(c, shapes_for(c, w, o)),
    "static-chunk": lambda c, w, o: _on(c, shapes_for(c, w, o), chunked=True),
    "static-prefix": lambda c, w, o: replace(_on(c, shapes_for(c, w, o)), prefix_caching=True),
    "static-prefix-copy": lambda c, w, o: replace(
        _on(c, _copying(shapes_for(c, w, o))), prefix_caching=True
    ),
    "static-host-tier": lambda c, w, o: replace(
        _on(c, shapes_for(c, w, o)), prefix_caching=True, tiers=c.tiers or (host_tier(c.hw),)
    ),
    "static-spec": _spec,
    "static-disagg": lambda c, w, o: replace(_on(c, shapes_for(c, w, o)), disagg=card_link(c.hw)),
}

# The seven techniques on a compiled-schedule machine, and the runtime reference beside them.
COMPILED_DEFAULT = (
    "paged",
    "static",
    "static-paged",
    "static-chunk",
    "static-prefix",
    "static-prefix-copy",
    "static-host-tier",
    "static-spec",
    "static-disagg",
)


def static_variant(
    base: SimConfig,
    name: str,
    workload: Sequence[RequestSpec],
    opts: ShapeOptions = ShapeOptions(),
) -> SimConfig:
    """``base`` edited by one of ``STATIC_VARIANTS``, labelled with its name."""
    return replace(STATIC_VARIANTS[name](base, workload, opts), label=name)


BECOMES = {
    "static": "continuous batching into fixed slots",
    "static-paged": "PagedAttention's allocator; the compiled attention reads the whole bucket",
    "static-chunk": "chunked prefill with one compiled chunk shape",
    "static-prefix": "prefix caching, the compiled program reads shared blocks in place",
    "static-prefix-copy": "prefix caching, each hit copied into the request's own slot",
    "static-host-tier": "prefix blocks tiered to host memory over the card's PCIe link",
    "static-spec": f"speculative decoding at a fixed verify width of {SPEC_K + 1} tokens",
    "static-disagg": "one prefill card and one decode card over the card link",
}


def compiled_note(r: SimResult) -> str:
    """One line on what a compiled-shape run's technique became and what its shapes cost."""
    c = r.compiled
    if c is None:
        return ""
    parts = [
        f"step time ×{c.time_ratio:.3f} of the unpadded steps (KV read ×{c.kv_ratio:.2f})",
        f"{c.shapes_used} shapes used of {c.programs} compiled",
        f"{c.recompiles} recompiles ({c.compile_s:.0f} s)" if c.recompiles else "no recompile",
    ]
    if c.prefix_copy_bytes:
        parts.append(f"prefix copies {c.prefix_copy_bytes / 1e9:.3g} GB")
    if r.prefix_hit_rate:
        parts.append(f"prefix hits {r.prefix_hit_rate:.0%}")
    if r.tokens_per_step_per_seq > 1:
        parts.append(f"{r.tokens_per_step_per_seq:.2f} tokens per verify step")
    what = BECOMES.get(r.label, "compiled shapes")
    return f"{r.label}: {what}; " + ", ".join(parts)
