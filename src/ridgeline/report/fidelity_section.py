"""The report's fidelity section: ridgeline's predictions against published measurements,
ideal and calibrated, per accelerator, with leave-one-source-out and the fitted numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ridgeline.fidelity.validate import FIT_HEADERS, SUMMARY_HEADERS, Validation, percent_or
from ridgeline.report.document import Section, Table
from ridgeline.report.fidelity_plots import validation_figure

if TYPE_CHECKING:
    from ridgeline.report.build import ReportContext


def fidelity_section(v: Validation) -> Callable[[ReportContext], Section]:
    """A section builder over a finished validation (``ridgeline report --validate``)."""

    def validation(ctx: ReportContext) -> Section:
        path = ctx.figure("validation.png")
        validation_figure(v).savefig(path, dpi=110)
        o = v.overall
        text = (
            f"{o.rows} published measurements (vendor pages, MLPerf-style benchmarks, papers and "
            f"independent runs; data/measurements) predicted two ways. The ideal roofline is off "
            f"by a median {o.ideal_median_error:.0%}; the calibrated model, a few physical terms "
            f"per accelerator family fitted on these rows, by {o.calibrated_median_error:.0%}, "
            f"with {o.within_2x} of {o.rows} rows within 2x. Fitted without a source's rows and "
            f"then asked to predict them (leave-one-source-out), it is off by "
            f"{percent_or(o.loso_median_error)}: the terms generalise across engines and models."
        )
        return Section(
            "fidelity",
            "Predictions against published measurements",
            paragraphs=(text,),
            tables=(
                Table(SUMMARY_HEADERS, tuple(v.summary_rows()), "Median absolute error"),
                Table(FIT_HEADERS, tuple(v.fit_rows()), "Fitted terms"),
            ),
            figures=(path,),
            data=v.to_dict(),
        )

    return validation
