"""Decode-shaped fp32 matmuls for the CPU: ``x [M, in] · Wᵀ`` with ``W`` packed in column panels.

A decode step multiplies a few rows (one per sequence) by every weight matrix. At one row that is
a GEMV bound by the memory bandwidth; at 16 rows it does 8 FLOPs per weight byte, above this
CPU's one-thread ridge (~95 GFLOP/s ÷ ~21 GB/s ≈ 4.5), so it is bound by the FMA units. oneDNN's
prepacked layouts serve one end each (``packing``). This kernel serves both from one copy:

    W [N, K]  →  panels [⌈N/16⌉, K, 16]        (16 output columns, contiguous along K)

    for each group of NP panels:                 acc[NP][MR] in zmm registers
        for k in 0 … K−1:
            w_j = panel_j[k, 0:16]                one 64-byte load per panel
            acc[j][m] += x[m, k] · w_j            MR broadcast-FMAs per load

Each panel is one sequential stream, so NP panels are NP streams. Few rows are memory-bound:
the more streams in flight, each prefetched only a few lines ahead, the faster the read (eight
streams at one row). As rows grow, the accumulators take the registers and NP shrinks; from 13
rows on, one panel with up to sixteen accumulators is FMA-bound. Rows beyond 16 run as further
chunks of 16, each re-reading the panels: at 8 FLOPs per byte that stays under the bandwidth, so
a long prefill chunk is FMA-bound too. Measured on distilgpt2's and llama-350m's shapes, one
thread (docs/engine.md): 27–28 GB/s at one row (four streams 16 lines ahead: 23–25; oneDNN's
one-row layout: 15–21), 80–98 GFLOP/s at 16 rows (oneDNN: 67–87).

AVX-512 only, compiled with ``load_inline`` like ``paged_kernel``; elsewhere ``load_panel_gemm``
returns None and ``packing`` uses oneDNN.
"""

from __future__ import annotations

from typing import Any

import torch

from ridgeline.engine.cpp_ext import OPENMP, compile_inline
from ridgeline.engine.huge_pages import huge_page_copy

PANEL = 16  # output columns per panel: one zmm register of fp32

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>

// y[0:MR, panels p .. p+NP) = bias + x[0:MR, :] · panels; bias may be null. x is read in place
// (row m at x + m·ldx) up to 8 rows; more rows are first transposed (x[m, k] at x[16·k + m]):
// sixteen broadcasts a row stride apart alias in L1 (half speed at K = 1024, 16 rows), and
// transposing a few rows costs more than their strided loads (4–11% slower at 4 rows).
template <int MR, int NP, int PFD>
static inline void tile(const float* x, int64_t ldx, const float* bias, const float* wp, float* y,
                        int64_t p, int64_t k_len, int64_t n, int64_t ldy) {
  __m512 acc[NP][MR];
  for (int j = 0; j < NP; ++j) {
    const int64_t col = (p + j) * 16;
    const __mmask16 mask = col + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - col)) - 1u);
    const __m512 b0 = bias ? _mm512_maskz_loadu_ps(mask, bias + col) : _mm512_setzero_ps();
    for (int m = 0; m < MR; ++m) acc[j][m] = b0;
  }
  const float* w = wp + p * k_len * 16;
  for (int64_t k = 0; k < k_len; ++k) {
    const float* xk = MR > 8 ? x + 16 * k : x + k;
#pragma GCC unroll 16
    for (int j = 0; j < NP; ++j) {
      const float* wk = w + (j * k_len + k) * 16;
      _mm_prefetch(reinterpret_cast<const char*>(wk + PFD), _MM_HINT_T0);
      const __m512 wv = _mm512_loadu_ps(wk);
#pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) acc[j][m] = _mm512_fmadd_ps(_mm512_set1_ps(xk[MR > 8 ? m : m * ldx]), wv, acc[j][m]);
    }
  }
  for (int j = 0; j < NP; ++j) {
    const int64_t col = (p + j) * 16;
    const __mmask16 mask = col + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - col)) - 1u);
    for (int m = 0; m < MR; ++m) _mm512_mask_storeu_ps(y + m * ldy + col, mask, acc[j][m]);
  }
}

// One call's operands: rows of x (stride ldx), the panels, optional bias, y (stride ldy).
struct Operands {
  const float* x;
  int64_t ldx;
  const float* bias;
  const float* wp;
  float* y;
  int64_t panels, k_len, n, ldy;
};

// All panels for one chunk of MR rows: groups of NP panels, then the remainder one at a time.
template <int MR, int NP, int PFD>
static void chunk(const Operands& o) {
  const int64_t groups = o.panels / NP;
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g)
      tile<MR, NP, PFD>(o.x, o.ldx, o.bias, o.wp, o.y, g * NP, o.k_len, o.n, o.ldy);
  });
  for (int64_t p = groups * NP; p < o.panels; ++p)
    tile<MR, 1, PFD>(o.x, o.ldx, o.bias, o.wp, o.y, p, o.k_len, o.n, o.ldy);
}

