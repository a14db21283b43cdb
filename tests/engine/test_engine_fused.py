"""Fused elementwise ops against torch, alone and inside Llama and GPT-2 decoders against
transformers."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine_support import cache_for, gpt2_config, llama_config, twin  # noqa: E402
from ridgeline.engine.attention import build_metadata  # noqa: E402
from ridgeline.engine.fused_ops import load_fused_ops  # noqa: E402
from ridgeline.engine.model import RMSNorm  # noqa: E402
from ridgeline.engine.rope import apply_rope  # noqa: E402
from ridgeline.serving.executor import ScheduledRequest  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def ops() -> Any:
    o = load_fused_ops()
    if o is None:
        pytest.skip("no C++ compiler: the model keeps torch's ops")
    return o


def test_add_rms_norm_adds_in_place_and_normalises(ops: Any) -> None:
    g = torch.Generator().manual_seed(0)
    residual, x = torch.randn(5, 96, generator=g), torch.randn(5, 96, generator=g)
    norm = RMSNorm(96, 1e-5)
    norm.weight.data = torch.randn(96, generator=g)
    expected_residual = residual + x
    with torch.inference_mode():
        ref = norm(expected_residual)
        got = ops.add_rms_norm(residual, x, norm.weight, norm.eps)
    assert torch.allclose(residual, expected_residual)
    assert (got - ref).abs().max().item() < 1e-5
    assert (ops.add_rms_norm(residual.clone(), None, norm.weight, 1e-5) - ref).abs().max() < 1e-5


def test_rope_in_place_on_a_strided_view(ops: Any) -> None:
    # the engine ropes q and k inside the qkv output: rows are strided, heads contiguous
    g = torch.Generator().manual_seed(1)
    qkv = torch.randn(3, 8 * 16, generator=g)  # [T, (H + kv + kv) * d], d = 16
    view = qkv[:, : 6 * 16].unflatten(-1, (6, 16))  # [T, H + kv, d]
    cos, sin = torch.randn(3, 16, generator=g), torch.randn(3, 16, generator=g)
    ref = apply_rope(view.clone(), cos, sin)
    untouched = qkv[:, 6 * 16 :].clone()
    ops.rope_(view, cos, sin)
    assert (view - ref).abs().max().item() < 1e-5
    assert torch.equal(qkv[:, 6 * 16 :], untouched)


def test_silu_mul_matches_swiglu(ops: Any) -> None:
    h = torch.cat([torch.linspace(-120, 40, 70), torch.randn(70)]).view(2, 70)  # extremes too
    gate, up = h.chunk(2, dim=-1)
    ref = torch.nn.functional.silu(gate) * up
    got = ops.silu_mul(h.contiguous())
    assert torch.isfinite(got).all()
    assert (got - ref).abs().max().item() < 1e-5


def test_add_layer_norm_adds_in_place_and_normalises(ops: Any) -> None:
    g = torch.Generator().manual_seed(2)
    residual, x = 50 + torch.randn(4, 80, generator=g), torch.randn(4, 80, generator=g)
    norm = torch.nn.LayerNorm(80, eps=1e-5)
    norm.weight.data, norm.bias.data = torch.randn(80, generator=g), torch.randn(80, generator=g)
    expected_residual = residual + x
    with torch.inference_mode():
        ref = norm(expected_residual)
        got = ops.add_layer_norm(residual, x, norm.weight, norm.bias, norm.eps)
        alone = ops.add_layer_norm(residual.clone(), None, norm.weight, norm.bias, norm.eps)
    assert torch.allclose(residual, expected_residual)
    assert (got - ref).abs().max().item() < 1e-4  # a mean of 50: two passes keep the variance
    assert (alone - ref).abs().max().item() < 1e-4


def test_gelu_tanh_matches_torch(ops: Any) -> None:
    h = torch.cat([torch.linspace(-120, 120, 301), 3 * torch.randn(211)]).view(2, 256)
    ref = torch.nn.functional.gelu(h, approximate="tanh")
    got = ops.gelu_tanh(h.contiguous())
    assert torch.isfinite(got).all()
    assert (got - ref).abs().max().item() < 1e-5


def test_argmax_rows_matches_torch_and_takes_the_first_tie(ops: Any) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 50257, generator=g)
    x[2, 10], x[2, 40000] = 99.0, 99.0  # a tie: the first index, as torch's argmax
    x[4, -1] = 99.0  # the last column
    assert ops.argmax_rows(x).tolist() == x.argmax(-1).tolist()
    assert ops.argmax_rows(x)[2].item() == 10


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_fused_decoder_logits_match_transformers(ops: Any, family: str) -> None:
    config = llama_config(2, layers=3) if family == "llama" else gpt2_config(layers=3)
    ours, theirs = twin(config, seed=5)
    ours.fused_ops = ops
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    with torch.inference_mode():
        seq = ScheduledRequest("a", tuple(prompt), 0, (2, 0, 3))
        meta = build_metadata([seq], 4, torch.device("cpu"))
        got = ours.logits(ours(torch.tensor(prompt), cache_for(ours, 8, 4), meta))
        ref = theirs(torch.tensor([prompt])).logits[0]
    assert (got - ref).abs().max().item() < 1e-4
