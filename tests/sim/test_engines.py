"""Engine profiles: vLLM v1, TensorRT-LLM and generic as data over the one scheduler."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ridgeline.analytic import Deployment
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.serving.lookahead import Lookahead
from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.serving.tiers import KVTiers, TierSpec
from ridgeline.sim import RequestSpec, SimConfig, simulate
from ridgeline.sim.engines import EngineRun, ServingSetup, engine_scheduler, engine_sim_config
from ridgeline.sim.executor import HostCost, StepCostModel
from ridgeline.sim.options import host_tier
from ridgeline.sim.workload import output_tokens, prompt_tokens
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.calibration import Term
from ridgeline.specs.engines import HostWork, engine_names, get_engine, parse_engine

H100, A100, L40S = (get_accelerator(n) for n in ("h100-sxm", "a100-80gb", "l40s"))
LLAMA = get_model("llama-2-7b")
EXPECTED = Pricing.expected(H100)


def test_shipped_engines_and_every_number_sourced() -> None:
    assert engine_names() == ["generic", "trtllm", "vllm"]
    for name in engine_names():
        e = get_engine(name)
        assert set(e.sources) >= {"block_size", "host.step_s"}
        assert all(e.sources.values())
        assert (e.memory_utilization is None) == (name == "generic")  # the runtime's default


def test_vllm_defaults_follow_the_device_as_get_batch_defaults_does() -> None:
    vllm = get_engine("vllm")
    # >= 70 GiB and not an A100: 8192 tokens, 1024 sequences; else 2048 and 256
    assert engine_scheduler(vllm, H100, LLAMA, ServingSetup()).max_num_batched_tokens == 8192
    a100 = engine_scheduler(vllm, A100, LLAMA, ServingSetup())
    l40s = engine_scheduler(vllm, L40S, LLAMA, ServingSetup())
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert (l40s.max_num_batched_tokens, l40s.max_num_seqs) == (2048, 256)
    assert vllm.graph_max_batch(128) == 256 and vllm.graph_max_batch(1024) == 512


def test_setup_overrides_and_sim_config() -> None:
    run = EngineRun(
        get_engine("vllm"),
        ServingSetup(max_num_batched_tokens=2048, max_num_seqs=128, num_blocks=500),
    )
    cfg = engine_sim_config(LLAMA, EXPECTED, run)
    assert (cfg.scheduler.max_num_batched_tokens, cfg.scheduler.max_num_seqs) == (2048, 128)
    assert cfg.prefix_caching and cfg.block_size == 16 and cfg.num_blocks == 500
    assert cfg.scheduler.enable_chunked_prefill and cfg.scheduler.policy is PolicyKind.FCFS
    vllm = get_engine("vllm")
    assert cfg.host == HostCost(vllm.host, 256)
    # the engine's kernel terms stand in for the family's in the pricing
    bw = vllm.kernels[Term.BANDWIDTH_EFFICIENCY]
    assert (
        cfg.pricing.calibration.bandwidth_efficiency == bw != H100.calibration.bandwidth_efficiency
    )
    ideal = engine_sim_config(LLAMA, Pricing.ideal(H100), run)
    assert ideal.pricing == Pricing.ideal(H100) and ideal.host == HostCost()
    trt = engine_sim_config(LLAMA, EXPECTED, EngineRun(get_engine("trtllm")))
    assert trt.scheduler.policy is PolicyKind.RESERVE and trt.block_size == 32


def test_host_work_in_a_step_by_hand() -> None:
    host = HostCost(HostWork(step_s=1e-3, sequence_s=1e-5, eager_layer_s=2e-6), graph_max_batch=4)
    bare, priced = (
        StepCostModel(LLAMA, Pricing.ideal(H100)),
        StepCostModel(LLAMA, Pricing.ideal(H100), host),
    )
    decode = ([1] * 4, [100] * 4)
    # a graphed decode step: 1 ms + 4 sequences x 10 us
    assert priced.step_time_s(*decode) - bare.step_time_s(*decode) == pytest.approx(1.04e-3)
    # a step with a prompt chunk runs eagerly: + 32 layers x 2 us
    mixed = ([1, 1, 50], [100, 100, 0])
    assert priced.step_time_s(*mixed) - bare.step_time_s(*mixed) == pytest.approx(1.03e-3 + 64e-6)
    # a decode batch past the largest graph (5 > 4) too, in the closed forms as well
    big = [100] * 5
    extra = 1.05e-3 + 64e-6
    assert priced.decode_run_s(big, 3)[2] - bare.decode_run_s(big, 3)[2] == pytest.approx(extra)
    assert priced.decode_segments_s([(5, 500, 2)])[1] - bare.decode_segments_s([(5, 500, 2)])[
        1
    ] == pytest.approx(extra)  # type: ignore[index]


def test_request_time_delays_scheduling_and_counts_in_ttft() -> None:
    wl = [RequestSpec("a", 0.0, prompt_tokens(0, 64), output_tokens(0, 4))]
    run = EngineRun(get_engine("generic"))
    cfg = engine_sim_config(LLAMA, EXPECTED, run)
    base = simulate(cfg, wl)
    late = simulate(replace(cfg, host=HostCost(HostWork(request_s=0.25))), wl)
    assert late.ttft_s.mean - base.ttft_s.mean == pytest.approx(0.25)
    assert late.e2e_s.mean - base.e2e_s.mean == pytest.approx(0.25)
    assert late.tpot_s.mean == pytest.approx(base.tpot_s.mean)


def test_reserve_admission_never_preempts_where_on_demand_does() -> None:
    # 40 blocks of 16 tokens; eight requests of 64 + 96 tokens (10 blocks each at the end)
    wl = [RequestSpec(f"r{i}", 0.0, prompt_tokens(i, 64), output_tokens(i, 96)) for i in range(8)]
    setup = ServingSetup(num_blocks=40, max_num_batched_tokens=512, max_num_seqs=8)
    on_demand = simulate(
        engine_sim_config(LLAMA, EXPECTED, EngineRun(get_engine("generic"), setup)), wl
    )
    trt = EngineRun(
        get_engine("trtllm"),
        ServingSetup(num_blocks=20, max_num_batched_tokens=512, max_num_seqs=8),
    )
    reserve = simulate(
        engine_sim_config(LLAMA, EXPECTED, trt), wl
    )  # blocks of 32: the same 640 slots
    assert on_demand.num_preemptions > 0
    assert reserve.num_preemptions == 0 and reserve.num_completed == 8
    # five 160-token reservations fit 640 slots at once (4 x 5 blocks of 32)
    assert reserve.max_running == 4


def test_bad_engine_files_name_the_field() -> None:
    with pytest.raises(UnknownNameError):
        get_engine("sglang")
    good = {
        "name": "x",
        "description": "",
        "policy": "fcfs",
        "preemption": "recompute",
        "chunked_prefill": {"value": True, "source": "s"},
        "prefix_caching": {"value": True, "source": "s"},
        "block_size": {"value": 16, "source": "s"},
        "memory_utilization": {"value": 1.5, "source": "s"},
        "limits": [{"max_num_batched_tokens": 8, "max_num_seqs": 2, "source": "s"}],
        "host": {
            n: {"value": 0, "source": "s"}
            for n in ("step_s", "sequence_s", "request_s", "eager_layer_s")
        },
    }
    with pytest.raises(ConfigError, match="memory_utilization"):
        parse_engine(good, "x.toml")
    with pytest.raises(ConfigError, match="host"):
        parse_engine({**good, "host": {}}, "x.toml")


@pytest.mark.parametrize("fast_forward", [True, False])
def test_async_scheduling_shows_a_request_arriving_mid_step_to_the_step_after_next(
    fast_forward: bool,
) -> None:
    """vLLM schedules step k + 1 when step k starts: ``b`` arriving during a's prefill (step 1)
    misses step 2 and is first scheduled when step 2 ends; without async scheduling at the end
    of step 1. Step ends come from ``a`` alone (its first token ends step 1, its second step 2)."""
    sched = SchedulerConfig(max_num_batched_tokens=512, async_scheduling=True)
    cfg = SimConfig(LLAMA, Pricing.ideal(H100), sched, num_blocks=400, fast_forward=fast_forward)
    a = RequestSpec("a", 0.0, prompt_tokens(0, 256), output_tokens(0, 2))
    b = RequestSpec("b", 1e-6, prompt_tokens(1, 64), output_tokens(1, 4))
    alone = simulate(cfg, [a]).requests[0]
    step1_end, step2_end = alone.ttft_s, alone.e2e_s
    lagged = {r.request_id: r for r in simulate(cfg, [a, b]).requests}["b"]
    assert lagged.queue_s == pytest.approx(step2_end - 1e-6, rel=1e-9)
    sync = replace(cfg, scheduler=replace(sched, async_scheduling=False))
    plain = {r.request_id: r for r in simulate(sync, [a, b]).requests}["b"]
    assert plain.queue_s == pytest.approx(step1_end - 1e-6, rel=1e-9)


def test_lookahead_holds_a_step_then_releases_and_flushes_when_idle() -> None:
    held: Lookahead[str] = Lookahead()
    held.hold("at-start", at_step_start=True)
    held.hold("mid", at_step_start=False)
    assert held.release() == ["at-start"]  # the next schedule sees it
    held.hold("later", at_step_start=False)
    assert held.release() == ["mid"] and held.pending
    assert held.flush() == ["later"] and not held.pending


def test_async_scheduling_is_data_of_the_profile() -> None:
    """TensorRT-LLM's overlap scheduler is on; vLLM's profile keeps it off (its runs show no
    lag, ``data/engines/vllm.toml``); a deployment's setup turns it either way."""
    trt = engine_scheduler(get_engine("trtllm"), H100, LLAMA, ServingSetup())
    vllm = engine_scheduler(get_engine("vllm"), H100, LLAMA, ServingSetup())
    assert trt.async_scheduling and not vllm.async_scheduling
    on = ServingSetup(async_scheduling=True)
    assert engine_scheduler(get_engine("vllm"), H100, LLAMA, on).async_scheduling
    assert not engine_scheduler(get_engine("generic"), H100, LLAMA, ServingSetup()).async_scheduling


