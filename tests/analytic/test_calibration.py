"""The calibrated cost model: each term against a hand computation, family files, and the
property that a calibrated time is never below the ideal one.

Hand computations are plain arithmetic on the numbers written in each test, not second calls
of the functions under test.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline import analytic as an
from ridgeline.analytic.calibrated import Rates, gemm_padding, op_seconds
from ridgeline.analytic.collectives import ring_allreduce, send_terms
from ridgeline.analytic.deploy import tensor_parallel_degrees
from ridgeline.errors import ConfigError
from ridgeline.sim.executor import StepCostModel
from ridgeline.specs import accelerator_names, get_accelerator, get_model
from ridgeline.specs.calibration import (
    IDEAL,
    Calibration,
    Term,
    family_names,
    get_family,
    parse_family,
)
from ridgeline.specs.catalog import parse_accelerator
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import Interconnect, Parallelism, Topology

MYCHIP = tomllib.loads((Path(__file__).parent.parent / "data" / "mychip.toml").read_text())


def _chip(calibration: dict[str, object] | None = None) -> an.Deployment:
    data = dict(MYCHIP)
    if calibration is not None:
        data["calibration"] = calibration
    return an.Deployment(parse_accelerator(data, "test"))


# --- each term, by hand ------------------------------------------------------------------------


def test_gemm_padding_is_tile_quantisation() -> None:
    assert gemm_padding(1, 64) == 64.0  # one row costs a whole 64-row MMA
    assert gemm_padding(64, 64) == 1.0
    assert gemm_padding(65, 64) == pytest.approx(128 / 65)
    assert gemm_padding(8, 1) == 1.0  # an ideal machine pads nothing
    assert gemm_padding(0, 64) == 1.0  # not a GEMM


def test_op_seconds_by_hand() -> None:
    cal = Calibration(
        bandwidth_efficiency=0.8,
        kv_bandwidth_efficiency=0.4,
        compute_efficiency=0.5,
        gemm_tile_rows=16,
    )
    compute_s, memory_s = op_seconds(1e12, 1e9, 2e8, 8, Rates(1e15, 1e12, 0.5), cal)
    # padding 16/8 = 2 at the full rate vs 1/0.5 = 2 at the sustained rate: the longer, 2 ms
    assert compute_s == pytest.approx(1e12 * 2 / 1e15)
    # 4 rows: padding 4 dominates the 1/0.5 discount (a floor, not a second discount)
    compute_s, _ = op_seconds(1e12, 1e9, 2e8, 4, Rates(1e15, 1e12, 0.5), cal)
    assert compute_s == pytest.approx(1e12 * 4 / 1e15)
    # 32 rows: no padding, the sustained rate
    compute_s, _ = op_seconds(1e12, 1e9, 2e8, 32, Rates(1e15, 1e12, 0.5), cal)
    assert compute_s == pytest.approx(1e12 / (1e15 * 0.5))
    # 0.8 GB of weights at 80% of 1 TB/s, 0.2 GB of KV at 40%
    assert memory_s == pytest.approx(8e8 / (1e12 * 0.8) + 2e8 / (1e12 * 0.4))  # 1.5 ms


def test_ring_allreduce_calibrated_by_hand() -> None:
    link = Interconnect(
        kind="test",
        topology=Topology.SWITCH,
        parallelism=Parallelism.TENSOR,
        links=4,
        link_bandwidth_bytes_per_s=2.5e10,
        egress_bandwidth_bytes_per_s=1e11,
        latency_s=1e-6,
        domain_chips=8,
    )
    cal = Calibration(link_efficiency=0.8, collective_latency_s=5e-6)
    c = ring_allreduce(4, 1e6, link, cal)
    # 2(n-1) = 6 hops of 1 us, one collective latency, 2(n-1)/n x 1 MB = 1.5 MB at 80% of 100 GB/s
    assert c.time_s == pytest.approx(6e-6 + 5e-6 + 1.5e6 / (0.8 * 1e11))
    assert ring_allreduce(4, 1e6, link).time_s == pytest.approx(6e-6 + 1.5e6 / 1e11)
    send = send_terms(2e5, link)
    stage = Calibration(link_efficiency=0.5, stage_latency_s=4e-5)
    assert send.seconds(stage) == pytest.approx(1e-6 + 4e-5 + 2e5 / (0.5 * 1e11))


def test_calibrated_decode_step_by_hand() -> None:
    """A memory-bound decode step at half the bandwidth takes twice as long, plus the layers'
    latency and the step latency."""
    llama = get_model("llama-2-7b")
    base = {"family": "cpu"}
    terms = {
        "bandwidth_efficiency": {"value": 0.5, "source": "test"},
        "compute_efficiency": {"value": 1.0, "source": "test"},
        "kv_bandwidth_efficiency": {"value": 0.5, "source": "test"},
        "layer_latency_s": {"value": 1e-5, "source": "test"},
        "step_latency_s": {"value": 2e-4, "source": "test"},
        "sequence_latency_s": {"value": 3e-5, "source": "test"},
    }
    acc = _chip({**base, **terms}).accelerator
    w = an.Workload(an.Phase.DECODE, 2, 512)
    ideal = an.step_cost(llama, acc, w)
    cal = an.step_cost(llama, an.Pricing.expected(acc), w)
    assert all(op.bound is an.Bound.MEMORY for op in ideal.ops)
    # 32 layers x 10 us, 200 us per step, 2 sequences x 30 us
    assert cal.step_time_s == pytest.approx(2 * ideal.step_time_s + 32e-5 + 2e-4 + 6e-5)
    assert ideal.step_time_s == pytest.approx(ideal.bytes / 5e11)  # the roofline itself


def test_deployment_layer_latency_by_hand() -> None:
    """Cerebras' 70B on four wafers: a lone sequence crosses 80 layers and four stages."""
    acc = get_accelerator("cerebras-wse3")
    cal = acc.calibration
    model = get_model("llama-3.1-70b")
    dep = an.Deployment(acc, 1, 4)
    cost = an.deployment_cost(
        model, an.Pricing.expected(dep), an.Workload(an.Phase.DECODE, 1, 1024)
    )
    assert cost.slot.layer_s == pytest.approx(80 / 4 * cal.layer_latency_s)
    ideal = an.deployment_cost(model, an.Pricing.ideal(dep), an.Workload(an.Phase.DECODE, 1, 1024))
    # four slots of a steady pipeline with one microbatch: 80 layer latencies, 4 stage crossings
    extra = 80 * cal.layer_latency_s + 4 * cal.stage_latency_s
    assert cost.step_time_s == pytest.approx(ideal.step_time_s + extra, rel=1e-6)


