"""Fused fp32 elementwise ops for the CPU decode step: one call where torch takes five to ten.

At decode the tensors between the matmuls are tiny (``[B, hidden]``), so their cost is the
dispatch, not the arithmetic: torch's RMSNorm on the CPU is eight aten calls (pow, mean, add,
rsqrt, mul, mul and two copies), RoPE in the rotate-half form six, SwiGLU three. Over 24
layers of llama-350m that was ~7 ms of a 177 ms step at batch 16 (docs/engine.md). Each op
here is one loop over the rows:

    add_rms_norm:  r ← r + x;  y = r / sqrt(mean(r²) + eps) · w      (Zhang & Sennrich 2019)
    rope:          x ← x·cos + rotate_half(x)·sin, in place           (Su et al. 2021)
    silu_mul:      y = silu(h[:, :f]) · h[:, f:]                      (Shazeer 2020)
    add_layer_norm: r ← r + x;  y = (r − mean) / sqrt(var + eps) · w + b  (Ba et al. 2016)
    gelu_tanh:     y = x · sigmoid(2·sqrt(2/π)(x + 0.044715x³))       (Hendrycks & Gimpel 2016)
    argmax_rows:   the greedy token of each row of logits

Compiled with ``load_inline`` (no AVX-512 requirement: plain loops the compiler vectorises);
``load_fused_ops`` returns None without a compiler and the model keeps the torch path.
"""

from __future__ import annotations

from typing import Any

import torch

from ridgeline.engine.cpp_ext import OPENMP, compile_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>

// residual += x (when given), in place; then out = the norm of residual, row by row:
//   RMSNorm (b null):   residual · rsqrt(mean(residual²) + eps) · w
//   LayerNorm (b set):  (residual − mean) · rsqrt(var + eps) · w + b
// The variance takes two passes: the one-pass E[x²] − mean² loses digits at large means.
static torch::Tensor add_norm(torch::Tensor residual, const c10::optional<torch::Tensor>& x,
                              const torch::Tensor& w, const float* bp, double eps) {
  TORCH_CHECK(residual.is_contiguous() && residual.scalar_type() == torch::kFloat32);
  const int64_t rows = residual.size(0), n = residual.size(1);
  auto out = torch::empty_like(residual);
  float* r = residual.data_ptr<float>();
  const float* xs = nullptr;
  torch::Tensor xc;
  if (x.has_value()) { xc = x->contiguous(); xs = xc.data_ptr<float>(); }
  const float* wp = w.data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* ri = r + i * n;
      if (xs) {
        const float* xi = xs + i * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) ri[j] += xi[j];
      }
      float mean = 0.f;
      if (bp) {
#pragma omp simd reduction(+ : mean)
        for (int64_t j = 0; j < n; ++j) mean += ri[j];
        mean /= float(n);
      }
      float ss = 0.f;
#pragma omp simd reduction(+ : ss)
      for (int64_t j = 0; j < n; ++j) ss += (ri[j] - mean) * (ri[j] - mean);
      const float inv = 1.f / std::sqrt(ss / float(n) + float(eps));
      float* oi = o + i * n;
      if (bp) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) oi[j] = (ri[j] - mean) * inv * wp[j] + bp[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) oi[j] = ri[j] * inv * wp[j];
      }
    }
  });
  return out;
}

torch::Tensor add_rms_norm(torch::Tensor residual, c10::optional<torch::Tensor> x,
                           torch::Tensor w, double eps) {
  return add_norm(residual, x, w, nullptr, eps);
}

torch::Tensor add_layer_norm(torch::Tensor residual, c10::optional<torch::Tensor> x,
                             torch::Tensor w, torch::Tensor b, double eps) {
  auto bc = b.contiguous();
  TORCH_CHECK(bc.scalar_type() == torch::kFloat32 && bc.numel() == residual.size(1));
  return add_norm(residual, x, w, bc.data_ptr<float>(), eps);
}

// x [T, heads, d] (any strides, last dim contiguous) rotated in place by cos/sin [T, d].
void rope_(torch::Tensor x, torch::Tensor cos, torch::Tensor sin) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.stride(2) == 1);
  TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous());
  const int64_t t_len = x.size(0), heads = x.size(1), d = x.size(2), half = d / 2;
  const int64_t st = x.stride(0), sh = x.stride(1);
  float* xp = x.data_ptr<float>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  for (int64_t t = 0; t < t_len; ++t) {
    const float* c = cp + t * d;
    const float* s = sp + t * d;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = xp + t * st + h * sh;
#pragma omp simd
      for (int64_t j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = a * c[j] - b * s[j];
        v[j + half] = b * c[j + half] + a * s[j + half];
      }
    }
  }
}

// h [T, 2f] → silu(h[:, :f]) * h[:, f:]  [T, f]
torch::Tensor silu_mul(torch::Tensor h) {
  TORCH_CHECK(h.is_contiguous() && h.scalar_type() == torch::kFloat32);
  const int64_t rows = h.size(0), f = h.size(1) / 2;
  auto out = torch::empty({rows, f}, h.options());
  const float* hp = h.data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* g = hp + i * 2 * f;
      const float* u = g + f;
      float* oi = o + i * f;
#pragma omp simd
      for (int64_t j = 0; j < f; ++j) {  // clamped: -ffast-math assumes no infinities
        oi[j] = g[j] / (1.f + std::exp(std::min(-g[j], 88.f))) * u[j];
      }
    }
  });
  return out;
}
// GELU, tanh form: x · sigmoid(2u) = x / (1 + e^(−2u)), u = sqrt(2/π)(x + 0.044715 x³).
torch::Tensor gelu_tanh(torch::Tensor h) {
  TORCH_CHECK(h.is_contiguous() && h.scalar_type() == torch::kFloat32);
  auto out = torch::empty_like(h);
  const float* hp = h.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = h.numel();
  const float c = 0.7978845608028654f;  // sqrt(2/π)
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {  // clamped: -ffast-math assumes no infinities
    const float x = hp[j];
    const float u2 = 2.f * c * (x + 0.044715f * x * x * x);
    o[j] = x / (1.f + std::exp(std::min(-u2, 88.f)));
  }
  return out;
}

// The index of each row's largest value (the first, on ties): [rows, n] → [rows] int64.
torch::Tensor argmax_rows(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat32);
  const int64_t rows = x.size(0), n = x.size(1);
  auto out = torch::empty({rows}, x.options().dtype(torch::kLong));
  const float* xp = x.data_ptr<float>();
  int64_t* op = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = xp + i * n;
    float mx = xi[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, xi[j]);
    int64_t at = 0;
    while (at < n && xi[at] != mx) ++at;  // mx is one of the row's values
    op[i] = at < n ? at : 0;  // NaN rows: unspecified, but in range
  }
  return out;
}
"""


class FusedOps:
    """The compiled ops (fp32, CPU)."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def add_rms_norm(
        self, residual: torch.Tensor, x: torch.Tensor | None, weight: torch.Tensor, eps: float
    ) -> torch.Tensor:
        """``residual += x`` in place (if given), then RMSNorm of it: [T, hidden]."""
        return self._module.add_rms_norm(residual, x, weight, eps)

    def rope_(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
        """Rotate ``x`` [T, heads, d] in place (rotate-half form) by ``cos``/``sin`` [T, d]."""
        self._module.rope_(x, cos, sin)

    def silu_mul(self, h: torch.Tensor) -> torch.Tensor:
        """SwiGLU's ``silu(gate) · up`` for ``h`` = [gate | up] [T, 2f] → [T, f]."""
        return self._module.silu_mul(h)

    def add_layer_norm(
        self,
        residual: torch.Tensor,
        x: torch.Tensor | None,
        weight: torch.Tensor,
        bias: torch.Tensor,
        eps: float,
    ) -> torch.Tensor:
        """``residual += x`` in place (if given), then LayerNorm of it: [T, hidden]."""
        return self._module.add_layer_norm(residual, x, weight, bias, eps)

    def gelu_tanh(self, h: torch.Tensor) -> torch.Tensor:
        """GELU in the tanh form (GPT-2's ``gelu_new``), elementwise."""
        return self._module.gelu_tanh(h)

    def argmax_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The first index of each row's maximum: [N, vocab] → [N] (torch's ``argmax(-1)``
        takes ~3.4 ns per element here, 0.7 ms for 16 rows of GPT-2's vocabulary)."""
        return self._module.argmax_rows(x)


def load_fused_ops(verbose: bool = False) -> FusedOps | None:
    """Compile (or load the cached build of) the ops; None, with a warning, if that fails."""
    module = compile_inline(
        "ridgeline_fused_ops_v3",
        _SOURCE,
        ["add_rms_norm", "rope_", "silu_mul", "add_layer_norm", "gelu_tanh", "argmax_rows"],
        ["-ffast-math", *OPENMP],
        OPENMP,
        fallback="using torch's ops",
        verbose=verbose,
    )
    return None if module is None else FusedOps(module)