def test_cpu_kv_blocks_become_a_host_tier_over_every_chips_link() -> None:
    dep = Deployment(H100, 4)
    setup = ServingSetup(cpu_kv_blocks=6553)
    cfg = engine_sim_config(
        get_model("llama-3.1-70b"), Pricing.expected(dep), EngineRun(get_engine("vllm"), setup)
    )
    (tier,) = cfg.tiers
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 16 tokens: 5.24 MB a block
    assert tier.capacity_bytes == 6553 * 5_242_880
    assert tier.bandwidth_bytes_per_s == 4 * host_tier(H100).bandwidth_bytes_per_s
    assert not engine_sim_config(LLAMA, EXPECTED, EngineRun(get_engine("vllm"))).tiers


def test_offload_stores_are_background_and_loads_are_charged() -> None:
    sync = KVTiers((TierSpec("host", 1e9, 1e9),), 1e6)
    background = KVTiers((TierSpec("cpu", 1e9, 1e9, async_writes=True),), 1e6)
    for tiers in (sync, background):
        tiers.offload(7)
    assert sync.take_transfer() == (1e6, pytest.approx(1e-3))
    assert background.take_transfer() == (0.0, 0.0)  # stored on a copy stream of its own
    background.pin([7])
    background.load([7])
    assert background.take_transfer() == (1e6, pytest.approx(1e-3))  # a hit waits for its load