def test_ideal_mode_is_the_roofline() -> None:
    """Ideal mode is the course's roofline whatever the catalog's calibration says."""
    acc = get_accelerator("h100-sxm")
    bare = dataclasses.replace(acc, calibration=IDEAL)
    w = an.Workload(an.Phase.DECODE, 8, 2048)
    model = get_model("llama-3.1-8b")
    assert an.step_cost(model, acc, w).step_time_s == an.step_cost(model, bare, w).step_time_s
    assert (
        an.step_cost(model, an.Pricing.expected(bare), w).step_time_s
        == an.step_cost(model, bare, w).step_time_s
    )


# --- family files --------------------------------------------------------------------------


def _family(**over: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "family": "f",
        "fit": ["layer_latency_s"],
        "terms": {"layer_latency_s": {"value": 1e-5, "source": "fitted on rows: a/b"}},
        "priors": {"layer_latency_s": {"value": 2e-5, "source": "estimate: x"}},
    }
    doc.update(over)
    return doc


def test_family_file_rules() -> None:
    fam = parse_family(_family(), "f.toml")
    assert fam.calibration.layer_latency_s == 1e-5
    assert fam.calibration.fitted_terms == (Term.LAYER_LATENCY_S,)
    assert fam.priors.layer_latency_s == 2e-5
    with pytest.raises(ConfigError, match="priors.compute_efficiency"):
        parse_family(_family(fit=["compute_efficiency"]), "f.toml")
    bad = {"bandwidth_efficiency": {"value": 1.5, "source": "x"}}
    with pytest.raises(ConfigError, match="bandwidth_efficiency"):
        parse_family(_family(terms=bad, fit=[]), "f.toml")


@pytest.mark.parametrize("name", family_names())
def test_every_family_term_has_a_source(name: str) -> None:
    fam = get_family(name)
    for term in Term:
        if term.value in fam.calibration.sources:
            assert fam.calibration.sources[term.value].strip()
    for term in fam.fit:  # a prior is sourced or an estimate, never itself a fit
        prior = fam.priors.sources[term.value]
        assert prior.strip() and not prior.startswith("fitted")


def test_every_catalog_accelerator_names_a_family() -> None:
    for name in accelerator_names():
        assert get_accelerator(name).calibration.family in family_names()


def test_unknown_family_is_one_line() -> None:
    with pytest.raises(ConfigError, match="field calibration.family: unknown"):
        _chip({"family": "nope"})


# --- calibrated >= ideal ---------------------------------------------------------------------

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "deepseek-v3", "distilgpt2")


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    acc=st.sampled_from(accelerator_names()),
    model=st.sampled_from(MODELS),
    phase=st.sampled_from(list(an.Phase)),
    batch=st.integers(1, 512),
    context=st.integers(1, 32768),
)
def test_calibrated_time_is_never_below_ideal(
    acc: str, model: str, phase: an.Phase, batch: int, context: int
) -> None:
    a, m = get_accelerator(acc), get_model(model)
    w = an.Workload(phase, batch, context)
    ideal = an.step_cost(m, a, w).step_time_s
    assert an.step_cost(m, an.Pricing.expected(a), w).step_time_s >= ideal
    for tp in tensor_parallel_degrees(m, a)[:3]:
        d = an.Deployment(a, tp)
        lo = an.deployment_cost(m, an.Pricing.ideal(d), w).step_time_s
        assert an.deployment_cost(m, an.Pricing.expected(d), w).step_time_s >= lo
    new, prior = [1] * min(batch, 64), [context] * min(batch, 64)
    ideal_sim = StepCostModel(m, an.Pricing.ideal(a)).step_time_s(new, prior)
    cal_sim = StepCostModel(m, an.Pricing.expected(a)).step_time_s(new, prior)
    assert cal_sim >= ideal_sim
    assert math.isfinite(cal_sim)


def test_simulator_step_equals_analytic_step_calibrated() -> None:
    """The simulator's calibrated step is the analytic calibrated step (one shared formula)."""
    acc, model = get_accelerator("h100-sxm"), get_model("llama-3.1-8b")
    w = an.Workload(an.Phase.DECODE, 24, 3000)
    analytic = an.step_cost(model, an.Pricing.expected(acc), w).step_time_s
    sim = StepCostModel(model, an.Pricing.expected(acc))
    assert sim.step_time_s([1] * 24, [3000] * 24) == pytest.approx(analytic, rel=1e-9)
    run = sim.decode_run_s([3000] * 24, 3)
    assert run[0] == pytest.approx(analytic, rel=1e-9)


# --- overlap: from the roofline's max to the serial sum ----------------------------------------


def test_overlap_by_hand() -> None:
    """overlap 1 is the roofline max, 0 the sum, 0.5 halfway (4 ms compute, 1 ms memory)."""
    for overlap, expected in ((1.0, 4e-3), (0.0, 5e-3), (0.5, 4.5e-3)):
        cal = Calibration(overlap=overlap)
        compute_s, memory_s = op_seconds(4e12, 1e9, 0.0, 0, Rates(1e15, 1e12), cal)
        assert max(compute_s, memory_s) == pytest.approx(expected)
        assert compute_s > memory_s  # still compute-bound


def test_overlap_rules() -> None:
    with pytest.raises(ConfigError, match="field overlap"):
        Calibration(overlap=1.5)
    with pytest.raises(ConfigError, match="field overlap"):
        Calibration(overlap=-0.1)
    with pytest.raises(ConfigError, match="gemm_tile_rows"):
        Calibration(overlap=0.5, gemm_tile_rows=64)
    with pytest.raises(ConfigError, match="overlap"):
        an.Efficiency(overlap=float("nan"))


