"""Analytic model against hand-computed values (reference/analytic.md anchors)."""

from __future__ import annotations

import numpy as np
import pytest

import ridgeline as rl
from ridgeline.analytic import Dtypes, Phase, Workload
from ridgeline.analytic.ops import MixedShape, UniformShape, attended_keys, op_terms
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs import DType


def test_llama2_7b_decode_on_a100_reads_13_55_gb_in_6_65_ms() -> None:
    # reference/analytic.md §0: linear weights incl. lm_head 6.607e9 params × 2 B = 13.214 GB,
    # + KV 2·32 layers·4096·640·2 B = 0.3355 GB → 13.55 GB ÷ 2.039e12 B/s = 6.645 ms.
    cost = rl.step_cost(
        rl.get_model("llama-2-7b"), rl.get_accelerator("a100-80gb"), Workload(Phase.DECODE, 1, 640)
    )
    linear_params = 6_738_415_616 - 32_000 * 4096 - (65 * 4096)  # minus embedding table and norms
    assert cost.kv_read_bytes == 2 * 32 * 4096 * 640 * 2
    assert cost.weight_bytes == pytest.approx(linear_params * 2 + 4096 * 2 + 65 * 4096 * 2)
    assert cost.bytes == pytest.approx(13.55e9, rel=1e-3)
    assert cost.step_time_s == pytest.approx(6.65e-3, rel=1e-3)
    assert cost.bound is rl.Bound.MEMORY


def test_kv_counted_once_per_step() -> None:
    m, a = rl.get_model("llama-2-7b"), rl.get_accelerator("a100-80gb")
    at_640 = rl.step_cost(m, a, Workload(Phase.DECODE, 1, 640))
    at_1280 = rl.step_cost(m, a, Workload(Phase.DECODE, 1, 1280))
    # doubling the context adds exactly one more context's KV read, once
    assert at_1280.kv_read_bytes - at_640.kv_read_bytes == 2 * 32 * 4096 * 640 * 2
    assert at_640.kv_write_bytes == 2 * 32 * 4096 * 1 * 2  # one new token per layer


