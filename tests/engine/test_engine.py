"""The engine against transformers: same random weights, same logits (fp32, atol 1e-4), same
greedy tokens for every request of mixed batches — chunked prefill, prefix-cache hits,
preemption with recompute, speculative decoding — and the pool all free afterwards."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine_support import (  # noqa: E402
    VOCAB,
    Driver,
    Pool,
    Req,
    cache_for,
    gpt2_config,
    hf_greedy,
    llama_config,
    twin,
)
from ridgeline.engine.attention import build_metadata  # noqa: E402
from ridgeline.engine.executor import TorchExecutor  # noqa: E402
from ridgeline.engine.kv_cache import KVCache  # noqa: E402
from ridgeline.serving.executor import ScheduledRequest  # noqa: E402

pytestmark = pytest.mark.torch
LOGIT_ATOL = 1e-4  # fp32; observed max |Δ| is ~1e-6 on these tiny models
BS = 4
CONFIGS = {
    "gpt2": lambda: gpt2_config(),
    "llama-mha": lambda: llama_config(4),
    "llama-gqa": lambda: llama_config(2),
    "llama-mqa": lambda: llama_config(1),
    "qwen2-bias-llama3-rope": lambda: llama_config(
        2,
        attention_bias=True,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    ),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def models(request: Any) -> tuple[Any, Any]:
    torch.set_num_threads(1)
    return twin(CONFIGS[request.param](), seed=1)


def _prompts(n: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = [3, 9, 14, 6, 11, 1, 17, 5][:n]
    return [torch.randint(0, VOCAB, (k,), generator=g).tolist() for k in lengths]


def test_logits_match_transformers(models: tuple[Any, Any]) -> None:
    """One request's prefill chunked in two, through the paged cache: every position's logits."""
    ours, theirs = models
    prompt = _prompts(7)[6]
    cache = cache_for(ours, 16, BS)
    table = (5, 2, 11, 0, 7)
    logits = []
    with torch.inference_mode():
        for start, end in ((0, 7), (7, len(prompt))):
            seq = ScheduledRequest("a", tuple(prompt[start:end]), start, table)
            meta = build_metadata([seq], BS, torch.device("cpu"))
            ids = torch.tensor(prompt[start:end])
            logits.append(ours.logits(ours(ids, cache, meta)))
        ref = theirs(torch.tensor([prompt])).logits[0]
    got = torch.cat(logits)
    assert (got - ref).abs().max().item() < LOGIT_ATOL


def _run(models: tuple[Any, Any], reqs: list[Req], **driver: Any) -> Driver:
    ours, _ = models
    num_blocks = 48
    extra = 2 * 8 if driver.get("spec_k") else 0
    executor = TorchExecutor(ours, cache_for(ours, num_blocks, BS, extra), **driver.pop("ex", {}))
    d = Driver(executor, Pool(num_blocks, seed=3), BS, **driver)
    d.run(reqs)
    assert sorted(d.pool.free) == list(range(num_blocks))  # every block back
    return d


def _expect(models: tuple[Any, Any], reqs: list[Req]) -> None:
    _, theirs = models
    for r in reqs:
        assert r.out == hf_greedy(theirs, r.prompt, r.max_tokens), r.rid


def _mixed(n: int = 6) -> list[Req]:
    return [Req(f"r{i}", p, max_tokens=5 + i % 3, arrival=2 * i) for i, p in enumerate(_prompts(n))]


def test_mixed_batch_with_chunked_prefill_matches_transformers(models: tuple[Any, Any]) -> None:
    reqs = _mixed()
    _run(models, reqs, budget=8)  # prompts of 9..17 tokens are chunked; decodes ride along
    _expect(models, reqs)


def test_preemption_and_recompute_match_transformers(models: tuple[Any, Any]) -> None:
    reqs = _mixed(4)
    d = _run(models, reqs, budget=32, preempt_at=6)
    assert d.preemptions == 1
    _expect(models, reqs)


def test_prefix_cache_hit_matches_transformers(models: tuple[Any, Any]) -> None:
    """B reuses A's first two full blocks (8 tokens) and computes only its own suffix."""
    ours, _ = models
    shared = _prompts(7)[6][:8]
    a = Req("a", shared + [1, 2, 3], max_tokens=4)
    b = Req("b", shared + [4, 5, 6, 7, 8], max_tokens=4, arrival=3)
    executor = TorchExecutor(ours, cache_for(ours, 32, BS))
    d = Driver(executor, Pool(32, seed=5), BS, budget=16)
    for _ in range(3):
        d.step([a])
    b.blocks = [d.pool.share(x) for x in a.blocks[:2]]
    b.computed = 8
    d.run([a, b])
    assert d.pool.free.__len__() == 32
    _expect(models, [a, b])


