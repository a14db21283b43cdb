"""Layout as a picture and a report section: bank conflicts by stride, alignment to the transfer
granule, and the bytes a row- or column-major walk fetches (``analytic.layout``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from ridgeline.analytic.layout import LayoutQuery, LayoutReport, layout_report
from ridgeline.errors import ConfigError
from ridgeline.report.document import Section, Table
from ridgeline.report.figures import new_figure, save_figure
from ridgeline.specs import get_accelerator
from ridgeline.specs.units import fmt_bytes, fmt_rate

if TYPE_CHECKING:
    from ridgeline.report.build import ReportContext

BANK_HW, BANK_LEVEL = "h100-sxm", "smem"  # the catalog level with a bank layout
GRANULE_HW = "ibm-spyre"  # 128-B sticks


def layout_plot(rep: LayoutReport) -> Figure:
    """Three panels: conflict degree against stride, useful share against offset, and bytes
    fetched per useful byte for the two walks."""
    fig, axes = new_figure((12, 3.8), 1, 3)
    strides = [b.stride_words for b in rep.banks]
    axes[0].bar([str(s) for s in strides], [b.conflict_degree for b in rep.banks])
    axes[0].set(xlabel="stride (words)", ylabel="conflict degree", title=f"banks: {rep.bank_level}")
    axes[1].plot(
        [a.offset_bytes for a in rep.alignments], [a.efficiency for a in rep.alignments], marker="o"
    )
    axes[1].set(
        xlabel="offset (B)",
        ylabel="useful / transferred",
        ylim=(0, 1.05),
        title=f"{rep.alignments[0].size_bytes:.0f}-B access, {rep.granule_bytes:.0f}-B granule",
    )
    axes[2].bar([t.order.value for t in rep.traversals], [t.amplification for t in rep.traversals])
    axes[2].set(
        ylabel="bytes fetched per useful byte",
        yscale="log",
        title=f"[{rep.shape[0]}x{rep.shape[1]}] walk, {rep.line_bytes:.0f}-B lines",
    )
    return fig


def layout_tables(rep: LayoutReport) -> tuple[Table, Table, Table]:
    """The report's three tables (the CLI prints the same rows)."""
    banks = Table(
        ("stride (words)", "conflict degree", "effective bandwidth"),
        tuple(
            (
                str(b.stride_words),
                str(b.conflict_degree),
                fmt_rate(b.effective_bytes_per_s, "B/s") if b.effective_bytes_per_s else "—",
            )
            for b in rep.banks
        ),
        f"Bank conflicts: lane i reads word i·stride on {rep.bank_level}",
    )
    aligns = Table(
        ("offset", "granules touched", "aligned", "useful share"),
        tuple(
            (
                fmt_bytes(a.offset_bytes),
                str(a.granules_touched),
                str(a.granules_aligned),
                f"{a.efficiency:.0%}",
            )
            for a in rep.alignments
        ),
        f"Alignment: a {fmt_bytes(rep.alignments[0].size_bytes)} access, "
        f"{rep.granule_bytes:.0f}-B granules",
    )
    walks = Table(
        ("order", "useful", "fetched", "fetched per useful byte"),
        tuple(
            (
                t.order.value,
                fmt_bytes(t.useful_bytes),
                fmt_bytes(t.fetched_bytes),
                f"{t.amplification:.3g}",
            )
            for t in rep.traversals
        ),
        f"Access order: a row-major [{rep.shape[0]}x{rep.shape[1]}] array of "
        f"{rep.elem_bytes:.0f}-B elements, {rep.line_bytes:.0f}-B transfers",
    )
    return banks, aligns, walks


def default_layout() -> LayoutReport:
    """H100 shared-memory banks, Spyre's 128-B sticks, a [1024x1024] fp32 walk."""
    level = get_accelerator(BANK_HW).level(BANK_LEVEL)
    return layout_report(level, granule_of(GRANULE_HW), LayoutQuery())


def granule_of(hw: str) -> float:
    """The device-memory transfer granule of a catalog accelerator."""
    acc = get_accelerator(hw)
    granule = acc.device.granule_bytes
    if granule is None:
        raise ConfigError(
            f"{acc.name}: field granule_bytes: the catalog gives no granule; give --granule"
        )
    return granule


def layout_section(ctx: ReportContext) -> Section:
    """Layout and access: the same numbers as ``ridgeline layout``."""
    rep = default_layout()
    walk = {t.order.value: t.amplification for t in rep.traversals}
    para = (
        "How the way bytes are touched sets the bandwidth: lanes of a warp whose words share a "
        "bank serialise (degree gcd(stride, 32)); an access that starts off a transfer granule "
        "moves one granule more; walking a row-major array column by column fetches a whole "
        f"line per element ({walk['column-major']:.3g} bytes per useful byte here, against "
        f"{walk['row-major']:.3g} row by row)."
    )
    return Section(
        "layout",
        "Layout: banks, alignment, access order",
        paragraphs=(para,),
        tables=layout_tables(rep),
        figures=(save_figure(layout_plot(rep), ctx.figure("layout.png")),),
        data=rep.to_dict(),
    )
