"""Fitting a family's few calibration terms on the published rows of its accelerators.

Each family names the terms it may fit (``Family.fit``); everything else stays sourced. A fitted
term must be constrained by at least ``MIN_CONSTRAINING_ROWS`` published rows: a row constrains a
term when its prediction moves by at least ``MIN_ELASTICITY`` of the term's relative change
(``FamilyFit.constraining``); ``validate`` lists each fitted term with that count and its bound.
The fit minimises the mean absolute log error, mean |ln(predicted / published)|, over the
family's re-timeable rows (per-user decode at a fixed batch and offline throughput, see
``fidelity.trace``): one set of numbers for every model, dtype and workload of the family, never
one per row. Efficiencies stay in (0, 1] and latencies non-negative (the search runs on
logit(e) and ln(t)), so a calibrated time is never below the ideal one.

Optimiser: Nelder-Mead (scipy.optimize.minimize) from the family's priors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ridgeline.fidelity.dataset import AttentionReads, Row
from ridgeline.fidelity.trace import Trace, TraceSet
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.calibration import (
    EFFICIENCY_TERMS,
    FITTED_PREFIX,
    MIN_ELASTICITY,
    Calibration,
    Family,
    Term,
    get_family,
)

MAX_EFFICIENCY = 1.0 - 1e-9
MIN_LATENCY_S = 1e-9
RESTARTS = 3
NELDER_MEAD = {"xatol": 1e-5, "fatol": 1e-8, "maxiter": 2000}


@dataclass(frozen=True, slots=True)
class FamilyFit:
    """A family's fitted terms, the rows they were fitted on, and the error they reach."""

    family: str
    values: Mapping[Term, float]
    rows: tuple[str, ...]
    mean_abs_log_error: float
    constraining: Mapping[Term, int] = field(default_factory=dict)  # rows that move with each

    def bound(self, term: Term) -> str:
        """The physical range the fit keeps ``term`` in."""
        return "(0, 1]" if term in EFFICIENCY_TERMS else ">= 0 s"

    @property
    def source(self) -> str:
        """The source tag the fitted terms carry: ``fitted on rows: <keys>``."""
        return f"{FITTED_PREFIX} on rows: " + ", ".join(self.rows)

    def calibration(self, base: Calibration) -> Calibration:
        """``base`` with the fitted values (and their source) set; with no rows, the priors'
        values and sources."""
        if not self.rows:
            prior = get_family(self.family).priors
            out = base
            for t, v in self.values.items():
                out = out.with_values({t: v}, prior.sources.get(t.value, "prior"))
            return out
        return base.with_values(self.values, self.source)


def _to_free(term: Term, value: float) -> float:
    if term in EFFICIENCY_TERMS:
        v = min(max(value, 1e-6), MAX_EFFICIENCY)
        return math.log(v / (1.0 - v))
    return math.log(max(value, MIN_LATENCY_S))


def _from_free(term: Term, u: float) -> float:
    if term in EFFICIENCY_TERMS:
        return 1.0 / (1.0 + math.exp(-u))
    return math.exp(min(u, 50.0))


def kv_read_factor(row: Row) -> float:
    """How many times the row's engine reads each KV byte per step: the query heads per KV head
    when its decode attention reads the cache once per query head (a kernel that predates
    grouped-query attention), else 1."""
    if row.source.attention_kv_reads is AttentionReads.PER_QUERY_HEAD:
        model = get_model(row.model)
        return model.num_heads / model.num_kv_heads
    return 1.0


def engine_calibration(cal: Calibration, kv_factor: float) -> Calibration:
    """``cal`` for an engine that reads the KV cache ``kv_factor`` times: the same bytes at
    ``1 / kv_factor`` of the KV rate take the time of ``kv_factor`` times the bytes."""
    if kv_factor == 1.0:
        return cal
    eff = cal.kv_bandwidth_efficiency / kv_factor
    return cal.with_values({Term.KV_BANDWIDTH_EFFICIENCY: eff})


def _groups(
    items: Sequence[tuple[Row, Trace]],
) -> list[tuple[Calibration, float, TraceSet, np.ndarray]]:
    """Rows grouped by accelerator and KV read factor (each its own base calibration), stacked
    for re-timing."""
    out = []
    for name, factor in sorted({(row.hardware, kv_read_factor(row)) for row, _ in items}):
        mine = [(r, t) for r, t in items if (r.hardware, kv_read_factor(r)) == (name, factor)]
        stacked = TraceSet.of([t for _, t in mine], [row.metric for row, _ in mine])
        published = np.array([row.value for row, _ in mine])
        out.append((get_accelerator(name).calibration, factor, stacked, published))
    return out


def fit_family(family: Family, items: Sequence[tuple[Row, Trace]]) -> FamilyFit:
    """Fit ``family.fit`` on ``items`` (rows of the family's accelerators with their traces).

    With no rows the fitted terms take their priors; with no terms to fit nothing changes.
    """
    terms = family.fit
    if not items:
        return FamilyFit(family.name, {t: family.priors.value(t) for t in terms}, (), math.nan)
    groups = _groups(items)

    def errors(values: Mapping[Term, float]) -> np.ndarray:
        parts = [
            np.abs(np.log(stacked.values(engine_calibration(base.with_values(values), k)) / p))
            for base, k, stacked, p in groups
        ]
        return np.concatenate(parts)

    def objective(u: np.ndarray) -> float:
        return float(errors({t: _from_free(t, x) for t, x in zip(terms, u, strict=True)}).mean())

    keys = tuple(sorted(row.key for row, _ in items))
    if not terms:
        return FamilyFit(family.name, {}, keys, float(errors({}).mean()))
    best = np.array([_to_free(t, family.priors.value(t)) for t in terms])
    for _ in range(RESTARTS):  # a restart from the last optimum escapes a collapsed simplex
        best = minimize(objective, best, method="Nelder-Mead", options=NELDER_MEAD).x
    values = {t: _from_free(t, x) for t, x in zip(terms, best, strict=True)}
    return FamilyFit(family.name, values, keys, objective(best), _constraining(groups, values))


_STEP = 0.9  # the relative change of a term that ``_constraining`` tries


def _predictions(
    groups: Sequence[tuple[Calibration, float, TraceSet, np.ndarray]], values: Mapping[Term, float]
) -> np.ndarray:
    return np.concatenate(
        [
            stacked.values(engine_calibration(base.with_values(values), k))
            for base, k, stacked, _ in groups
        ]
    )


def _constraining(
    groups: Sequence[tuple[Calibration, float, TraceSet, np.ndarray]], values: Mapping[Term, float]
) -> dict[Term, int]:
    """Per fitted term, the rows whose prediction moves by at least ``MIN_ELASTICITY`` of a
    ``_STEP`` change of the term (the others do not constrain it)."""
    at = _predictions(groups, values)
    out = {}
    for term, v in values.items():
        moved = _predictions(groups, {**values, term: v * _STEP})
        elasticity = np.abs(np.log(moved / at)) / abs(math.log(_STEP))
        out[term] = int(np.sum(elasticity >= MIN_ELASTICITY))
    return out