@pytest.mark.parametrize("overlap", [0.0, 0.3])
def test_simulator_step_equals_analytic_step_with_partial_overlap(overlap: float) -> None:
    """The executor's closed forms (stepwise, decode runs, grouped decode pieces) keep the
    analytic formula when loads do not fully hide under compute."""
    acc, model = get_accelerator("h100-sxm"), get_model("llama-3.1-8b")
    eff = an.Efficiency(bandwidth=0.7, compute=0.5, overlap=overlap)
    for w in (an.Workload(an.Phase.DECODE, 24, 3000), an.Workload(an.Phase.PREFILL, 2, 900)):
        analytic = an.step_cost(model, an.Pricing.of(acc, "ideal", efficiency=eff), w).step_time_s
        full = an.step_cost(
            model, an.Pricing.of(acc, "ideal", efficiency=an.Efficiency(0.7, 0.5)), w
        ).step_time_s
        assert analytic > full  # something no longer hides
        sim = StepCostModel(model, an.Pricing.of(acc, "ideal", efficiency=eff))
        new = [1] * 24 if w.phase is an.Phase.DECODE else [900] * 2
        prior = [3000] * 24 if w.phase is an.Phase.DECODE else [0] * 2
        assert sim.step_time_s(new, prior) == pytest.approx(analytic, rel=1e-9)
    sim = StepCostModel(model, an.Pricing.of(acc, "ideal", efficiency=eff))
    run = sim.decode_run_s([3000] * 24, 4)
    grouped = sim.decode_steps_s([24] * 4, [24 * (3000 + j) for j in range(4)])
    assert grouped is not None
    assert np.allclose(run, grouped, rtol=1e-9)
    assert run[0] == pytest.approx(sim.step_time_s([1] * 24, [3000] * 24), rel=1e-9)


# --- kinds of operator: each at its own efficiency ------------------------------------------------


def test_each_kind_of_operator_takes_its_own_compute_term() -> None:
    """16-bit, 8-bit, 4-bit and weight-only GEMMs, attention and MoE experts."""
    from ridgeline.analytic.calibrated import OpKind, compute_term
    from ridgeline.analytic.ops import OpClass

    gemm, bf16 = OpClass.GEMM, DType.BF16
    assert compute_term(OpKind(gemm, bf16, bf16)) is Term.COMPUTE_EFFICIENCY
    assert compute_term(OpKind(gemm, DType.FP8, DType.FP8)) is Term.FP8_COMPUTE_EFFICIENCY
    assert compute_term(OpKind(gemm, DType.FP4, DType.FP4)) is Term.FP4_COMPUTE_EFFICIENCY
    assert compute_term(OpKind(gemm, bf16, DType.INT4)) is Term.WEIGHT_ONLY_COMPUTE_EFFICIENCY
    attention = OpKind(OpClass.ATTENTION, bf16)
    assert compute_term(attention) is Term.ATTENTION_COMPUTE_EFFICIENCY
    experts = OpKind(OpClass.EXPERTS, DType.FP8, DType.FP8)
    assert compute_term(experts) is Term.MOE_COMPUTE_EFFICIENCY


def test_an_unset_compute_term_is_the_16_bit_one() -> None:
    cal = Calibration(compute_efficiency=0.5, fp8_compute_efficiency=0.25)
    assert cal.value(Term.FP8_COMPUTE_EFFICIENCY) == 0.25
    assert cal.value(Term.MOE_COMPUTE_EFFICIENCY) == 0.5
    with pytest.raises(ConfigError, match="attention_compute_efficiency"):
        Calibration(attention_compute_efficiency=1.5)


