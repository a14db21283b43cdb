"""Both kernel builds, token-exact against transformers on realistic shapes, through the public
``LLM`` API: MHA at head_dim 64 (distilgpt2's heads), GQA at head_dim 128 and MQA at head_dim
64, with prompts over several 16-token blocks. ``native`` takes the AVX-512 kernels where the
CPU has them (paged_rows_mha4, paged_rows_avx512, the panel GEMM and the fused layer);
``portable`` is compiled without AVX-512 and takes the plain loops on every CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from transformers import GPT2Config, LlamaConfig  # noqa: E402

from engine_support import VOCAB, hf_greedy, twin  # noqa: E402
from ridgeline.engine.llm import LLM  # noqa: E402
from ridgeline.engine.sampling import SamplingParams  # noqa: E402

pytestmark = pytest.mark.torch

SHAPES = {
    "gpt2-mha-d64": lambda: GPT2Config(
        vocab_size=VOCAB, n_embd=512, n_layer=2, n_head=8, n_positions=256
    ),
    "llama-gqa-d128": lambda: LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=1024,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=1536,
        max_position_embeddings=256,
    ),
    "llama-mqa-d64": lambda: LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=512,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=1,
        intermediate_size=768,
        max_position_embeddings=256,
    ),
}


@pytest.fixture(scope="module", params=list(SHAPES))
def saved(request: Any, tmp_path_factory: Any) -> tuple[Path, Any]:
    torch.set_num_threads(1)
    _, theirs = twin(SHAPES[request.param](), seed=5)
    path = tmp_path_factory.mktemp(request.param)
    theirs.save_pretrained(path)
    return path, theirs


@pytest.mark.parametrize("kernels", ["native", "portable"])
def test_kernel_build_is_token_exact_on_a_realistic_shape(
    saved: tuple[Path, Any], kernels: str
) -> None:
    path, theirs = saved
    llm = LLM(str(path), weights=path, kernels=kernels, block_size=16, num_blocks=64)
    assert llm.kernel is not None and llm.model.fused_ops is not None  # the compiled paths run
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in (37, 70, 5)]
    outs = llm.generate(prompts, SamplingParams(max_output_tokens=8))
    for o in outs:
        assert list(o.token_ids) == hf_greedy(theirs, list(o.prompt_token_ids), 8)
