"""Small parts of the engine: cache sizing, copy-on-write, weight-name mapping edge cases."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine_support import gpt2_config, llama_config, spec_of, twin  # noqa: E402
from ridgeline.engine.kv_cache import KVCache, cache_shape  # noqa: E402
from ridgeline.engine.model import CausalLM  # noqa: E402
from ridgeline.engine.weights import from_hf_state, to_hf_state  # noqa: E402
from ridgeline.errors import CapacityError, ConfigError  # noqa: E402
from ridgeline.specs import get_model  # noqa: E402

pytestmark = pytest.mark.torch


def test_cache_is_sized_from_the_budget_to_the_byte() -> None:
    spec = get_model("distilgpt2")  # 6 layers, 12 KV heads, head_dim 64
    per_block = 2 * 6 * 16 * 12 * 64 * 4  # K and V, every layer, fp32: 589,824 B
    shape = cache_shape(spec, 16, 10 * per_block + 1, torch.float32)
    assert (shape.num_blocks, shape.bytes_per_block) == (10, per_block)
    with pytest.raises(CapacityError, match="holds no block"):
        cache_shape(spec, 16, per_block - 1, torch.float32)


def test_copy_on_write_copies_every_layer() -> None:
    spec = spec_of(llama_config(2))
    cache = KVCache(cache_shape(spec, 4, 1e6, torch.float32), torch.device("cpu"))
    for t in (*cache.k, *cache.v):
        t.normal_()
    cache.copy_blocks(((3, 7),))
    assert all(torch.equal(t[7], t[3]) for t in (*cache.k, *cache.v))


def test_gpt2_names_load_with_or_without_the_transformer_prefix() -> None:
    ours, _ = twin(gpt2_config(), seed=2)
    bare = {k.removeprefix("transformer."): v for k, v in to_hf_state(ours).items()}
    bare["h.0.attn.bias"] = torch.ones(1)  # old checkpoints carry mask buffers: ignored
    other = CausalLM(ours.spec, max_positions=256)
    from_hf_state(other, bare)
    assert all(
        torch.equal(a, b) for a, b in zip(ours.parameters(), other.parameters(), strict=True)
    )


def test_a_missing_or_misshapen_tensor_is_named() -> None:
    ours, _ = twin(llama_config(1), seed=2)
    state = to_hf_state(ours)
    del state["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(ConfigError, match="model.layers.1.mlp.up_proj.weight"):
        from_hf_state(CausalLM(ours.spec, 256), state)
    state = to_hf_state(ours)
    state["model.norm.weight"] = torch.ones(7)
    with pytest.raises(ConfigError, match="model.norm.weight"):
        from_hf_state(CausalLM(ours.spec, 256), state)


def test_unsupported_architectures_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="mixture-of-experts"):
        CausalLM(get_model("mixtral-8x7b"), 16)


def test_hw_sizes_the_kv_budget_like_vllm() -> None:
    from ridgeline.analytic import Deployment, Dtypes, weights_bytes
    from ridgeline.analytic.memory import MemoryRule, activation_bytes
    from ridgeline.engine.llm import EngineConfig, kv_budget_bytes
    from ridgeline.specs import DType, get_accelerator

    spec, hw = get_model("distilgpt2"), get_accelerator("a100-80gb")
    cfg, fp32 = EngineConfig(), Dtypes(DType.FP32, DType.FP32, DType.FP32)
    # vLLM's gpu_memory_utilization 0.9, less the weights and the named reserve: the
    # activations of a step of max_num_batched_tokens over max_num_seqs, and a 1 GB workspace
    rule = MemoryRule(None, cfg.max_num_batched_tokens, cfg.max_num_seqs)
    reserve = activation_bytes(spec, Deployment(hw), fp32, rule) + 1e9
    expected = 0.9 * hw.device_capacity_bytes - weights_bytes(spec, DType.FP32) - reserve
    assert kv_budget_bytes(spec, cfg, hw) == pytest.approx(expected)
    assert kv_budget_bytes(spec, EngineConfig(memory_utilization=0.5), hw) == pytest.approx(
        expected - 0.4 * hw.device_capacity_bytes
    )
    assert kv_budget_bytes(spec, EngineConfig(kv_budget_bytes=123.0), hw) == 123.0
