"""The KV cache under every orchestrator: the five architectures side by side.

For each accelerator (H100, TPU v5e, Cerebras WSE-3, Groq LPU, IBM Spyre by default), on the
smallest deployment that holds the model (``analytic.deploy.auto_deployment``):

- who allocates the KV and at what granularity (a block of tokens, a page and its VMEM tile, a
  bucket, a static buffer), with its size in bytes;
- which memory level holds it and the path to compute (catalog levels and their managers), and
  its orchestrator (``Accelerator.orchestrator``, the label every face uses);
- for each of the seven techniques, who provides it (``data/kv_management.toml``, sourced) and
  what it costs or saves on the workload: two simulations of the same trace, without and with
  the technique, on the deployment, priced as ``KVManageOptions.mode`` says (calibrated by
  default, ``analytic.pricing``) with its links and KV pool (``analytic.memory``).
  Compiled-schedule machines (Spyre, TPU) run at compiled shapes (``sim.compiled``), which are
  one-chip programs: a deployment of several of them runs as one chip with their summed
  capacity, bandwidth and peak (NOTE: no collective cost there). Where nobody provides a
  technique the numbers say what it would change if a runtime did. Chunked prefill runs on its
  own workload, long prompts arriving among running decodes, and is judged by the stall a
  decode sees (``sim.kv_lessons``); an effect of zero says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ridgeline.analytic import Phase, Workload, kv_bytes_per_token
from ridgeline.analytic.deployment import Deployment, auto_deployment
from ridgeline.analytic.memory import kv_pool_bytes
from ridgeline.analytic.pallas import tpu_step
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import RidgelineError
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim.compiled import PriceCache, is_compiled_schedule
from ridgeline.sim.kv_lessons import (
    NO_CHANGE,
    stall_detail,
    stall_trace,
    trace_rate_per_s,
    why_no_change,
)
from ridgeline.sim.loop import SimConfig, simulate
from ridgeline.sim.metrics import SimResult
from ridgeline.sim.static_variants import ShapeOptions, shapes_for
from ridgeline.sim.variants import variant
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import Accelerator, ModelSpec, get_accelerator
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.catalog import FIVE_ARCHITECTURES
from ridgeline.specs.kv_practice import KVPractice, Provider, Technique, kv_practice

FIVE = FIVE_ARCHITECTURES
BLOCK_TOKENS = 16  # vLLM's default KV block (Kwon et al., SOSP 2023)
Progress = Callable[[str, str], None]  # (accelerator, the variant about to be simulated)


@dataclass(frozen=True, slots=True)
class Metric:
    """What a technique is judged by, read from a simulation result."""

    name: str
    unit: str
    read: Callable[[SimResult], float]
    lower_is_better: bool = True


METRICS = {
    Technique.CONTINUOUS_BATCHING: Metric(
        "output tokens/s", "tok/s", lambda r: r.output_tokens_per_s, False
    ),
    Technique.PAGED_ATTENTION: Metric(
        "KV allocated but unused", "%", lambda r: 100 * r.unused_allocated_frac
    ),
    Technique.PREFIX_CACHING: Metric("TTFT p50", "ms", lambda r: 1e3 * r.ttft_s.p50),
    Technique.CHUNKED_PREFILL: Metric(
        "longest decode stall (max ITL)", "ms", lambda r: 1e3 * r.itl_tail.max_s
    ),
    Technique.DISAGGREGATION: Metric("ITL p99", "ms", lambda r: 1e3 * r.itl_s.p99),
    Technique.TIERING: Metric("TTFT p50", "ms", lambda r: 1e3 * r.ttft_s.p50),
    Technique.SPECULATIVE_DECODING: Metric("TPOT p50", "ms", lambda r: 1e3 * r.tpot_s.p50),
}

# (without, with) the technique, as ``simulate compare`` variants; "serial-X" is X one request
# at a time. Runtime-managed machines use the paged runtime's variants, compiled-schedule
# machines the compiled-shape ones.
RUNTIME_PAIRS = {
    Technique.CONTINUOUS_BATCHING: ("serial-paged", "paged"),
    Technique.PAGED_ATTENTION: ("contiguous", "paged"),
    Technique.PREFIX_CACHING: ("paged", "prefix"),
    Technique.CHUNKED_PREFILL: ("no-chunk", "paged"),
    Technique.DISAGGREGATION: ("paged", "disagg"),
    Technique.TIERING: ("prefix", "host-tier"),
    Technique.SPECULATIVE_DECODING: ("paged", "spec"),
}
COMPILED_PAIRS = {
    Technique.CONTINUOUS_BATCHING: ("serial-static", "static"),
    Technique.PAGED_ATTENTION: ("static", "static-paged"),
    Technique.PREFIX_CACHING: ("static", "static-prefix"),
    Technique.CHUNKED_PREFILL: ("static", "static-chunk"),
    Technique.DISAGGREGATION: ("static", "static-disagg"),
    Technique.TIERING: ("static-prefix", "static-host-tier"),
    Technique.SPECULATIVE_DECODING: ("static", "static-spec"),
}


@dataclass(frozen=True, slots=True)
class TechniqueCost:
    """One technique on one architecture: who provides it, what it becomes, what it changes.

    ``without``/``with_`` are the metric without and with the technique (None, with ``note``
    saying why, when the simulator cannot run it there)."""

    technique: Technique
    provider: Provider
    becomes: str
    source: str
    metric: str
    unit: str
    without: float | None
    with_: float | None
    note: str = ""
    detail: str = ""  # more statistics of the same two runs, named
    why: str = ""  # why the effect is zero, when it is and the reason is known

    @property
    def change(self) -> float | None:
        """with ÷ without − 1 (negative: the metric went down)."""
        if self.without is None or self.with_ is None or self.without == 0:
            return None
        return self.with_ / self.without - 1.0

    @property
    def effect(self) -> str:
        """The change as text, conditional where nobody provides the technique."""
        if self.without is None or self.with_ is None:
            return self.note
        verb = "would go" if self.provider is Provider.NOBODY else "goes"
        pct = "" if self.change is None else f" ({self.change:+.0%})"
        text = f"{self.metric} {verb} {self.without:,.4g} → {self.with_:,.4g} {self.unit}{pct}"
        text += f"; {self.detail}" if self.detail else ""
        return text + (f" — no change: {self.why}" if self.why else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "technique": self.technique.value,
            "provider": self.provider.value,
            "becomes": self.becomes,
            "source": self.source,
            "metric": self.metric,
            "unit": self.unit,
            "without": self.without,
            "with": self.with_,
            "change": self.change,
            "detail": self.detail or None,
            "why_no_change": self.why or None,
            "effect": self.effect,
        }


@dataclass(frozen=True, slots=True)
class ArchitectureKV:
    """How one architecture manages the KV cache of the model, and what each technique does."""

    accelerator: str
    kind: str
    deployment: str
    chips: int
    orchestrator: str
    allocator: Provider
    granularity: str
    granularity_bytes: float
    kv_level: str
    path: str
    kv_capacity_tokens: int
    source: str
    techniques: tuple[TechniqueCost, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "kind": self.kind,
            "deployment": self.deployment,
            "chips": self.chips,
            "orchestrator": self.orchestrator,
            "allocator": self.allocator.value,
            "granularity": self.granularity,
            "granularity_bytes": self.granularity_bytes,
            "kv_level": self.kv_level,
            "path": self.path,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "source": self.source,
            "techniques": [t.to_dict() for t in self.techniques],
        }


@dataclass(frozen=True, slots=True)
class KVManageReport:
    """The architectures side by side for one model and workload."""

    model: str
    workload: str
    rows: tuple[ArchitectureKV, ...]
    label: str = "expected (calibrated)"  # the pricing's (``analytic.pricing.Pricing.label``)
    mode: CostMode = CostMode.CALIBRATED

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.kv-manage/3",
            "mode": self.mode.value,
            "label": self.label,
            "model": self.model,
            "workload": self.workload,
            "rows": [r.to_dict() for r in self.rows],
        }


def aggregate(acc: Accelerator, chips: int) -> Accelerator:
    """``chips`` chips of ``acc`` as one accelerator: capacities, bandwidths, peaks and cores
    summed (ideal tensor parallelism, no collective cost)."""
    if chips == 1:
        return acc
    levels = tuple(
        replace(
            lvl,
            instances=lvl.instances * chips if lvl.instances > 1 else lvl.instances,
            capacity_bytes=lvl.capacity_bytes * (1 if lvl.instances > 1 else chips),
            usable_bytes=None
            if lvl.usable_bytes is None
            else lvl.usable_bytes * (1 if lvl.instances > 1 else chips),
            bandwidth_bytes_per_s=None
            if lvl.bandwidth_bytes_per_s is None
            else lvl.bandwidth_bytes_per_s * chips,
        )
        for lvl in acc.levels
    )
    peaks = {d: v * chips for d, v in acc.peak_flops_per_s.items()}
    return replace(
        acc,
        name=f"{chips} x {acc.name}",
        levels=levels,
        peak_flops_per_s=peaks,
        cores=acc.cores * chips,
    )


def kv_path(acc: Accelerator) -> str:
    """The KV's level and the levels above it on the way to compute, with their managers."""
    names = acc.level_names
    d = names.index(acc.device_level)
    return " → ".join(f"{lvl.name} ({lvl.managed_by.value})" for lvl in acc.levels[d::-1])


