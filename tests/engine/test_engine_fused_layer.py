"""The one-call C++ decoder layer against the Python layers: identical hidden states and caches."""

from __future__ import annotations

import random
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine_support import cache_for, twin  # noqa: E402
from ridgeline.engine.attention import build_metadata  # noqa: E402
from ridgeline.engine.fused_layer import load_fused_layer  # noqa: E402
from ridgeline.engine.fused_ops import load_fused_ops  # noqa: E402
from ridgeline.engine.model import CausalLM, early_exit  # noqa: E402
from ridgeline.engine.packing import Layout, pack_linears  # noqa: E402
from ridgeline.engine.paged_kernel import load_paged_kernel  # noqa: E402
from ridgeline.engine.panel_gemm import load_panel_gemm  # noqa: E402
from ridgeline.serving.executor import ScheduledRequest  # noqa: E402

pytestmark = pytest.mark.torch
BS = 16


@pytest.fixture(scope="module")
def parts() -> tuple[Any, Any, Any, Any]:
    panel, ops, kernel, layer = (
        load_panel_gemm(),
        load_fused_ops(),
        load_paged_kernel(),
        load_fused_layer(),
    )
    if None in (panel, ops, kernel, layer):
        pytest.skip("needs the C++ builds and AVX-512")
    return panel, ops, kernel, layer


def _config(family: str) -> Any:
    from transformers import GPT2Config, LlamaConfig

    if family == "gpt2":  # MHA, head_dim 64: the vectorised kernel; LayerNorm, biases, GELU
        return GPT2Config(vocab_size=96, n_embd=128, n_layer=2, n_head=2, n_positions=256)
    if family == "llama-bias":  # GQA 4:2 at head_dim 64, RoPE, biases on q, k, v and o
        return LlamaConfig(
            vocab_size=96,
            hidden_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=96,
            max_position_embeddings=256,
            attention_bias=True,
        )
    if family == "llama-mqa":  # MQA at head_dim 128
        return LlamaConfig(
            vocab_size=96,
            hidden_size=256,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=96,
            max_position_embeddings=256,
        )
    # head_dim 8: the kernel's scalar path
    return LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        max_position_embeddings=256,
    )


def _model(family: str, parts: tuple[Any, Any, Any, Any]) -> CausalLM:
    panel, ops, _, layer = parts
    ours, _ = twin(_config(family), seed=3)
    pack_linears(ours, Layout.PANEL, panel)
    ours.fused_ops = ops
    ours.use_fused_layer(layer)
    return ours


def _decode_step(model: CausalLM, kernel: Any, contexts: list[int]) -> tuple[Any, Any]:
    """Hidden states of one decode step over shuffled blocks filled with random K/V, and the
    cache after it (the step writes its K/V)."""
    per = max(contexts) // BS + 1
    cache = cache_for(model, len(contexts) * per, BS)
    g = torch.Generator().manual_seed(7)
    for t in (*cache.k, *cache.v):
        t.copy_(torch.randn(t.shape, generator=g))
    order = list(range(len(contexts) * per))
    random.Random(1).shuffle(order)
    reqs = [
        ScheduledRequest(f"r{i}", (5 + i,), ctx, tuple(order[i * per : (i + 1) * per]))
        for i, ctx in enumerate(contexts)
    ]
    meta = build_metadata(reqs, BS, torch.device("cpu"))
    assert meta.all_paged
    ids = torch.tensor([r.token_ids[0] for r in reqs])
    with torch.inference_mode():
        return model(ids, cache, meta, kernel), cache


@pytest.mark.parametrize("family", ["gpt2", "llama-bias", "llama-mqa", "llama-d8"])
def test_cpp_layers_match_the_python_layers_exactly(parts: Any, family: str) -> None:
    model, kernel = _model(family, parts), parts[2]
    contexts = [3, 40, 17]  # a partial first block, several blocks, rows of different lengths
    assert model.fused_layer is not None and len(model.layer_weights) == 2
    got, got_cache = _decode_step(model, kernel, contexts)
    model.use_fused_layer(None)
    assert model.fused_layer is None
    ref, ref_cache = _decode_step(model, kernel, contexts)
    assert torch.equal(got, ref)
    assert all(torch.equal(a, b) for a, b in zip(got_cache.k, ref_cache.k, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(got_cache.v, ref_cache.v, strict=True))


def test_profiler_sees_the_kernels_of_the_python_layers(parts: Any) -> None:
    from ridgeline.engine.packing import PANEL_LINEAR_RANGE
    from ridgeline.engine.paged_kernel import PAGED_ATTENTION_RANGE

    model, kernel = _model("gpt2", parts), parts[2]
    with torch.profiler.profile() as prof:
        _decode_step(model, kernel, [20, 9])
    names = {e.name for e in prof.events()}
    assert PAGED_ATTENTION_RANGE in names
    assert any(n.startswith(PANEL_LINEAR_RANGE) for n in names)


def test_unfit_models_and_self_drafts(parts: Any) -> None:
    panel, ops, kernel, layer = parts
    plain, _ = twin(_config("llama-bias"), seed=3)  # weights not in panels: the layer does not fit
    plain.fused_ops = ops
    plain.use_fused_layer(layer)
    assert plain.fused_layer is None and plain.layer_weights == []
    model = _model("llama-bias", parts)
    draft = early_exit(model, 1)  # its one layer ends in the final norm, not layer 1's
    assert draft.fused_layer is layer and len(draft.layer_weights) == 1
    assert torch.equal(draft.layer_weights[0].tensors[10], model.final_norm.weight.detach())
    got, _ = _decode_step(draft, kernel, [12, 30])
    draft.use_fused_layer(None)
    ref, _ = _decode_step(draft, kernel, [12, 30])
    assert torch.equal(got, ref)
