"""``ridgeline validate``: every published row predicted ideal and calibrated, and
leave-one-source-out.

- ideal: the roofline at datasheet peaks, no latencies;
- calibrated: the catalog's calibration (the fitted numbers stored in ``data/calibration``);
- leave-one-source-out (LOSO): for each source, the families are fitted again on every other
  source's rows and that source's rows predicted with the result; a family left with no rows
  falls back to its priors. This shows whether the few terms generalise or memorise.

Error of a row: |predicted / published - 1|; a row is "within 2x" when 0.5 <= ratio <= 2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ridgeline.fidelity.dataset import Row, Scenario, load_dataset
from ridgeline.fidelity.fit import FamilyFit, FamilyRows, engine_calibration, engine_facts, fit_rows
from ridgeline.fidelity.prediction import DEFAULT_MAX_SEQS, PredictRequest, predict, record
from ridgeline.fidelity.trace import Trace
from ridgeline.specs import Accelerator, get_accelerator
from ridgeline.specs.calibration import IDEAL, Calibration, CostMode, Term, family_names, get_family

Progress = Callable[[str, int, int], None]  # (what, done, total)

SUMMARY_HEADERS = (
    "accelerator",
    "rows",
    "ideal",
    "calibrated",
    "left out",
    "within 2x",
    "worst row (ratio)",
)
FIT_HEADERS = (
    "family",
    "fitted term",
    "value",
    "bound",
    "rows constraining it",
    "rows fitted",
    "mean |ln ratio|",
)


def request_for(row: Row, mode: CostMode = CostMode.CALIBRATED) -> PredictRequest:
    """The prediction that answers ``row``: its deployment, dtypes, lengths and load.

    decode: a fixed batch (1 when unstated); offline: the stated requests, a static batch when
    ``batch`` is set; server: Poisson arrivals at ``rate_rps`` or closed-loop ``concurrency``.
    """
    batch = concurrency = None
    requests, max_seqs = row.requests, row.max_seqs or DEFAULT_MAX_SEQS
    if row.scenario is Scenario.DECODE:
        batch, requests = row.batch or 1, None
    elif row.scenario is Scenario.OFFLINE and row.batch is not None:
        requests, max_seqs = row.requests or row.batch, row.batch
    elif row.scenario is Scenario.SERVER and row.rate_rps is None:
        concurrency = row.concurrency or row.batch or 1
    return PredictRequest(
        hardware=row.hardware,
        model=row.model,
        isl=row.isl,
        osl=row.osl,
        tensor_parallel=row.tensor_parallel,
        pipeline_parallel=row.pipeline_parallel,
        data_parallel=row.data_parallel,
        weight_dtype=row.weight_dtype,
        kv_dtype=row.kv_dtype,
        requests=requests,
        batch=batch,
        concurrency=concurrency,
        max_seqs=max_seqs,
        rate_rps=row.rate_rps if row.scenario is Scenario.SERVER else None,
        mode=mode,
    )


def retimeable(row: Row) -> bool:
    """Rows whose requests are all queued at t = 0, so a recorded run can be re-timed."""
    return row.scenario is not Scenario.SERVER or row.rate_rps is None


@dataclass(frozen=True, slots=True)
class RowResult:
    """One row: published, ideal, calibrated and leave-one-source-out predictions (``loso``
    None: the leave-one-source-out refits were not run)."""

    row: Row
    ideal: float
    calibrated: float
    loso: float | None

    def ratio(self, which: str = "calibrated") -> float:
        """Predicted over published, ``ideal`` or ``calibrated``."""
        return float(getattr(self, which)) / self.row.value

    def error(self, which: str = "calibrated") -> float:
        return abs(self.ratio(which) - 1.0)

    @property
    def loso_ratio(self) -> float | None:
        """The left-out prediction over published (None: not run)."""
        return None if self.loso is None else self.loso / self.row.value

    @property
    def loso_error(self) -> float | None:
        ratio = self.loso_ratio
        return None if ratio is None else abs(ratio - 1.0)

    def to_dict(self) -> dict[str, Any]:
        r = self.row
        return {
            "key": r.key,
            "hardware": r.hardware,
            "model": r.model,
            "scenario": r.scenario.value,
            "metric": r.metric.value,
            "published": r.value,
            "ideal": self.ideal,
            "calibrated": self.calibrated,
            "loso": self.loso,
            "ratio_ideal": self.ratio("ideal"),
            "ratio_calibrated": self.ratio("calibrated"),
            "ratio_loso": self.loso_ratio,
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """Median absolute errors and the worst row of a group of rows."""

    name: str
    rows: int
    ideal_median_error: float
    calibrated_median_error: float
    loso_median_error: float | None  # None: leave-one-source-out not run
    within_2x: int
    worst_key: str
    worst_ratio: float

    @staticmethod
    def of(name: str, results: Sequence[RowResult]) -> Summary:
        worst = max(results, key=lambda r: abs(math.log(r.ratio())))
        return Summary(
            name=name,
            rows=len(results),
            ideal_median_error=float(np.median([r.error("ideal") for r in results])),
            calibrated_median_error=float(np.median([r.error() for r in results])),
            loso_median_error=_median_or_none([r.loso_error for r in results]),
            within_2x=sum(1 for r in results if 0.5 <= r.ratio() <= 2.0),
            worst_key=worst.row.key,
            worst_ratio=worst.ratio(),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Validation:
    """Every row's predictions, the summaries, and the families' fits on the whole dataset."""

    results: tuple[RowResult, ...]
    fits: tuple[FamilyFit, ...]

    @property
    def overall(self) -> Summary:
        return Summary.of("all", self.results)

    def by_accelerator(self) -> list[Summary]:
        names = sorted({r.row.hardware for r in self.results})
        return [Summary.of(n, [r for r in self.results if r.row.hardware == n]) for n in names]

    def summary_rows(self) -> list[tuple[str, ...]]:
        """``SUMMARY_HEADERS`` rows, per accelerator then overall, as text for tables."""
        return [
            (
                s.name,
                str(s.rows),
                f"{s.ideal_median_error:.0%}",
                f"{s.calibrated_median_error:.0%}",
                percent_or(s.loso_median_error),
                f"{s.within_2x}/{s.rows}",
                f"{s.worst_key} ({s.worst_ratio:.2f}x)",
            )
            for s in [*self.by_accelerator(), self.overall]
        ]

    def fit_rows(self) -> list[tuple[str, ...]]:
        """``FIT_HEADERS`` rows: every fitted term with its value, bound, the rows that
        constrain it (``FamilyFit.constraining``) and the family's fit; then every term a
        family asked to fit that too few rows constrain, pinned at its prior."""
        fitted = [
            (f.family, t.value, f"{v:.4g}", f.bound(t), str(f.constraining.get(t, 0)))
            for f in self.fits
            if f.rows
            for t, v in f.values.items()
        ]
        pinned = [
            (
                f.family,
                f"{t.value} (pinned at its prior)",
                f"{_prior(f, t):.4g}",
                f.bound(t),
                str(n),
            )
            for f in self.fits
            if f.rows
            for t, n in f.pinned.items()
        ]
        errors = {f.family: (str(len(f.rows)), _fixed_or(f.mean_abs_log_error)) for f in self.fits}
        return [(*row, *errors[row[0]]) for row in fitted + pinned]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.validate/1",
            "overall": self.overall.to_dict(),
            "by_accelerator": [s.to_dict() for s in self.by_accelerator()],
            "fits": [
                {
                    "family": f.family,
                    "values": {t.value: v for t, v in f.values.items()},
                    "constraining_rows": {t.value: n for t, n in f.constraining.items()},
                    "pinned": {t.value: n for t, n in f.pinned.items()},
                    "rows": list(f.rows),
                    "mean_abs_log_error": f.mean_abs_log_error,
                }
                for f in self.fits
            ],
            "rows": [r.to_dict() for r in self.results],
        }


def _prior(fit: FamilyFit, term: Term) -> float:
    return get_family(fit.family).priors.value(term)


def percent_or(value: float | None, missing: str = "not run") -> str:
    """``value`` as a percentage, or ``missing`` where it was not computed (None)."""
    return missing if value is None else f"{value:.0%}"


def _fixed_or(value: float | None, missing: str = "no rows") -> str:
    return missing if value is None else f"{value:.3f}"


def _median_or_none(values: Sequence[float | None]) -> float | None:
    """The median, or None when any value is absent (a step that was not run)."""
    present = [v for v in values if v is not None]
    return float(np.median(present)) if present and len(present) == len(values) else None


def family_of(row: Row) -> str:
    return get_accelerator(row.hardware).calibration.family


def fit_all(
    rows: Iterable[Row],
    traces: Mapping[str, Trace],
    families: Iterable[str] | None = None,
    start: Mapping[str, FamilyFit] | None = None,
) -> dict[str, FamilyFit]:
    """Every family (or those of ``families``) fitted on its re-timeable rows among ``rows``
    (priors where it has none), each search starting from ``start``'s fit where given."""
    data = family_rows(rows, traces, families)
    return {
        name: fit_rows(d, start=None if start is None else start.get(name))
        for name, d in data.items()
    }


