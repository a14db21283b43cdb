"""``ridgeline report``."""

from __future__ import annotations

from typing import Annotated

import typer

from ridgeline.analytic.deployment import Deployment
from ridgeline.analytic.pricing import Pricing
from ridgeline.cli.common import (
    HwOpt,
    IdealOpt,
    ModelOpt,
    PpOpt,
    TpOpt,
    console,
    emit_json,
    mode_of,
    writable_dir,
)
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL
from ridgeline.report.build import SECTIONS, SectionBuilder, build_report
from ridgeline.report.sweep_section import sweep_section
from ridgeline.specs import get_accelerator


def _sections(lab: str | None, sweep_db: str | None, validate: bool) -> list[SectionBuilder]:
    """The stock sections, then those the options add (lab results, a sweep, validation)."""
    sections = list(SECTIONS)
    if lab is not None:
        from ridgeline.report.lab_sections import lab_builders

        sections += lab_builders(lab)
    if sweep_db is not None:
        sections.append(sweep_section(sweep_db))
    if validate:
        from ridgeline.fidelity.validate import validate as run_validation
        from ridgeline.report.fidelity_section import fidelity_section

        sections.append(fidelity_section(run_validation()))
    return sections


def report_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    hw: HwOpt = DEFAULT_ACCELERATOR,
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    ideal: IdealOpt = False,
    out: Annotated[
        str, typer.Option("--out", help="output directory", callback=writable_dir)
    ] = "out/report",
    lab: Annotated[
        str | None, typer.Option("--lab", help="lab results database to add as sections")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print the written paths as JSON")
    ] = False,
    sweep_db: Annotated[
        str | None, typer.Option("--sweep", help="add a section on this stored sweep")
    ] = None,
    validate: Annotated[
        bool, typer.Option("--validate", help="add predictions against published measurements")
    ] = False,
) -> None:
    """Write the full report (report.html, report.md, report.json and figures) for one model.

    Every section prices steps calibrated (the expected times) unless --ideal, on the --hw
    deployment (--tp, --pp), and says so. Example: ridgeline report --model llama-3.1-8b"""
    sections = _sections(lab, sweep_db, validate)
    pricing = Pricing.of(Deployment(get_accelerator(hw), tp, pp), mode_of(ideal))
    files = build_report(model, out, pricing, sections)
    if json_out:
        emit_json(
            {
                "schema": "ridgeline.report-files/2",
                "mode": pricing.mode.value,
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
