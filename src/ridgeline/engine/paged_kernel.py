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

Work is split over (row, KV head) with ``at::parallel_for``, so it follows
``torch.set_num_threads``. fp32 and bf16 caches; accumulation in fp32.

It is compiled once with ``torch.utils.cpp_extension.load_inline`` (needs a C++ compiler; the
build is cached under ``TORCH_EXTENSIONS_DIR``). When no compiler is found the engine falls back
to the gather path and says so.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <vector>

template <typename T>
static void paged_rows(const T* q, const T* kc, const T* vc, const int* tables,
                       const int* lens, T* out, int64_t rows, int64_t heads, int64_t kv_heads,
                       int64_t d, int64_t bs, int64_t max_blocks, float scale) {
  const int64_t group = heads / kv_heads;
  const int64_t slot_stride = kv_heads * d;      // one token of one layer: [kv_heads, d]
  at::parallel_for(0, rows * kv_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(group * d), acc(group * d), m(group), l(group), s(group * bs);
    for (int64_t job = begin; job < end; ++job) {
      const int64_t r = job / kv_heads, g = job % kv_heads;
      for (int64_t h = 0; h < group; ++h)
        for (int64_t i = 0; i < d; ++i)
          qf[h * d + i] = float(q[(r * heads + g * group + h) * d + i]) * scale;
      std::fill(acc.begin(), acc.end(), 0.f);
      std::fill(m.begin(), m.end(), -INFINITY);
      std::fill(l.begin(), l.end(), 0.f);
      const int64_t len = lens[r];
      for (int64_t j = 0; j * bs < len; ++j) {
        const int64_t block = tables[r * max_blocks + j];
        const int64_t n = std::min(bs, len - j * bs);
        const T* kb = kc + block * bs * slot_stride + g * d;
        const T* vb = vc + block * bs * slot_stride + g * d;
        for (int64_t h = 0; h < group; ++h) {
          const float* qh = &qf[h * d];
          float mx = m[h];
          for (int64_t t = 0; t < n; ++t) {
            const T* kt = kb + t * slot_stride;
            float dot = 0.f;
#pragma omp simd reduction(+ : dot)
            for (int64_t i = 0; i < d; ++i) dot += qh[i] * float(kt[i]);
            s[h * bs + t] = dot;
            mx = std::max(mx, dot);
          }
          const float alpha = std::exp(m[h] - mx);
          float* ah = &acc[h * d];
          float sum = l[h] * alpha;
#pragma omp simd
          for (int64_t i = 0; i < d; ++i) ah[i] *= alpha;
          for (int64_t t = 0; t < n; ++t) {
            const float p = std::exp(s[h * bs + t] - mx);
            sum += p;
            const T* vt = vb + t * slot_stride;
#pragma omp simd
            for (int64_t i = 0; i < d; ++i) ah[i] += p * float(vt[i]);
          }
          m[h] = mx;
          l[h] = sum;
        }
      }
      for (int64_t h = 0; h < group; ++h) {
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
        T* o = out + (r * heads + g * group + h) * d;
        for (int64_t i = 0; i < d; ++i) o[i] = T(acc[h * d + i] * inv);
      }
    }
  });
}

torch::Tensor paged_attention_rows(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                   torch::Tensor block_tables, torch::Tensor context_lens,
                                   double scale) {
  TORCH_CHECK(q.is_contiguous() && k_cache.is_contiguous() && v_cache.is_contiguous());
  TORCH_CHECK(block_tables.scalar_type() == torch::kInt32 && context_lens.scalar_type() == torch::kInt32);
  auto tables = block_tables.contiguous();
  auto lens = context_lens.contiguous();
  auto out = torch::empty_like(q);
  const int64_t rows = q.size(0), heads = q.size(1), d = q.size(2);
  const int64_t bs = k_cache.size(1), kv_heads = k_cache.size(2);
  const int64_t max_blocks = tables.size(1);
  if (q.scalar_type() == torch::kFloat32) {
    paged_rows<float>(q.data_ptr<float>(), k_cache.data_ptr<float>(), v_cache.data_ptr<float>(),
                      tables.data_ptr<int>(), lens.data_ptr<int>(), out.data_ptr<float>(), rows,
                      heads, kv_heads, d, bs, max_blocks, float(scale));
  } else {
    TORCH_CHECK(q.scalar_type() == torch::kBFloat16, "fp32 or bf16 only");
    using B = at::BFloat16;
    paged_rows<B>(q.data_ptr<B>(), k_cache.data_ptr<B>(), v_cache.data_ptr<B>(),
                  tables.data_ptr<int>(), lens.data_ptr<int>(), out.data_ptr<B>(), rows, heads,
                  kv_heads, d, bs, max_blocks, float(scale));
  }
  return out;
}
"""


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
        return self._module.paged_attention_rows(
            q, k_cache, v_cache, block_tables, context_lens, scale
        )


def load_paged_kernel(verbose: bool = False) -> PagedKernel | None:
    """Compile (or load the cached build of) the kernel; None, with a warning, if it fails."""
    try:
        from torch.utils.cpp_extension import load_inline

        module = load_inline(
            name="ridgeline_paged_attention_v1",
            cpp_sources=_SOURCE,
            functions=["paged_attention_rows"],
            extra_cflags=["-O3", "-march=native", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
            verbose=verbose,
        )
    except Exception as e:  # compiler missing, headers missing, build error
        warnings.warn(
            f"paged attention kernel unavailable ({type(e).__name__}: {e}); using the gather path",
            stacklevel=2,
        )
        return None
    return PagedKernel(module)