// Streams per tile by rows: as many panels as the registers hold (NP·MR accumulators ≤ 24 of 32
// zmm), each prefetched 4 lines ahead. Measured (docs/engine.md): at one row, eight streams 4
// lines ahead read 27–28 GB/s where four streams 16 lines ahead read 23–25; at 4–8 rows, 3–6
// streams gain 10–36%. From 13 rows on, one panel's 16·MR accumulators fill the file.
template <int MR>
static void chunk_for(const Operands& o) {
  if constexpr (MR <= 3) chunk<MR, 8, 64>(o);
  else if constexpr (MR == 4) chunk<MR, 6, 64>(o);
  else if constexpr (MR <= 6) chunk<MR, 4, 64>(o);
  else if constexpr (MR <= 8) chunk<MR, 3, 64>(o);
  else if constexpr (MR <= 12) chunk<MR, 2, 128>(o);
  else chunk<MR, 1, 1024>(o);
}

using ChunkFn = void (*)(const Operands&);
static const ChunkFn kChunks[16] = {
    chunk_for<1>, chunk_for<2>, chunk_for<3>, chunk_for<4>, chunk_for<5>, chunk_for<6>,
    chunk_for<7>, chunk_for<8>, chunk_for<9>, chunk_for<10>, chunk_for<11>, chunk_for<12>,
    chunk_for<13>, chunk_for<14>, chunk_for<15>, chunk_for<16>};
#endif

bool available() {
#if defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

// [N, K] → [⌈N/16⌉, K, 16], columns past N zero.
torch::Tensor pack(torch::Tensor w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat32);
  const int64_t n = w.size(0), k = w.size(1), panels = (n + 15) / 16;
  auto padded = torch::zeros({panels * 16, k}, w.options());
  padded.narrow(0, 0, n).copy_(w);
  return padded.view({panels, 16, k}).transpose(1, 2).contiguous();
}

torch::Tensor linear(torch::Tensor x, torch::Tensor panels, c10::optional<torch::Tensor> bias,
                     int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && panels.is_contiguous());
  const int64_t rows = x.size(0), k = x.size(1);
  TORCH_CHECK(panels.size(1) == k && panels.size(2) == 16);
  auto y = torch::empty({rows, n}, x.options());
#if defined(__AVX512F__)
  auto xc = x.contiguous();
  c10::optional<torch::Tensor> bc;
  if (bias.has_value()) bc = bias->contiguous();
  TORCH_CHECK(!bc || (bc->scalar_type() == torch::kFloat32 && bc->numel() == n));
  const float* xp = xc.data_ptr<float>();
  std::vector<float> xt;
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {  // chunks of up to 16 rows, each over all panels
    const int64_t mr = std::min<int64_t>(16, rows - r0);
    const float* xr = xp + r0 * k;
    if (mr > 8) {                               // xt[kk, m] = x[r0 + m, kk]
      xt.resize(k * 16);
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t m = 0; m < mr; ++m) xt[kk * 16 + m] = xr[m * k + kk];
      xr = xt.data();
    }
    const Operands o{xr, k, bc ? bc->data_ptr<float>() : nullptr,
                     panels.data_ptr<float>(), y.data_ptr<float>() + r0 * n, panels.size(0), k,
                     n, n};
    kChunks[mr - 1](o);
  }
#else
  TORCH_CHECK(false, "panel_gemm needs AVX-512");
#endif
  return y;
}
"""


class PanelGemm:
    """The compiled kernel: ``pack`` a weight once, then ``linear`` any number of rows."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def pack(self, w: torch.Tensor) -> torch.Tensor:
        """``[N, K]`` fp32 → panels ``[⌈N/16⌉, K, 16]``, on huge pages (``huge_pages``)."""
        return huge_page_copy(self._module.pack(w.detach().float().contiguous()))

    def linear(
        self, x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None, n: int
    ) -> torch.Tensor:
        """``x`` [M, K] → [M, n]."""
        return self._module.linear(x, panels, bias, n)


def load_panel_gemm(verbose: bool = False) -> PanelGemm | None:
    """Compile (or load the cached build of) the kernel; None where it does not apply."""
    module = compile_inline(
        "ridgeline_panel_gemm_v4",
        _SOURCE,
        ["pack", "linear", "available"],
        ["-std=c++17", *OPENMP],
        OPENMP,
        fallback="using oneDNN's layouts",
        verbose=verbose,
    )
    return PanelGemm(module) if module is not None and module.available() else None
