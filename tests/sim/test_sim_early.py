"""Stopping a simulation once its TTFT objective is certainly missed: the bound on late requests,
that a stopped run really misses the objective, and that a run meeting it never stops."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ridgeline.analytic.pricing import Pricing
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import LengthDist, Lengths, SimConfig, Simulation, WorkloadSpec, generate
from ridgeline.sim.early import LateStop, late_limit
from ridgeline.specs import get_accelerator, get_model

A100 = get_accelerator("a100-80gb")
IDEAL = Pricing.ideal(A100)  # these runs' figures are the ideal roofline's
LLAMA = get_model("llama-2-7b")


@pytest.mark.parametrize(
    ("n", "pct"), [(10, 90.0), (11, 90.0), (1000, 99.0), (7, 100.0), (3, 50.0)]
)
def test_late_limit_is_enough_late_requests_to_sink_the_percentile(n: int, pct: float) -> None:
    """Brute force: with k values above the bound and n − k below, numpy's percentile is above
    the bound for every k >= late_limit, and below it for k <= late_limit − 2 (one fewer may
    go either way: the interpolation straddles the bound)."""
    rng = np.random.default_rng(n)
    limit = late_limit(n, pct)
    for k in range(n + 1):
        low, high = rng.uniform(0.0, 1.0, n - k), rng.uniform(1.0 + 1e-9, 5.0, k)
        above = float(np.percentile(np.concatenate([low, high]), pct)) > 1.0
        if k >= limit:
            assert above, k
        elif k <= limit - 2:
            assert not above, k
    assert late_limit(10, 90.0) == 10 - 8 and late_limit(1000, 99.0) == 1000 - 989


def _run(cfg: SimConfig, rate: float, stop: LateStop | None, seed: int = 1) -> Simulation:
    workload = generate(
        WorkloadSpec(
            num_requests=400,
            rate_per_s=rate,
            prompt=Lengths(LengthDist.LOGNORMAL, 800),
            output=Lengths(LengthDist.UNIFORM, 60),
            seed=seed,
        )
    )
    sim = Simulation(cfg, workload)
    sim.run(stop=stop)
    return sim


def _percentile(sim: Simulation, pct: float) -> float:
    """The TTFT percentile as the sweep takes it: a request never served counts as infinite."""
    ttft = np.array([r.ttft_s for r in sim.log.request_metrics()])
    with np.errstate(invalid="ignore"):
        value = float(np.percentile(np.nan_to_num(ttft, nan=math.inf), pct))
    return math.inf if math.isnan(value) else value  # inf - inf in the interpolation


CFG = SimConfig(LLAMA, IDEAL, SchedulerConfig(max_num_batched_tokens=1024), num_blocks=300)


def test_an_overloaded_run_stops_and_did_miss_the_objective() -> None:
    rule = LateStop(ttft_s=1.0, count=late_limit(400, 90.0))
    stopped = _run(CFG, 60.0, rule)
    full = _run(CFG, 60.0, None)
    assert stopped.stopped and not full.stopped
    assert _percentile(full, 90.0) > 1.0
    done = sum(t is not None for t in stopped.log.finish)
    assert done < 400 // 2  # decided well before the end


def test_a_run_that_meets_the_objective_never_stops_and_is_unchanged() -> None:
    rule = LateStop(ttft_s=5.0, count=late_limit(400, 90.0))
    watched, plain = _run(CFG, 2.0, rule), _run(CFG, 2.0, None)
    assert not watched.stopped
    assert watched.log.finish == plain.log.finish and watched.log.first_tok == plain.log.first_tok


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.floats(1.0, 200.0),
    ttft_s=st.floats(0.05, 3.0),
    pct=st.sampled_from([50.0, 90.0, 99.0, 100.0]),
    fast=st.booleans(),
    seed=st.integers(0, 5),
)
def test_a_stop_is_only_ever_a_certain_miss(
    rate: float, ttft_s: float, pct: float, fast: bool, seed: int
) -> None:
    cfg = replace(CFG, fast_forward=fast)
    stopped = _run(cfg, rate, LateStop(ttft_s, late_limit(400, pct)), seed)
    full = _run(cfg, rate, None, seed)
    if stopped.stopped:
        assert _percentile(full, pct) > ttft_s
