"""``ridgeline simulate``: one serving configuration, or ``simulate compare`` for several."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ridgeline.analytic import Efficiency
from ridgeline.cli.common import HwOpt, JsonOpt, ModelOpt, console, emit_json, err_console
from ridgeline.errors import ConfigError
from ridgeline.report.serving_plots import kv_timeline_plot, latency_cdf_plot
from ridgeline.serving.scheduler import PreemptionMode, SchedulerConfig
from ridgeline.serving.spec_decode import SpecDecodeConfig
from ridgeline.sim import (
    SLO,
    Arrival,
    RequestSpec,
    SimConfig,
    SimResult,
    WorkloadSpec,
    generate,
    load_trace,
    parse_lengths,
    simulate,
)
from ridgeline.sim.buckets import CompileBudget
from ridgeline.sim.compiled import is_compiled_schedule
from ridgeline.sim.options import parse_disagg, parse_tiers
from ridgeline.sim.static_variants import (
    COMPILED_DEFAULT,
    ShapeOptions,
    compiled_note,
    static_variant,
)
from ridgeline.sim.variants import DEFAULT_VARIANTS, compare
from ridgeline.specs import get_accelerator, get_model

PROGRESS_MIN_REQUESTS = 2000


class Mode(StrEnum):
    """``simulate`` runs one configuration or compares several."""

    RUN = "run"
    COMPARE = "compare"


class WorkloadKind(StrEnum):
    """Synthetic workload kinds."""

    POISSON = "poisson"
    GAMMA = "gamma"
    SHARED_PREFIX = "shared-prefix"
    MULTI_TURN = "multi-turn"


def _opt(*names: str, help: str) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help)


def _workload(
    kind: WorkloadKind,
    trace: str | None,
    n: int,
    rate: float,
    lengths: tuple[str, str],
    shape: tuple[float, int, int, int],
    seed: int,
) -> list[RequestSpec]:
    """The requests: a trace (first ``n`` lines) or a synthetic workload."""
    if trace:
        return load_trace(trace, limit=n)
    cv, prefixes, prefix_len, turns = shape
    if kind is WorkloadKind.SHARED_PREFIX and not prefixes:
        prefixes, prefix_len = 8, prefix_len or 1024
    if kind is WorkloadKind.MULTI_TURN and turns < 2:
        turns = 4
    spec = WorkloadSpec(
        num_requests=n,
        rate_per_s=rate,
        arrival=Arrival.GAMMA if kind is WorkloadKind.GAMMA else Arrival.POISSON,
        cv=cv,
        prompt=parse_lengths(lengths[0], 512),
        output=parse_lengths(lengths[1], 128),
        num_prefixes=prefixes,
        prefix_len=prefix_len,
        turns=turns,
        seed=seed,
    )
    return generate(spec)


@contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    """A Rich progress bar on stderr for long runs (``None`` when not shown)."""
    if not enabled:
        yield None
        return
    columns = (TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("sim", total=total)
        yield lambda done: bar.update(task, completed=done)


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def _table(results: list[SimResult], title: str) -> Table:
    t = Table(title=title)
    heads = (
        "config", "done/rej", "req/s", "out tok/s", "goodput/s", "TTFT p50/p99 ms",
        "TPOT p50/p99 ms", "ITL p99 ms", "preempt", "max run", "KV peak", "unused alloc", "prefix hit",
    )  # fmt: skip
    for h in heads:
        t.add_column(h, justify="left" if h == "config" else "right", no_wrap=h == "config")
    for r in results:
        t.add_row(
            r.label or "run",
            f"{r.num_completed}/{r.num_rejected}",
            f"{r.requests_per_s:.2f}",
            f"{r.output_tokens_per_s:,.0f}",
            f"{r.goodput_per_s:.2f}",
            f"{_ms(r.ttft_s.p50)}/{_ms(r.ttft_s.p99)}",
            f"{_ms(r.tpot_s.p50)}/{_ms(r.tpot_s.p99)}",
            _ms(r.itl_s.p99),
            str(r.num_preemptions),
            str(r.max_running),
            f"{r.kv_peak_frac:.0%}",
            f"{r.unused_allocated_frac:.1%}",
            f"{r.prefix_hit_rate:.0%}",
        )
    return t


def _plots(results: list[SimResult], out: str) -> list[Path]:
    d = Path(out)
    return [
        kv_timeline_plot(results, d / "kv_use.png"),
        latency_cdf_plot(results, d / "latency_cdf.png"),
    ]


def simulate_cmd(
    mode: Annotated[Mode, typer.Argument(help="run (default) or compare")] = Mode.RUN,
    hw: HwOpt = "a100-80gb",
    model: ModelOpt = "llama-2-7b",
    workload: Annotated[
        WorkloadKind, _opt("--workload", help="synthetic workload kind")
    ] = WorkloadKind.POISSON,
    rate: Annotated[float, _opt("--rate", help="arrivals per second")] = 4.0,
    requests: Annotated[
        int, _opt("--requests", "-n", help="requests (trace: first N lines)")
    ] = 1000,
    prompt: Annotated[
        str, _opt("--prompt", help="prompt lengths DIST:MEAN[:P]")
    ] = "lognormal:1000",
    output: Annotated[str, _opt("--output", help="output lengths DIST:MEAN[:P]")] = "lognormal:200",
    cv: Annotated[float, _opt("--cv", help="gamma arrivals: coefficient of variation")] = 2.0,
    prefixes: Annotated[int, _opt("--prefixes", help="shared system prompts")] = 0,
    prefix_len: Annotated[int, _opt("--prefix-len", help="tokens per system prompt")] = 0,
    turns: Annotated[int, _opt("--turns", help="turns per conversation")] = 1,
    trace: Annotated[str | None, _opt("--trace", help="JSONL or CSV trace instead")] = None,
    policy: Annotated[str, _opt("--policy", help="fcfs, priority, contiguous, static")] = "fcfs",
    prefix_caching: Annotated[bool, _opt("--prefix-caching", help="reuse cached prefixes")] = False,
    chunk: Annotated[int, _opt("--chunk", help="token budget per step; 0: no chunking")] = 2048,
    max_seqs: Annotated[int, _opt("--max-seqs", help="most running requests")] = 256,
    max_model_len: Annotated[
        int, _opt("--max-model-len", help="longest request (0: the model's context)")
    ] = 0,
    block_size: Annotated[int, _opt("--block-size", help="tokens per KV block")] = 16,
    eviction: Annotated[str, _opt("--eviction", help="cached-block eviction: lru or lfu")] = "lru",
    mem_util: Annotated[float, _opt("--mem-util", help="device memory for weights + KV")] = 0.9,
    preemption: Annotated[
        PreemptionMode, _opt("--preemption", help="recompute or swap")
    ] = PreemptionMode.RECOMPUTE,
    spec_k: Annotated[int, _opt("--spec-k", help="draft tokens per step (0: off)")] = 0,
    spec_accept: Annotated[float, _opt("--spec-accept", help="draft acceptance rate")] = 0.7,
    spec_draft: Annotated[str | None, _opt("--spec-draft", help="draft model (cost)")] = None,
    tiers: Annotated[str | None, _opt("--tiers", help="host | NAME:BYTES:BW[:LAT],...")] = None,
    disagg: Annotated[str | None, _opt("--disagg", help="P:D prefill:decode instances")] = None,
    link_bw: Annotated[float, _opt("--link-bw", help="disagg link bytes/s")] = 50e9,
    link_latency: Annotated[float, _opt("--link-latency", help="disagg link latency s")] = 1e-3,
    bw_eff: Annotated[float, _opt("--bw-eff", help="fraction of peak bandwidth")] = 1.0,
    compute_eff: Annotated[float, _opt("--compute-eff", help="fraction of peak FLOP/s")] = 1.0,
    overhead: Annotated[float, _opt("--overhead", help="fixed seconds per step")] = 0.0,
    slo_ttft: Annotated[float, _opt("--slo-ttft", help="TTFT SLO (s) for goodput")] = 2.0,
    slo_tpot: Annotated[float, _opt("--slo-tpot", help="TPOT SLO (s) for goodput")] = 0.1,
    configs: Annotated[
        str | None, _opt("--configs", help="compare: variants (default: by accelerator)")
    ] = None,
    prefill_chunk: Annotated[int, _opt("--prefill-chunk", help="compiled prefill tokens")] = 512,
    compile_s: Annotated[float, _opt("--compile-s", help="seconds to compile a program")] = 20.0,
    compile_budget: Annotated[
        float, _opt("--compile-budget", help="compile seconds the deployment affords")
    ] = 1200.0,
    recompile: Annotated[
        bool, _opt("--recompile", help="compile a missing bucket instead of refusing")
    ] = False,
    seed: Annotated[int, _opt("--seed", help="workload and acceptance seed")] = 0,
    json_out: JsonOpt = False,
    plot: Annotated[
        str | None, _opt("--plot", help="write KV-use and latency-CDF PNGs here")
    ] = None,
) -> None:
    """Simulate serving a workload: latency, throughput and KV memory of one configuration,
    or of several (``ridgeline simulate compare --configs paged,contiguous,static``)."""
    m, acc = get_model(model), get_accelerator(hw)
    max_model_len = max_model_len or m.max_position_embeddings
    whole = policy in ("contiguous", "static")
    configs = configs or ",".join(
        COMPILED_DEFAULT if is_compiled_schedule(acc) else DEFAULT_VARIANTS
    )
    if spec_k and mode is Mode.COMPARE and "spec" in configs:
        raise ConfigError("--spec-k with compare: use the 'spec' variant or drop --spec-k")
    sched = SchedulerConfig(
        # reserving policies run whole prompts: their budget must hold the longest one
        max_num_batched_tokens=max(chunk, max_model_len) if whole else chunk or max_model_len,
        max_num_seqs=max_seqs,
        max_model_len=max_model_len,
        enable_chunked_prefill=chunk > 0,
        policy=policy,
        preemption=preemption,
        spec=SpecDecodeConfig(spec_k, spec_accept) if spec_k else None,
    )
    cfg = SimConfig(
        m, acc, sched, block_size=block_size, prefix_caching=prefix_caching, eviction=eviction,
        memory_utilization=mem_util,
        tiers=parse_tiers(tiers, acc) if tiers else (),
        efficiency=Efficiency(bw_eff, compute_eff, overhead),
        draft_model=get_model(spec_draft) if spec_draft else None,
        disagg=parse_disagg(disagg, link_bw, link_latency) if disagg else None,
        slo=SLO(slo_ttft, slo_tpot), seed=seed, label=policy,
    )  # fmt: skip
    wl = _workload(
        workload, trace, requests, rate, (prompt, output), (cv, prefixes, prefix_len, turns), seed
    )
    show = not json_out and len(wl) >= PROGRESS_MIN_REQUESTS
    shape_opts = ShapeOptions(
        CompileBudget(compile_s, compile_budget), prefill_chunk, recompile=recompile
    )
    if policy == "static" and is_compiled_schedule(acc):
        cfg = static_variant(cfg, "static", wl, shape_opts)
    if mode is Mode.COMPARE:
        names = [c.strip() for c in configs.split(",") if c.strip()]
        with _progress(len(names), show) as tick:
            started: list[str] = []

            def on_variant(label: str) -> None:
                if tick is not None:
                    tick(len(started))
                started.append(label)

            results = list(compare(cfg, wl, names, on_variant, shape_opts).results)
    else:
        with _progress(len(wl), show) as tick:
            results = [simulate(cfg, wl, tick)]
    _render(results, m.name, acc.name, json_out, plot)


def _render(
    results: list[SimResult], model: str, hw: str, json_out: bool, plot: str | None
) -> None:
    figs = _plots(results, plot) if plot else []
    if json_out:
        payload: dict[str, object] = {"schema": "ridgeline.simulate/1", "model": model, "hw": hw}
        payload["results"] = [r.to_dict() for r in results]
        payload["plots"] = [str(f) for f in figs]
        emit_json(payload)
        return
    n = results[0].num_requests
    console.print(_table(results, f"{model} on {hw}: {n} requests"))
    for r in results:
        if r.reject_reasons:
            console.print(f"[yellow]{r.label}: rejected {'; '.join(r.reject_reasons)}[/]")
    for r in results:
        if r.compiled is not None:
            console.print(compiled_note(r), highlight=False)
    for f in figs:
        console.print(f"wrote {f}")
