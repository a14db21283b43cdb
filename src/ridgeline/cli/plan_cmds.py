"""``ridgeline plan``: the cheapest deployment that meets latency targets, on every accelerator
asked, with how sure each figure is (``ridgeline.plan``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ridgeline import specs  # the catalog loads when a command runs, not for its --help
from ridgeline.cli.common import console, emit_json, err_console
from ridgeline.cli.options import grouped
from ridgeline.defaults import (
    DEFAULT_ACCELERATOR,
    DEFAULT_MODEL,
    DEFAULT_PROBE_REQUESTS,
    DEFAULT_PROBE_S,
    DEFAULT_SIMULATED,
)
from ridgeline.specs.cost_mode import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.units import fmt_seconds
from ridgeline.sweep.kinds import BackendKind

if TYPE_CHECKING:  # loaded when the command runs, not for its --help (start-up)
    from ridgeline.fidelity.residuals import Interval, NoInterval
    from ridgeline.plan import Plan, PlanRequest, Targets
    from ridgeline.plan.request import WorkloadChoice
    from ridgeline.plan.result import AcceleratorPlan, Candidate


def _opt(name: str, help: str, panel: str) -> typer.models.OptionInfo:
    return typer.Option(name, help=help, rich_help_panel=panel)


_T, _G, _S, _R = "Traffic", "Targets", "Search", "Run and output"


@dataclass(frozen=True, slots=True)
class TrafficOptions:
    """What arrives: fixed lengths, a trace, or a workload file; and at what rate."""

    rate: Annotated[float, _opt("--rate", "requests per second the deployment must carry", _T)]
    isl: Annotated[int | None, _opt("--isl", "prompt tokens per request", _T)] = None
    osl: Annotated[int | None, _opt("--osl", "output tokens per request", _T)] = None
    trace: Annotated[
        str | None,
        _opt("--trace", "a trace (JSONL or CSV, or a shipped sample) re-timed to the rate", _T),
    ] = None
    workload: Annotated[
        str | None,
        _opt(
            "--workload", "a TOML file with a [workload] table (a sweep spec's workload form)", _T
        ),
    ] = None
    duration: Annotated[float, _opt("--duration", "seconds of arrivals per simulation", _T)] = (
        DEFAULT_PROBE_S
    )
    max_requests: Annotated[int, _opt("--max-requests", "requests per simulation at most", _T)] = (
        DEFAULT_PROBE_REQUESTS
    )
    seed: Annotated[int, _opt("--seed", "workload and simulation seed", _T)] = 0

    def choice(self) -> WorkloadChoice:
        from ridgeline.plan.request import WorkloadChoice

        return WorkloadChoice(
            self.isl, self.osl, self.trace, self.workload, self.duration, self.max_requests
        )


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """Latency targets, both at one percentile."""

    ttft: Annotated[float, _opt("--ttft-p90", "time to first token target, seconds", _G)]
    tpot: Annotated[float, _opt("--tpot-p90", "time per output token target, seconds", _G)]
    percentile: Annotated[
        float, _opt("--percentile", "the percentile of both targets (90: p90)", _G)
    ] = 90.0

    def targets(self) -> Targets:
        from ridgeline.plan import Targets

        return Targets(self.ttft, self.tpot, self.percentile)


def _dtypes(text: str | None) -> tuple[DType, ...] | None:
    return None if text is None else tuple(DType.parse(x) for x in text.split(",") if x.strip())


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """Which accelerators, how many chips, which formats, which cost model."""

    hw: Annotated[
        str | None,
        _opt("--hw", f"accelerators, comma-separated (default {DEFAULT_ACCELERATOR})", _S),
    ] = None
    all_hw: Annotated[bool, _opt("--all", "every accelerator of the catalog", _S)] = False
    max_chips: Annotated[int, _opt("--max-chips", "most chips of the whole deployment", _S)] = (
        1_000_000
    )
    weight_dtypes: Annotated[
        str | None,
        _opt("--weight-dtypes", "weight formats (default: each chip's native bf16/fp8/fp4)", _S),
    ] = None
    kv_dtypes: Annotated[
        str | None, _opt("--kv-dtypes", "KV formats (default: 16-bit and fp8)", _S)
    ] = None
    ideal: Annotated[
        bool, _opt("--ideal", "the ideal roofline instead of the calibrated model", _S)
    ] = False
    simulate: Annotated[int, _opt("--simulate", "layouts simulated per accelerator", _S)] = (
        DEFAULT_SIMULATED
    )
    top: Annotated[int, _opt("--top", "layouts shown per accelerator", _S)] = 3

    def accelerators(self) -> tuple[str, ...]:
        if self.all_hw and self.hw:
            raise typer.BadParameter("give --hw or --all, not both")
        if self.all_hw:
            return tuple(specs.accelerator_names())
        names = (self.hw or DEFAULT_ACCELERATOR).split(",")
        return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Where the simulations run, prices, and the output."""

    backend: Annotated[
        BackendKind, _opt("--backend", "local process pool or a Ray cluster", _R)
    ] = BackendKind.LOCAL
    workers: Annotated[
        int | None, _opt("--workers", "processes (or Ray CPUs); 1 runs here", _R)
    ] = None
    address: Annotated[str | None, _opt("--address", "a Ray cluster to join", _R)] = None
    price: Annotated[
        str | None, _opt("--price", "TOML of [prices.<accelerator>] usd_per_chip_hour", _R)
    ] = None
    json_out: Annotated[
        bool, _opt("--json", "print JSON (stable schema) instead of tables", _R)
    ] = False


