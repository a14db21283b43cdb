"""``ridgeline simulate``: one serving configuration, or ``simulate compare`` for several."""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ridgeline.cli.common import (
    HwOpt,
    ModelOpt,
    console,
    emit_json,
    err_console,
    progress_bar,
    save_plot,
)
from ridgeline.cli.options import grouped
from ridgeline.cli.simulate_options import (
    CostOptions,
    OutputOptions,
    ServingOptions,
    ShapeGroupOptions,
    TopologyOptions,
    WorkloadOptions,
)
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL
from ridgeline.errors import ConfigError
from ridgeline.serving.policies import PolicyKind

if TYPE_CHECKING:  # loaded when the command runs, not for its --help (start-up)
    from ridgeline.sim import RequestSpec, SimConfig, SimResult

PROGRESS_MIN_REQUESTS = 2000


class Mode(StrEnum):
    """``simulate`` runs one configuration or compares several."""

    RUN = "run"
    COMPARE = "compare"


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def _table(results: list[SimResult], title: str) -> Table:
    t = Table(title=title)
    heads = (
        "config",
        "done/rej",
        "req/s",
        "out tok/s",
        "goodput/s",
        "TTFT p50/p99 ms",
        "TPOT p50/p99 ms",
        "ITL p99 ms",
        "preempt",
        "max run",
        "KV peak",
        "unused alloc",
        "prefix hit",
    )
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


def _plots(results: list[SimResult], out: str, label: str) -> list[Path]:
    from ridgeline.report.serving_plots import kv_timeline_plot, latency_cdf_plot

    d = Path(out)
    return [
        save_plot(kv_timeline_plot(results, label), d / "kv_use.png"),
        save_plot(latency_cdf_plot(results, label), d / "latency_cdf.png"),
    ]


def _sim_config(
    model: str,
    hw: str,
    serving: ServingOptions,
    cost: CostOptions,
    topo: TopologyOptions,
    out: OutputOptions,
    seed: int,
) -> SimConfig:
    """The simulated server: its pricing (mode, deployment, data types: built once here), the
    engine profile's scheduler and host work, its KV pool, tiers and topology."""
    from ridgeline.analytic.deployment import check_deployment
    from ridgeline.sim.engines import EngineRun, engine_sim_config
    from ridgeline.sim.options import parse_disagg, parse_tiers
    from ridgeline.specs import get_accelerator, get_model
    from ridgeline.specs.engines import get_engine

    m, acc = get_model(model), get_accelerator(hw)
    pricing = cost.pricing(acc)
    check_deployment(m, pricing.deployment)
    cfg = engine_sim_config(m, pricing, EngineRun(get_engine(serving.engine), serving.setup()))
    return replace(
        cfg,
        scheduler=replace(cfg.scheduler, spec=topo.spec()),
        eviction=serving.eviction,
        tiers=parse_tiers(topo.tiers, acc) if topo.tiers else cfg.tiers,  # --cpu-kv-blocks'
        draft_model=get_model(topo.spec_draft) if topo.spec_draft else None,
        disagg=parse_disagg(topo.disagg, topo.link_bw, topo.link_latency) if topo.disagg else None,
        slo=out.slo(),
        seed=seed,
        label=cfg.scheduler.policy.value if serving.engine == "generic" else serving.engine,
    )


def _run(
    cfg: SimConfig,
    wl: list[RequestSpec],
    variants: list[str] | None,
    show: bool,
    shapes: ShapeGroupOptions,
    clients: int | None = None,
) -> list[SimResult]:
    """One simulation (``variants`` None) or one per variant, with a progress bar if ``show``;
    a closed loop of ``clients`` when given. The compiled shapes and the variants load only
    for a comparison (a plain run starts without them)."""
    from ridgeline.sim import simulate

    if variants is None:
        with progress_bar(len(wl), show, "simulating") as tick:
            return [simulate(cfg, wl, tick, clients)]
    from ridgeline.sim.variants import compare

    with progress_bar(len(variants), show, "simulating") as tick:
        started: list[str] = []

        def on_variant(label: str) -> None:
            if tick is not None:
                tick(len(started))
            started.append(label)

        return list(compare(cfg, wl, variants, on_variant, shapes.shape_options()).results)


