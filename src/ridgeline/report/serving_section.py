"""The report's serving section: one workload simulated under paged, contiguous, static,
prefix-cached and speculative configurations on the report's deployment, priced by the report's
pricing (a few seconds of simulation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.errors import CapacityError
from ridgeline.report import serving_plots
from ridgeline.report.document import Section, Table
from ridgeline.report.figures import save_figure
from ridgeline.serving.spec_decode import expected_tokens_per_step
from ridgeline.sim import (
    LengthDist,
    Lengths,
    RequestSpec,
    SimConfig,
    SimResult,
    WorkloadSpec,
    generate,
)
from ridgeline.sim.executor import StepCost, step_cost_model
from ridgeline.sim.variants import DRAFT, SPEC_VARIANT, compare

if TYPE_CHECKING:
    from ridgeline.report.build import ReportContext

NUM_REQUESTS = 400
LOAD = 0.8  # arrivals at this fraction of the rough sustainable rate
VARIANTS = ("paged", "contiguous", "static", "prefix", "spec")


def _rate(cost: StepCost, prompt: int, output: int, batch: int = 64) -> float:
    """Rough sustainable request rate: one prefill plus ``output`` decode steps shared by
    ``batch`` sequences per request."""
    per_request_s = (
        cost.step_time_s([prompt], [0])
        + output * cost.step_time_s([1] * batch, [prompt + output // 2] * batch) / batch
    )
    return LOAD / per_request_s


def _row(r: SimResult) -> tuple[str, ...]:
    return (
        r.label,
        f"{r.num_completed}/{r.num_rejected}",
        f"{r.requests_per_s:.2f}",
        f"{r.ttft_s.p50 * 1e3:.1f} / {r.ttft_s.p99 * 1e3:.1f}",
        f"{r.tpot_s.p50 * 1e3:.2f} / {r.tpot_s.p99 * 1e3:.2f}",
        str(r.num_preemptions),
        str(r.max_running),
        f"{r.kv_peak_frac:.0%}",
        f"{r.unused_allocated_frac:.1%}",
        f"{r.prefix_hit_rate:.0%}",
    )


def _workload(ctx: ReportContext, num_requests: int) -> tuple[float, list[RequestSpec]]:
    """The context's serving workload, or the report's shared-prefix workload at 80% of the
    rough sustainable rate."""
    given = ctx.serving.workload
    if given is not None:
        return given.rate_per_s, generate(given)
    rate = _rate(step_cost_model(ctx.model, ctx.pricing), 1024, 128)
    spec = WorkloadSpec(
        num_requests=num_requests,
        rate_per_s=rate,
        prompt=Lengths(LengthDist.LOGNORMAL, 512, hi=2048),
        output=Lengths(LengthDist.LOGNORMAL, 128, hi=1024),
        num_prefixes=4,
        prefix_len=512,
        seed=0,
    )
    return rate, generate(spec)


def _summary(ctx: ReportContext, base: SimConfig, rate: float, results: list[SimResult]) -> str:
    paged, contiguous = results[0], results[1]
    slots = paged.kv_blocks * paged.block_size
    max_len = base.scheduler.max_model_len
    mean_tokens = sum(r.prompt_len + r.output_len for r in paged.requests) / len(paged.requests)
    what = (
        "the requests asked"
        if ctx.serving.workload is not None
        else f"Poisson {rate:.2f}/s, 4 shared 512-token system prompts + lognormal 512-token "
        "questions, lognormal 128-token answers"
    )
    return (
        f"{paged.num_requests} requests ({what}) served by {ctx.model.name} on "
        f"{ctx.pricing.deployment.label} ({paged.kv_blocks:,} KV blocks of {paged.block_size} "
        f"tokens under the KV-pool rule), steps priced {ctx.pricing.label}. Reserving max_model_len ({max_len}) per request "
        f"(contiguous) leaves {contiguous.unused_allocated_frac:.0%} of the allocated KV unused, "
        f"against {paged.unused_allocated_frac:.1%} with paged blocks (the last partial block of "
        f"each request); the pool holds at most {slots // max_len} reserved requests at once, "
        f"against about {slots / mean_tokens:,.0f} paged ones of this workload's mean "
        f"{mean_tokens:,.0f} tokens. Peak concurrency here: contiguous "
        f"{contiguous.max_running}, paged {paged.max_running}."
    )


SPEC_TEXT = (
    "Speculative decoding (row spec: {k} draft tokens from {draft}, accepted at rate α = "
    "{alpha}) yields (1 − α^(k+1)) / (1 − α) = {tokens:.2f} tokens per verify step (Leviathan "
    "et al., ICML 2023); its TPOT column shows the gain, paid for with the draft's own steps."
)
HEADERS = (
    "config",
    "done/rej",
    "req/s",
    "TTFT p50/p99 ms",
    "TPOT p50/p99 ms",
    "preempt",
    "max running",
    "KV peak",
    "unused alloc",
    "prefix hit",
)


def serving_section(ctx: ReportContext, num_requests: int = NUM_REQUESTS) -> Section:
    """Paged vs contiguous vs static vs prefix caching vs speculative decoding, on one
    shared-prefix workload."""
    q = ctx.serving
    base = SimConfig(ctx.model, ctx.pricing, q.scheduler, memory_utilization=q.memory_utilization)
    try:
        rate, wl = _workload(ctx, num_requests)
        results = list(compare(base, wl, _variants(ctx)).results)
    except CapacityError as e:
        return Section("serving", "Serving simulation", (f"Not simulated: {e}.",))
    label = ctx.pricing.label
    figs = (
        save_figure(serving_plots.kv_timeline_plot(results, label), ctx.figure("serving_kv.png")),
        save_figure(
            serving_plots.latency_cdf_plot(results, label), ctx.figure("serving_latency.png")
        ),
    )
    k, alpha = SPEC_VARIANT.num_draft_tokens, SPEC_VARIANT.acceptance_rate
    tokens = expected_tokens_per_step(alpha, k)
    spec = SPEC_TEXT.format(k=k, draft=DRAFT, alpha=alpha, tokens=tokens)
    caption = f"Serving variants on {ctx.pricing.deployment.label} — {label}"
    return Section(
        "serving",
        f"Serving simulation on {ctx.hw.name}",
        paragraphs=(_summary(ctx, base, rate, results), spec),
        tables=(Table(HEADERS, tuple(_row(r) for r in results), caption),),
        figures=figs,
        data={
            "mode": ctx.pricing.mode.value,
            "pricing": ctx.pricing.to_dict(),
            "rate_per_s": rate,
            "results": [r.to_dict() for r in results],
        },
    )


def _variants(ctx: ReportContext) -> tuple[str, ...]:
    """The variants of the section; on a deployment of many chips, those the simulator runs
    there (compiled shapes are one chip's programs)."""
    if ctx.pricing.deployment.chips == 1:
        return VARIANTS
    return tuple(v for v in VARIANTS if v != "static")
