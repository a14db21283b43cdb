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
NELDER_MEAD = {"xatol": 1e-3, "fatol": 1e-6, "maxiter": 2000}  # 0.1% on each term


@dataclass(frozen=True, slots=True)
class FamilyFit:
    """A family's fitted terms, the rows they were fitted on, and the error they reach."""

    family: str
    values: Mapping[Term, float]
    rows: tuple[str, ...]
    mean_abs_log_error: float | None  # None: no rows to fit on
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
    """What a source states about its engine and machines (``fidelity.dataset.Source``): how
    many times its decode attention reads each KV byte, whether it fuses the activations'
    quantisation into the kernel before each 8- or 4-bit GEMM, and the fraction of the catalog
    part's memory bandwidth its GPUs have (a power-limited part: below 1)."""

    kv_read_factor: float = 1.0
    fused_quantisation: bool = False
    bandwidth_scale: float = 1.0


def engine_facts(row: Row) -> EngineFacts:
    """The ``EngineFacts`` of ``row``'s source."""
    fused = row.source.activation_quantisation is ActivationQuantisation.FUSED
    stated = row.source.device_bandwidth_bytes_per_s
    catalog = get_accelerator(row.hardware).device_bandwidth_bytes_per_s
    scale = 1.0 if stated is None else min(1.0, stated / catalog)
    return EngineFacts(kv_read_factor(row), fused, scale)


def engine_calibration(cal: Calibration, facts: EngineFacts) -> Calibration:
    """``cal`` for an engine of ``facts``: reading the KV cache ``kv_read_factor`` times, the
    same bytes at ``1 / kv_read_factor`` of the KV rate take the time of that many times the
    bytes; fusing the activations' quantisation, a quantised GEMM adds no fixed time of its own
    (``quantised_gemm_latency_s`` = 0); with GPUs of ``bandwidth_scale`` of the catalog's
    bandwidth, every byte moves that much slower."""
    values = {}
    scale = facts.bandwidth_scale
    if facts.kv_read_factor != 1.0 or scale != 1.0:
        kv = cal.kv_bandwidth_efficiency * scale / facts.kv_read_factor
        values[Term.KV_BANDWIDTH_EFFICIENCY] = kv
    if scale != 1.0:
        values[Term.BANDWIDTH_EFFICIENCY] = cal.bandwidth_efficiency * scale
    if facts.fused_quantisation and cal.quantised_gemm_latency_s:
        values[Term.QUANTISED_GEMM_LATENCY_S] = 0.0
    return cal.with_values(values) if values else cal


_Group = tuple[Calibration, EngineFacts, TraceSet, np.ndarray]


@dataclass(frozen=True, slots=True)
class FamilyRows:
    """A family's rows stacked once for re-timing, grouped by accelerator and engine facts
    (each group its own base calibration), with each row's key and source in the groups'
    order: a fit may leave any source out without stacking again."""

    family: Family
    groups: tuple[_Group, ...]
    keys: tuple[str, ...]
    sources: np.ndarray  # (rows,) source id of each row

    @staticmethod
    def of(family: Family, items: Sequence[tuple[Row, Trace]]) -> FamilyRows:
        groups, keys, sources = [], [], []
        for name, facts in sorted({(row.hardware, engine_facts(row)) for row, _ in items}):
            mine = [(r, t) for r, t in items if (r.hardware, engine_facts(r)) == (name, facts)]
            stacked = TraceSet.of([t for _, t in mine], [row.metric for row, _ in mine])
            published = np.array([row.value for row, _ in mine])
            groups.append((get_accelerator(name).calibration, facts, stacked, published))
            keys += [r.key for r, _ in mine]
            sources += [r.source.id for r, _ in mine]
        return FamilyRows(family, tuple(groups), tuple(keys), np.array(sources, dtype=object))


def fit_family(
    family: Family,
    items: Sequence[tuple[Row, Trace]],
    start: Mapping[Term, float] | None = None,
) -> FamilyFit:
    """Fit ``family.fit`` on ``items`` (rows of the family's accelerators with their traces),
    the search starting from ``start``'s values where given, else from the priors
    (``fit_rows``)."""
    if not items:
        return FamilyFit(family.name, {t: family.priors.value(t) for t in family.fit}, (), None)
    return fit_rows(FamilyRows.of(family, items), start=start)


