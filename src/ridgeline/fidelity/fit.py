"""Fitting a family's few calibration terms on the published rows of its accelerators.

Each family names the terms it may fit (``Family.fit``); everything else stays sourced. A term is
fitted only where at least ``MIN_CONSTRAINING_ROWS`` published rows constrain it: a row
constrains a term when its prediction moves by at least ``MIN_ELASTICITY`` of the term's relative
change (``FamilyFit.constraining``), counted at the priors before the fit. A term with fewer rows
is pinned at its prior (sourced or an estimate) and reported as such, never fitted: two rows
would only be pinned by it. ``validate`` lists each fitted term with its count and bound.
The fit minimises the mean absolute log error, mean |ln(predicted / published)|, over the
family's re-timeable rows (per-user decode at a fixed batch and offline throughput, see
``fidelity.trace``): one set of numbers for every model, dtype and workload of the family, never
one per row. Efficiencies stay in (0, 1] and latencies non-negative (the search runs on
logit(e) and ln(t)), so a calibrated time is never below the ideal one.

Optimiser: Nelder-Mead (scipy.optimize.minimize) from the family's priors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ridgeline.fidelity.dataset import ActivationQuantisation, AttentionReads, Row
from ridgeline.fidelity.trace import Trace, TraceSet
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.calibration import (
    EFFICIENCY_TERMS,
    FITTED_PREFIX,
    MIN_CONSTRAINING_ROWS,
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
    pinned: Mapping[Term, int] = field(default_factory=dict)  # too few rows: held at the prior

    def bound(self, term: Term) -> str:
        """The physical range the fit keeps ``term`` in."""
        return "(0, 1]" if term in EFFICIENCY_TERMS else ">= 0 s"

    @property
    def source(self) -> str:
        """The source tag the fitted terms carry: ``fitted on rows: <keys>``."""
        return f"{FITTED_PREFIX} on rows: " + ", ".join(self.rows)

    def calibration(self, base: Calibration) -> Calibration:
        """``base`` with the fitted values (and their source) set, the pinned terms at their
        priors; with no rows, every term of the fit at its prior (value and source)."""
        if not self.rows:
            return self._priors(base, self.values)
        return self._priors(base.with_values(self.values, self.source), self.pinned)

    def _priors(self, base: Calibration, terms: Iterable[Term]) -> Calibration:
        prior = get_family(self.family).priors
        out = base
        for t in terms:
            out = out.with_values({t: prior.value(t)}, prior.sources.get(t.value, "prior"))
        return out


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
    grouped-query attention); with a dense cache of ``dense_kv_cache_tokens`` per sequence
    (read whole whatever the sequence holds), that many tokens over the mean a sequence holds
    while it decodes, isl + osl / 2; else 1."""
    factor = 1.0
    if row.source.attention_kv_reads is AttentionReads.PER_QUERY_HEAD:
        model = get_model(row.model)
        factor = model.num_heads / model.num_kv_heads
    dense = row.source.dense_kv_cache_tokens
    if dense is not None:
        factor *= max(1.0, dense / (row.isl + row.osl / 2))
    return factor


@dataclass(frozen=True, slots=True, order=True)
class EngineFacts:
    """What a source states about its engine's kernels (``fidelity.dataset.Source``): how many
    times its decode attention reads each KV byte, and whether it fuses the activations'
    quantisation into the kernel before each 8- or 4-bit GEMM."""

    kv_read_factor: float = 1.0
    fused_quantisation: bool = False


def engine_facts(row: Row) -> EngineFacts:
    """The ``EngineFacts`` of ``row``'s source."""
    fused = row.source.activation_quantisation is ActivationQuantisation.FUSED
    return EngineFacts(kv_read_factor(row), fused)


def engine_calibration(cal: Calibration, facts: EngineFacts) -> Calibration:
    """``cal`` for an engine of ``facts``: reading the KV cache ``kv_read_factor`` times, the
    same bytes at ``1 / kv_read_factor`` of the KV rate take the time of that many times the
    bytes; fusing the activations' quantisation, a quantised GEMM adds no fixed time of its own
    (``quantised_gemm_latency_s`` = 0)."""
    values = {}
    if facts.kv_read_factor != 1.0:
        values[Term.KV_BANDWIDTH_EFFICIENCY] = cal.kv_bandwidth_efficiency / facts.kv_read_factor
    if facts.fused_quantisation and cal.quantised_gemm_latency_s:
        values[Term.QUANTISED_GEMM_LATENCY_S] = 0.0
    return cal.with_values(values) if values else cal


