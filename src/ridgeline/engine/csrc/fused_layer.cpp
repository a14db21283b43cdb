#include "kernels.h"

namespace ridgeline {

// One layer on the residual stream (model.DecoderLayer.forward_fused). w: qkv, o, up, down
// panels and biases, the layer's MLP norm and the next norm (weight, bias); a missing bias is an
// empty tensor, and a norm with a bias is a LayerNorm, without one an RMSNorm.
// dims: heads, kv_heads, head_dim, gated (SwiGLU: 1, tanh GELU: 0), the up projection's width;
// scalars: the two norms' eps, the attention scale.
static c10::optional<at::Tensor> present(const at::Tensor& t) {
  return t.numel() ? c10::optional<at::Tensor>(t) : c10::nullopt;
}

static at::Tensor add_norm_of(at::Tensor residual, at::Tensor x, const at::Tensor& w,
                                 const at::Tensor& b, double eps) {
  return b.numel() ? add_layer_norm(residual, x, w, b, eps) : add_rms_norm(residual, x, w, eps);
}

at::Tensor decode_layer(at::Tensor h, at::Tensor residual, std::vector<at::Tensor> w,
                           std::vector<int64_t> dims, std::vector<double> scalars,
                           c10::optional<at::Tensor> cos, c10::optional<at::Tensor> sin,
                           at::Tensor k_cache, at::Tensor v_cache, at::Tensor slots,
                           at::Tensor tables, at::Tensor lens) {
  TORCH_CHECK(w.size() == 12 && dims.size() == 5 && scalars.size() == 3);
  const int64_t heads = dims[0], kv_heads = dims[1], d = dims[2], t = h.size(0);
  const int64_t q_width = heads * d, kv_width = kv_heads * d;
  auto qkv = linear(h, w[0], present(w[1]), q_width + 2 * kv_width);       // [T, q + 2 kv]
  if (cos.has_value() && sin.has_value())                                 // q and k together
    rope_(qkv.narrow(1, 0, q_width + kv_width).view({t, heads + kv_heads, d}), *cos, *sin);
  auto q = qkv.narrow(1, 0, q_width).view({t, heads, d}).contiguous();     // [T, H, d]
  auto k = qkv.narrow(1, q_width, kv_width).view({t, kv_heads, d});        // [T, kv, d]
  auto v = qkv.narrow(1, q_width + kv_width, kv_width).view({t, kv_heads, d});
  write_kv(k_cache, v_cache, slots, k, v);
  auto a = paged_attention_rows(q, k_cache, v_cache, tables, lens, scalars[2]);  // [T, H, d]
  auto o = linear(a.view({t, q_width}), w[2], present(w[3]), residual.size(1));
  auto h2 = add_norm_of(residual, o, w[8], w[9], scalars[0]);
  auto up = linear(h2, w[4], present(w[5]), dims[4]);                     // [T, 2·ffn] or [T, ffn]
  auto act = dims[3] ? silu_mul(up) : gelu_tanh(up);
  auto m = linear(act, w[6], present(w[7]), residual.size(1));
  return add_norm_of(residual, m, w[10], w[11], scalars[1]);
}

}  // namespace ridgeline
