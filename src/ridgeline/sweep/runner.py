"""Runs a sweep: the capacity search of every configuration, in rounds, on a backend, with every
probe stored as it finishes.

One round = one probe per configuration still searching, all submitted together::

    round k:  decide (grid order) ─▶ submit probes ─▶ store each as it finishes ─▶ observe (grid order)

Decisions (next rate, converged, dominated) are taken only between rounds, in grid order, from
the results of earlier rounds — never from the order in which probes finish — so a sweep gives
the same results on any backend. A resumed sweep replays the same rounds, taking each probe from
the store when it is there, so it also reaches the same decisions, simulating only what is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ridgeline.analytic import weights_bytes
from ridgeline.specs import get_accelerator, get_model
from ridgeline.sweep.backends import Backend, ProbeTask, SharedContext
from ridgeline.sweep.point import Configuration, PointResult, PointSimulator, point_key
from ridgeline.sweep.search import Bracket, Status, dominated, next_rate, proven
from ridgeline.sweep.spec import SearchSettings, SweepSpec
from ridgeline.sweep.store import ConfigResult, ResultStore, config_row
from ridgeline.sweep.workload import load_table


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a running sweep stands, for a progress bar."""

    num_configs: int
    num_finished: int
    num_simulated: int
    num_reused: int
    best_label: str | None
    best_objective: float | None


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What a finished ``run_sweep`` did."""

    results: tuple[ConfigResult, ...]
    num_simulated: int  # simulations run by this call
    num_reused: int  # probes taken from the store instead
    num_decided_early: int  # of the simulations run, those stopped once the SLOs were missed
    num_rounds: int
    wall_s: float


@dataclass(slots=True)
class _Search:
    """Mutable state of one configuration's search (runner-private)."""

    idx: int
    key: str
    config: Configuration
    factor: float | None
    settings: SearchSettings
    bracket: Bracket = Bracket()
    status: Status = Status.RUNNING


def weights_fit(config: Configuration) -> bool:
    """True when the model's weights fit the deployment's device memory (all chips together):
    the crudest ``PointSimulator.fits``, for simulators without memory rules of their own."""
    model, acc = get_model(config.model), get_accelerator(config.accelerator)
    return float(weights_bytes(model)) < acc.device_capacity_bytes * config.chips


def spec_payload(spec: SweepSpec) -> dict[str, Any]:
    """The spec as plain JSON values, for the store."""
    return asdict(spec)


def _group(c: Configuration) -> tuple[str, str]:
    return c.model, c.workload.name


def _settings(spec: SweepSpec, c: Configuration, table_sizes: Mapping[str, int]) -> SearchSettings:
    """The search settings of one configuration: a probe of ``duration_s`` seconds cannot
    measure rates beyond (requests available) / duration_s, so the search stops there (capped)."""
    w = c.workload
    if w.duration_s is None:
        return spec.search
    most = min(spec.search.rate_max_rps, table_sizes[w.name] / w.duration_s)
    return replace(spec.search, rate_max_rps=most)


