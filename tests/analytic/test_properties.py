"""Hypothesis properties of the analytic model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ridgeline as rl
from ridgeline.analytic import Phase, Workload

MODELS = ["llama-3.1-8b", "mistral-7b", "mixtral-8x7b", "deepseek-v3", "gpt2", "qwen2.5-7b"]
ACC = rl.get_accelerator("h100-sxm")

batches = st.integers(min_value=1, max_value=512)
contexts = st.integers(min_value=1, max_value=200_000)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(list(Phase)), batches, contexts, batches, contexts)
def test_bytes_and_flops_never_decrease(
    name: str, phase: Phase, b1: int, c1: int, b2: int, c2: int
) -> None:
    m = rl.get_model(name)
    lo = rl.step_cost(m, ACC, Workload(phase, min(b1, b2), min(c1, c2)))
    hi = rl.step_cost(m, ACC, Workload(phase, max(b1, b2), max(c1, c2)))
    assert hi.bytes >= lo.bytes * (1 - 1e-12)
    assert hi.flops >= lo.flops * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["llama-2-7b", "llama-3.1-8b", "qwen2.5-7b"]),
    st.integers(1, 16),
    st.sampled_from([rl.DType.BF16, rl.DType.INT8, rl.DType.INT4]),
)
def test_decode_intensity_approaches_2b_over_bytes_per_weight(
    name: str, batch: int, wdt: rl.DType
) -> None:
    # short context: weights dominate; each weight read does one multiply-add per sequence
    di = rl.decode_intensity(rl.get_model(name), ACC, batch, 1, rl.Dtypes(weight=wdt))
    expected = 2 * batch / wdt.bytes
    assert di.weights_only == pytest.approx(expected, rel=0.05)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["llama-2-7b", "gpt2", "llama-3.1-70b"]),
    st.integers(1, 64),
    st.sampled_from([1, 2, 4, 8]),
    batches,
    contexts,
)
def test_gqa_kv_is_kv_heads_over_heads_of_mha(
    name: str, _: int, groups: int, batch: int, ctx: int
) -> None:
    m = rl.get_model(name)
    mha = m.with_kv_heads(m.num_heads)
    kv_heads = max(1, m.num_heads // groups)
    gqa = m.with_kv_heads(kv_heads)
    assert rl.kv_bytes(gqa, batch, ctx) * m.num_heads == pytest.approx(
        rl.kv_bytes(mha, batch, ctx) * kv_heads
    )
