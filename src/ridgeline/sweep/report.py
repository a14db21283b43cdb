"""What a stored sweep says: configurations ranked by the objective, each with its metrics at
capacity, and the Pareto front of latency against throughput per chip.

The front is drawn over every probe that met the SLOs (a configuration contributes one point per
such rate): x = output tokens/s per chip (higher is better), y = the SLO percentile of TPOT
(lower is better). A point is on the front when no other probe is at least as good on both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from ridgeline.analytic.pricing import EXPECTED_LABEL, IDEAL_LABEL
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.html import html_table
from ridgeline.sweep.point import PointResult
from ridgeline.sweep.search import FrontPoint, Status, pareto_front
from ridgeline.sweep.store import ConfigRow, SweepData


@dataclass(frozen=True, slots=True)
class ConfigSummary:
    """One configuration's outcome, with its probe at capacity (``None`` if none met the SLOs)."""

    label: str
    key: str
    model: str
    chips: int
    status: str
    capacity_rps: float | None
    upper_rps: float | None
    objective: float | None
    num_probes: int
    at_capacity: PointResult | None


@dataclass(frozen=True, slots=True)
class SweepReport:
    """A stored sweep summarized for tables and plots."""

    name: str
    objective: str
    slo: dict[str, float]
    num_configs: int
    num_probes: int
    status_counts: dict[str, int]
    ranked: tuple[ConfigSummary, ...]  # finished configurations, best objective first
    front: tuple[FrontPoint, ...]
    mode: str = CostMode.CALIBRATED.value  # how the probes were priced (``analytic.pricing``)

    @property
    def label(self) -> str:
        """``expected (calibrated)`` or ``ideal roofline``: what kind of figures these are."""
        return EXPECTED_LABEL if self.mode == CostMode.CALIBRATED.value else IDEAL_LABEL

    @property
    def best(self) -> ConfigSummary | None:
        """The top-ranked configuration, if any met the SLOs."""
        return self.ranked[0] if self.ranked and self.ranked[0].capacity_rps else None

    def best_by_model(self) -> dict[str, ConfigSummary]:
        """The best configuration of each model (configurations compete within a model)."""
        best: dict[str, ConfigSummary] = {}
        for s in self.ranked:  # best first
            if s.capacity_rps and s.model not in best:
                best[s.model] = s
        return best

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "ridgeline.sweep-report/2", **asdict(self), "label": self.label}

    def to_dataframe(self) -> Any:
        """One row per ranked configuration: capacity, objective and the probe at capacity.
        pandas is optional (``pip install 'ridgeline[pandas]'``)."""
        import pandas as pd

        return pd.DataFrame([_frame_row(s) for s in self.ranked])

    def _repr_html_(self) -> str:
        rows = [(s.label, s.status, s.capacity_rps, s.objective) for s in self.ranked[:10]]
        headers = ("configuration", "status", "capacity req/s", self.objective)
        title = (
            f"{self.name}: {self.num_configs} configurations, {self.num_probes} simulations "
            f"({self.label})"
        )
        return html_table(headers, rows, title)


def _frame_row(s: ConfigSummary) -> dict[str, Any]:
    cap = s.at_capacity
    return {
        "label": s.label,
        "model": s.model,
        "chips": s.chips,
        "status": s.status,
        "capacity_rps": s.capacity_rps,
        "objective": s.objective,
        "num_probes": s.num_probes,
        "ttft_p_s": cap.ttft_p_s if cap else None,
        "tpot_p_s": cap.tpot_p_s if cap else None,
        "output_tokens_per_s": cap.output_tokens_per_s if cap else None,
    }


def _summaries(data: SweepData) -> list[ConfigSummary]:
    by_key: dict[str, ConfigRow] = {c.key: c for c in data.configs}
    probes: dict[tuple[str, float], PointResult] = {
        (p.key, p.result.rate_rps): p.result for p in data.probes
    }
    out = []
    for r in data.results:
        row = by_key.get(r.key)
        if row is None:
            continue
        at_cap = probes.get((r.key, r.capacity_rps)) if r.capacity_rps is not None else None
        out.append(
            ConfigSummary(
                row.label,
                r.key,
                row.config["model"],
                row.chips,
                r.status,
                r.capacity_rps,
                r.upper_rps,
                r.objective,
                r.num_probes,
                at_cap,
            )
        )
    return out


def _front(data: SweepData, models: set[str] | None) -> list[FrontPoint]:
    by_key = {c.key: c for c in data.configs}
    points = []
    for p in data.probes:
        row = by_key.get(p.key)
        if row is None or not p.result.meets_slo:
            continue
        if models is not None and row.config["model"] not in models:
            continue
        per_chip = p.result.output_tokens_per_s / row.chips
        points.append(FrontPoint(row.label, p.result.rate_rps, per_chip, p.result.tpot_p_s))
    return pareto_front(points)


def sweep_report(data: SweepData, model: str | None = None) -> SweepReport:
    """Rank the finished configurations and compute the front (of one model, if given)."""
    summaries = _summaries(data)
    if model is not None:
        summaries = [s for s in summaries if s.model == model]
    ranked = sorted(summaries, key=lambda s: (-(s.objective or 0.0), s.label))
    counts = Counter(s.status for s in summaries)
    running = len(data.configs) - len(data.results)
    if running:
        counts[Status.RUNNING.value] = running
    return SweepReport(
        name=str(data.spec.get("name", "sweep")),
        objective=str(data.spec.get("objective", "goodput")),
        slo=dict(data.spec.get("slo", {})),
        num_configs=len(data.configs),
        num_probes=len(data.probes),
        status_counts=dict(sorted(counts.items())),
        ranked=tuple(ranked),
        front=tuple(_front(data, None if model is None else {model})),
        # NOTE: stores written before sweeps named their mode priced on the ideal roofline
        mode=str(data.spec.get("mode", CostMode.IDEAL.value)),
    )
