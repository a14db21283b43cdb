"""``ridgeline report``."""

from __future__ import annotations

from typing import Annotated

import typer

from ridgeline.cli.common import HwOpt, ModelOpt, console, emit_json
from ridgeline.report.build import build_report


def report_cmd(
    model: ModelOpt = "llama-3.1-8b",
    hw: HwOpt = "h100-sxm",
    out: Annotated[str, typer.Option("--out", help="output directory")] = "out/report",
    lab: Annotated[
        str | None, typer.Option("--lab", help="lab results database to add as sections")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print the written paths as JSON")
    ] = False,
) -> None:
    """Write the full report (report.html, report.md, report.json and figures) for one model."""
    sections = None
    if lab is not None:
        from ridgeline.report.build import SECTIONS
        from ridgeline.report.lab_section import lab_builders

        sections = SECTIONS + lab_builders(lab)
    files = build_report(model, out, hw, sections)
    if json_out:
        emit_json(
            {
                "schema": "ridgeline.report-files/1",
                "html": str(files.html),
                "markdown": str(files.markdown),
                "json": str(files.json),
                "sections": list(files.sections),
            }
        )
        return
    console.print(
        f"wrote {files.html}, {files.markdown}, {files.json} "
        f"(sections: {', '.join(files.sections)})"
    )
