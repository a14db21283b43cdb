"""Disaggregated serving over pools of many-chip instances (``sim.pools``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ridgeline.analytic import Deployment, kv_bytes_per_token
from ridgeline.analytic.memory import kv_pool_blocks
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim.executor import step_cost_model
from ridgeline.sim.loop import Role, SimConfig, Simulation
from ridgeline.sim.pools import PoolSet, PoolSimulation, pool_link
from ridgeline.sim.workload import Lengths, RequestSpec, WorkloadSpec, generate
from ridgeline.specs import get_accelerator, get_model

H200 = get_accelerator("h200")
M8 = get_model("llama-3.1-8b")


def test_the_link_is_one_hop_and_the_narrower_pools_egress() -> None:
    """TP1 prefill to TP2 decode on H200: one chip's NVLink egress (450 GB/s), one hop (1 us)."""
    link = pool_link(PoolSet(Deployment(H200, 1), Deployment(H200, 2), 3, 1))
    assert link.link_bandwidth_bytes_per_s == 450e9
    assert link.link_latency_s == 1e-6
    assert (link.num_prefill, link.num_decode) == (3, 1)
    wide = pool_link(PoolSet(Deployment(H200, 4), Deployment(H200, 8)))
    assert wide.link_bandwidth_bytes_per_s == 4 * 450e9


def test_pools_on_one_accelerator_only() -> None:
    with pytest.raises(ConfigError, match="field pools"):
        PoolSet(Deployment(H200), Deployment(get_accelerator("h100-sxm")))
    with pytest.raises(ConfigError, match="num_decode"):
        PoolSet(Deployment(H200), Deployment(H200), 1, 0)


def test_one_request_hand_checked() -> None:
    """A 1,000-token prompt and two output tokens: TTFT is the prefill instance's step; the
    KV then crosses the link (1 us + 1,000 x 131,072 B / 450 GB/s) and the decode instance's
    TP2 step of one sequence on 1,000 cached tokens gives the second token."""
    cfg = SimConfig(M8, Pricing.expected(H200), SchedulerConfig(max_num_batched_tokens=4096))
    req = RequestSpec("r0", 0.0, list(range(1000)), [7, 8])
    pools = PoolSet(Deployment(H200, 1), Deployment(H200, 2))
    run = PoolSimulation(cfg, [req], pools).run()
    prefill = step_cost_model(M8, Pricing.expected(Deployment(H200, 1)))
    decode = step_cost_model(M8, Pricing.expected(Deployment(H200, 2)))
    t_prefill = prefill.step_time_s([1000], [0])
    assert kv_bytes_per_token(M8) == 131_072
    t_link = 1e-6 + 1000 * 131_072 / 450e9
    t_decode = decode.step_time_s([1], [1000])
    r = run.requests[0]
    assert r.ttft_s == pytest.approx(t_prefill, rel=1e-12)
    assert r.e2e_s == pytest.approx(t_prefill + t_link + t_decode, rel=1e-12)


def test_each_pool_has_its_own_cost_and_kv_pool() -> None:
    cfg = SimConfig(M8, Pricing.expected(H200))
    pools = PoolSet(Deployment(H200, 1), Deployment(H200, 2), 2, 1)
    sim = PoolSimulation(cfg, [], pools)
    roles = [i.role for i in sim.instances]
    assert roles == [Role.PREFILL, Role.PREFILL, Role.DECODE]
    tps = [
        getattr(i.executor.cost, "deployment", Deployment(H200)).tensor_parallel
        for i in sim.instances
    ]
    assert tps == [1, 1, 2]
    blocks = [i.scheduler.kv.pool.num_blocks for i in sim.instances]
    rule, block_bytes = cfg.memory_rule, cfg.block_bytes
    assert blocks[0] == kv_pool_blocks(M8, Deployment(H200, 1), cfg.dtypes, block_bytes, rule)
    assert blocks[2] == kv_pool_blocks(M8, Deployment(H200, 2), cfg.dtypes, block_bytes, rule)
    assert blocks[2] > 2 * blocks[0]  # two chips, and only 8B/2 of weights on each


def test_one_chip_pools_are_the_base_loops_disaggregation() -> None:
    """Differential: with one-chip instances on both sides, the pools run exactly as the base
    loop's disaggregation with the same link."""
    spec = WorkloadSpec(
        num_requests=60,
        rate_per_s=20.0,
        prompt=Lengths.between(200, 900),
        output=Lengths.between(2, 60),
    )
    work = generate(spec)
    pools = PoolSet(Deployment(H200), Deployment(H200), 2, 1)
    cfg = SimConfig(M8, Pricing.expected(H200))
    ours = PoolSimulation(cfg, work, pools).run()
    base = Simulation(replace(cfg, disagg=pool_link(pools)), work).run()
    assert [r.e2e_s for r in ours.requests] == pytest.approx(
        [r.e2e_s for r in base.requests], rel=1e-12
    )
    assert ours.ttft_s.p90 == pytest.approx(base.ttft_s.p90, rel=1e-12)