@dataclass(frozen=True, slots=True)
class KVManageOptions:
    """The simulator settings shared by every architecture: the scheduler, the compiled shapes,
    the pricing mode and the KV-pool rule's ``memory_utilization`` (None: each runtime's)."""

    scheduler: SchedulerConfig
    shapes: ShapeOptions = ShapeOptions()
    mode: CostMode = CostMode.CALIBRATED
    memory_utilization: float | None = None


def _serial(cfg: SimConfig) -> SimConfig:
    s = cfg.scheduler
    return replace(
        cfg, scheduler=replace(s, max_num_seqs=1, static_slots=1 if s.static_slots else None)
    )


class _Runs:
    """Simulations of one trace on one deployment, by variant name, each run once."""

    def __init__(
        self, acc: Accelerator, base: SimConfig, wl: Sequence[RequestSpec], shapes: ShapeOptions
    ) -> None:
        self.acc, self.base, self.wl, self.shapes = acc, base, wl, shapes
        self.done: dict[str, SimResult] = {}
        self.progress: Progress | None = None

    def get(self, name: str) -> SimResult:
        if name not in self.done:
            if self.progress is not None:
                self.progress(self.acc.name, name)
            serial = name.startswith("serial-")
            cfg = variant(self.base, name.removeprefix("serial-"), self.wl, self.shapes)
            self.done[name] = simulate(_serial(cfg) if serial else cfg, self.wl)
        return self.done[name]