class _Sweep:
    """One run of ``run_sweep``: the searches, the store, the probe cache, the counters."""

    def __init__(
        self,
        spec: SweepSpec,
        store: ResultStore,
        backend: Backend,
        simulator: PointSimulator,
        table_sizes: Mapping[str, int],
    ) -> None:
        self.spec, self.store, self.backend, self.simulator = spec, store, backend, simulator
        configs = spec.configurations()
        keys = [point_key(c, spec.slo, spec.seed) for c in configs]
        rows = [config_row(i, k, c) for i, (k, c) in enumerate(zip(keys, configs, strict=True))]
        store.begin(spec_payload(spec), rows)
        # NOTE: finished configurations are replayed too (from stored probes, at no cost), so
        # the early-stopping decisions of a resumed sweep see exactly what the first run saw.
        self.cache = {(p.key, p.result.rate_rps): p.result for p in store.read().probes}
        self.results: dict[str, ConfigResult] = {}
        self.searches = [
            _Search(i, k, c, spec.objective_factor(c), _settings(spec, c, table_sizes))
            for i, (k, c) in enumerate(zip(keys, configs, strict=True))
        ]
        self.num_configs = len(configs)
        self.num_simulated = self.num_reused = self.num_rounds = self.num_decided_early = 0

    def best(self) -> tuple[str | None, float | None]:
        """Label and objective of the best configuration proven so far."""
        scored = [
            (proven(s.bracket, s.factor), -s.idx, s.config.label)
            for s in self.searches
            if s.factor is not None and s.bracket.lo_rps is not None
        ]
        if not scored:
            return None, None
        value, _, label = max(scored)
        return label, value

    def best_proven(self) -> dict[tuple[str, str], float]:
        """Per (model, workload): the best objective proven so far. Configurations compete only
        with those serving the same model and traffic."""
        best: dict[tuple[str, str], float] = {}
        for s in self.searches:
            if s.factor is not None:
                group = _group(s.config)
                best[group] = max(best.get(group, 0.0), proven(s.bracket, s.factor))
        return best

    def finish(self, s: _Search, status: Status) -> None:
        s.status = status
        b = s.bracket
        objective = None if s.factor is None else proven(b, s.factor)
        result = ConfigResult(s.key, status.value, b.lo_rps, b.hi_rps, objective, b.num_probes)
        self.results[s.key] = result
        self.store.add_result(result)

    def decide(self, s: _Search, best_of: Mapping[tuple[str, str], float]) -> float | None:
        """The rate ``s`` probes this round, or ``None`` once it has finished."""
        if s.bracket.num_probes == 0 and not self.simulator.fits(s.config):
            self.finish(s, Status.DOES_NOT_FIT)
            return None
        early = self.spec.search.early_stop and s.factor is not None
        best = best_of.get(_group(s.config), 0.0)
        if early and s.factor is not None and dominated(s.bracket, s.factor, best):
            self.finish(s, Status.DOMINATED)
            return None
        step = next_rate(s.bracket, s.settings)
        if isinstance(step, Status):
            self.finish(s, step)
            return None
        return step

    def round(self, on_progress: Callable[[Progress], None] | None) -> bool:
        """Run one round; False when every search has finished."""
        best = self.best_proven()
        active = [s for s in self.searches if s.status is Status.RUNNING]
        planned = [(s, rate) for s in active if (rate := self.decide(s, best)) is not None]
        if not planned:
            return False
        self.num_rounds += 1
        found: dict[tuple[str, float], PointResult] = {}
        tasks = []
        for s, rate in planned:
            cached = self.cache.get((s.key, rate))
            if cached is not None:
                found[(s.key, rate)] = cached
                self.num_reused += 1
            else:
                tasks.append(ProbeTask(s.key, s.config, rate, self.spec.seed))
        for task, result in self.backend.run(tasks):
            self.store.add_probe(task.key, result)
            found[(task.key, task.rate_rps)] = result
            self.num_simulated += 1
            self.num_decided_early += result.decided_early
            if on_progress is not None:
                on_progress(self.progress())
        for s, rate in planned:  # grid order: the finishing order never matters
            s.bracket = s.bracket.observe(rate, found[(s.key, rate)].meets_slo)
        return True

    def progress(self) -> Progress:
        label, value = self.best()
        return Progress(
            self.num_configs,
            len(self.results),
            self.num_simulated,
            self.num_reused,
            label,
            value,
        )


def run_sweep(
    spec: SweepSpec,
    store: ResultStore,
    backend: Backend,
    simulator: PointSimulator,
    on_progress: Callable[[Progress], None] | None = None,
) -> SweepOutcome:
    """Find the capacity of every configuration of ``spec``, storing each probe as it finishes.

    Configurations already finished in ``store`` are skipped; probes already stored are reused.

    Args:
        spec: the sweep.
        store: where results go (and come from, on a resumed sweep).
        backend: where probes run; started and closed here.
        simulator: the point simulator shipped to the workers.
        on_progress: called after every finished probe and configuration.

    Returns:
        Every configuration's result (in grid order) and what this call simulated.
    """
    start = time.perf_counter()
    tables = {w.name: load_table(w, spec.seed) for w in spec.workloads}
    sizes = {name: len(t.prompt_tokens) for name, t in tables.items()}
    sweep = _Sweep(spec, store, backend, simulator, sizes)
    backend.start(SharedContext(simulator, tables, spec.slo, spec.search.decide_early))
    try:
        while sweep.round(on_progress):
            if on_progress is not None:
                on_progress(sweep.progress())
    finally:
        backend.close()
    return SweepOutcome(
        tuple(sweep.results[s.key] for s in sweep.searches),
        sweep.num_simulated,
        sweep.num_reused,
        sweep.num_decided_early,
        sweep.num_rounds,
        time.perf_counter() - start,
    )
