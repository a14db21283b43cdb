"""The report's serving section: one workload simulated under paged, contiguous, static and
prefix-cached configurations on the report's accelerator (a few seconds of simulation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.errors import CapacityError
from ridgeline.report import serving_plots
from ridgeline.report.document import Section, Table
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.serving.spec_decode import expected_tokens_per_step
from ridgeline.sim import (
    LengthDist,
    Lengths,
    SimConfig,
    SimResult,
    StepCostModel,
    WorkloadSpec,
    generate,
)
from ridgeline.sim.variants import compare

if TYPE_CHECKING:
    from ridgeline.report.build import ReportContext

NUM_REQUESTS = 400
LOAD = 0.8  # arrivals at this fraction of the rough sustainable rate
VARIANTS = ("paged", "contiguous", "static", "prefix")


def _rate(cost: StepCostModel, prompt: int, output: int, batch: int = 64) -> float:
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


def serving_section(ctx: ReportContext, num_requests: int = NUM_REQUESTS) -> Section:
    """Paged vs contiguous vs static vs prefix caching, on one shared-prefix workload."""
    base = SimConfig(ctx.model, ctx.hw, SchedulerConfig(max_model_len=4096))
    try:
        cost = StepCostModel(ctx.model, ctx.hw)
        rate = _rate(cost, 1024, 128)
        wl = generate(
            WorkloadSpec(
                num_requests=num_requests,
                rate_per_s=rate,
                prompt=Lengths(LengthDist.LOGNORMAL, 512, hi=2048),
                output=Lengths(LengthDist.LOGNORMAL, 128, hi=1024),
                num_prefixes=4,
                prefix_len=512,
                seed=0,
            )
        )
        results = list(compare(base, wl, VARIANTS).results)
    except CapacityError as e:
        return Section("serving", "Serving simulation", (f"Not simulated: {e}.",))
    figs = (
        serving_plots.kv_timeline_plot(results, ctx.figure("serving_kv.png")),
        serving_plots.latency_cdf_plot(results, ctx.figure("serving_latency.png")),
    )
    paged, contiguous = results[0], results[1]
    slots = paged.kv_blocks * paged.block_size
    mean_tokens = sum(r.prompt_len + r.output_len for r in paged.requests) / len(paged.requests)
    text = (
        f"{num_requests} requests (Poisson {rate:.2f}/s, 4 shared 512-token system prompts + "
        f"lognormal 512-token questions, lognormal 128-token answers) served by {ctx.model.name} "
        f"on one {ctx.hw.name} ({paged.kv_blocks:,} KV blocks of {paged.block_size} tokens). "
        f"Reserving max_model_len ({base.scheduler.max_model_len}) per request (contiguous) "
        f"leaves {contiguous.unused_allocated_frac:.0%} of the allocated KV unused, against "
        f"{paged.unused_allocated_frac:.1%} with paged blocks (the last partial block of each "
        f"request); the pool holds at most {slots // base.scheduler.max_model_len} reserved "
        f"requests at once, against about {slots / mean_tokens:,.0f} paged ones of this "
        f"workload's mean {mean_tokens:,.0f} tokens. Peak concurrency here: contiguous "
        f"{contiguous.max_running}, paged {paged.max_running}."
    )
    spec = (
        "Speculative decoding with k drafts accepted at rate α yields (1 − α^(k+1)) / (1 − α) "
        f"tokens per verify step (Leviathan et al. 2023): {expected_tokens_per_step(0.7, 4):.2f} "
        "for k = 4, α = 0.7."
    )
    headers = (
        "config", "done/rej", "req/s", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "preempt",
        "max running", "KV peak", "unused alloc", "prefix hit",
    )  # fmt: skip
    return Section(
        "serving",
        f"Serving simulation on {ctx.hw.name}",
        paragraphs=(text, spec),
        tables=(Table(headers, tuple(_row(r) for r in results)),),
        figures=figs,
        data={"rate_per_s": rate, "results": [r.to_dict() for r in results]},
    )
