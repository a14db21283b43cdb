"""Model configs added for the published-measurements dataset, against published figures.

Parameter counts are the totals Meta publishes for each checkpoint (Hugging Face model cards and
safetensors index metadata). The arithmetic is spelled out for Llama-2-13B so the test does not
just restate the code under test.
"""

from __future__ import annotations

import pytest

from ridgeline.specs import Attention, get_model, param_counts

PUBLISHED = {
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3.1-405b": 405_853_388_800,
    "llama-3.3-70b": 70_553_706_496,
}


@pytest.mark.parametrize(("name", "count"), PUBLISHED.items())
def test_new_model_parameter_counts_equal_published(name: str, count: int) -> None:
    assert param_counts(get_model(name)).total == count


def test_llama_2_13b_count_by_hand() -> None:
    # 40 layers x (attention 4 x 5120^2 + SwiGLU 3 x 5120 x 13824 + two norms 2 x 5120)
    # + embedding and lm_head 2 x 32000 x 5120 + final norm 5120 (Llama 2 paper, Table 1 shapes).
    per_layer = 4 * 5120**2 + 3 * 5120 * 13824 + 2 * 5120
    assert 40 * per_layer + 2 * 32000 * 5120 + 5120 == PUBLISHED["llama-2-13b"]


@pytest.mark.parametrize(
    ("name", "layers", "hidden", "heads", "kv_heads", "attention", "vocab"),
    [
        ("llama-2-13b", 40, 5120, 40, 40, Attention.MHA, 32000),
        ("llama-2-70b", 80, 8192, 64, 8, Attention.GQA, 32000),
        ("llama-3-8b", 32, 4096, 32, 8, Attention.GQA, 128256),
        ("llama-3.1-405b", 126, 16384, 128, 8, Attention.GQA, 128256),
        ("llama-3.3-70b", 80, 8192, 64, 8, Attention.GQA, 128256),
    ],
)
def test_new_model_shapes(
    name: str, layers: int, hidden: int, heads: int, kv_heads: int, attention: Attention, vocab: int
) -> None:
    m = get_model(name)
    shape = (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.attention, m.vocab_size)
    assert shape == (layers, hidden, heads, kv_heads, attention, vocab)
    assert m.head_dim == 128


def test_kv_bytes_per_token_of_llama_3_1_405b() -> None:
    # 2 (K and V) x 126 layers x 8 KV heads x 128 head dim x 2 bytes = 516,096 B per token in bf16.
    m = get_model("llama-3.1-405b")
    assert m.num_layers * m.kv_elements_per_token_per_layer * 2 == 516_096


def test_llama_3_context_windows() -> None:
    assert get_model("llama-3-8b").max_position_embeddings == 8192
    assert get_model("llama-3-8b").rope_scaling is None
    assert get_model("llama-3.3-70b").max_position_embeddings == 131072
    assert get_model("llama-2-70b").max_position_embeddings == 4096
