"""Transformer architectures as data: the shapes that set FLOPs, bytes and KV size.

A ``ModelSpec`` is built from a Hugging Face ``config.json`` (see ``hf_config``) or from the
shipped catalog. Per-layer differences (sliding-window vs global attention, dense vs MoE MLP) are
kept in ``layers``; parameter counts live in ``params``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Attention(StrEnum):
    """How keys and values are shared across query heads, which sets the KV cache size."""

    MHA = "mha"  # one KV head per query head
    GQA = "gqa"  # groups of query heads share a KV head
    MQA = "mqa"  # all query heads share one KV head
    MLA = "mla"  # a compressed latent per token (DeepSeek-V2/V3)


class Norm(StrEnum):
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class Position(StrEnum):
    LEARNED = "learned"
    ROPE = "rope"


@dataclass(frozen=True, slots=True)
class MLASpec:
    """Multi-head latent attention ranks (DeepSeek-V2, arXiv:2405.04434 §2.1)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_width(self) -> int:
        """Elements cached per token per layer: the latent plus the shared RoPE key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True, slots=True)
class MoESpec:
    """Mixture-of-experts MLP: routed experts, top-k, and always-on shared experts.

    ``shared_ffn`` is the total intermediate size of the shared MLP (0 when there is none);
    DeepSeek's ``n_shared_experts`` experts are one MLP of ``n_shared * moe_intermediate_size``.
    """

    num_experts: int
    top_k: int
    expert_ffn: int
    shared_ffn: int = 0
    router_bias: bool = False  # DeepSeek-V3 e_score_correction_bias
    shared_expert_gate: bool = False  # Qwen2-MoE's sigmoid gate on the shared expert


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """What differs from layer to layer: attention window (``None`` = global) and MoE MLP."""

    window: int | None = None
    moe: bool = False


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer's shapes.

    Attributes:
        head_dim: per-head dimension of queries/keys/values (MLA: see ``mla``).
        ffn: intermediate size of a dense MLP layer.
        gated_mlp: SwiGLU/GeGLU (three matrices) instead of two.
        norms_per_layer: 2 for most models, 4 for Gemma-2 (pre and post norms).
        layers: one ``LayerSpec`` per layer.
    """

    name: str
    family: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn: int
    vocab_size: int
    max_position_embeddings: int
    attention: Attention
    layers: tuple[LayerSpec, ...]
    gated_mlp: bool = True
    activation: str = "silu"
    norm: Norm = Norm.RMSNORM
    position: Position = Position.ROPE
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    tied_embeddings: bool = False
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: Mapping[str, Any] | None = None
    mla: MLASpec | None = None
    moe: MoESpec | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and any(layer.moe for layer in self.layers)

    @property
    def kv_heads_cached(self) -> int:
        """KV heads the cache stores per layer (MLA stores one latent, not ``num_kv_heads``)."""
        return 1 if self.attention is Attention.MLA else self.num_kv_heads

    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Elements cached per token per layer.

        Standard attention: K and V, ``2 × kv_heads × head_dim``; MLA: ``kv_lora_rank +
        qk_rope_head_dim`` (DeepSeek-V2 §2.1.2, Table 1).
        """
        if self.mla is not None:
            return self.mla.cache_width
        return 2 * self.num_kv_heads * self.head_dim

    def with_kv_heads(self, num_kv_heads: int, name: str | None = None) -> ModelSpec:
        """The same model with a different number of KV heads (MHA/GQA/MQA variants)."""
        from dataclasses import replace

        attn = attention_kind(self.num_heads, num_kv_heads)
        return replace(self, num_kv_heads=num_kv_heads, attention=attn, name=name or self.name)


def attention_kind(num_heads: int, num_kv_heads: int) -> Attention:
    """MHA when every query head has its KV head, MQA with one KV head, GQA otherwise."""
    if num_kv_heads == num_heads:
        return Attention.MHA
    if num_kv_heads == 1:
        return Attention.MQA
    return Attention.GQA
