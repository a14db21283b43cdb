"""Every documented configuration either runs in the fast mode or names why not.

``ridgeline simulate`` is run (in-process, a few requests, ``--json``) with each option that
changes scheduling, and every ``simulate compare`` variant, and the JSON's ``fast_mode`` field
is held to the expected answer: None (the fast mode ran) or a ``FastModeOff`` reason. A new
option fails ``test_every_simulate_option_is_enumerated`` until it is placed here, and a new
configuration field fails ``test_every_configuration_field_is_enumerated``, so no feature
leaves the fast mode unannounced. The covered ones are held to the step loop's results in
``tests/sim/test_sim_fast.py`` and at the end of this file.
"""

from __future__ import annotations

import json
import typing
from dataclasses import fields, replace

import pytest
from typer.testing import CliRunner

from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.cli.simulate_options import (
    CostOptions,
    OutputOptions,
    ServingOptions,
    ShapeGroupOptions,
    TopologyOptions,
    WorkloadOptions,
)
from ridgeline.serving.eviction import EvictionKind
from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.scheduler import PreemptionMode, SchedulerConfig
from ridgeline.sim import SimConfig, Simulation, generate, simulate
from ridgeline.sim.engines import EngineRun, ServingSetup, engine_sim_config
from ridgeline.sim.fast_off import FastModeOff, fast_mode_off
from ridgeline.sim.replicas import ReplicaSet, ReplicaSimulation
from ridgeline.sim.static_variants import STATIC_VARIANTS
from ridgeline.sim.variants import VARIANTS
from ridgeline.sim.workload import LengthDist, Lengths, WorkloadSpec
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.engines import engine_names, get_engine

runner = CliRunner()
OFF = FastModeOff
RUN = ["simulate", "--hw", "a100-80gb", "-m", "llama-2-7b", "-n", "6", "--rate", "4", "--json"]
SHARED = ["--prefixes", "2", "--prefix-len", "64"]

# name: (options added to RUN, the reason the fast mode is off or None)
CASES: dict[str, tuple[list[str], FastModeOff | None]] = {
    "defaults": ([], None),
    **{f"policy-{p}": (["--policy", p.value], None) for p in PolicyKind},
    **{f"engine-{e}": (["--engine", e], None) for e in engine_names()},
    "no-chunking": (["--chunk", "0"], None),
    "small-budget": (["--chunk", "128"], None),
    "few-seqs": (["--max-seqs", "2"], None),
    "short-context": (["--max-model-len", "2048"], None),
    "big-blocks": (["--block-size", "32"], None),
    "memory-utilization": (["--memory-utilization", "0.5"], None),
    "kv-blocks": (["--kv-blocks", "300"], None),
    "prefix-caching": (["--prefix-caching", *SHARED], None),
    **{
        f"eviction-{e}": (["--prefix-caching", "--eviction", e.value, *SHARED], None)
        for e in EvictionKind
    },
    "no-prefix-caching": (["--no-prefix-caching", *SHARED], None),
    "multi-turn-caching": (["--prefix-caching", "--turns", "3"], OFF.OUTPUTS_REUSED),
    "multi-turn-no-caching": (["--no-prefix-caching", "--turns", "3"], None),
    # swap without a tier to swap to recomputes (Scheduler._preempt)
    **{f"preemption-{m}": (["--preemption", m.value], None) for m in PreemptionMode},
    "swap-to-host": (["--preemption", "swap", "--tiers", "host"], OFF.KV_TIERS),
    "host-tier": (["--tiers", "host"], OFF.KV_TIERS),
    # regression: simulate dropped the engine's CPU tier when --tiers was not given
    "cpu-offload": (["--cpu-kv-blocks", "200"], OFF.KV_TIERS),
    "spec-decode": (["--spec-k", "2", "--spec-accept", "0.5"], OFF.SPEC_DECODE),
    "spec-draft": (["--spec-k", "2", "--spec-draft", "distilgpt2"], OFF.SPEC_DECODE),
    "disagg": (
        ["--disagg", "1:1", "--link-bw", "1e11", "--link-latency", "0.002"],
        OFF.DISAGGREGATION,
    ),
    "closed-loop": (["--concurrency", "3"], OFF.CLOSED_LOOP),
    "moe": (["-m", "qwen3-30b-a3b"], None),
    "moe-expert-parallel": (["-m", "mixtral-8x7b", "--tp", "2", "--ep", "2"], None),
    "sliding-window": (["-m", "mistral-7b"], None),
    "tensor-parallel": (["--tp", "2"], None),
    "pipeline": (["--pp", "2"], None),
    "fp8": (["--weight-dtype", "fp8", "--kv-dtype", "fp8"], None),
    "ideal": (["--ideal", "--bw-eff", "0.8", "--compute-eff", "0.6", "--overhead", "0.001"], None),
    "trace": (["--trace", "vidur_conv_4qps_1k"], None),
    "gamma-arrivals": (["--workload", "gamma", "--cv", "3"], None),
    "lengths": (["--prompt", "uniform:300", "--output", "uniform:40"], None),
    "compiled-tpu": (["--hw", "tpu-v6e", "--policy", "static"], OFF.COMPILED_SHAPES),
    "compiled-spyre": (
        [
            "--hw",
            "ibm-spyre",
            "-m",
            "llama-3.1-8b",
            "--policy",
            "static",
            "--prefill-chunk",
            "256",
            "--compile-s",
            "10",
            "--compile-budget",
            "600",
            "--recompile",
        ],
        OFF.COMPILED_SHAPES,
    ),
    "paged-tpu": (["--hw", "tpu-v6e"], None),  # not static: no compiled shapes
}

