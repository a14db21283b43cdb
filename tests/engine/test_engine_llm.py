"""``LLM`` under the real serving scheduler and block pool, against transformers' greedy tokens:
staggered arrivals, chunked prefill, prefix-cache hits, preemption with recompute, speculative
decoding — and the pool back to all free (cached blocks aside) at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine_support import VOCAB, gpt2_config, hf_greedy, llama_config, twin  # noqa: E402
from ridgeline.engine.llm import LLM  # noqa: E402
from ridgeline.engine.sampling import SamplingParams  # noqa: E402

pytestmark = pytest.mark.torch
CONFIGS = {
    "gpt2": gpt2_config,
    "llama-gqa": lambda: llama_config(2),
    "llama-mqa": lambda: llama_config(1),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def saved(request: Any, tmp_path_factory: Any) -> tuple[Path, Any]:
    """A transformers model with random weights saved as safetensors, and the model itself."""
    torch.set_num_threads(1)
    _, theirs = twin(CONFIGS[request.param](), seed=11)
    path = tmp_path_factory.mktemp(request.param)
    theirs.save_pretrained(path)
    return path, theirs


def _prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    shared = torch.randint(0, VOCAB, (12,), generator=g).tolist()  # three full blocks of 4
    own = [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in (3, 17, 1, 9, 6, 25)]
    return [shared + own[0], own[1], shared + own[2], own[3], shared + own[4], own[5]]


def _check(llm: LLM, outs: list[Any], theirs: Any, n: int) -> None:
    for o in outs:
        assert list(o.token_ids) == hf_greedy(theirs, list(o.prompt_token_ids), n), o.request_id
        assert o.ttft_s is not None and o.ttft_s >= 0
    pool = llm.scheduler.kv.pool
    pool.check()
    assert pool.num_free == pool.num_blocks  # all free; cached blocks are free and evictable
    assert not llm.scheduler.has_unfinished


def test_mixed_staggered_chunked_prefix_hits(saved: tuple[Path, Any]) -> None:
    path, theirs = saved
    llm = LLM(str(path), weights=path, block_size=4, max_num_batched_tokens=10, num_blocks=64)
    prompts = _prompts()
    arrivals = [0.0, 0.0, 1e-4, 2e-4, 5e-3, 1.0]  # engine clock: the last arrives when idle
    outs = llm.generate(prompts, SamplingParams(max_output_tokens=6), arrivals_s=arrivals)
    _check(llm, outs, theirs, 6)
    assert sum(o.num_cached_tokens for o in outs) >= 12  # the shared 12-token prefix hit
    assert any(len(b.requests) > 1 and b.num_tokens > len(b.requests) for b in llm.stats.batches)


def test_preemption_and_recompute(saved: tuple[Path, Any]) -> None:
    path, theirs = saved
    llm = LLM(
        str(path),
        weights=path,
        block_size=4,
        max_num_batched_tokens=32,
        num_blocks=14,
        prefix_caching=False,
    )
    outs = llm.generate(_prompts()[:4], SamplingParams(max_output_tokens=10))
    assert sum(o.num_preemptions for o in outs) > 0
    _check(llm, outs, theirs, 10)


@pytest.mark.parametrize("draft", ["self", "separate"])
def test_speculative_decoding(saved: tuple[Path, Any], draft: str, tmp_path: Path) -> None:
    path, theirs = saved
    if draft == "self":
        options: dict[str, Any] = {"draft_layers": 1}
    else:
        small = theirs.config.to_dict()
        key = "n_layer" if "n_layer" in small else "num_hidden_layers"
        (tmp_path / "config.json").write_text(__import__("json").dumps({**small, key: 1}))
        options = {"draft_model": str(tmp_path / "config.json")}
    llm = LLM(
        str(path),
        weights=path,
        block_size=4,
        max_num_batched_tokens=16,
        num_blocks=64,
        num_speculative_tokens=3,
        **options,
    )
    outs = llm.generate(_prompts(), SamplingParams(max_output_tokens=8))
    _check(llm, outs, theirs, 8)
    assert llm.stats.draft_tokens > 0


def test_text_prompt_without_tokenizer_is_a_clear_error(saved: tuple[Path, Any]) -> None:
    from ridgeline.errors import ConfigError

    path, _ = saved
    llm = LLM(str(path), weights=path, block_size=4, num_blocks=8, paged_kernel=False)
    with pytest.raises(ConfigError, match="tokenizer"):
        llm.generate(["hello"])


def test_swap_preemption_restores_the_kv(saved: tuple[Path, Any]) -> None:
    """Swap instead of recompute: the victim's blocks go to host memory and come back."""
    path, theirs = saved
    llm = LLM(
        str(path),
        weights=path,
        block_size=4,
        max_num_batched_tokens=32,
        num_blocks=14,
        prefix_caching=False,
        preemption="swap",
    )
    outs = llm.generate(_prompts()[:4], SamplingParams(max_output_tokens=10))
    assert llm.scheduler.stats.num_swaps > 0
    assert any(b.swap_in for b in llm.stats.batches) and not llm.cache.tier
    _check(llm, outs, theirs, 10)


def test_ttft_and_tpot_are_sums_of_measured_step_times(saved: tuple[Path, Any]) -> None:
    """TTFT = engine clock at the end of the step that sampled the first token − arrival;
    TPOT = (clock at the last token − clock at the first) / (tokens − 1)."""
    path, _ = saved
    llm = LLM(str(path), weights=path, block_size=4, max_num_batched_tokens=8, num_blocks=64)
    prompts = _prompts()[:3]
    outs = llm.generate(prompts, SamplingParams(max_output_tokens=4), arrivals_s=[0.0, 0.0, 0.0])
    ends = [sum(llm.stats.step_times[: i + 1]) for i in range(len(llm.stats.step_times))]
    for o in outs:
        sampled = [
            ends[i]
            for i, b in enumerate(llm.stats.batches)
            for r in b.requests
            if r.request_id == o.request_id and r.sample
        ]
        assert o.ttft_s == pytest.approx(sampled[0])
        assert o.tpot_s == pytest.approx((sampled[-1] - sampled[0]) / 3)