def test_bf16_model_runs_close_to_fp32(models: tuple[Any, Any]) -> None:
    ours, theirs = models
    prompt = _prompts(3)[2]
    low = type(ours)(ours.spec, max_positions=256)
    low.load_state_dict(ours.state_dict())
    low = low.to(torch.bfloat16)
    cache = cache_for(low, 8, BS)
    cache.k = [k.to(torch.bfloat16) for k in cache.k]
    cache.v = [v.to(torch.bfloat16) for v in cache.v]
    seq = ScheduledRequest("a", tuple(prompt), 0, (3, 1, 6, 0))
    with torch.inference_mode():
        got = low.logits(
            low(torch.tensor(prompt), cache, build_metadata([seq], BS, torch.device("cpu")))
        )
        ref = theirs(torch.tensor([prompt])).logits[0]
    assert (got - ref).abs().max().item() < 0.25  # bf16 keeps ~3 significant digits


def _drafter(kind: str, ours: Any, cache: Any, num_blocks: int, k: int) -> Any:
    from ridgeline.engine.model import CausalLM, early_exit
    from ridgeline.engine.spec_decode import Drafter
    from ridgeline.engine.weights import init_random

    if kind == "self":
        return Drafter(early_exit(ours, 1), KVCache.sharing(cache, 1), num_blocks, k, True)
    draft = CausalLM(ours.spec, max_positions=256, num_layers=1 if kind == "small" else None)
    if kind == "same":
        draft.load_state_dict(ours.state_dict())
    else:
        init_random(draft, torch.Generator().manual_seed(9), std=0.15)
    draft_cache = cache_for(draft, cache.shape.num_blocks, BS)
    return Drafter(draft, draft_cache, num_blocks, k, False)


@pytest.mark.parametrize("kind", ["same", "small", "self"])
def test_speculative_decoding_keeps_greedy_tokens(models: tuple[Any, Any], kind: str) -> None:
    """Identical draft (all accepted), unrelated small draft (mostly rejected), first-layer
    self-draft: the greedy tokens are transformers' in every case."""
    ours, _ = models
    num_blocks, k = 48, 3
    cache = cache_for(ours, num_blocks, BS, extra=16)
    executor = TorchExecutor(ours, cache, drafter=_drafter(kind, ours, cache, num_blocks, k))
    reqs = _mixed(5)
    d = Driver(executor, Pool(num_blocks, seed=3), BS, budget=12, spec_k=k)
    d.run(reqs)
    assert sorted(d.pool.free) == list(range(num_blocks))
    _expect(models, reqs)
    if kind == "same":  # every draft accepted: far fewer steps than tokens
        assert d.steps < sum(r.max_tokens for r in reqs)


def test_packed_linears_keep_logits(models: tuple[Any, Any]) -> None:
    from ridgeline.engine.model import CausalLM
    from ridgeline.engine.packing import can_pack, pack_linears

    ours, theirs = models
    if not can_pack(torch.device("cpu")):
        pytest.skip("no oneDNN in this torch build")
    packed = CausalLM(ours.spec, max_positions=256)
    packed.load_state_dict(ours.state_dict())
    assert pack_linears(packed) == 4 * ours.spec.num_layers + 1
    prompt = _prompts(2)[1]
    seq = ScheduledRequest("a", tuple(prompt), 0, (3, 1, 6))
    with torch.inference_mode():
        meta = build_metadata([seq], BS, torch.device("cpu"))
        got = packed.logits(packed(torch.tensor(prompt), cache_for(packed, 8, BS), meta))
        ref = theirs(torch.tensor([prompt])).logits[0]
    assert (got - ref).abs().max().item() < LOGIT_ATOL