# simulate's options that do not change what is scheduled, or that the cases above do not need
# (the workload's size, its seed, reporting)
NOT_SCHEDULING = {
    "--requests",
    "--rate",
    "--seed",
    "--profile",
    "--questions",
    "--slo-ttft",
    "--slo-tpot",
    "--configs",
    "--json",
    "--plot",
    "--hw",
    "--model",
}


def _fast_mode(args: list[str]) -> list[dict[str, object]]:
    """Each run's JSON ``fast_mode``, once stderr has said the same: a line for each run off the
    fast mode, naming why, and nothing about the fast mode for a run it covered."""
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    modes = [res["fast_mode"] for res in json.loads(r.stdout)["results"]]
    said = [line for line in r.stderr.splitlines() if "fast mode off: " in line]
    whys = [m["why"] for m in modes if not m["ran"]]
    assert len(said) == len(whys) and all(
        f"fast mode off: {w} (" in s for w, s in zip(whys, said, strict=True)
    ), r.stderr
    return modes


def _expected(off: FastModeOff | None) -> dict[str, object]:
    return {"ran": off is None, "off": off, "why": off.why if off else None}


@pytest.mark.parametrize("name", CASES)
def test_each_simulate_option_runs_fast_or_says_why(name: str) -> None:
    args, off = CASES[name]
    assert _fast_mode([*RUN, *args]) == [_expected(off)]


# every variant of simulate compare, by name: the reason its runs leave the fast mode
VARIANT_OFF: dict[str, FastModeOff | None] = {
    "paged": None,
    "contiguous": None,
    "static": None,  # on a GPU: fixed slots, no compiled shapes
    "prefix": None,
    "no-chunk": None,
    "priority": None,
    "swap": OFF.KV_TIERS,
    "spec": OFF.SPEC_DECODE,
    "host-tier": OFF.KV_TIERS,
    "disagg": OFF.DISAGGREGATION,
}