def family_rows(
    rows: Iterable[Row], traces: Mapping[str, Trace], families: Iterable[str] | None = None
) -> dict[str, FamilyRows]:
    """Each family's (or those of ``families``) re-timeable rows among ``rows``, stacked."""
    rows = [r for r in rows if r.key in traces]
    out = {}
    for name in family_names() if families is None else families:
        items = [(r, traces[r.key]) for r in rows if family_of(r) == name]
        out[name] = FamilyRows.of(get_family(name), items)
    return out


Simulated = dict[tuple[PredictRequest, str], dict[str, Any]]  # (run, repr(calibration)) -> run


def _predicted(row: Row, cal: Calibration, traces: Mapping[str, Trace], runs: Simulated) -> float:
    """The row's metric under ``cal``: re-priced from its trace, or simulated (once per run
    and calibration in ``runs``: rows of one run publish its throughput and its TTFT)."""
    cal = engine_calibration(cal, engine_facts(row))
    if row.key in traces:
        return traces[row.key].metrics(cal)[row.metric]
    key = (request_for(row), repr(cal))  # a Calibration holds dicts: not hashable
    if key not in runs:
        acc: Accelerator = dataclasses.replace(get_accelerator(row.hardware), calibration=cal)
        req = dataclasses.replace(key[0], hardware=acc, mode=CostMode.CALIBRATED)
        runs[key] = predict(req).to_dict()
    return float(runs[key][row.metric.value])