def test_fp8_attention_runs_at_the_16_bit_peak() -> None:
    """llama-3.1-8b prefill of 4,096 tokens in fp8 on an H100: the attention core is priced at
    the bf16 peak (989.4 TFLOP/s) times its efficiency, plus its KV writes (kv_overlap = 0:
    KV traffic is not hidden under compute), the GEMMs at the fp8 peak; the residual stream,
    and so the all-reduces, stay bf16."""
    from ridgeline.analytic import Dtypes, Phase, Workload, step_cost
    from ridgeline.analytic.pricing import Pricing

    h100 = get_accelerator("h100-sxm")
    dt = Dtypes(weight=DType.FP8, act=DType.FP8, kv=DType.FP8)
    assert dt.stream is DType.BF16
    w = Workload(Phase.PREFILL, 1, 4096, dtypes=dt)
    cost = step_cost(get_model("llama-3.1-8b"), Pricing.expected(h100, dt), w)
    core = next(op for op in cost.ops if op.name == "attn.core")
    eff = h100.calibration.value(Term.ATTENTION_COMPUTE_EFFICIENCY)
    assert h100.calibration.kv_overlap == 0.0
    # 4,096 tokens x 32 layers x 8 KV heads x 128 x (K, V) x 1 B written at 3.35 TB/s x kv_eff
    kv_s = 4096 * 32 * 8 * 128 * 2 / (3.35e12 * h100.calibration.kv_bandwidth_efficiency)
    assert core.kv_write_bytes == 4096 * 32 * 8 * 128 * 2
    assert core.time_s == pytest.approx(core.flops / (989.4e12 * eff) + kv_s)
    qkv = next(op for op in cost.ops if op.name == "attn.qkv_proj")
    fp8 = h100.calibration.value(Term.FP8_COMPUTE_EFFICIENCY)
    assert qkv.time_s == pytest.approx(qkv.flops / (1978.9e12 * fp8))


def test_kernel_latencies_by_hand() -> None:
    """llama-3.1-8b, one step on an H100: per layer 4 GEMMs (qkv, o, gate+up, down), one
    attention kernel and 3 elementwise kernels (two norms, the gated activation); plus the
    embedding gather, the final norm and the lm_head. The fixed time is those kernels at the
    family's sourced latencies and what is left per layer (``layer_latency_s``)."""
    from ridgeline.analytic.calibrated import KernelCounts, fixed_step_seconds, kernel_counts
    from ridgeline.analytic.workload import Dtypes

    m = get_model("llama-3.1-8b")
    assert kernel_counts(m, Dtypes()) == KernelCounts(4 * 32 + 1, 32, 3 * 32 + 2, 0)
    fp8 = Dtypes(weight=DType.FP8, act=DType.FP8, kv=DType.FP8)
    assert kernel_counts(m, fp8).quantised == 4 * 32  # the 16-bit lm_head is not quantised
    cal = get_accelerator("h100-sxm").calibration
    assert (cal.gemm_latency_s, cal.attention_latency_s, cal.kernel_latency_s) == (
        4.2e-6,
        7e-6,
        3e-6,
    )
    want = 129 * 4.2e-6 + 32 * 7e-6 + 98 * 3e-6 + 32 * cal.layer_latency_s
    assert fixed_step_seconds(32, cal, 0.0, kernel_counts(m, Dtypes())) == pytest.approx(want)
    # an fp8 step adds each quantised GEMM's input-quantisation kernel
    extra = 128 * cal.quantised_gemm_latency_s
    assert fixed_step_seconds(32, cal, 0.0, kernel_counts(m, fp8)) == pytest.approx(want + extra)


def test_kv_traffic_is_not_hidden_under_compute_by_hand() -> None:
    """kv_overlap = 0: an op's KV seconds add to its compute side; at 1 the roofline's max."""
    rates = Rates(1e12, 1e12, 1.0)
    hidden = Calibration(kv_overlap=1.0)
    apart = Calibration(kv_overlap=0.0)
    # 2 s of compute, 1 s of other bytes, 0.5 s of KV bytes
    c, m = op_seconds(2e12, 1.5e12, 0.5e12, 0.0, rates, hidden)
    assert max(c, m) == pytest.approx(2.0)
    c, m = op_seconds(2e12, 1.5e12, 0.5e12, 0.0, rates, apart)
    assert max(c, m) == pytest.approx(2.5)
    with pytest.raises(ConfigError, match="kv_overlap"):
        Calibration(kv_overlap=1.5)