@grouped(TrafficOptions, TargetOptions, SearchOptions, RunOptions)
def plan_cmd(
    model: Annotated[
        str,
        typer.Option("--model", "-m", help="models (names or config.json paths), comma-separated"),
    ] = DEFAULT_MODEL,
    *,
    traffic: TrafficOptions,
    targets: TargetOptions,
    search: SearchOptions,
    run: RunOptions,
) -> None:
    """The cheapest deployment that meets latency targets, on every accelerator asked.

    Searches per accelerator tensor and pipeline parallel, weight and KV formats, aggregated
    or disaggregated serving and token budgets; bounds every layout analytically, simulates
    the best, and prints the winners, the Pareto front, why the others lost, and the winner's
    vLLM and SGLang command lines. Every figure carries an interval from validation.

    \b
    Example:
      ridgeline plan -m llama-3.1-8b --isl 1000 --osl 200 --rate 4 --ttft-p90 1 --tpot-p90 0.05
    """
    from ridgeline.plan import run_plans
    from ridgeline.sweep.backends import make_backend

    reqs = _requests(model, traffic, targets, search, run)
    backend = make_backend(run.backend, run.workers, run.address)
    with err_console.status("planning...") as status:
        plans = run_plans(reqs, backend, progress=lambda text: status.update(text))
    if run.json_out:
        one = len(plans) == 1
        emit_json(
            plans[0]
            if one
            else {"schema": "ridgeline.plans/1", "plans": [p.to_dict() for p in plans]}
        )
        return
    for plan in plans:
        render(plan, search.top)


def _requests(
    model: str,
    traffic: TrafficOptions,
    targets: TargetOptions,
    search: SearchOptions,
    run: RunOptions,
) -> list[PlanRequest]:
    """One request per model named (``-m a,b``), alike in everything else."""
    from ridgeline.plan import PlanRequest, load_prices

    models = [m.strip() for m in model.split(",") if m.strip()] or [DEFAULT_MODEL]
    base = PlanRequest(
        model=models[0],
        workload=traffic.choice().spec(),
        rate_rps=traffic.rate,
        targets=targets.targets(),
        accelerators=search.accelerators(),
        max_chips=search.max_chips,
        prices=load_prices(run.price) if run.price else {},
        weight_dtypes=_dtypes(search.weight_dtypes),
        kv_dtypes=_dtypes(search.kv_dtypes),
        mode=CostMode.IDEAL if search.ideal else CostMode.CALIBRATED,
        top=search.top,
        simulated=search.simulate,
        seed=traffic.seed,
    )
    return [replace(base, model=m) for m in dict.fromkeys(models)]


def render(plan: Plan, top: int) -> None:
    """The plan as tables: winners, front, why others lost, the check, the command lines."""
    t = plan.targets
    p = f"p{t.percentile:g}"
    console.print(
        f"{plan.model}, {plan.workload} at {plan.rate_rps:g} req/s; TTFT {p} <= "
        f"{fmt_seconds(t.ttft_s)}, TPOT {p} <= {fmt_seconds(t.tpot_s)}; "
        f"{'expected (calibrated)' if plan.mode is CostMode.CALIBRATED else 'ideal roofline'}"
    )
    console.print(f"[bold]{plan.verdict}[/bold]")
    if any(a.candidates for a in plan.accelerators):
        console.print(winners_table(plan, top))
    notes = [f"{a.accelerator}: {a.interval_note}" for a in plan.accelerators if a.interval_note]
    for note in notes:
        console.print(f"  no interval: {note}")
    if any(a.ruled_out for a in plan.accelerators):
        console.print(ruled_out_table(plan.accelerators))
    if plan.front:
        console.print(front_table(plan))
    for key, why in plan.reasons:
        console.print(f"  {key}: {why}")
    if plan.checks:
        console.print(checks_table(plan))
    for cmds in plan.commands:
        console.print(f"[bold]{cmds.engine}[/bold] ({cmds.note})")
        for line in cmds.lines:
            console.print(f"  {line}", markup=False, highlight=False)
    console.print(
        f"{sum(a.num_layouts for a in plan.accelerators):,} layouts screened, "
        f"{plan.num_simulations} simulations, {plan.wall_s:.1f} s; intervals: 80% of the "
        "family's held-out validation rows"
    )