_Group = tuple[Calibration, EngineFacts, TraceSet, np.ndarray]


def _groups(items: Sequence[tuple[Row, Trace]]) -> list[_Group]:
    """Rows grouped by accelerator and engine facts (each its own base calibration), stacked
    for re-timing."""
    out = []
    for name, factor in sorted({(row.hardware, engine_facts(row)) for row, _ in items}):
        mine = [(r, t) for r, t in items if (r.hardware, engine_facts(r)) == (name, factor)]
        stacked = TraceSet.of([t for _, t in mine], [row.metric for row, _ in mine])
        published = np.array([row.value for row, _ in mine])
        out.append((get_accelerator(name).calibration, factor, stacked, published))
    return out


def fit_family(family: Family, items: Sequence[tuple[Row, Trace]]) -> FamilyFit:
    """Fit ``family.fit`` on ``items`` (rows of the family's accelerators with their traces).

    Terms that fewer than ``MIN_CONSTRAINING_ROWS`` rows constrain at the fit are pinned at
    their priors and the others fitted again without them. With no rows the fitted terms take
    their priors; with no terms to fit nothing changes.
    """
    if not items:
        return FamilyFit(family.name, {t: family.priors.value(t) for t in family.fit}, (), math.nan)
    groups = _groups(items)
    keys = tuple(sorted(row.key for row, _ in items))
    values, error = _fit(family, groups, family.fit, {})
    counts = _constraining(groups, values)
    pinned = {t: counts[t] for t in family.fit if counts[t] < MIN_CONSTRAINING_ROWS}
    if pinned:
        fixed = {t: family.priors.value(t) for t in pinned}
        terms = tuple(t for t in family.fit if t not in pinned)
        values, error = _fit(family, groups, terms, fixed)
        counts = _constraining(groups, {**fixed, **values})
    return FamilyFit(family.name, values, keys, error, {t: counts[t] for t in values}, pinned)


def _fit(
    family: Family, groups: Sequence[_Group], terms: Sequence[Term], fixed: Mapping[Term, float]
) -> tuple[dict[Term, float], float]:
    """``terms`` fitted from their priors (the ``fixed`` values held), and the error reached."""

    def objective(u: np.ndarray) -> float:
        values = {**fixed, **{t: _from_free(t, x) for t, x in zip(terms, u, strict=True)}}
        return float(_errors(groups, values).mean())

    if not terms:
        return {}, objective(np.zeros(0))
    best = np.array([_to_free(t, family.priors.value(t)) for t in terms])
    for _ in range(RESTARTS):  # a restart from the last optimum escapes a collapsed simplex
        best = minimize(objective, best, method="Nelder-Mead", options=NELDER_MEAD).x
    return {t: _from_free(t, x) for t, x in zip(terms, best, strict=True)}, objective(best)


def _errors(groups: Sequence[_Group], values: Mapping[Term, float]) -> np.ndarray:
    """|ln(predicted / published)| of every row under ``values``."""
    predicted = _predictions(groups, values)
    return np.abs(np.log(predicted / np.concatenate([p for *_, p in groups])))


_STEP = 0.9  # the relative change of a term that ``_constraining`` tries


def _predictions(groups: Sequence[_Group], values: Mapping[Term, float]) -> np.ndarray:
    return np.concatenate(
        [
            stacked.values(engine_calibration(base.with_values(values), k))
            for base, k, stacked, _ in groups
        ]
    )


def _constraining(groups: Sequence[_Group], values: Mapping[Term, float]) -> dict[Term, int]:
    """Per term of ``values``, the rows whose prediction moves by at least ``MIN_ELASTICITY`` of
    a ``_STEP`` change of the term (the others do not constrain it)."""
    if not values:
        return {}
    at = _predictions(groups, values)
    out = {}
    for term, v in values.items():
        moved = _predictions(groups, {**values, term: v * _STEP})
        elasticity = np.abs(np.log(moved / at)) / abs(math.log(_STEP))
        out[term] = int(np.sum(elasticity >= MIN_ELASTICITY))
    return out
