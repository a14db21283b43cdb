"""Serving plots (each returns a matplotlib ``Figure``): KV use over time and latency CDFs of simulation results."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ridgeline.report.figures import new_figure
from ridgeline.sim.metrics import SimResult


def _name(r: SimResult, i: int) -> str:
    return r.label or f"run {i + 1}"


def kv_timeline_plot(results: Sequence[SimResult], label: str = "") -> Figure:
    """Device KV blocks in use over simulated time (solid) and the allocated-but-unused part
    (dashed: fragmentation, or reservations for contiguous/static policies); ``label`` names
    how the steps were priced (``analytic.pricing.Pricing.label``)."""
    fig, ax = new_figure((8, 4))
    for i, r in enumerate(results):
        tl = r.timeline
        (line,) = ax.plot(tl.time_s, np.asarray(tl.used_frac) * 100, label=f"{_name(r, i)} used")
        ax.plot(
            tl.time_s,
            np.asarray(tl.unused_allocated_frac) * 100,
            "--",
            color=line.get_color(),
            label=f"{_name(r, i)} unused",
        )
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("KV pool (%)")
    ax.set_ylim(0, 105)
    ax.set_title("KV cache use over time" + (f" ({label} step times)" if label else ""))
    ax.legend(fontsize=7, ncol=2)
    return fig


def latency_cdf_plot(results: Sequence[SimResult], label: str = "") -> Figure:
    """Empirical CDFs of TTFT and TPOT per configuration, priced as ``label`` says."""
    fig, axes = new_figure((10, 4), 1, 2)
    if label:
        fig.suptitle(f"latency, {label}", fontsize=10)
    for i, r in enumerate(results):
        for ax, attr in zip(axes, ("ttft_s", "tpot_s"), strict=True):
            x = np.sort([getattr(q, attr) for q in r.requests if not math.isnan(getattr(q, attr))])
            if x.size:
                ax.plot(x * 1e3, np.arange(1, x.size + 1) / x.size, label=_name(r, i))
    for ax, name in zip(axes, ("TTFT", "TPOT"), strict=True):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig
