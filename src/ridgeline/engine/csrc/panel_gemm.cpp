// Decode-shaped fp32 GEMMs, x [M, K] · Wᵀ with W packed in 16-column panels; see panel_gemm.py.
#include "kernels.h"

namespace ridgeline {

#if defined(__AVX512F__)

// y[0:MR, panels p, p + stride, … p + (NP−1)·stride] = bias + x[0:MR, :] · panels; bias may be null. x is read in place
// (row m at x + m·ldx) up to 8 rows; more rows are first transposed (x[m, k] at x[16·k + m]):
// sixteen broadcasts a row stride apart alias in L1 (half speed at K = 1024, 16 rows), and
// transposing a few rows costs more than their strided loads (4–11% slower at 4 rows).
template <int MR, int NP, int PFD>
static inline void tile(const float* x, int64_t ldx, const float* bias, const float* wp, float* y,
                        int64_t p, int64_t stride, int64_t k_len, int64_t n, int64_t ldy) {
  __m512 acc[NP][MR];
  for (int j = 0; j < NP; ++j) {
    const int64_t col = (p + j * stride) * 16;
    const __mmask16 mask = col + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - col)) - 1u);
    const __m512 b0 = bias ? _mm512_maskz_loadu_ps(mask, bias + col) : _mm512_setzero_ps();
    for (int m = 0; m < MR; ++m) acc[j][m] = b0;
  }
  const float* w = wp + p * k_len * 16;
  for (int64_t k = 0; k < k_len; ++k) {
    const float* xk = MR > 8 ? x + 16 * k : x + k;
#pragma GCC unroll 16
    for (int j = 0; j < NP; ++j) {
      const float* wk = w + (j * stride * k_len + k) * 16;
      if constexpr (PFD > 0) _mm_prefetch(reinterpret_cast<const char*>(wk + PFD), _MM_HINT_T0);
      const __m512 wv = _mm512_loadu_ps(wk);
#pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) acc[j][m] = _mm512_fmadd_ps(_mm512_set1_ps(xk[MR > 8 ? m : m * ldx]), wv, acc[j][m]);
    }
  }
  for (int j = 0; j < NP; ++j) {
    const int64_t col = (p + j * stride) * 16;
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

// All panels for one chunk of MR rows, NP streams at a time. Each stream reads a run of up to
// kRun consecutive panels (panel g + 1 follows panel g in memory), so the hardware prefetcher
// keeps it from tile to tile: distilgpt2's lm_head (48 KiB panels) 28 → 31 GB/s. Runs are
// interleaved in blocks of NP·kRun panels rather than one run per stream over the whole matrix:
// streams a large power of two apart (two halves of a 1 GiB weight, 512 MiB) read at 19–22
// GB/s against 33 for runs of 64 (docs/engine.md). Shorter tails take shorter runs; fewer than
// NP panels left go one at a time.
constexpr int64_t kRun = 64;

template <int MR, int NP, int PFD>
static void chunk(const Operands& o) {
  int64_t base = 0;
  while (o.panels - base >= NP) {
    const int64_t run = std::min<int64_t>(kRun, (o.panels - base) / NP);
    const int64_t blocks = (o.panels - base) / (NP * run);
    at::parallel_for(0, blocks * run, 1, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {  // stream j reads panel p + j·run
        const int64_t p = base + (g / run) * NP * run + g % run;
        tile<MR, NP, PFD>(o.x, o.ldx, o.bias, o.wp, o.y, p, run, o.k_len, o.n, o.ldy);
      }
    });
    base += blocks * NP * run;
  }
  for (int64_t p = base; p < o.panels; ++p)
    tile<MR, 1, PFD>(o.x, o.ldx, o.bias, o.wp, o.y, p, 0, o.k_len, o.n, o.ldy);
}

// Streams per tile by rows, measured on distilgpt2's and llama-350m's matrices with the panels
// on huge pages, in runs (docs/engine.md): at 1–5 rows two streams without software prefetch
// read 29–33 GB/s, within 1–4% of ``sum`` over 1 GiB in the same minute at 1–4 rows and 7% at
// 5 (at 4 rows, six streams 4 lines ahead read 29–30; at one row on 4 KiB pages without runs
// eight streams were best, 27–28). At 6–8 rows 3–4 streams 4 lines ahead; the FMAs start to bound them. From 13
// rows on, one panel's 16·MR accumulators fill the register file.
template <int MR>
static void chunk_for(const Operands& o) {
  if constexpr (MR <= 5) chunk<MR, 2, 0>(o);
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

// [N, K] → [⌈N/16⌉, K, 16], columns past N zero.
at::Tensor pack(at::Tensor w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kFloat);
  const int64_t n = w.size(0), k = w.size(1), panels = (n + 15) / 16;
  auto padded = at::zeros({panels * 16, k}, w.options());
  padded.narrow(0, 0, n).copy_(w);
  return padded.view({panels, 16, k}).transpose(1, 2).contiguous();
}

at::Tensor linear(at::Tensor x, at::Tensor panels, c10::optional<at::Tensor> bias,
                     int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && panels.is_contiguous());
  const int64_t rows = x.size(0), k = x.size(1);
  TORCH_CHECK(panels.size(1) == k && panels.size(2) == 16);
  auto y = at::empty({rows, n}, x.options());
#if defined(__AVX512F__)
  auto xc = x.contiguous();
  c10::optional<at::Tensor> bc;
  if (bias.has_value()) bc = bias->contiguous();
  TORCH_CHECK(!bc || (bc->scalar_type() == at::kFloat && bc->numel() == n));
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

}  // namespace ridgeline
