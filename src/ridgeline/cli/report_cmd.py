"""``ridgeline report``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from ridgeline.cli.common import (
    HwOpt,
    ModelOpt,
    Tick,
    console,
    emit_json,
    progress_bar,
    writable_dir,
)
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL

if TYPE_CHECKING:  # loaded when the command runs, not for its --help (start-up)
    from ridgeline.report.build import SectionBuilder
    from ridgeline.report.document import ReportFiles
    from ridgeline.specs import Accelerator, ModelSpec


def report_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    hw: HwOpt = DEFAULT_ACCELERATOR,
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

    \b
    Example:
      ridgeline report --model llama-3.1-8b --out out/report --validate
    """
    from ridgeline.report.sweep_section import sweep_section
    from ridgeline.specs import get_accelerator, get_model

    spec, acc = get_model(model), get_accelerator(hw)  # a bad name fails before any work
    extra = []
    if lab is not None:
        from ridgeline.report.lab_sections import lab_builders

        extra += lab_builders(lab)
    if sweep_db is not None:
        extra.append(sweep_section(sweep_db))
    files = _build(ReportRequest(spec, acc, out, tuple(extra), validate), show=not json_out)
    _print_files(files, json_out)


def _print_files(files: ReportFiles, json_out: bool) -> None:
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


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """What ``report`` writes: the model on ``hw`` into ``out``, the standard sections, then
    ``extra`` ones (lab, sweep) and the validation if asked."""

    model: ModelSpec
    hw: Accelerator
    out: str
    extra: tuple[SectionBuilder, ...]
    validate: bool


def _build(req: ReportRequest, show: bool) -> ReportFiles:
    """Build the report with progress on stderr: the validation's predictions, then each
    section as it is built."""
    from ridgeline.report.build import SECTIONS, build_report

    sections = [*SECTIONS, *req.extra]
    total = len(sections) + 2 * req.validate  # the predictions, then their section
    with progress_bar(total, show, "report") as tick:
        if req.validate:
            sections.append(_validated(tick))
        steps = itertools.count(req.validate)

        def started(name: str) -> None:
            if tick is not None:
                tick(next(steps), name)

        files = build_report(req.model, req.out, req.hw, sections, started)
        if tick is not None:
            tick(total, "written")
    return files


def _validated(tick: Tick | None) -> SectionBuilder:
    """The validation section, its predictions made now (each named on the progress bar)."""
    from ridgeline.fidelity.validate import validate as run_validation
    from ridgeline.report.fidelity_section import fidelity_section

    def recording(key: str) -> None:
        if tick is not None:
            tick(0, f"validation: {key}")

    return fidelity_section(run_validation(progress=recording))
