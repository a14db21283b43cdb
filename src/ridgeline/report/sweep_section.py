"""The sweep section of ``ridgeline report`` (only when a sweep store is given: it reads a
database, it runs no simulation) and the tables and front plot that ``ridgeline sweep report``
shows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from ridgeline.report.document import Section, Table
from ridgeline.report.figures import new_figure, save_figure
from ridgeline.sweep import SweepReport, read_store, sweep_report

if TYPE_CHECKING:
    from ridgeline.report.build import ReportContext


def _num(value: float | None, fmt: str = ".3g") -> str:
    return "—" if value is None else format(value, fmt)


def markdown(t: Table) -> str:
    """A table as Markdown, caption in bold above it."""
    lines = [f"**{t.caption}**", ""] if t.caption else []
    lines += ["| " + " | ".join(t.headers) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(row) + " |" for row in t.rows]
    return "\n".join(lines) + "\n"


def ranked_table(rep: SweepReport, top: int = 20) -> Table:
    """The best ``top`` configurations: capacity, objective, and latency at capacity."""
    rows = []
    for i, s in enumerate(rep.ranked[:top], start=1):
        cap = s.at_capacity
        rows.append(
            (
                str(i),
                s.label,
                s.status,
                _num(s.capacity_rps),
                _num(s.objective),
                _num(cap.ttft_p_s if cap else None),
                _num(cap.tpot_p_s if cap else None),
                _num(cap.output_tokens_per_s / s.chips if cap else None, ",.0f"),
                str(s.num_probes),
            )
        )
    pct = rep.slo.get("percentile", 90)
    headers = (
        "#",
        "configuration",
        "status",
        "capacity req/s",
        rep.objective,
        f"TTFT p{pct:g} s",
        f"TPOT p{pct:g} s",
        "out tok/s/chip",
        "probes",
    )
    return Table(
        headers, tuple(rows), caption=f"Best configurations by {rep.objective} — {rep.label}"
    )


def front_table(rep: SweepReport) -> Table:
    """The Pareto front: throughput per chip against the SLO percentile of TPOT."""
    pct = rep.slo.get("percentile", 90)
    rows = tuple(
        (
            str(i),
            p.label,
            f"{p.rate_rps:.3g}",
            f"{p.throughput_per_chip:,.0f}",
            f"{p.latency_s:.4g}",
        )
        for i, p in enumerate(rep.front, start=1)
    )
    headers = ("#", "configuration", "rate req/s", "out tok/s/chip", f"TPOT p{pct:g} s")
    return Table(headers, rows, caption=f"Pareto front (probes within the SLOs) — {rep.label}")


def plot_front(rep: SweepReport, title: str | None = None) -> Figure:
    """Every SLO-meeting point of the front, numbered as in ``front_table``, with the front
    drawn as a step line; the numbers' configurations are listed beside the plot, so long
    labels never overlap the points or each other."""
    fig, ax = new_figure((11, 5.5))
    xs = [p.throughput_per_chip for p in rep.front]
    ys = [p.latency_s * 1e3 for p in rep.front]
    ax.step(xs, ys, where="post", color="0.6", lw=1)
    ax.scatter(xs, ys, zorder=3)
    for i, (x, y) in enumerate(zip(xs, ys, strict=True), start=1):
        ax.annotate(str(i), (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
    key = "\n".join(f"{i}. {p.label}" for i, p in enumerate(rep.front, start=1))
    ax.text(1.02, 1.0, key, transform=ax.transAxes, va="top", fontsize=7, family="monospace")
    pct = rep.slo.get("percentile", 90)
    ax.set_xlabel("output tokens/s per chip")
    ax.set_ylabel(f"TPOT p{pct:g} (ms)")
    ax.set_title(
        title or f"{rep.name}: latency vs throughput per chip (Pareto front) — {rep.label}"
    )
    ax.grid(alpha=0.3)
    return fig


def sweep_section(db: str | Path) -> Callable[[ReportContext], Section]:
    """A report section builder for the sweep stored at ``db`` (for the report's model, when
    the sweep has it; otherwise for all models). The store is read now: a missing or broken
    one fails before any section is built."""
    data = read_store(db)

    def build(ctx: ReportContext) -> Section:
        models = {c.config["model"] for c in data.configs}
        rep = sweep_report(data, ctx.model.name if ctx.model.name in models else None)
        fig = save_figure(plot_front(rep), ctx.figure("sweep_front.png"))
        best = rep.best
        lead = (
            f"Sweep '{rep.name}' ({db}): {rep.num_configs} configurations, {rep.num_probes} "
            f"simulations, priced {rep.label}; objective {rep.objective}."
        )
        if best is not None:
            lead += f" Best: {best.label} at {best.capacity_rps:.3g} req/s."
        return Section(
            "sweep",
            "Capacity sweep",
            paragraphs=(lead,),
            tables=(ranked_table(rep, 10), front_table(rep)),
            figures=(fig,),
            data=rep.to_dict(),
        )

    return build