def _with(value: str, iv: Interval | NoInterval | None, fmt: str) -> str:
    from ridgeline.fidelity.residuals import Interval

    if not isinstance(iv, Interval):
        return value
    if fmt == "s":
        return f"{value} [{fmt_seconds(iv.low)}-{fmt_seconds(iv.high)}]"
    return f"{value} [{iv.low:,.0f}-{iv.high:,.0f}]"


def _row(c: Candidate, targets: Targets) -> list[str]:
    from ridgeline.plan.result import copies_text

    lay = c.bound.layout
    iv = c.intervals
    if c.copies is None or c.met is None:
        miss = c.missed.missed(targets) if c.missed is not None else "the targets"
        what = [lay.accelerator, "-", lay.parallel_label, lay.serving.value, lay.formats.label]
        return [*what, "-", "-", "-", f"misses {miss}", "-"]
    r = c.met.result
    head = c.headroom(targets)
    per_chip = f"{c.tokens_per_s_per_chip:,.0f}" if c.tokens_per_s_per_chip else "-"
    usd = c.usd_per_million_tokens
    return [
        lay.accelerator,
        f"{c.chips} ({copies_text(c.copies)} x {lay.chips})",
        lay.parallel_label,
        lay.serving.value,
        f"{lay.formats.label}; seqs {lay.knobs.max_num_seqs}, budget {lay.knobs.max_num_batched_tokens}",
        _with(per_chip, iv.tokens_per_s_per_chip if iv else None, "n"),
        _with(fmt_seconds(r.ttft_p_s), iv.ttft_s if iv else None, "s"),
        _with(fmt_seconds(r.tpot_p_s), iv.tpot_s if iv else None, "s"),
        "-" if head is None else f"{head:.0%} ({c.tighter(targets)})",
        "-" if usd is None else f"${usd:,.2f}",
    ]


def winners_table(plan: Plan, top: int) -> Table:
    p = f"p{plan.targets.percentile:g}"
    t = Table(title=f"best layouts per accelerator (ranked by {plan.ranked_by})")
    columns = ["accelerator", "chips", "parallel", "serving", "formats and knobs"]
    columns += ["tok/s per chip", f"TTFT {p}", f"TPOT {p}", "headroom", "$ per M tok"]
    for col in columns:
        t.add_column(col, justify="left" if col in ("accelerator", "parallel") else "right")
    for a in plan.accelerators:
        for c in a.candidates[:top]:
            t.add_row(*_row(c, plan.targets))
    return t


def ruled_out_table(plans: tuple[AcceleratorPlan, ...]) -> Table:
    t = Table(
        "accelerator",
        "layouts",
        "ruled out by",
        "how many",
        "the closest of them",
        title="what the bound ruled out",
    )
    for a in plans:
        for m in a.ruled_out:
            t.add_row(
                a.accelerator,
                str(a.num_layouts),
                m.limit.value,
                str(m.count),
                f"{m.example.what}: {m.example.reason}",
            )
    return t


def front_table(plan: Plan) -> Table:
    t = Table(
        "#",
        "layout x copies",
        "tok/s per chip",
        "tok/s per user",
        title=f"Pareto front: throughput per chip against per-user speed (1 / TPOT p{plan.targets.percentile:g})",
    )
    for i, f in enumerate(plan.front, 1):
        t.add_row(str(i), f.label, f"{f.throughput_per_chip:,.0f}", f"{1 / f.latency_s:,.1f}")
    return t


def checks_table(plan: Plan) -> Table:
    p = f"p{plan.targets.percentile:g}"
    t = Table(
        "rate", "per copy", f"TTFT {p}", f"TPOT {p}", "meets", title="the winner at other rates"
    )
    for c in plan.checks:
        r = c.probe.result
        early = " (stopped)" if r.decided_early else ""
        t.add_row(
            f"{c.factor:g}x = {c.factor * plan.rate_rps:g} req/s",
            f"{c.probe.rate_per_copy_rps:.3g} req/s",
            "over target" + early if r.decided_early else fmt_seconds(r.ttft_p_s),
            "-" if r.decided_early else fmt_seconds(r.tpot_p_s),
            "yes" if c.meets else "no",
        )
    return t