@grouped(
    WorkloadOptions, ServingOptions, CostOptions, TopologyOptions, ShapeGroupOptions, OutputOptions
)
def simulate_cmd(
    mode: Annotated[Mode, typer.Argument(help="run (default) or compare")] = Mode.RUN,
    hw: HwOpt = DEFAULT_ACCELERATOR,
    model: ModelOpt = DEFAULT_MODEL,
    *,
    workload: WorkloadOptions,
    serving: ServingOptions,
    cost: CostOptions,
    topology: TopologyOptions,
    shapes: ShapeGroupOptions,
    output: OutputOptions,
) -> None:
    """Simulate serving a workload: latency, throughput and KV memory.

    One configuration, or several side by side (simulate compare --configs paged,static); steps
    priced calibrated (the expected times) unless --ideal.

    \b
    Example:
      ridgeline simulate --hw h100-sxm --model llama-3.1-70b --tp 4 --rate 2 -n 500
    """
    cfg = _sim_config(model, hw, serving, cost, topology, output, workload.seed)
    variants = output.variants(cfg.hw) if mode is Mode.COMPARE else None
    if topology.spec_k and variants and any("spec" in v for v in variants):
        raise ConfigError("--spec-k with compare: use the 'spec' variant or drop --spec-k")
    if workload.concurrency and variants:
        raise ConfigError("--concurrency: one configuration (no compare)")
    wl = workload.requests_to_serve()
    if workload.concurrency:  # a closed loop: clients send at once, then as requests end
        wl = [replace(r, arrival_s=0.0) for r in wl]
    show = not output.json_out and len(wl) >= PROGRESS_MIN_REQUESTS
    if serving.policy is PolicyKind.STATIC:
        cfg = _static(cfg, wl, shapes)
    results = _run(cfg, wl, variants, show, shapes, workload.concurrency)
    _say_fast_mode_off(results)
    _render(results, cfg, output.json_out, output.plot)


def _static(cfg: SimConfig, wl: list[RequestSpec], shapes: ShapeGroupOptions) -> SimConfig:
    """``cfg`` with the static policy's compiled shapes where the accelerator runs compiled
    programs (loaded only for the static policy)."""
    from ridgeline.sim.compiled import is_compiled_schedule
    from ridgeline.sim.static_variants import static_variant

    if not is_compiled_schedule(cfg.hw):
        return cfg
    return static_variant(cfg, "static", wl, shapes.shape_options())


def _say_fast_mode_off(results: list[SimResult]) -> None:
    """One line on stderr for each run the fast mode did not cover, naming why (stdout, and
    the JSON with it, stays as it is; the JSON's ``fast_mode`` says the same)."""
    several = len(results) > 1
    for r in results:
        if r.fast_mode_off is not None:
            who = f"{r.label or 'run'}: " if several else ""
            err_console.print(
                f"{who}fast mode off: {r.fast_mode_off.why} (the step loop runs it, ~10x slower)",
                highlight=False,
                markup=False,
                soft_wrap=True,  # one line whatever the terminal's width (a test reads it)
            )


def _render(results: list[SimResult], cfg: SimConfig, json_out: bool, plot: str | None) -> None:
    pricing = cfg.pricing
    figs = _plots(results, plot, pricing.label) if plot else []
    if json_out:
        payload: dict[str, object] = {
            "schema": "ridgeline.simulate/3",
            "model": cfg.model.name,
            "hw": cfg.hw.name,
            "mode": pricing.mode.value,
            "pricing": pricing.to_dict(),
        }
        payload["results"] = [r.to_dict() for r in results]
        payload["plots"] = [str(f) for f in figs]
        emit_json(payload)
        return
    n = results[0].num_requests
    where = pricing.deployment.label if pricing.deployment.chips > 1 else cfg.hw.name
    console.print(_table(results, f"{cfg.model.name} on {where}: {n} requests — {pricing.label}"))
    for r in results:
        if r.reject_reasons:
            console.print(f"[yellow]{r.label}: rejected {'; '.join(r.reject_reasons)}[/]")
    for r in results:
        if r.compiled is not None:
            from ridgeline.sim.static_variants import compiled_note

            console.print(compiled_note(r), highlight=False)
    for f in figs:
        console.print(f"wrote {f}")
