"""One decoder layer of a decode step in one C++ call: the per-layer Python cost, removed.

A decode step at small batch spends 1.5–2 ms of distilgpt2's 13 ms outside its kernels (the
module calls, views and ~10 extension calls per layer between them). Half of that is the weight
stream itself: it evicts the interpreter's working set from L2 and L3 between every two calls,
and a tiny GPT-2's step with nothing else to do takes 0.9 ms warm, 1.8 ms after a 64 MiB read
(docs/engine.md). This module runs ``DecoderLayer.forward_fused`` in C++ on the same kernels —
the panel GEMM, the fused norms and activations, the paged attention and its K/V write —
compiled into one extension from their sources, so the same arithmetic runs in the same order:

    qkv = h · W_qkv (+ b);  rope(q, k) in place            (Llama family)
    write k, v at the step's slots;  a = paged_attention(q)
    h2 = add_norm(residual += a · W_o (+ b))
    m = act(h2 · W_up (+ b)) · W_down (+ b)                 silu·up (SwiGLU) or tanh GELU
    return add_norm(residual += m)                          with the next layer's norm

It applies to fp32 decode steps where every row attends over paged blocks (``all_paged``), the
weights are in panels and the ops are compiled; ``CausalLM`` keeps the Python layers otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ridgeline.engine import fused_ops, paged_kernel, panel_gemm
from ridgeline.engine.cpp_ext import OPENMP, compile_inline
from ridgeline.engine.packing import PanelLinear

if TYPE_CHECKING:
    from ridgeline.engine.model import DecoderLayer

_LAYER = r"""
// One layer on the residual stream (model.DecoderLayer.forward_fused). w: qkv, o, up, down
// panels and biases, the layer's MLP norm and the next norm (weight, bias); a missing bias is an
// empty tensor, and a norm with a bias is a LayerNorm, without one an RMSNorm.
// dims: heads, kv_heads, head_dim, gated (SwiGLU: 1, tanh GELU: 0), the up projection's width;
// scalars: the two norms' eps, the attention scale.
static c10::optional<torch::Tensor> present(const torch::Tensor& t) {
  return t.numel() ? c10::optional<torch::Tensor>(t) : c10::nullopt;
}

static torch::Tensor add_norm_of(torch::Tensor residual, torch::Tensor x, const torch::Tensor& w,
                                 const torch::Tensor& b, double eps) {
  return b.numel() ? add_layer_norm(residual, x, w, b, eps) : add_rms_norm(residual, x, w, eps);
}

torch::Tensor decode_layer(torch::Tensor h, torch::Tensor residual, std::vector<torch::Tensor> w,
                           std::vector<int64_t> dims, std::vector<double> scalars,
                           c10::optional<torch::Tensor> cos, c10::optional<torch::Tensor> sin,
                           torch::Tensor k_cache, torch::Tensor v_cache, torch::Tensor slots,
                           torch::Tensor tables, torch::Tensor lens) {
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
"""

# The kernels' own sources, then the layer: one translation unit, no name in common, built with
# -ffast-math like the fused ops and the paged kernel. The panel GEMM was built without it, but
# its arithmetic is FMA intrinsics only, which -ffast-math leaves alone (the tests check that the
# hidden states are identical).
_SOURCE = panel_gemm._SOURCE + fused_ops._SOURCE + paged_kernel._SOURCE + _LAYER


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """What ``decode_layer`` takes for one layer, gathered once."""

    tensors: list[torch.Tensor]  # qkv, o, up, down (panels, bias), mlp norm, next norm (w, b)
    dims: list[int]  # heads, kv_heads, head_dim, gated, the up projection's width
    scalars: list[float]  # the MLP norm's eps, the next norm's, the attention scale


def _bias(t: torch.Tensor | None) -> torch.Tensor:
    return torch.empty(0) if t is None else t


def _norm(norm: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Weight, bias (empty for an RMSNorm) and eps of a LayerNorm or an RMSNorm."""
    weight, bias, eps = norm.weight, getattr(norm, "bias", None), getattr(norm, "eps", None)
    assert isinstance(weight, torch.Tensor) and isinstance(eps, float)
    return weight.detach(), _bias(None if bias is None else bias.detach()), eps


def layer_weights(layer: DecoderLayer, next_norm: torch.nn.Module) -> LayerWeights | None:
    """The layer's operands, or None where it does not fit (weights not in panels, an
    activation other than SwiGLU's silu or tanh GELU)."""
    attn, mlp = layer.attn, layer.mlp
    linears = (attn.qkv, attn.o_proj, mlp.up, mlp.down)
    if not all(isinstance(x, PanelLinear) for x in linears):
        return None
    if not ((mlp.gated and mlp.silu) or (not mlp.gated and mlp.gelu_tanh)):
        return None
    tensors: list[torch.Tensor] = []
    for lin in linears:
        assert isinstance(lin, PanelLinear)
        tensors += [lin.panels, _bias(lin.bias)]
    w2, b2, eps2 = _norm(layer.mlp_norm)
    wn, bn, epsn = _norm(next_norm)
    tensors += [w2, b2, wn, bn]
    dims = [attn.num_heads, attn.kv_heads, attn.head_dim, int(mlp.gated), mlp.up.out_features]
    scale = attn.head_dim**-0.5  # as PagedKernel computes it
    return LayerWeights(tensors, dims, [eps2, epsn, scale])


class FusedLayer:
    """The compiled layer: ``run`` one decode layer on the residual stream."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def run(
        self,
        h: torch.Tensor,
        residual: torch.Tensor,
        weights: LayerWeights,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slots: torch.Tensor,
        tables: torch.Tensor,
        lens: torch.Tensor,
    ) -> torch.Tensor:
        """``h`` [T, hidden] (this layer's normed input); adds the layer to ``residual`` in
        place and returns the next norm of it."""
        cos, sin = rope if rope is not None else (None, None)
        return self._module.decode_layer(
            h, residual, weights.tensors, weights.dims, weights.scalars, cos, sin,
            k_cache, v_cache, slots, tables, lens,
        )  # fmt: skip


def load_fused_layer(verbose: bool = False) -> FusedLayer | None:
    """Compile (or load the cached build of) the layer; None, with a warning, if that fails or
    the panel GEMM does not apply (no AVX-512)."""
    module = compile_inline(
        "ridgeline_fused_layer_v6",
        _SOURCE,
        ["decode_layer", "available"],
        ["-std=c++17", "-ffast-math", *OPENMP],
        OPENMP,
        fallback="running the layers in Python",
        verbose=verbose,
    )
    return FusedLayer(module) if module is not None and module.available() else None
