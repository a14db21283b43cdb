"""The in-place paged attention kernel against the gather reference, and inside the engine."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine_support import Driver, Pool, Req, cache_for, hf_greedy, llama_config, twin  # noqa: E402
from ridgeline.engine.attention import gather_paged  # noqa: E402
from ridgeline.engine.executor import TorchExecutor  # noqa: E402
from ridgeline.engine.paged_kernel import load_paged_kernel  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def kernel() -> Any:
    k = load_paged_kernel()
    if k is None:
        pytest.skip("no C++ compiler: the engine uses the gather path")
    return k


@pytest.mark.parametrize(
    ("heads", "kv_heads", "dtype", "atol"),
    [
        (4, 4, "float32", 1e-5),
        (8, 2, "float32", 1e-5),
        (6, 1, "float32", 1e-5),
        (4, 2, "bfloat16", 2e-2),
    ],
)
def test_kernel_matches_gather(
    kernel: Any, heads: int, kv_heads: int, dtype: str, atol: float
) -> None:
    g = torch.Generator().manual_seed(0)
    dt = getattr(torch, dtype)
    blocks, bs, d = 20, 4, 16
    k_cache = torch.randn(blocks, bs, kv_heads, d, generator=g).to(dt)
    v_cache = torch.randn(blocks, bs, kv_heads, d, generator=g).to(dt)
    lens = torch.tensor([1, 4, 5, 13, 16], dtype=torch.int32)  # block edges and partial blocks
    tables = torch.randperm(blocks, generator=g)[:20].view(5, 4).to(torch.int32)
    q = torch.randn(5, heads, d, generator=g).to(dt)
    mask = (torch.arange(16)[None, :] < lens[:, None])[:, None, None, :]
    ref = gather_paged(q.float(), k_cache.float(), v_cache.float(), tables, mask)
    got = kernel(q, k_cache, v_cache, tables, lens)
    assert (got.float() - ref).abs().max().item() < atol


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_write_stores_strided_rows_at_their_slots(kernel: Any, dtype: str) -> None:
    # the engine's new keys and values are views into the QKV output: rows are strided
    dt = getattr(torch, dtype)
    blocks, bs, kv_heads, d = 6, 4, 2, 8
    k_cache, v_cache = (
        torch.zeros(blocks, bs, kv_heads, d, dtype=dt),
        torch.zeros(blocks, bs, kv_heads, d, dtype=dt),
    )
    qkv = torch.randn(3, (4 + 2 * kv_heads) * d).to(dt)  # [T, (H + 2 kv) d], H = 4
    k_new = qkv[:, 4 * d : (4 + kv_heads) * d].unflatten(-1, (kv_heads, d))
    v_new = qkv[:, (4 + kv_heads) * d :].unflatten(-1, (kv_heads, d))
    slots = torch.tensor([5, 0, 23])
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    ref_k.view(-1, kv_heads, d).index_copy_(0, slots, k_new)
    ref_v.view(-1, kv_heads, d).index_copy_(0, slots, v_new)
    kernel.write(k_cache, v_cache, slots, k_new, v_new)
    assert torch.equal(k_cache, ref_k) and torch.equal(v_cache, ref_v)
    with pytest.raises(RuntimeError, match="outside the cache"):
        kernel.write(k_cache, v_cache, torch.tensor([0, 1, 24]), k_new, v_new)


@pytest.mark.parametrize(
    ("heads", "kv_heads", "d", "bs"),
    [
        (16, 4, 64, 16),
        (8, 8, 64, 4),
        (4, 1, 128, 32),
        (12, 12, 64, 16),
        (6, 2, 128, 8),
        (5, 5, 64, 40),
        (3, 3, 128, 24),
    ],
)
def test_vectorised_path_matches_gather(
    kernel: Any, heads: int, kv_heads: int, d: int, bs: int
) -> None:
    # head_dim 64 and 128 take the AVX-512 path where the compiler targets it: chunks of 16
    # tokens across block sizes below and above 16, partial chunks, one-token contexts; MHA
    # reads four chunks at once, and blocks of 40 (chunks of 16, 16, 8) start some groups of
    # four with a short chunk; head counts not a multiple of four pad the last score vector
    g = torch.Generator().manual_seed(1)
    lens = torch.tensor([1, 15, 16, 17, 33, 64, 70, 150], dtype=torch.int32)
    max_blocks = -(-int(lens.max()) // bs)
    blocks = len(lens) * max_blocks
    k_cache = torch.randn(blocks, bs, kv_heads, d, generator=g)
    v_cache = torch.randn(blocks, bs, kv_heads, d, generator=g)
    tables = torch.randperm(blocks, generator=g).view(len(lens), max_blocks).to(torch.int32)
    q = torch.randn(len(lens), heads, d, generator=g) * 3  # sharp softmax: exp accuracy shows
    keys = torch.arange(max_blocks * bs)
    mask = (keys[None, :] < lens[:, None])[:, None, None, :]
    ref = gather_paged(q, k_cache, v_cache, tables, mask)
    for row, n in enumerate(lens.tolist()):  # slots past the context hold garbage: never read
        for pos in range(n, max_blocks * bs):
            block = int(tables[row, pos // bs])
            k_cache[block, pos % bs] = float("nan")
            v_cache[block, pos % bs] = float("nan")
    got = kernel(q, k_cache, v_cache, tables, lens)
    assert (got - ref).abs().max().item() < 2e-5


def test_engine_with_kernel_matches_transformers(kernel: Any) -> None:
    ours, theirs = twin(llama_config(2), seed=4)
    executor = TorchExecutor(ours, cache_for(ours, 40, 4), kernel=kernel)
    prompts = [[3, 1, 4, 1, 5, 9, 2, 6], [5, 3], [5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6]]
    reqs = [Req(f"r{i}", p, 6, arrival=i) for i, p in enumerate(prompts)]
    Driver(executor, Pool(40), 4, budget=6).run(reqs)
    for r in reqs:
        assert r.out == hf_greedy(theirs, r.prompt, 6)