def _technique(
    practice: KVPractice, t: Technique, runs: _Runs, pair: tuple[str, str]
) -> TechniqueCost:
    p, m = practice.technique(t), METRICS[t]
    try:
        before, after = (runs.get(name) for name in pair)
    except RidgelineError as e:  # e.g. no host level to tier to
        return TechniqueCost(
            t, p.provider, p.becomes, p.source, m.name, m.unit, None, None, f"not simulated: {e}"
        )
    values = (m.read(before), m.read(after))
    cost = TechniqueCost(t, p.provider, p.becomes, p.source, m.name, m.unit, *values)
    detail = stall_detail(before, after) if t is Technique.CHUNKED_PREFILL else ""
    unchanged = cost.change is None or abs(cost.change) < NO_CHANGE
    why = why_no_change(t, before, after, trace_rate_per_s(runs.wl)) if unchanged else ""
    return replace(cost, detail=detail, why=why)


def _granularity(practice: KVPractice, model: ModelSpec, runs: _Runs, tp: int) -> tuple[str, float]:
    """The allocation unit as text and its bytes on one chip of the tensor-parallel group."""
    per_token = kv_bytes_per_token(model) / tp
    limit = runs.base.scheduler.max_model_len
    if practice.granularity == "bucket":
        buckets = shapes_for(runs.base, runs.wl, runs.shapes).seq_buckets
        text = f"a bucket per slot: {', '.join(f'{b:,}' for b in buckets)} tokens"
        return text, per_token * max(buckets)
    if practice.granularity == "static buffer":
        return f"a static buffer per slot of {limit:,} tokens (estimate)", per_token * limit
    if practice.granularity == "page + VMEM tile":
        tile = _vmem_tile(model, runs)
        return f"pages of {BLOCK_TOKENS} tokens in HBM; {tile}", per_token * BLOCK_TOKENS
    return f"{practice.granularity} of {BLOCK_TOKENS} tokens", per_token * BLOCK_TOKENS


