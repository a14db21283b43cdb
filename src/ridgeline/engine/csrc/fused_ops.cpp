// Fused fp32 elementwise ops for the CPU decode step; see fused_ops.py.
#include "kernels.h"

namespace ridgeline {

// residual += x (when given), in place; then out = the norm of residual, row by row:
//   RMSNorm (b null):   residual · rsqrt(mean(residual²) + eps) · w
//   LayerNorm (b set):  (residual − mean) · rsqrt(var + eps) · w + b
// The variance takes two passes: the one-pass E[x²] − mean² loses digits at large means.
static at::Tensor add_norm(at::Tensor residual, const c10::optional<at::Tensor>& x,
                              const at::Tensor& w, const float* bp, double eps) {
  TORCH_CHECK(residual.is_contiguous() && residual.scalar_type() == at::kFloat);
  const int64_t rows = residual.size(0), n = residual.size(1);
  auto out = at::empty_like(residual);
  float* r = residual.data_ptr<float>();
  const float* xs = nullptr;
  at::Tensor xc;
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

at::Tensor add_rms_norm(at::Tensor residual, c10::optional<at::Tensor> x,
                           at::Tensor w, double eps) {
  return add_norm(residual, x, w, nullptr, eps);
}

at::Tensor add_layer_norm(at::Tensor residual, c10::optional<at::Tensor> x,
                             at::Tensor w, at::Tensor b, double eps) {
  auto bc = b.contiguous();
  TORCH_CHECK(bc.scalar_type() == at::kFloat && bc.numel() == residual.size(1));
  return add_norm(residual, x, w, bc.data_ptr<float>(), eps);
}

// x [T, heads, d] (any strides, last dim contiguous) rotated in place by cos/sin [T, d].
void rope_(at::Tensor x, at::Tensor cos, at::Tensor sin) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.stride(2) == 1);
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
at::Tensor silu_mul(at::Tensor h) {
  TORCH_CHECK(h.is_contiguous() && h.scalar_type() == at::kFloat);
  const int64_t rows = h.size(0), f = h.size(1) / 2;
  auto out = at::empty({rows, f}, h.options());
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
at::Tensor gelu_tanh(at::Tensor h) {
  TORCH_CHECK(h.is_contiguous() && h.scalar_type() == at::kFloat);
  auto out = at::empty_like(h);
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
at::Tensor argmax_rows(at::Tensor x) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == at::kFloat);
  const int64_t rows = x.size(0), n = x.size(1);
  auto out = at::empty({rows}, x.options().dtype(at::kLong));
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

}  // namespace ridgeline
