"""Figures without pyplot: every plot function of ``report`` builds a ``matplotlib.figure.Figure``
and returns it; saving it is the caller's choice (``save_figure``).

Building a ``Figure`` directly (matplotlib's object-oriented API) needs no backend, so importing
``ridgeline.report`` never switches the backend of a notebook or an application, and no global
pyplot state is left behind. A notebook shows a returned figure inline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure

DPI = 110


def new_figure(
    size_in: tuple[float, float], rows: int = 1, cols: int = 1, **subplots: Any
) -> tuple[Figure, Any]:
    """A figure of ``size_in`` inches (tight layout) and its axes (``Figure.subplots``)."""
    fig = Figure(figsize=size_in, layout="tight")
    return fig, fig.subplots(rows, cols, **subplots)


def colors() -> list[str]:
    """matplotlib's default colour cycle."""
    return list(matplotlib.rcParams["axes.prop_cycle"].by_key()["color"])


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (parent folders created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path
