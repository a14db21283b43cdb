"""An index-based paged attention kernel for the CPU: reads K/V blocks in place.

The gather path copies every row's blocks to a contiguous tensor before SDPA, so each step moves
the whole KV cache three times (read, write the copy, read it again). This kernel walks each
row's block table and reads every key and value once, PagedAttention-style (Kwon et al. 2023),
with the online softmax of FlashAttention (Dao et al. 2022; Milakov & Gimelshein 2018), one
block at a time:

    for each block j of the row (keys t of the block, up to context_len):
        s_t   = q · k_t · scale                       for every query head of the KV group
        m'    = max(m, max_t s_t);  α = exp(m − m')
        l     = α · l + Σ_t exp(s_t − m')
        acc   = α · acc + Σ_t exp(s_t − m') · v_t
    out = acc / l

Each row takes all its heads at once, so a block's ``[block_size, kv_heads, d]`` keys and values
are read front to back in memory order; rows are split over threads with ``at::parallel_for``
(it follows ``torch.set_num_threads``). fp32 and bf16 caches; accumulation in fp32; built with
``-ffast-math`` so the exponentials vectorise (glibc libmvec), hence a finite floor instead of
−∞ for the running max. While a block computes, the next block of the table is prefetched a
token row at a time: with GQA 16:4 the kernel is a third compute, and the prefetch overlaps the
two (B16 × 1024, llama-350m shape: 5.3 → 4.7 ms per layer; MHA unchanged at the DRAM rate).

fp32 MHA takes four chunks (four blocks of 16 tokens) at once instead, read token row by token
row, all four in step, with one online-softmax update per four chunks: a block of a shuffled
table is a short run that the hardware prefetchers start cold, and four runs read together
overlap those starts (distilgpt2's shape, B4 × 1024: 20 → 25–27 GB/s from DRAM). The same
order for GQA recomputes what its head-major loop shares and is no faster there.

The C++ is ``csrc/paged_attention.cpp``, built with the other kernels (``kernel_build``: once
per environment, needs a C++ compiler). When none is found the engine falls back to the gather
path and says so.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.profiler import record_function

from ridgeline.engine.cpp_ext import load_kernels
from ridgeline.engine.kernel_build import KernelTarget

PAGED_ATTENTION_RANGE = "ridgeline::paged_attention"  # the profiler's name for the kernel


class PagedKernel:
    """The compiled kernel, callable as a ``DecodeKernel``."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __call__(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> torch.Tensor:
        """q [R, H, d] → [R, H, d]; caches [num_blocks, block_size, kv_heads, d]."""
        scale = q.shape[-1] ** -0.5
        q = q.to(k_cache.dtype).contiguous()
        if torch._C._autograd._profiler_enabled():  # a named range: not an aten op otherwise
            with record_function(PAGED_ATTENTION_RANGE):
                return self._module.paged_attention_rows(
                    q, k_cache, v_cache, block_tables, context_lens, scale
                )
        return self._module.paged_attention_rows(
            q, k_cache, v_cache, block_tables, context_lens, scale
        )

    def write(
        self,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slots: torch.Tensor,
        k_new: torch.Tensor,
        v_new: torch.Tensor,
    ) -> None:
        """Store ``k_new``/``v_new`` [T, kv_heads, d] at ``slots`` [T] of the caches, in place
        (one call for what ``index_copy_`` does in two: 9–27 µs each at decode)."""
        self._module.write_kv(
            k_cache, v_cache, slots, k_new.to(k_cache.dtype), v_new.to(v_cache.dtype)
        )


def load_paged_kernel(target: KernelTarget | str = KernelTarget.NATIVE) -> PagedKernel | None:
    """The kernel of the ``target`` build (compiled on first use); None, with a warning, if
    the kernels cannot be built."""
    module = load_kernels(target, fallback="using the gather path")
    return None if module is None else PagedKernel(module)