def fit_rows(
    data: FamilyRows,
    leave_out: str | None = None,
    start: FamilyFit | Mapping[Term, float] | None = None,
) -> FamilyFit:
    """Fit ``data.family.fit`` on ``data``'s rows but those of source ``leave_out``.

    Terms that fewer than ``MIN_CONSTRAINING_ROWS`` rows constrain at the fit are pinned at
    their priors and the others fitted again without them. From a ``FamilyFit`` ``start``
    (a fit on more rows) the search starts at its values with its pinned terms pinned: fewer
    rows never constrain a term more. With no rows the fitted terms take their priors.
    """
    family = data.family
    mask = data.sources != leave_out
    if not mask.any():
        return FamilyFit(family.name, {t: family.priors.value(t) for t in family.fit}, (), None)
    keys = tuple(sorted(k for k, m in zip(data.keys, mask, strict=True) if m))
    begin = {t: family.priors.value(t) for t in family.fit}
    pinned: dict[Term, int] = {}
    restarts = RESTARTS
    if isinstance(start, FamilyFit):
        begin |= dict(start.values)
        pinned, restarts = dict(start.pinned), 1
    elif start is not None:
        begin |= dict(start)
    fit = _Fit(data.groups, mask)
    while True:
        fixed = {t: family.priors.value(t) for t in pinned}
        terms = tuple(t for t in family.fit if t not in pinned)
        values, error = fit.search(terms, fixed, begin, restarts)
        counts = fit.constraining({**fixed, **values})
        weak = {t: counts[t] for t in values if counts[t] < MIN_CONSTRAINING_ROWS}
        if not weak:
            return FamilyFit(
                family.name, values, keys, error, {t: counts[t] for t in values}, pinned
            )
        pinned |= weak
        begin |= values  # the next search starts where this one ended
        restarts = 1


@dataclass(frozen=True, slots=True)
class _Fit:
    """The rows of ``mask`` in ``groups``, re-timed for a search."""

    groups: tuple[_Group, ...]
    mask: np.ndarray

    def predictions(self, values: Mapping[Term, float]) -> np.ndarray:
        return _predictions(self.groups, values)[self.mask]

    def errors(self, values: Mapping[Term, float]) -> np.ndarray:
        """|ln(predicted / published)| of every row under ``values``."""
        published = np.concatenate([p for *_, p in self.groups])[self.mask]
        return np.abs(np.log(self.predictions(values) / published))

    def search(
        self,
        terms: Sequence[Term],
        fixed: Mapping[Term, float],
        begin: Mapping[Term, float],
        restarts: int,
    ) -> tuple[dict[Term, float], float]:
        """``terms`` fitted from ``begin`` (the ``fixed`` values held), and the error reached."""

        def objective(u: np.ndarray) -> float:
            values = {**fixed, **{t: _from_free(t, x) for t, x in zip(terms, u, strict=True)}}
            return float(self.errors(values).mean())

        if not terms:
            return {}, objective(np.zeros(0))
        best = np.array([_to_free(t, begin[t]) for t in terms])
        for _ in range(restarts):  # a restart from the last optimum escapes a collapsed simplex
            best = minimize(objective, best, method="Nelder-Mead", options=NELDER_MEAD).x
        return {t: _from_free(t, x) for t, x in zip(terms, best, strict=True)}, objective(best)

    def constraining(self, values: Mapping[Term, float]) -> dict[Term, int]:
        """Per term of ``values``, the rows whose prediction moves by at least
        ``MIN_ELASTICITY`` of a ``_STEP`` change of the term (the others do not constrain it)."""
        if not values:
            return {}
        at = self.predictions(values)
        out = {}
        for term, v in values.items():
            moved = self.predictions({**values, term: v * _STEP})
            elasticity = np.abs(np.log(moved / at)) / abs(math.log(_STEP))
            out[term] = int(np.sum(elasticity >= MIN_ELASTICITY))
        return out


_STEP = 0.9  # the relative change of a term that ``_constraining`` tries


def _predictions(groups: Sequence[_Group], values: Mapping[Term, float]) -> np.ndarray:
    return np.concatenate(
        [
            stacked.values(engine_calibration(base.with_values(values), k))
            for base, k, stacked, _ in groups
        ]
    )
