"""The validation plot: predicted / published for every row, ideal and calibrated, by accelerator.

Returns a matplotlib ``Figure`` built without pyplot (no backend is switched); saving is the
caller's choice.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ridgeline.fidelity.validate import Validation, percent_or


def validation_figure(v: Validation) -> Figure:
    """Ratio predicted / published of every row (log scale), one column per accelerator."""
    names = sorted({r.row.hardware for r in v.results})
    fig = Figure(figsize=(max(6.0, 0.9 * len(names) + 2), 4.2))
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)  # jitter only: the same picture on every run
    for i, name in enumerate(names):
        rows = [r for r in v.results if r.row.hardware == name]
        x = i + rng.uniform(-0.18, 0.18, len(rows))
        ax.scatter(x - 0.2, [r.ratio("ideal") for r in rows], marker="x", color="0.6", s=14)
        ax.scatter(x + 0.2, [r.ratio() for r in rows], marker="o", color="C0", s=14)
    ax.scatter([], [], marker="x", color="0.6", label="ideal roofline")
    ax.scatter([], [], marker="o", color="C0", label="calibrated")
    ax.set_yscale("log")
    for y, style in ((1.0, "-"), (0.5, ":"), (2.0, ":")):
        ax.axhline(y, color="k", lw=0.8, ls=style)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("predicted / published")
    o = v.overall
    ax.set_title(
        f"{o.rows} published rows: median error ideal {o.ideal_median_error:.0%}, "
        f"calibrated {o.calibrated_median_error:.0%}, left out {percent_or(o.loso_median_error)}",
        fontsize=10,
    )
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig
