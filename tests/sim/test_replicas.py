"""Simulator replicas that are multi-chip deployments, behind a router."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ridgeline.analytic import Deployment, Phase, Pricing, Workload, deployment_cost
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.sim.loop import Disagg, SimConfig, kv_pool_blocks
from ridgeline.sim.replicas import (
    DeploymentStepCost,
    ReplicaSet,
    Router,
    simulate_replicas,
)
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import get_accelerator, get_model


@pytest.mark.parametrize(
    ("hw", "tp", "pp"), [("h100-sxm", 2, 1), ("cerebras-wse3", 1, 4), ("groq-lpu", 8, 78)]
)
def test_replica_step_is_the_deployment_step(hw: str, tp: int, pp: int) -> None:
    """Differential: the simulator's step equals analytic.deploy's with one microbatch."""
    m = get_model("llama-3.1-70b")
    pricing = Pricing.ideal(Deployment(get_accelerator(hw), tp, pp))
    cost = DeploymentStepCost(m, pricing)
    decode = deployment_cost(m, pricing, Workload(Phase.DECODE, 4, 1000), microbatches=1)
    assert cost.step_time_s([1] * 4, [1000] * 4) == pytest.approx(decode.step_time_s, rel=1e-9)
    run = cost.decode_run_s([1000] * 4, 3)
    assert run[0] == pytest.approx(decode.step_time_s, rel=1e-9)
    prefill = deployment_cost(m, pricing, Workload(Phase.PREFILL, 2, 512), microbatches=1)
    assert cost.step_time_s([512] * 2, [0] * 2) == pytest.approx(prefill.step_time_s, rel=1e-9)


def _request(rid: str, arrival_s: float, output_len: int) -> RequestSpec:
    return RequestSpec(rid, arrival_s, list(range(100, 116)), list(range(5000, 5000 + output_len)))


# r0 decodes 2000 tokens (seconds); r1 one token; r2 arrives after r1 is done, r0 is not.
ROUTING = [_request("r0", 0.0, 2000), _request("r1", 0.0, 1), _request("r2", 1.0, 4)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("router", "expected"),
    [
        (Router.ROUND_ROBIN, {"r0": 0, "r1": 1, "r2": 0}),
        (Router.LEAST_OUTSTANDING, {"r0": 0, "r1": 1, "r2": 1}),
    ],
)
def test_router_assignments(router: Router, expected: dict[str, int]) -> None:
    dep = Deployment(get_accelerator("h100-sxm"), 2)
    cfg = SimConfig(get_model("llama-3.1-8b"), Pricing.ideal(dep))
    run = simulate_replicas(cfg, ROUTING, ReplicaSet(2, router))
    assert dict(run.assignments) == expected
    assert run.result.num_completed == 3
    assert run.requests_per_replica() == [
        sum(v == 0 for v in expected.values()),
        sum(v == 1 for v in expected.values()),
    ]


def test_replica_kv_pool_of_llama_70b_on_two_h100() -> None:
    # the KV-pool rule (analytic.memory), the scheduler's profile step of 2,048 tokens over 128
    # sequences: activations 2,048 x 2 B x (8,192 + 3 x 28,672 / 2) + 128 x 128,256 x 24 B =
    # 603,717,632 B, workspace 1e9 B. At memory_utilization 0.9 each chip offers 72e9 B for
    # 70,553,706,496 B of weights and 1,603,717,632 B of reserve: nothing is left for KV.
    dep = Deployment(get_accelerator("h100-sxm"), 2)
    cfg = SimConfig(get_model("llama-3.1-70b"), Pricing.ideal(dep))
    with pytest.raises(CapacityError, match="leaves no room for KV on 2 x h100-sxm"):
        kv_pool_blocks(cfg)
    # at 0.95: 76e9 - 70,553,706,496 - 1,603,717,632 = 3,842,575,872 B per chip; the two chips
    # hold distinct KV heads (8 heads / TP 2): 7,685,151,744 B / (16 x 327,680 B) -> 1,465
    cfg = replace(cfg, memory_utilization=0.95)
    assert kv_pool_blocks(cfg) == 1465
    burst = [_request(f"q{i}", 0.0, 32) for i in range(8)]
    run = simulate_replicas(cfg, burst, ReplicaSet(2))
    assert run.result.num_completed == 8 and run.result.kv_blocks == 1465
    assert run.requests_per_replica() == [4, 4]


def test_replica_errors_name_the_field() -> None:
    dep = Deployment(get_accelerator("h100-sxm"), 2)
    with pytest.raises(ConfigError, match="field replicas"):
        ReplicaSet(0)
    cfg = SimConfig(get_model("llama-3.1-8b"), Pricing.ideal(dep), disagg=Disagg())
    with pytest.raises(ConfigError, match="field disagg"):
        simulate_replicas(cfg, ROUTING, ReplicaSet(2))


def test_one_replica_routes_every_request_to_it_in_both_modes() -> None:
    dep = Deployment(get_accelerator("h100-sxm"), 2)
    cfg = SimConfig(get_model("llama-3.1-8b"), Pricing.ideal(dep))
    fast = simulate_replicas(cfg, ROUTING, ReplicaSet(1))
    slow = simulate_replicas(replace(cfg, fast_forward=False), ROUTING, ReplicaSet(1))
    assert dict(fast.assignments) == dict(slow.assignments) == {"r0": 0, "r1": 0, "r2": 0}
    assert [r.ttft_s for r in fast.result.requests] == pytest.approx(
        [r.ttft_s for r in slow.result.requests], rel=1e-9
    )
