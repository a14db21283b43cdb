"""``ridgeline sweep run|status|report``: capacity sweeps from a TOML spec, stored as they run."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from ridgeline.cli.common import (
    JsonOpt,
    PlotOpt,
    Tick,
    console,
    emit_json,
    new_app,
    progress_bar,
    save_plot,
)
from ridgeline.errors import ConfigError
from ridgeline.specs.cost_mode import CostMode
from ridgeline.sweep.kinds import BackendKind, Objective, StoreFormat

if TYPE_CHECKING:  # loaded when a command runs, not for its --help (start-up)
    from ridgeline.report.document import Table
    from ridgeline.sweep import ChipSplit, SweepOutcome, SweepReport, SweepSpec
    from ridgeline.sweep import Progress as SweepProgress

sweep_app = new_app("Capacity sweeps: the highest request rate within SLOs, per configuration.")

DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="result store (default: SPEC's name with .db or .parquet)"),
]
ListOpt = Annotated[str | None, typer.Option(help="comma-separated; replaces the spec's axis")]


AddressOpt = Annotated[
    str | None, typer.Option(help="Ray cluster to join (default: start a local one)")
]
WorkersOpt = Annotated[
    int | None, typer.Option(help="processes (local) or CPUs (ray); default: all cores")
]
SimulatorOpt = Annotated[str | None, typer.Option(help="module:factory of another point simulator")]


def _split(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(t.strip() for t in text.split(",") if t.strip())


def _chips(text: str | None) -> tuple[ChipSplit, ...] | None:
    """``--chips 1,2,4``: tensor parallel over all chips, as the spec's ``sweep.chips``."""
    from ridgeline.sweep import ChipSplit

    if text is None:
        return None
    try:
        return tuple(ChipSplit(int(c), int(c)) for c in text.split(","))
    except ValueError:
        raise ConfigError(f"--chips {text!r}: expected integers like 1,2,4") from None


def _rich(t: Table) -> RichTable:
    table = RichTable(title=t.caption or None)
    for header in t.headers:
        table.add_column(header, overflow="fold")
    for row in t.rows:
        table.add_row(*(escape(cell) for cell in row))  # labels hold [knob=value]
    return table


def _describe(p: SweepProgress) -> str:
    best = "—" if p.best_label is None else f"{p.best_label} ({p.best_objective:.3g})"
    return escape(f"{p.num_simulated} sims, {p.num_reused} reused · best: {best}")


@sweep_app.command("run")
def run_cmd(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="sweep spec (TOML)")],
    db: DbOpt = None,
    fmt: Annotated[StoreFormat, typer.Option("--format", help="store format")] = StoreFormat.SQLITE,
    backend: Annotated[BackendKind, typer.Option(help="where probes run")] = BackendKind.LOCAL,
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    objective: Annotated[Objective | None, typer.Option(help="replaces the spec's")] = None,
    seed: Annotated[int | None, typer.Option(help="replaces the spec's")] = None,
    models: ListOpt = None,
    accelerators: ListOpt = None,
    chips: ListOpt = None,
    simulator: SimulatorOpt = None,
    ideal: Annotated[
        bool, typer.Option("--ideal", help="price on the ideal roofline (replaces the spec's mode)")
    ] = False,
    progress: Annotated[bool, typer.Option(help="show a progress bar on stderr")] = True,
    json_out: JsonOpt = False,
) -> None:
    """Run (or resume) the sweep of SPEC; every probe is stored as it finishes.

    Probes are priced calibrated (the expected step times) unless the spec's mode or --ideal
    says ideal.

    \b
    Example:
      ridgeline sweep run examples/sweep_example.toml
    """
    import ridgeline.sweep as sw  # a lazy package: each name loads its module when used

    spec = sw.with_overrides(
        sw.load_spec(spec_path),
        objective=objective,
        seed=seed,
        models=_split(models),
        accelerators=_split(accelerators),
        deployments=_chips(chips),
        mode=CostMode.IDEAL if ideal else None,
    )
    sim = sw.load_simulator(simulator)
    db = db or f"{spec_path.stem}.{'parquet' if fmt is StoreFormat.PARQUET else 'db'}"
    n = len(spec.configurations())
    with closing(sw.open_store(db, fmt)) as store, progress_bar(n, progress, "sweep") as tick:
        runner = sw.make_backend(backend, workers, address)
        outcome = sw.run_sweep(spec, store, runner, sim, _on_progress(tick))
    _print_run(spec, outcome, sw.sweep_report(sw.read_store(db)), json_out)