def test_llama31_8b_kv_per_token_and_crossover() -> None:
    m = rl.get_model("llama-3.1-8b")
    assert rl.kv_bytes_per_token(m) == 2 * 32 * 8 * 128 * 2 == 131_072
    weights = 8_030_261_248 * 2
    assert rl.crossover_context(m) == -(-weights // 131_072) == 122_533  # "about 122.5k"
    assert rl.crossover_context(m, batch=8) == -(-weights // (8 * 131_072))


def test_h100_decode_intensity_weights_only_and_with_kv() -> None:
    m, h100 = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
    di = rl.decode_intensity(m, h100, batch=1, context=4096)
    # ~2 FLOPs per 2-byte weight → ~1 FLOP/B; KV adds 4096·131072 B of bytes with few FLOPs
    assert 1.0 < di.weights_only < 1.2
    assert di.with_kv < di.weights_only
    assert di.kv_bytes == pytest.approx(4096 * 131_072 + 131_072, rel=1e-9)
    assert di.ridge_point == pytest.approx(989.4e12 / 3.35e12)


def test_prefill_is_compute_bound_and_decode_memory_bound_on_h100() -> None:
    m, h100 = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
    assert rl.step_cost(m, h100, Workload(Phase.PREFILL, 1, 2048)).bound is rl.Bound.COMPUTE
    assert rl.step_cost(m, h100, Workload(Phase.DECODE, 1, 2048)).bound is rl.Bound.MEMORY


def test_efficiency_and_overhead_scale_time() -> None:
    m, a = rl.get_model("llama-2-7b"), rl.get_accelerator("a100-80gb")
    w = Workload(Phase.DECODE, 1, 640)
    ideal = rl.step_cost(m, a, w).step_time_s
    eff = rl.Efficiency(bandwidth=0.5, step_overhead_s=1e-3)
    slow = rl.step_cost(m, rl.Pricing.of(a, "ideal", efficiency=eff), w).step_time_s
    assert slow == pytest.approx(2 * ideal + 1e-3)
    with pytest.raises(ConfigError, match="add --ideal"):
        rl.Pricing.of(a, "calibrated", efficiency=eff)  # efficiencies scale the ideal roofline
    with pytest.raises(ConfigError, match="bandwidth_efficiency"):
        rl.Efficiency(bandwidth=1.5)


def test_lm_head_reads_whole_matrix_and_embedding_only_rows() -> None:
    m, a = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
    ops = {op.name: op for op in rl.step_cost(m, a, Workload(Phase.DECODE, 4, 100)).ops}
    assert ops["lm_head"].weight_bytes == 128_256 * 4096 * 2
    assert ops["embedding"].weight_bytes == 4 * 4096 * 2
    assert ops["lm_head"].flops == 2 * 4 * 4096 * 128_256


def test_moe_reads_expected_distinct_experts() -> None:
    m, a = rl.get_model("mixtral-8x7b"), rl.get_accelerator("h100-sxm")
    per_expert_bytes = 3 * 4096 * 14336 * 2
    one = {op.name: op for op in rl.step_cost(m, a, Workload(Phase.DECODE, 1, 1)).ops}
    # one token, top-2 of 8: 8·(1 − (6/8)^1) = 2 experts per layer
    assert one["moe.experts"].weight_bytes == pytest.approx(32 * 2 * per_expert_bytes)
    four = {op.name: op for op in rl.step_cost(m, a, Workload(Phase.DECODE, 4, 1)).ops}
    distinct = 8 * (1 - 0.75**4)  # 5.46875 experts, not 2 and not 8
    assert four["moe.experts"].weight_bytes == pytest.approx(32 * distinct * per_expert_bytes)


def test_moe_permutes_tokens_in_kernels_of_their_own() -> None:
    """Qwen3-30B-A3B (hidden 2048, top-8): the permutation reads each token's row and writes
    it once per expert; the un-permutation reads the 8 expert outputs back and writes their
    weighted sum; the kernels per MoE layer stay two grouped GEMMs and three elementwise ones
    (permutation, gated activation, un-permutation)."""
    from ridgeline.analytic.calibrated import kernel_counts

    m, a = rl.get_model("qwen3-30b-a3b"), rl.get_accelerator("h100-sxm")
    ops = {op.name: op for op in rl.step_cost(m, a, Workload(Phase.DECODE, 16, 100)).ops}
    row, layers = 2048 * 2, 48
    assert ops["moe.permute"].act_read_bytes == layers * 16 * row
    assert ops["moe.permute"].act_write_bytes == layers * 16 * 8 * row
    assert ops["moe.unpermute"].act_read_bytes == layers * 16 * 8 * row
    assert ops["moe.unpermute"].act_write_bytes == layers * 16 * row
    k = kernel_counts(m, Dtypes())
    assert k.gemm == (2 + 1 + 2) * layers + 1  # qkv and o, the router, 2 expert GEMMs; lm_head
    assert k.elementwise == (2 + 3) * layers + 2  # two norms, 3 MoE kernels; embedding, final norm


def test_sliding_window_caps_kv_read_and_size() -> None:
    m, a = rl.get_model("mistral-7b"), rl.get_accelerator("h100-sxm")
    long = rl.step_cost(m, a, Workload(Phase.DECODE, 1, 10_000))
    assert long.kv_read_bytes == 32 * 4096 * 2 * 8 * 128 * 2
    assert rl.kv_bytes(m, 2, 10_000) == 2 * 32 * 4096 * 2 * 8 * 128 * 2


def test_mla_kv_is_the_latent() -> None:
    m = rl.get_model("deepseek-v3")
    assert rl.kv_bytes_per_token(m) == 61 * (512 + 64) * 2
    assert rl.kv_bytes(m, 3, 1000, DType.FP8) == 3 * 1000 * 61 * 576 * 1


def test_mha_baseline_of_an_mla_model_caches_its_key_and_value_widths() -> None:
    """Regression: DeepSeek-V3's MHA baseline used head_dim 56 (hidden / heads) and
    said 1,748,992 B/token; plain attention caches per head a key of 128 + 64 and a value of 128:
    61 layers x 128 heads x 320 x 2 B = 4,997,120 B/token."""
    m = rl.get_model("deepseek-v3")
    rows = {t.name: t for t in rl.techniques(m, 1, 1000)}
    assert rows["mha"].kv_bytes_per_token == 61 * 128 * (192 + 128) * 2 == 4_997_120
    assert rows["as configured"].kv_bytes_per_token == 61 * 576 * 2
    assert rows["mqa"].kv_bytes_per_token == 61 * 1 * 320 * 2


def test_attended_keys_causal_and_windowed() -> None:
    # 4 new tokens after 3 cached: each sees 4, 5, 6, 7 keys
    assert attended_keys(4, 3, None) == 4 + 5 + 6 + 7
    # window 5: min(k, 5) for k = 4..7 → 4 + 5 + 5 + 5
    assert attended_keys(4, 3, 5) == 19


def test_mixed_shape_equals_sum_of_uniform_parts() -> None:
    m, dt = rl.get_model("llama-3.1-8b"), Dtypes()
    mixed = op_terms(m, MixedShape(np.array([1, 1, 100]), np.array([50, 70, 0])), dt)
    decode = op_terms(m, UniformShape(1.0, 1.0, 50.0), dt)
    decode2 = op_terms(m, UniformShape(1.0, 1.0, 70.0), dt)
    prefill = op_terms(m, UniformShape(1.0, 100.0, 0.0), dt)
    for op_mixed, a, b, c in zip(mixed, decode, decode2, prefill, strict=True):
        assert op_mixed.flops == pytest.approx(a.flops + b.flops + c.flops)
        assert op_mixed.kv_read_bytes == pytest.approx(
            a.kv_read_bytes + b.kv_read_bytes + c.kv_read_bytes
        )


def test_sweep_matches_single_point_api() -> None:
    m, a = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
    batch, ctx = np.array([1, 8, 64]), np.array([128, 4096, 32768])
    s = rl.sweep(m, a, Phase.DECODE, batch, ctx)
    for i in range(3):
        c = rl.step_cost(m, a, Workload(Phase.DECODE, int(batch[i]), int(ctx[i])))
        assert s.step_time_s[i] == pytest.approx(c.step_time_s)
        assert s.bytes[i] == pytest.approx(c.bytes)
        assert bool(s.compute_bound[i]) == (c.bound is rl.Bound.COMPUTE)


def test_capacity_on_h100() -> None:
    """The KV-pool rule (analytic.memory) by hand: 0.9 x 80e9 B usable; weights 8,030,261,248
    params x 2 B; reserve: a profile step of 8,192 tokens, 8,192 x 2 B x (4,096 + 3 x 14,336)
    = 771,751,936 B, and 256 sequences' sampler, 256 x 128,256 x 24 B = 788,004,864 B, plus a
    1e9 B workspace."""
    m, h100 = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
    fit = rl.kv_fit(m, rl.Deployment(h100), rl.Dtypes(), (32_768, 1))
    pool = 72e9 - 8_030_261_248 * 2 - (771_751_936 + 788_004_864 + 1e9)
    assert fit.pool_bytes == pool == 53_379_720_704
    assert fit.max_batch == int(pool // (32_768 * 131_072)) == 12
    # one sequence could hold pool // 131,072 = 407,254 tokens: capped at the model's 131,072
    assert fit.max_context == 131_072 and fit.capped
    with pytest.raises(CapacityError, match="short by"):
        rl.kv_fit(rl.get_model("llama-3.1-70b"), rl.Deployment(h100), rl.Dtypes(), (1, 1))


def test_techniques_ratios() -> None:
    rows = {t.name: t for t in rl.techniques(rl.get_model("llama-3.1-8b"), 1, 8192)}
    assert rows["mha"].ratio_to_mha == 1.0
    assert rows["gqa"].ratio_to_mha == 8 / 32
    assert rows["mqa"].ratio_to_mha == 1 / 32
    assert rows["fp8 kv"].ratio_to_mha == 0.5
    assert rows["window 4096"].ratio_to_mha == 0.5
    assert rows["mla"].kv_bytes_per_token == 32 * 576 * 2


def test_five_questions_scarce_resources() -> None:
    m = rl.get_model("llama-3.1-8b")
    w = Workload(Phase.DECODE, 1, 4096)
    assert rl.five_questions(m, rl.get_accelerator("h100-sxm"), w).scarce is rl.Resource.BANDWIDTH
    groq = rl.five_questions(m, rl.get_accelerator("groq-lpu"), w)
    assert groq.scarce is rl.Resource.CAPACITY and "73 chips" in groq.reason
    prefill = rl.five_questions(m, rl.get_accelerator("h100-sxm"), Workload(Phase.PREFILL, 8, 4096))
    assert prefill.scarce is rl.Resource.COMPUTE


def test_spyre_decode_reads_by_category() -> None:
    reads = rl.decode_reads(rl.get_model("llama-3.1-8b"), rl.get_accelerator("ibm-spyre"), 1, 4096)
    # weights: all but the embedding table (1 gathered row) at 2 B
    assert reads.weight_bytes == (8_030_261_248 - 128_256 * 4096 + 4096) * 2
    assert reads.kv_bytes == 4097 * 131_072
    lpddr = next(lt for lt in reads.per_level if lt.level == "lpddr5")
    assert lpddr.time_s == pytest.approx(reads.total_bytes / 200e9)
    assert lpddr.fits and not next(lt for lt in reads.per_level if lt.level == "lx").fits


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("batch", {"batch": 0}),
        ("context", {"context_len": 10**9}),
        ("prompt", {"prompt_len": 9000}),
    ],
)
def test_workload_validation(field: str, kwargs: dict) -> None:
    args = {"phase": Phase.PREFILL, "batch": 1, "context_len": 4096, **kwargs}
    with pytest.raises(ConfigError, match=field):
        Workload(**args)


def test_compare_default_five() -> None:
    cmp = rl.compare(rl.get_model("llama-3.1-8b"))
    assert [r.accelerator.kind for r in cmp.rows] == ["gpu", "tpu", "wafer", "lpu", "dataflow"]


def test_kv_techniques_reject_an_empty_context() -> None:
    # regression: `ridgeline kv -t 0` divided by the zero KV of MHA
    with pytest.raises(ConfigError, match="field context"):
        rl.techniques(rl.get_model("llama-3.1-8b"), 1, 0)


def test_decode_batching_limit_and_crossing() -> None:
    """The report's claim about batching decode: at 4k context llama-3.1-8b's
    intensity levels off near 31 FLOP/B on an H100, far below the 295 FLOP/B ridge; at 128
    tokens it crosses the ridge at the first batch whose intensity reaches it."""
    m, a = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
    long = rl.decode_batching(m, a, 4096)
    assert 30 < long.limit_flops_per_byte < 33
    assert long.batch_at_ridge is None
    assert "bandwidth-bound at any batch" in long.sentence()
    short = rl.decode_batching(m, a, 128)
    assert short.batch_at_ridge is not None
    b = short.batch_at_ridge

    def ai(batch: int) -> float:
        return rl.step_cost(m, a, Workload(Phase.DECODE, batch, 128)).arithmetic_intensity

    assert ai(b - 1) < short.ridge_point <= ai(b)
