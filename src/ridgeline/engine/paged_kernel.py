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
−∞ for the running max.

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

// One row = one query token: all its heads at once, so each block's [bs, kv_heads, d] keys and
// values are read front to back, once, in memory order.
template <typename T>
static void paged_rows(const T* q, const T* kc, const T* vc, const int* tables,
                       const int* lens, T* out, int64_t rows, int64_t heads, int64_t kv_heads,
                       int64_t d, int64_t bs, int64_t max_blocks, float scale) {
  const int64_t group = heads / kv_heads;
  const int64_t slot_stride = kv_heads * d;      // one token of one layer: [kv_heads, d]
  const float kFloor = -1e30f;                   // finite "minus infinity" (fast-math safe)
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(heads * d), acc(heads * d), m(heads), l(heads), s(heads * bs);
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t i = 0; i < heads * d; ++i) qf[i] = float(q[r * heads * d + i]) * scale;
      std::fill(acc.begin(), acc.end(), 0.f);
      std::fill(m.begin(), m.end(), kFloor);
      std::fill(l.begin(), l.end(), 0.f);
      const int64_t len = lens[r];
      for (int64_t j = 0; j * bs < len; ++j) {
        const int64_t block = tables[r * max_blocks + j];
        const int64_t n = std::min(bs, len - j * bs);
        const T* kb = kc + block * bs * slot_stride;
        const T* vb = vc + block * bs * slot_stride;
        for (int64_t t = 0; t < n; ++t) {            // s[h, t] = q_h . k_t
          const T* kt = kb + t * slot_stride;
          for (int64_t h = 0; h < heads; ++h) {
            const float* qh = &qf[h * d];
            const T* kh = kt + (h / group) * d;
            float dot = 0.f;
#pragma omp simd reduction(+ : dot)
            for (int64_t i = 0; i < d; ++i) dot += qh[i] * float(kh[i]);
            s[h * bs + t] = dot;
          }
        }
        for (int64_t h = 0; h < heads; ++h) {        // online softmax update
          float* sh = &s[h * bs];
          float mx = m[h];
          for (int64_t t = 0; t < n; ++t) mx = std::max(mx, sh[t]);
          float sum = 0.f;
#pragma omp simd reduction(+ : sum)
          for (int64_t t = 0; t < n; ++t) {
            sh[t] = std::exp(sh[t] - mx);
            sum += sh[t];
          }
          const float alpha = std::exp(m[h] - mx);
          float* ah = &acc[h * d];
#pragma omp simd
          for (int64_t i = 0; i < d; ++i) ah[i] *= alpha;
          l[h] = l[h] * alpha + sum;
          m[h] = mx;
        }
        for (int64_t t = 0; t < n; ++t) {            // acc_h += p[h, t] v_t
          const T* vt = vb + t * slot_stride;
          for (int64_t h = 0; h < heads; ++h) {
            const float p = s[h * bs + t];
            const T* vh = vt + (h / group) * d;
            float* ah = &acc[h * d];
#pragma omp simd
            for (int64_t i = 0; i < d; ++i) ah[i] += p * float(vh[i]);
          }
        }
      }
      for (int64_t h = 0; h < heads; ++h) {
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
        T* o = out + (r * heads + h) * d;
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
            name="ridgeline_paged_attention_v2",
            cpp_sources=_SOURCE,
            functions=["paged_attention_rows"],
            extra_cflags=["-O3", "-march=native", "-ffast-math", "-fopenmp"],
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
