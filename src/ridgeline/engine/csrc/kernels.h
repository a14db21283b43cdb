// ridgeline's CPU kernels: what the translation units share, and every function they export.
//
// One extension module, built from these sources with one set of flags (kernel_build.py):
//   paged_attention.cpp   paged attention over KV blocks read in place, and the K/V slot write
//   panel_gemm.cpp        decode-shaped fp32 GEMMs on weights packed in 16-column panels
//   fused_ops.cpp         fused norms + residual, RoPE, SwiGLU, tanh GELU, the greedy argmax
//   fused_layer.cpp       one decoder layer of a decode step on the kernels above
//   bindings.cpp          the Python bindings (the only unit that includes torch/extension.h)
// The AVX-512 paths compile where the target has AVX-512F (-march=native on such a CPU); the
// portable build (-march=x86-64-v3 or no -march) takes the plain loops the compiler vectorises.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ridgeline {

// Whether this build targets AVX-512F: the vectorised attention and the panel GEMM exist only
// then (the engine packs weights for oneDNN and runs its layers in Python otherwise).
constexpr bool kHasAvx512 =
#if defined(__AVX512F__)
    true;
#else
    false;
#endif

inline bool has_avx512() { return kHasAvx512; }

// paged_attention.cpp
at::Tensor paged_attention_rows(at::Tensor q, at::Tensor k_cache, at::Tensor v_cache,
                                at::Tensor block_tables, at::Tensor context_lens, double scale);
void write_kv(at::Tensor kc, at::Tensor vc, at::Tensor slots, at::Tensor k, at::Tensor v);

// panel_gemm.cpp
at::Tensor pack(at::Tensor w);
at::Tensor linear(at::Tensor x, at::Tensor panels, c10::optional<at::Tensor> bias, int64_t n);

// fused_ops.cpp
at::Tensor add_rms_norm(at::Tensor residual, c10::optional<at::Tensor> x, at::Tensor w,
                        double eps);
at::Tensor add_layer_norm(at::Tensor residual, c10::optional<at::Tensor> x, at::Tensor w,
                          at::Tensor b, double eps);
void rope_(at::Tensor x, at::Tensor cos, at::Tensor sin);
at::Tensor silu_mul(at::Tensor h);
at::Tensor gelu_tanh(at::Tensor h);
at::Tensor argmax_rows(at::Tensor x);

// fused_layer.cpp
at::Tensor decode_layer(at::Tensor h, at::Tensor residual, std::vector<at::Tensor> w,
                        std::vector<int64_t> dims, std::vector<double> scalars,
                        c10::optional<at::Tensor> cos, c10::optional<at::Tensor> sin,
                        at::Tensor k_cache, at::Tensor v_cache, at::Tensor slots,
                        at::Tensor tables, at::Tensor lens);

}  // namespace ridgeline
