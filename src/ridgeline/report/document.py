"""A report as data (sections of paragraphs, tables and figures) and its three renderings:
self-contained HTML (figures embedded as base64), Markdown (figures beside it) and JSON."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True, slots=True)
class Section:
    """One section: text, tables, figure paths (PNG) and the data behind it for report.json."""

    key: str
    title: str
    paragraphs: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    figures: tuple[Path, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)


def _md_table(t: Table) -> str:
    lines = ["| " + " | ".join(t.headers) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(row) + " |" for row in t.rows]
    return ("\n" + t.caption + "\n\n" if t.caption else "\n") + "\n".join(lines) + "\n"


def to_markdown(title: str, sections: list[Section], out_dir: Path) -> str:
    parts = [f"# {title}\n"]
    for s in sections:
        parts.append(f"\n## {s.title}\n")
        parts += [p + "\n" for p in s.paragraphs]
        parts += [_md_table(t) for t in s.tables]
        parts += [f"\n![{f.stem}]({f.relative_to(out_dir)})\n" for f in s.figures]
    return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;
padding:3px 8px;text-align:left}th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}
caption{caption-side:top;text-align:left;font-weight:600}code{background:#f6f6f6}"""


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in t.rows
    )
    cap = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(title: str, sections: list[Section]) -> str:
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1><nav><ul>",
    ]
    parts += [f"<li><a href='#{s.key}'>{html.escape(s.title)}</a></li>" for s in sections]
    parts.append("</ul></nav>")
    for s in sections:
        parts.append(f"<section id='{s.key}'><h2>{html.escape(s.title)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in s.paragraphs]
        parts += [_html_table(t) for t in s.tables]
        for f in s.figures:
            data = base64.b64encode(f.read_bytes()).decode()
            parts.append(
                f"<figure><img alt='{html.escape(f.stem)}' src='data:image/png;base64,{data}'></figure>"
            )
        parts.append("</section>")
    parts.append("</body></html>")
    return "".join(parts)


def to_json(title: str, sections: list[Section], meta: Mapping[str, Any] | None = None) -> str:
    """The report as JSON: ``meta`` (how it was priced, say) beside the title and sections."""
    payload = {
        "schema": "ridgeline.report/2",
        "title": title,
        **(meta or {}),
        "sections": {s.key: {"title": s.title, **s.data} for s in sections},
    }
    return json.dumps(payload, indent=2, default=str)


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """The three files of a written report, and the keys of its sections."""

    html: Path
    markdown: Path
    json: Path
    sections: tuple[str, ...]


def write_report(
    out_dir: Path,
    stem: str,
    title: str,
    sections: list[Section],
    meta: Mapping[str, Any] | None = None,
) -> ReportFiles:
    """Write ``stem``.html (self-contained), ``stem``.md (figures beside it) and ``stem``.json
    (with ``meta`` at its top) into ``out_dir``."""
    files = ReportFiles(
        out_dir / f"{stem}.html",
        out_dir / f"{stem}.md",
        out_dir / f"{stem}.json",
        tuple(s.key for s in sections),
    )
    files.html.write_text(to_html(title, sections))
    files.markdown.write_text(to_markdown(title, sections, out_dir))
    files.json.write_text(to_json(title, sections, meta))
    return files
