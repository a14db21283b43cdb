"""The report's KV-management section: who manages the KV cache on the five architectures and
what the seven techniques change on a small shared-prefix trace (``sim.kv_manage``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.report.document import Section, Table
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import LengthDist, Lengths, WorkloadSpec, generate
from ridgeline.sim.kv_lessons import STALL_WORKLOAD
from ridgeline.sim.kv_manage import KVManageOptions, KVManageReport, kv_manage
from ridgeline.specs.kv_practice import Technique
from ridgeline.specs.units import fmt_bytes

if TYPE_CHECKING:
    from ridgeline.report.build import ReportContext

NUM_REQUESTS = 16  # 14 simulations per architecture: seconds, not minutes
MAX_LEN = 4096


def _trace(max_model_len: int) -> list:  # type: ignore[type-arg]
    """Two shared system prompts of a quarter of the length, prompts and outputs below it."""
    spec = WorkloadSpec(
        num_requests=NUM_REQUESTS,
        rate_per_s=2.0,
        prompt=Lengths(LengthDist.LOGNORMAL, max_model_len // 8),
        output=Lengths(LengthDist.LOGNORMAL, max_model_len // 32),
        num_prefixes=2,
        prefix_len=max_model_len // 4,
    )
    return generate(spec)


def kv_manage_tables(rep: KVManageReport) -> tuple[Table, Table]:
    """Who manages the KV per architecture; the seven techniques × the architectures."""
    arch = Table(
        (
            "accelerator",
            "deployment",
            "orchestrator",
            "allocates KV",
            "granularity",
            "lives in → compute",
            "KV room",
        ),
        tuple(
            (
                r.accelerator,
                r.deployment,
                r.orchestrator,
                r.allocator.value,
                f"{r.granularity} ({fmt_bytes(r.granularity_bytes)} per chip)",
                r.path,
                f"{r.kv_capacity_tokens:,} tokens",
            )
            for r in rep.rows
        ),
        f"{rep.model}: who manages the KV cache",
    )
    rows = []
    for t in Technique:
        cells = [next(x for x in r.techniques if x.technique is t) for r in rep.rows]
        rows.append((t.label, *(f"{c.provider.value}: {c.becomes}. {c.effect}" for c in cells)))
    tech = Table(
        ("technique", *(r.accelerator for r in rep.rows)),
        tuple(rows),
        f"The seven techniques on {rep.workload}; chunked prefill on {STALL_WORKLOAD} — "
        f"{rep.label}",
    )
    return arch, tech


def kv_manage_section(ctx: ReportContext) -> Section:
    """kv-manage on the report's model."""
    limit = min(MAX_LEN, ctx.model.max_position_embeddings)
    sched = SchedulerConfig(max_num_batched_tokens=512, max_model_len=limit)
    label = f"{NUM_REQUESTS} requests, Poisson 2/s, two shared prefixes of {limit // 4} tokens"
    opts = KVManageOptions(sched, mode=ctx.pricing.mode)
    rep = kv_manage(ctx.model, _trace(limit), opts, label=label)
    return Section(
        "kv-manage",
        "The KV cache under five orchestrators",
        paragraphs=(
            "The same KV cache under five orchestrators: "
            + "; ".join(f"{r.accelerator} {r.orchestrator}" for r in rep.rows)
            + " (the managers on the KV's path from where it lives to compute). Each effect is "
            "two simulations of the same trace on the architecture's smallest deployment, "
            f"without and with the technique ('would' where nobody provides it), priced "
            f"{rep.label}; compiled-schedule machines run at compiled shapes. Chunked prefill is "
            "judged on long prompts arriving among running decodes, by the longest stall a "
            "decode sees; an effect of zero says why. The same table: ridgeline kv-manage.",
        ),
        tables=kv_manage_tables(rep),
        data=rep.to_dict(),
    )