def _vmem_tile(model: ModelSpec, runs: _Runs) -> str:
    """The Pallas BlockSpec of decode attention at the workload's mean context, one chip."""
    mean = sum(r.prompt_len + r.output_len // 2 for r in runs.wl) // max(1, len(runs.wl))
    step = tpu_step(model, runs.acc, Workload(Phase.DECODE, 1, max(1, mean)))
    return f"VMEM tiles of {step.op('attn.core').note.removeprefix('KV blocks of ')} (Pallas)"


def _pricing(dep: Deployment, mode: CostMode) -> Pricing:
    """The deployment's pricing; a compiled-schedule machine's chips as one (its compiled
    shapes are one-chip programs; module docstring)."""
    if is_compiled_schedule(dep.accelerator) and dep.chips > 1:
        return Pricing.of(aggregate(dep.accelerator, dep.chips), mode)
    return Pricing.of(dep, mode)


def architecture_kv(
    model: ModelSpec,
    acc: Accelerator,
    wl: Sequence[RequestSpec],
    opts: KVManageOptions,
    progress: Progress | None = None,
) -> ArchitectureKV:
    """One architecture's KV management and the seven techniques on ``wl`` (``progress`` is
    told each simulation as it starts)."""
    practice = kv_practice(acc.kind)
    limit = opts.scheduler.max_model_len
    dep = auto_deployment(model, acc, Workload(Phase.DECODE, 1, limit))
    pricing = _pricing(dep, opts.mode)
    shapes = replace(opts.shapes, prices=PriceCache())
    base = SimConfig(model, pricing, opts.scheduler, memory_utilization=opts.memory_utilization)
    runs = _Runs(acc, base, wl, shapes)
    runs.progress = progress
    stalls = _Runs(acc, base, stall_trace(limit), replace(opts.shapes, prices=PriceCache()))
    pairs = COMPILED_PAIRS if is_compiled_schedule(acc) else RUNTIME_PAIRS
    techniques = tuple(
        _technique(practice, t, stalls if t is Technique.CHUNKED_PREFILL else runs, pairs[t])
        for t in Technique
    )
    room = kv_pool_bytes(model, pricing.deployment, pricing.dtypes, base.memory_rule)
    granularity, unit_bytes = _granularity(practice, model, runs, dep.tensor_parallel)
    return ArchitectureKV(
        accelerator=acc.name,
        kind=acc.kind,
        deployment=dep.label,
        chips=dep.chips,
        orchestrator=acc.orchestrator,
        allocator=practice.allocator,
        granularity=granularity,
        granularity_bytes=unit_bytes,
        kv_level=acc.device_level,
        path=kv_path(acc),
        kv_capacity_tokens=max(0, int(room // kv_bytes_per_token(model))),
        source=practice.source,
        techniques=techniques,
    )


def kv_manage(
    model: ModelSpec,
    wl: Sequence[RequestSpec],
    opts: KVManageOptions,
    accelerators: Sequence[str] = FIVE,
    label: str = "",
    progress: Progress | None = None,
) -> KVManageReport:
    """The architectures side by side (``FIVE`` by default) for ``model`` on ``wl``;
    ``progress(accelerator, variant)`` is told each simulation as it starts."""
    rows = tuple(
        architecture_kv(model, get_accelerator(a), wl, opts, progress) for a in accelerators
    )
    pricing_label = Pricing.of(get_accelerator(accelerators[0]), opts.mode).label
    return KVManageReport(model.name, label, rows, pricing_label, opts.mode)
