"""The sweep on ridgeline's serving simulator: the capacity search finds a rate computed by hand
from the simulator's own cost model, and the default simulator is the serving one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ridgeline.analytic.pricing import Pricing
from ridgeline.sim.executor import StepCostModel
from ridgeline.specs import get_accelerator, get_model
from ridgeline.sweep import (
    ChipSplit,
    Configuration,
    LocalBackend,
    Policy,
    ServingSimulator,
    SqliteStore,
    run_sweep,
    spec_from_dict,
)

PROMPT, N, SLO_FACTOR = 1000, 11, 2.0


def _spec(ttft_slo_s: float) -> dict[str, object]:
    return {
        "sweep": {"models": ["llama-3.1-8b"], "accelerators": ["h100-sxm"]},
        # a budget of exactly one prompt: one prefill per step, a FIFO single server
        "policies": [{"name": "one-prompt", "max_num_batched_tokens": PROMPT}],
        "workloads": [
            {
                "name": "fixed",
                "arrival": "uniform",
                "prompt_tokens": PROMPT,
                "output_tokens": 1,
                "num_requests": N,
            }
        ],
        "slo": {"ttft_s": ttft_slo_s, "tpot_s": 1.0, "percentile": 100},
        "search": {"rate_start_rps": 1.0, "rel_tolerance": 0.001, "max_probes": 40},
    }


@pytest.mark.slow
def test_capacity_on_the_simulator_matches_the_hand_computed_rate(tmp_path: Path) -> None:
    """Each request is one prefill step of T = step_time([1000], [0]) (calibrated: a sweep's
    default pricing) and ends there (one output token). Arrivals every 1/λ: below λ = 1/T nobody waits and TTFT = T; above it
    request k waits k(T − 1/λ), so the last of n has TTFT = T + (n − 1)(T − 1/λ). With the
    TTFT SLO S = 2T at p100: λ* = 1 / (T − (S − T)/(n − 1)) = 1 / (0.9 T) for n = 11."""
    pricing = Pricing.expected(get_accelerator("h100-sxm"))
    t = StepCostModel(get_model("llama-3.1-8b"), pricing).step_time_s([PROMPT], [0])
    slo = SLO_FACTOR * t
    expected = 1 / (t - (slo - t) / (N - 1))
    out = run_sweep(
        spec_from_dict(_spec(slo)),
        SqliteStore(tmp_path / "sim.db"),
        LocalBackend(1),
        ServingSimulator(),
    )
    (res,) = out.results
    assert res.status == "converged", res
    assert res.capacity_rps is not None and res.upper_rps is not None
    assert res.capacity_rps <= expected < res.upper_rps <= res.capacity_rps * 1.001
    assert expected == pytest.approx(1 / (0.9 * t))


def test_serving_simulator_knows_what_does_not_fit() -> None:
    sim = ServingSimulator()
    fixed = spec_from_dict(_spec(1.0)).workloads[0]
    big_on_one = Configuration("llama-3.1-70b", "h100-sxm", ChipSplit(1, 1), Policy("p"), fixed)
    big_on_four = Configuration("llama-3.1-70b", "h100-sxm", ChipSplit(4, 4), Policy("p"), fixed)
    odd_split = Configuration("llama-3.1-8b", "h100-sxm", ChipSplit(3, 3), Policy("p"), fixed)
    assert not sim.fits(big_on_one)  # 141 GB of weights on an 80 GB chip
    assert sim.fits(big_on_four)
    assert not sim.fits(odd_split)  # 3 does not divide 32 heads


@pytest.mark.slow
def test_deciding_probes_early_changes_no_decision_and_no_probe_that_met(tmp_path: Path) -> None:
    """A probe stopped once its TTFT objective is certainly missed counts as missed, as the
    whole simulation would: the same brackets, statuses and probes within the SLOs."""
    data = {
        "sweep": {"models": ["llama-3.1-8b"], "accelerators": ["h100-sxm"]},
        "policies": [{"name": "p", "max_num_batched_tokens": [512, 4096]}],
        "workloads": [
            {
                "name": "w",
                "arrival": "poisson",
                "prompt_tokens": [200, 2000],
                "output_tokens": [20, 200],
                "duration_s": 10,
                "max_requests": 800,
            }
        ],
        "slo": {"ttft_s": 0.5, "tpot_s": 0.05, "percentile": 90},
        "search": {"rate_start_rps": 4.0, "rel_tolerance": 0.2},
    }
    outcomes, stores = {}, {}
    for decide in (True, False):
        spec = spec_from_dict({**data, "search": {**data["search"], "decide_early": decide}})
        store = SqliteStore(tmp_path / f"{decide}.db")
        outcomes[decide] = run_sweep(spec, store, LocalBackend(1), ServingSimulator())
        stores[decide] = store.read()
    fast, full = outcomes[True], outcomes[False]
    assert fast.results == full.results and fast.num_simulated == full.num_simulated
    assert fast.num_decided_early > 0 and full.num_decided_early == 0
    met = {
        s: {(p.key, p.result.rate_rps): p.result for p in stores[s].probes if p.result.meets_slo}
        for s in stores
    }
    assert met[True] == met[False] and met[True]
    decided = [p.result for p in stores[True].probes if p.result.decided_early]
    assert decided and not any(r.meets_slo for r in decided)
