"""How sure a prediction is: intervals from the leave-one-source-out residuals of ``validate``,
per accelerator family.

Each published row of a family gives one residual: the speed ridgeline predicts for it with
the family fitted *without that row's source* over the speed published, in logs,

    e = ln(predicted / published)        for tokens/s rows
    e = ln(published / predicted)        for TTFT and TPOT rows (a time: speed is its inverse)

so e > 0 means ridgeline was too fast. Over a family's residuals, the 10th and 90th percentiles
(linear interpolation, numpy's default) bound an 80% interval: a predicted speed x is, in 80%
of held-out cases, within [x·e^(−e90), x·e^(−e10)]; a predicted time t within
[t·e^(e10), t·e^(e90)]. Held-out residuals, not in-sample ones: each source's rows are
predicted as a new user's machine would be, by terms fitted on other sources.

A family with fewer than ``MIN_ROWS`` rows gets no interval, and says so (``NoInterval``).

The residuals are stored (``data/residuals/loso.toml``, written by
``python tools/write_residuals.py`` from a full ``validate`` run), because a validation takes
tens of seconds; ``tests/fidelity/test_residuals.py`` checks the stored file against a fresh run.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from ridgeline.fidelity.dataset import Metric
from ridgeline.fidelity.prediction import Prediction
from ridgeline.fidelity.validate import RowResult, Validation, family_of
from ridgeline.specs import Accelerator, get_accelerator

MIN_ROWS = 8  # the fewest published rows an interval rests on (the bar for fitting a term)
COVERAGE = 0.8  # from the 10th to the 90th percentile
TIME_METRICS = (Metric.TTFT_S, Metric.TPOT_S)
RESIDUALS_FILE = ("residuals", "loso.toml")


@dataclass(frozen=True, slots=True)
class Residual:
    """One row's held-out residual (module docstring)."""

    key: str
    source: str
    speed_log_error: float


@dataclass(frozen=True, slots=True)
class FamilyResiduals:
    """The held-out residuals of one accelerator family's rows."""

    family: str
    rows: tuple[Residual, ...]

    @property
    def num_sources(self) -> int:
        return len({r.source for r in self.rows})

    def quantiles(self) -> tuple[float, float]:
        """The (1 − COVERAGE)/2 and (1 + COVERAGE)/2 quantiles of the log errors."""
        errors = np.array([r.speed_log_error for r in self.rows])
        lo, hi = np.quantile(errors, [(1 - COVERAGE) / 2, (1 + COVERAGE) / 2])
        return float(lo), float(hi)


@dataclass(frozen=True, slots=True)
class Interval:
    """Where the measured figure lies, in ``coverage`` of held-out cases of the family."""

    low: float
    high: float
    family: str
    rows: int
    coverage: float = COVERAGE

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "family": self.family,
            "rows": self.rows,
            "coverage": self.coverage,
        }


@dataclass(frozen=True, slots=True)
class NoInterval:
    """A family whose rows are too few to say how sure a figure is."""

    family: str
    rows: int

    @property
    def reason(self) -> str:
        return (
            f"{self.family}: {self.rows} held-out rows, fewer than the {MIN_ROWS} an interval needs"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "rows": self.rows, "interval": None, "reason": self.reason}


def speed_log_error(r: RowResult) -> float:
    """The held-out residual of one validated row (module docstring)."""
    ratio = r.loso_ratio
    assert ratio is not None, "a residual needs the leave-one-source-out prediction"
    e = math.log(ratio)
    return -e if r.row.metric in TIME_METRICS else e


def residuals_of(v: Validation) -> dict[str, FamilyResiduals]:
    """Every family's held-out residuals in a validation run with leave-one-source-out."""
    rows: dict[str, list[Residual]] = {}
    for r in v.results:
        if r.loso is not None and math.isfinite(r.loso) and r.loso > 0:
            res = Residual(r.row.key, r.row.source.id, speed_log_error(r))
            rows.setdefault(family_of(r.row), []).append(res)
    return {f: FamilyResiduals(f, tuple(sorted(x, key=lambda r: r.key))) for f, x in rows.items()}


@cache
def family_residuals() -> Mapping[str, FamilyResiduals]:
    """The stored held-out residuals of every family that has rows (module docstring)."""
    text = resources.files("ridgeline.data").joinpath(*RESIDUALS_FILE).read_text()
    data = tomllib.loads(text)
    return {
        name: FamilyResiduals(
            name,
            tuple(Residual(r["key"], r["source"], float(r["speed_log_error"])) for r in rows),
        )
        for name, rows in data["families"].items()
    }


def dump_residuals(res: Mapping[str, FamilyResiduals]) -> str:
    """The residuals file's text (``tools/write_residuals.py`` writes it)."""
    lines = [
        "# Held-out (leave-one-source-out) residuals of `ridgeline validate`, per accelerator",
        "# family: speed_log_error = ln(predicted / published speed) of each row, predicted by the",
        "# family fitted without the row's source. Written by `python tools/write_residuals.py`;",
        "# read by ridgeline.fidelity.residuals for the intervals of predict and plan.",
        "",
    ]
    for name in sorted(res):
        for r in res[name].rows:
            lines += [f'[[families."{name}"]]', f'key = "{r.key}"', f'source = "{r.source}"']
            lines += [f"speed_log_error = {r.speed_log_error:.6f}", ""]
    return "\n".join(lines)


def _family(acc: Accelerator | str) -> str:
    return (acc if isinstance(acc, Accelerator) else get_accelerator(acc)).calibration.family


def _residuals(family: str) -> FamilyResiduals:
    return family_residuals().get(family, FamilyResiduals(family, ()))


def speed_interval(acc: Accelerator | str, value: float) -> Interval | NoInterval:
    """The interval of a predicted speed (tokens/s) on ``acc`` (module docstring)."""
    res = _residuals(_family(acc))
    if len(res.rows) < MIN_ROWS:
        return NoInterval(res.family, len(res.rows))
    lo, hi = res.quantiles()
    return Interval(value * math.exp(-hi), value * math.exp(-lo), res.family, len(res.rows))


def time_interval(acc: Accelerator | str, value: float) -> Interval | NoInterval:
    """The interval of a predicted time (TTFT, TPOT) on ``acc`` (module docstring)."""
    res = _residuals(_family(acc))
    if len(res.rows) < MIN_ROWS:
        return NoInterval(res.family, len(res.rows))
    lo, hi = res.quantiles()
    return Interval(value * math.exp(lo), value * math.exp(hi), res.family, len(res.rows))


@dataclass(frozen=True, slots=True)
class PredictionIntervals:
    """The intervals of a ``predict`` result's figures."""

    output_tokens_per_s: Interval | NoInterval
    per_user_tokens_per_s: Interval | NoInterval
    ttft_s: Interval | NoInterval
    tpot_s: Interval | NoInterval

    def to_dict(self) -> dict[str, Any]:
        return {
            "output_tokens_per_s": self.output_tokens_per_s.to_dict(),
            "per_user_tokens_per_s": self.per_user_tokens_per_s.to_dict(),
            "ttft_s": self.ttft_s.to_dict(),
            "tpot_s": self.tpot_s.to_dict(),
        }


def prediction_intervals(p: Prediction, acc: Accelerator | str) -> PredictionIntervals:
    """Intervals of every figure of ``p`` (predicted on ``acc``)."""
    return PredictionIntervals(
        speed_interval(acc, p.output_tokens_per_s),
        speed_interval(acc, p.per_user_tokens_per_s),
        time_interval(acc, p.ttft_s),
        time_interval(acc, p.tpot_s),
    )