def record_all(
    rows: Sequence[Row],
    progress: Progress | None = None,
    run: Callable[[PredictRequest], Trace] = record,
) -> dict[str, Trace]:
    """One recorded run per re-timeable row, each distinct run simulated once: rows that
    publish several metrics of one run (its throughput and its TTFT) share its trace (136
    runs for 168 rows; they were simulated once per row, 19% of validate's CPU)."""
    traces, recorded = {}, {}
    todo = [row for row in rows if retimeable(row)]
    for i, row in enumerate(todo):
        if progress is not None:
            progress(f"recording {row.key}", i, len(todo))
        req = request_for(row)
        if req not in recorded:
            recorded[req] = run(req)
        traces[row.key] = recorded[req]
    return traces


def validate(
    rows: Sequence[Row] | None = None,
    loso: bool = True,
    progress: Progress | None = None,
    traces: Mapping[str, Trace] | None = None,
) -> Validation:
    """Predict every row ideal, calibrated (catalog terms) and leave-one-source-out
    (``traces``: the rows' recorded runs, when already recorded)."""
    rows = list(load_dataset() if rows is None else rows)
    traces = record_all(rows, progress) if traces is None else traces
    data = family_rows(rows, traces)
    fits = {name: fit_rows(d) for name, d in data.items()}
    runs: Simulated = {}
    held_out = _loso(rows, traces, data, fits, runs, progress) if loso else {}
    results = []
    for i, row in enumerate(rows):
        if progress is not None:
            progress(f"predicting {row.key}", i, len(rows))
        cal = get_accelerator(row.hardware).calibration
        results.append(
            RowResult(
                row,
                ideal=_predicted(row, IDEAL, traces, runs),
                calibrated=_predicted(row, cal, traces, runs),
                loso=held_out.get(row.key),
            )
        )
    return Validation(tuple(results), tuple(fits.values()))


def _loso(
    rows: Sequence[Row],
    traces: Mapping[str, Trace],
    data: Mapping[str, FamilyRows],
    fits: Mapping[str, FamilyFit],
    runs: Simulated,
    progress: Progress | None = None,
) -> dict[str, float]:
    """Each source's rows predicted by its families fitted without them (each search starting
    from the fit on every row, with its pinned terms: the same optimum in fewer steps)."""
    out = {}
    sources = sorted({r.source.id for r in rows})
    for i, source in enumerate(sources):
        if progress is not None:
            progress(f"leaving out {source}", i, len(sources))
        held = [r for r in rows if r.source.id == source]
        # only the families of the held-out rows change when they leave the fit
        others = {
            name: fit_rows(data[name], source, fits[name]) for name in {family_of(r) for r in held}
        }
        for row in held:
            base = get_accelerator(row.hardware).calibration
            cal = others[base.family].calibration(base) if base.family in others else base
            out[row.key] = _predicted(row, cal, traces, runs)
    return out