def _on_progress(tick: Tick | None) -> Callable[[SweepProgress], None]:
    """The bar: configurations finished, and the best so far."""

    def update(p: SweepProgress) -> None:
        if tick is not None:
            tick(p.num_finished, _describe(p))

    return update


def _print_run(spec: SweepSpec, outcome: SweepOutcome, rep: SweepReport, json_out: bool) -> None:
    """What ``sweep run`` prints: the ranked table and the counts, or them as JSON."""
    from ridgeline.report.sweep_section import ranked_table

    n = len(spec.configurations())
    if json_out:
        counts = {
            "num_simulated": outcome.num_simulated,
            "num_reused": outcome.num_reused,
            "num_decided_early": outcome.num_decided_early,
        }
        emit_json(
            {
                "schema": "ridgeline.sweep-run/2",
                "mode": spec.mode.value,
                "num_configs": n,
                **counts,
                "wall_s": outcome.wall_s,
                "report": rep.to_dict(),
            }
        )
        return
    console.print(_rich(ranked_table(rep, 10)))
    console.print(
        f"{n} configurations, {outcome.num_simulated} simulations run "
        f"({outcome.num_decided_early} stopped once the SLOs were missed), "
        f"{outcome.num_reused} reused from the store, {outcome.wall_s:.1f} s"
    )


@sweep_app.command("status")
def status_cmd(
    db: Annotated[str, typer.Argument(metavar="DB", help="result store")],
    json_out: JsonOpt = False,
) -> None:
    """How far a stored sweep got: configurations by status, probes stored, best so far.

    \b
    Example:
      ridgeline sweep status out/example.db
    """
    from ridgeline.sweep import read_store, sweep_report

    rep = sweep_report(read_store(db))
    best = rep.best_by_model()
    payload = {
        "schema": "ridgeline.sweep-status/2",
        "name": rep.name,
        "mode": rep.mode,
        "num_configs": rep.num_configs,
        "num_probes": rep.num_probes,
        "status_counts": rep.status_counts,
        "best": {m: {"label": b.label, "objective": b.objective} for m, b in best.items()},
    }
    if json_out:
        emit_json(payload)
        return
    counts = ", ".join(f"{k} {v}" for k, v in rep.status_counts.items())
    console.print(
        f"sweep '{rep.name}' ({rep.label}): {rep.num_configs} configurations ({counts})",
        markup=False,
    )
    console.print(f"{rep.num_probes} probes stored")
    for b in best.values():
        line = f"best so far for {b.model}: {b.label}: {b.objective or 0:.4g} {rep.objective}"
        console.print(line, markup=False)


@sweep_app.command("report")
def report_cmd(
    db: Annotated[str, typer.Argument(metavar="DB", help="result store")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="only this model")] = None,
    top: Annotated[int, typer.Option(help="rows of the ranking")] = 20,
    plot: PlotOpt = None,
    markdown: Annotated[bool, typer.Option(help="print Markdown tables")] = False,
    json_out: JsonOpt = False,
) -> None:
    """The best configurations and the Pareto front of latency vs throughput per chip.

    \b
    Example:
      ridgeline sweep report out/example.db --plot out/front.png
    """
    from ridgeline.report.sweep_section import front_table, plot_front, ranked_table
    from ridgeline.report.sweep_section import markdown as md_table
    from ridgeline.sweep import read_store, sweep_report

    rep = sweep_report(read_store(db), model)
    if plot:
        save_plot(plot_front(rep), plot)
    if json_out:
        emit_json(rep)
        return
    if markdown:
        typer.echo(md_table(ranked_table(rep, top)) + "\n" + md_table(front_table(rep)))
        return
    console.print(_rich(ranked_table(rep, top)))
    console.print(_rich(front_table(rep)))
    if plot:
        console.print(f"wrote {plot}")
