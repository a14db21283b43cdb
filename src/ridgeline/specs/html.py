"""A small HTML table for the ``_repr_html_`` of result types (Jupyter shows it inline)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any


def _cell(value: Any) -> str:
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "") -> str:
    """``rows`` under ``headers`` as an HTML table; numbers with thousands separators.

    >>> html_table(("a", "b"), [(1234, 0.5)])
    '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1,234</td><td>0.5</td></tr></tbody></table>'
    """
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