# the compiled-shape variants on a compiled-schedule accelerator: the first reason that applies
STATIC_OFF = {
    **{
        v: OFF.COMPILED_SHAPES
        for v in ("static", "static-paged", "static-chunk", "static-prefix", "static-prefix-copy")
    },
    "static-host-tier": OFF.KV_TIERS,
    "static-spec": OFF.SPEC_DECODE,
    "static-disagg": OFF.DISAGGREGATION,
}


@pytest.mark.slow
def test_every_compare_variant_runs_fast_or_says_why() -> None:
    assert VARIANT_OFF.keys() == VARIANTS.keys()
    got = _fast_mode(["simulate", "compare", *RUN[1:], "--configs", ",".join(VARIANT_OFF)])
    assert [g["off"] for g in got] == list(VARIANT_OFF.values())
    assert STATIC_OFF.keys() == STATIC_VARIANTS.keys()
    compiled = ["simulate", "compare", "--hw", "tpu-v6e", *RUN[3:], "--configs"]
    got = _fast_mode([*compiled, ",".join(STATIC_OFF)])
    assert [g["off"] for g in got] == list(STATIC_OFF.values())


def _flags(cls: type) -> set[str]:
    """The long option names of an option group (with ``Annotated``, typer takes the first
    name as the option's ``default``)."""
    out = set()
    for hint in typing.get_type_hints(cls, include_extras=True).values():
        for meta in getattr(hint, "__metadata__", ()):
            decls = [meta.default, *meta.param_decls]
            out |= {d for x in decls if isinstance(x, str) for d in x.split("/") if d[:2] == "--"}
    return out


def test_every_simulate_option_is_enumerated() -> None:
    """A new option of ``simulate`` fails here until a case above runs it (or it is listed as
    not changing what is scheduled)."""
    groups = (
        WorkloadOptions,
        ServingOptions,
        CostOptions,
        TopologyOptions,
        ShapeGroupOptions,
        OutputOptions,
    )
    options = set().union(*(_flags(g) for g in groups)) | {"--hw", "--model"}
    used = {a for args, _ in CASES.values() for a in args if a.startswith("--")}
    assert "--prefix-caching" in options and "--spec-k" in options  # the names are read
    assert options - used - NOT_SCHEDULING == set()
    assert used - options == set()  # no case names an option that is gone


def test_every_reason_and_choice_has_a_case() -> None:
    reasons = {off for _, off in CASES.values()} | set(VARIANT_OFF.values())
    # TURNED_OFF is the library's fast_forward=False, INSTANCES its replicas: not CLI options
    assert set(FastModeOff) - reasons == {OFF.TURNED_OFF, OFF.INSTANCES}
    assert {f"policy-{p}" for p in PolicyKind} | {
        f"eviction-{e}" for e in EvictionKind
    } <= CASES.keys()
    assert {f"engine-{e}" for e in engine_names()} <= CASES.keys()
    assert {f"preemption-{m}" for m in PreemptionMode} <= CASES.keys()


# the fields of the configurations and where they are varied here or in tests/sim/test_sim_fast.py
# (a new field fails test_every_configuration_field_is_enumerated until it is placed)
SIM_FIELDS = {
    "model": "moe, sliding-window",
    "pricing": "ideal, tensor-parallel, pipeline, fp8",
    "scheduler": "the SchedulerConfig fields",
    "block_size": "big-blocks",
    "prefix_caching": "prefix-caching",
    "eviction": "eviction-*",
    "memory_utilization": "memory-utilization",
    "num_blocks": "kv-blocks",
    "tiers": "host-tier",
    "draft_model": "spec-draft",
    "disagg": "disagg",
    "compiled": "compiled-*",
    "slo": "not scheduling",
    "host": "engine-* (their host work)",
    "seed": "spec acceptance only",
    "fast_forward": "TURNED_OFF",
    "label": "not scheduling",
}
SCHEDULER_FIELDS = {
    "max_num_batched_tokens": "small-budget",
    "max_num_seqs": "few-seqs",
    "max_model_len": "short-context",
    "long_prefill_token_threshold": "test_sim_fast chunk-cap",
    "enable_chunked_prefill": "no-chunking",
    "policy": "policy-*",
    "preemption": "preemption-*, swap-to-host",
    "static_buckets": "compiled-*",
    "static_slots": "test_sim_fast static",
    "static": "compiled-spyre, test_sim_fast prefix_copy",
    "spec": "spec-decode",
    "async_scheduling": "engine-vllm, test_sim_fast drawn configs",
}


