"""``ridgeline report``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from ridgeline.cli.common import (
    HwOpt,
    IdealOpt,
    ModelOpt,
    PpOpt,
    Tick,
    TpOpt,
    console,
    emit_json,
    mode_of,
    progress_bar,
    writable_dir,
)
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL

if TYPE_CHECKING:  # loaded when the command runs, not for its --help (start-up)
    from ridgeline.analytic.pricing import Pricing
    from ridgeline.report.build import SectionBuilder
    from ridgeline.report.document import ReportFiles


def _sections(lab: str | None, sweep_db: str | None) -> list[SectionBuilder]:
    """The stock sections, then those the options add (lab results, a sweep); the validation
    is added as the report is built (``_build``), its progress shown."""
    from ridgeline.report.build import SECTIONS
    from ridgeline.report.sweep_section import sweep_section

    sections = list(SECTIONS)
    if lab is not None:
        from ridgeline.report.lab_sections import lab_builders

        sections += lab_builders(lab)
    if sweep_db is not None:
        sections.append(sweep_section(sweep_db))
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
    deployment (--tp, --pp), and says so.

    \b
    Example:
      ridgeline report --model llama-3.1-8b --out out/report --validate
    """
    from ridgeline.analytic.deployment import Deployment
    from ridgeline.analytic.pricing import Pricing
    from ridgeline.specs import get_accelerator, get_model

    spec = get_model(model)  # a bad name fails before any work
    pricing = Pricing.of(Deployment(get_accelerator(hw), tp, pp), mode_of(ideal))
    req = ReportRequest(spec.name, pricing, out, tuple(_sections(lab, sweep_db)), validate)
    _print_files(_build(req, show=not json_out), pricing, json_out)


def _print_files(files: ReportFiles, pricing: Pricing, json_out: bool) -> None:
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


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """What ``report`` writes: the model priced by ``pricing`` into ``out``, the ``sections``,
    then the validation if asked."""

    model: str
    pricing: Pricing
    out: str
    sections: tuple[SectionBuilder, ...]
    validate: bool


def _build(req: ReportRequest, show: bool) -> ReportFiles:
    """Build the report with progress on stderr: the validation's predictions, then each
    section as it is built."""
    from ridgeline.report.build import build_report

    sections = list(req.sections)
    total = len(sections) + 2 * req.validate  # the predictions, then their section
    with progress_bar(total, show, "report") as tick:
        if req.validate:
            sections.append(_validated(tick))
        steps = itertools.count(req.validate)

        def started(name: str) -> None:
            if tick is not None:
                tick(next(steps), name)

        files = build_report(req.model, req.out, req.pricing, sections, started)
        if tick is not None:
            tick(total, "written")
    return files


def _validated(tick: Tick | None) -> SectionBuilder:
    """The validation section, its predictions made now (each named on the progress bar)."""
    from ridgeline.fidelity.validate import validate as run_validation
    from ridgeline.report.fidelity_section import fidelity_section

    def recording(what: str, done: int, total: int) -> None:
        if tick is not None:
            tick(0, f"validation: {what} ({done}/{total})")

    return fidelity_section(run_validation(progress=recording))
