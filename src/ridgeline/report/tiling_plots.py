"""Tiling plots (each returns a matplotlib ``Figure``): intensity against tile size, FlashAttention traffic
against sequence length, and the timeline of a compiled scratchpad schedule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ridgeline.analytic.dataflow import Schedule, step_timeline
from ridgeline.analytic.flash import FlashTable
from ridgeline.analytic.tiling import IntensityCurve
from ridgeline.report.figures import colors, new_figure


def intensity_plot(curves: Sequence[tuple[str, IntensityCurve]], title: str) -> Figure:
    """Intensity at DRAM against square tile edge; solid where the tile fits the scratchpad,
    dotted where it does not; each scratchpad's ridge point as a dashed line."""
    fig, ax = new_figure((8, 5))
    for (label, c), color in zip(curves, colors(), strict=False):
        edges = [p.edge for p in c.points]
        ai = [p.intensity for p in c.points]
        fit = [p.edge for p in c.points if p.fits]
        ax.plot(edges, ai, ":", color=color, lw=1.2)
        ax.plot(fit, [p.intensity for p in c.points if p.fits], "o-", color=color, label=label)
        ax.axhline(c.ridge_point, ls="--", color=color, lw=1, alpha=0.7)
        where = label.split(",")[0]
        ax.annotate(
            f"ridge {c.ridge_point:.0f} ({where})",
            (edges[0], c.ridge_point * 1.05),
            color=color,
            fontsize=8,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("square tile edge (elements); dotted = does not fit the scratchpad")
    ax.set_ylabel("arithmetic intensity at DRAM (FLOP/B)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def flash_plot(table: FlashTable) -> Figure:
    """Per-layer attention traffic against N: prefill (standard vs tiled per memory) and
    decode (Flash-Decoding per memory vs standard)."""
    fig, (pre, dec) = new_figure((11, 4.5), 1, 2)
    first = table.memories[0].name
    base = [r for r in table.rows if r.memory == first]
    ns = [r.n for r in base]
    pre.plot(ns, [r.prefill_standard_bytes for r in base], "k-s", label="standard (S, P in HBM)")
    dec.plot(
        ns, [r.decode.standard_bytes * r.heads for r in base], "k-s", label="standard (unfused)"
    )
    for mem, color in zip(table.memories, colors(), strict=False):
        rows = [r for r in table.rows if r.memory == mem.name]
        bc, br = rows[0].prefill.blocks.bc, rows[0].prefill.blocks.br
        pre.plot(
            ns,
            [r.prefill_flash_bytes for r in rows],
            "o-",
            color=color,
            label=f"tiled, {mem.name} (Bc={bc}, Br={br})",
        )
        dec.plot(
            ns,
            [r.decode_flash_bytes for r in rows],
            "o--",
            color=color,
            label=f"Flash-Decoding, {mem.name}",
        )
    for ax, what in ((pre, "prefill"), (dec, "decode (one new token)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length N (tokens)")
        ax.set_ylabel("HBM bytes per layer (one sequence)")
        ax.set_title(f"{table.model}: attention traffic, {what}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def timeline_plot(s: Schedule) -> Figure:
    """The step (ops over time), one layer's per-core lanes (DMA, ring, compute) and the
    scratchpad occupancy of that layer."""
    fig, (top, mid, low) = new_figure(
        (11, 7.5), 3, 1, gridspec_kw={"height_ratios": [1.1, 1.6, 1.2]}
    )
    names = [r.program.name for r in s.runs]
    color = {n: c for n, c in zip(names, _cycle(len(names)), strict=True)}
    segs = step_timeline(s)
    for name in names:
        spans = [(g.start_s * 1e3, (g.end_s - g.start_s) * 1e3) for g in segs if g.name == name]
        top.broken_barh(spans, (-0.4, 0.8), color=color[name])
    top.axvline(s.roofline_time_s * 1e3, color="k", ls="--", lw=1)
    top.set_ylim(-0.6, 0.6)
    top.set_yticks([])
    top.set_xlabel("ms")
    top.set_title(
        f"{s.model} {s.workload.phase.value} on {s.accelerator} (batch {s.workload.batch}, "
        f"context {s.workload.context_len}, bucket {s.bucket.batch}x{s.bucket.context}): "
        f"{s.time_s * 1e3:.2f} ms simulated, roofline {s.roofline_time_s * 1e3:.2f} ms (dashed)",
        fontsize=9,
    )
    layer = [g for g in segs if g.layer == 0]
    _lanes(mid, s, layer, color)
    _occupancy(low, s, layer)
    handles = [Rectangle((0, 0), 1, 1, color=color[n]) for n in names]
    fig.legend(handles, names, loc="center right", fontsize=8, frameon=False)
    fig.set_layout_engine("tight", rect=(0, 0, 0.86, 1))
    return fig


def _cycle(n: int) -> list[Any]:
    """Distinct colours: tab10, then the light half of tab20."""
    cmap10, cmap20 = matplotlib.colormaps["tab10"], matplotlib.colormaps["tab20"]
    return [cmap10(i) if i < 10 else cmap20((2 * i + 1) % 20) for i in range(n)]


def _lanes(ax: Axes, s: Schedule, layer: list, color: dict) -> None:
    lanes = {"dma": 2, "ring": 1, "compute": 0}
    runs = {r.program.name: r for r in s.runs}
    for seg in layer:
        for lane, y in lanes.items():
            spans = [
                ((seg.start_s + ev.start_s) * 1e6, (ev.end_s - ev.start_s) * 1e6)
                for ev in runs[seg.name].events
                if ev.lane == lane
            ]
            edge = "white" if lane == "dma" else "none"
            ax.broken_barh(spans, (y - 0.4, 0.8), facecolor=color[seg.name], edgecolor=edge, lw=0.3)
    busy = {lane: 0.0 for lane in lanes}
    for seg in layer:
        for ev in runs[seg.name].events:
            busy[ev.lane] += ev.end_s - ev.start_s
    span = layer[-1].end_s - layer[0].start_s if layer else 1.0
    text = ", ".join(f"{lane} busy {b / span:.1%}" for lane, b in busy.items())
    ax.set_yticks(list(lanes.values()), ["DMA (load/store)", "ring", "compute"])
    ax.set_xlabel("µs (layer 0, one core; every core runs the same program)")
    ax.set_title(
        f"one layer, per-core lanes (double-buffered loads overlap compute): {text}", fontsize=9
    )


def _occupancy(ax: Axes, s: Schedule, layer: list) -> None:
    runs = {r.program.name: r for r in s.runs}
    xs: list[float] = []
    ys: list[float] = []
    for seg in layer:
        occ = runs[seg.name].program.occupancy_bytes / 1e6
        xs += [seg.start_s * 1e6, seg.end_s * 1e6]
        ys += [occ, occ]
    ax.plot(xs, ys, "b-")
    ax.fill_between(xs, ys, alpha=0.2)
    ax.axhline(s.core.capacity_bytes / 1e6, color="r", ls="--", lw=1, label="usable scratchpad")
    ax.set_ylabel("scratchpad MB")
    ax.set_xlabel("µs (layer 0)")
    ax.set_title("scratchpad occupancy (buffers allocated by the schedule)", fontsize=9)
    ax.legend(fontsize=8)