def test_every_configuration_field_is_enumerated() -> None:
    assert {f.name for f in fields(SimConfig)} == SIM_FIELDS.keys()
    assert {f.name for f in fields(SchedulerConfig)} == SCHEDULER_FIELDS.keys()


def _engine_config(engine: str, model: str) -> SimConfig:
    pricing = Pricing.of(get_accelerator("h100-sxm"))
    setup = ServingSetup(num_blocks=300, max_num_batched_tokens=256)
    return engine_sim_config(get_model(model), pricing, EngineRun(get_engine(engine), setup))


@pytest.mark.parametrize(
    ("engine", "model"),
    [
        ("vllm", "llama-3.1-8b"),
        ("trtllm", "llama-3.1-8b"),
        ("generic", "qwen3-30b-a3b"),
        ("generic", "mistral-7b"),
        ("vllm", "mistral-7b"),
    ],
)
def test_engine_profiles_moe_and_sliding_windows_give_the_step_by_step_result(
    engine: str, model: str
) -> None:
    """The configurations the cases above add to ``tests/sim/test_sim_fast.py``'s: engine profiles
    (their host work, async scheduling), an MoE model and a sliding-window one."""
    from test_sim_fast import _assert_same

    spec = WorkloadSpec(
        num_requests=60,
        rate_per_s=30,
        prompt=Lengths(LengthDist.LOGNORMAL, 600),
        output=Lengths(LengthDist.UNIFORM, 60),
        seed=5,
    )
    cfg = _engine_config(engine, model)
    got = _assert_same(cfg, generate(spec))
    assert got.fast_mode_off is None and got.num_completed == 60
    # 300 blocks: the pool runs short (TensorRT-LLM's profile reserves at admission instead)
    assert (got.num_preemptions > 0) is (cfg.scheduler.policy is not PolicyKind.RESERVE)


def test_swap_without_tiers_preempts_by_recompute_in_the_fast_mode() -> None:
    """``--preemption swap`` with no tier to swap to recomputes (``Scheduler._preempt``), so the
    fast mode covers it and gives the same preemptions as recompute."""
    from test_sim_fast import _assert_same

    spec = WorkloadSpec(num_requests=30, rate_per_s=40, output=Lengths(LengthDist.UNIFORM, 60))
    cfg = _engine_config("generic", "llama-3.1-8b")
    swap = replace(cfg, scheduler=replace(cfg.scheduler, preemption=PreemptionMode.SWAP))
    got = _assert_same(swap, generate(spec))
    assert got.num_preemptions > 0
    assert got.num_preemptions == _assert_same(cfg, generate(spec)).num_preemptions


def test_the_library_only_reasons_replicas_and_fast_forward_off() -> None:
    """Two replicas are two instances (the fast mode runs one); one replica is covered; a
    configuration with ``fast_forward`` off says so."""
    cfg = _engine_config("generic", "llama-3.1-8b")
    workload = generate(WorkloadSpec(num_requests=4, rate_per_s=4))
    assert fast_mode_off(Simulation(cfg, workload)) is None
    assert fast_mode_off(ReplicaSimulation(cfg, workload, ReplicaSet(1))) is None
    assert fast_mode_off(ReplicaSimulation(cfg, workload, ReplicaSet(2))) is OFF.INSTANCES
    off = simulate(replace(cfg, fast_forward=False), workload).fast_mode_off
    assert off is OFF.TURNED_OFF and off.why == "fast_forward is off"
