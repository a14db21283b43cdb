"""The lab's KV-growth table: the resident peak's slope against the tokens held, beside the KV
formula (``lab.peak``), from a stored ``lab kv`` result."""

from __future__ import annotations

from typing import Any

from ridgeline.report.document import Table
from ridgeline.specs.units import fmt_bytes


def growth_table(checks: list[dict[str, Any]]) -> Table | None:
    """The resident peak's growth with context against the KV formula (``lab.peak``): one row
    per model whose check measured it."""
    rows = []
    for c in checks:
        g = c.get("growth")
        if not g or g.get("slope_bytes_per_token") is None:
            continue
        rows.append(
            (
                c["name"],
                f"{g['batch']} × {g['tokens'][0]}…{g['tokens'][-1]} (chunks of {g['chunk']})",
                fmt_bytes(g["peak_bytes"][-1], binary=True),
                f"{g['slope_bytes_per_token']:,.0f}",
                f"{g['formula_bytes_per_token']:,.0f}",
                f"{g['ratio']:.3f}",
                f"{g['expected_ratio']:.3f}",
            )
        )
    if not rows:
        return None
    return Table(
        (
            "model",
            "B × tokens",
            "peak rise at the end",
            "peak slope B/token",
            "formula B/token",
            "slope ÷ formula",
            "expected",
        ),
        tuple(rows),
        "KV growth seen in the resident peak (VmHWM above the pre-cache baseline)",
    )
