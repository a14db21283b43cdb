"""Parameter counts, per component, computed from a ``ModelSpec``.

The counts equal the published ones exactly (tested): gpt2 124,439,808; llama-2-7b
6,738,415,616; llama-3.1-8b 8,030,261,248; mistral-7b 7,241,732,096; mixtral-8x7b
46,702,792,704; deepseek-v3 671,026,419,200 (main model, without the multi-token-prediction
module). Tied embeddings are counted once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ridgeline.specs.model import ModelSpec, Norm


def attention_params(m: ModelSpec) -> int:
    """Weights (and biases) of one attention block.

    MLA follows DeepSeek-V2 §2.1: q_a/q_b (or q_proj without q LoRA), kv_a_proj_with_mqa,
    kv_b_proj, o_proj, plus the two LoRA RMSNorms.
    """
    h = m.hidden_size
    if m.mla is not None:
        a = m.mla
        q_out = m.num_heads * a.qk_head_dim
        q = (
            h * q_out
            if a.q_lora_rank is None
            else h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * q_out
        )
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv_b = a.kv_lora_rank * m.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
        o = m.num_heads * a.v_head_dim * h
        return q + kv_a + kv_b + o
    q_dim = m.num_heads * m.head_dim
    kv_dim = m.num_kv_heads * m.head_dim
    weights = h * q_dim + 2 * h * kv_dim + q_dim * h
    bias = (q_dim + 2 * kv_dim if m.qkv_bias else 0) + (h if m.o_bias else 0)
    qk_norm = 2 * m.head_dim if m.qk_norm else 0
    return weights + bias + qk_norm


def mlp_params(m: ModelSpec, ffn: int) -> int:
    """One MLP of intermediate size ``ffn``: 3 matrices if gated (SwiGLU), else 2."""
    h = m.hidden_size
    if m.gated_mlp:
        return 3 * h * ffn + ((2 * ffn + h) if m.mlp_bias else 0)
    return 2 * h * ffn + ((ffn + h) if m.mlp_bias else 0)


def router_params(m: ModelSpec) -> int:
    """Router (gate) of one MoE layer, plus DeepSeek-V3's score-correction bias and the
    Qwen2-MoE shared-expert gate."""
    if m.moe is None:
        return 0
    e = m.moe
    return (
        m.hidden_size * e.num_experts
        + (e.num_experts if e.router_bias else 0)
        + (m.hidden_size if e.shared_expert_gate else 0)
    )


def norm_params_per_layer(m: ModelSpec) -> int:
    """Norm weights in one layer (LayerNorm has a bias too)."""
    per = 2 * m.hidden_size if m.norm is Norm.LAYERNORM else m.hidden_size
    return m.norms_per_layer * per


@dataclass(frozen=True, slots=True)
class ParamCounts:
    """Parameters by component. ``active`` counts what one token uses (top-k routed experts)."""

    total: int
    active: int
    embedding: int
    positions: int
    lm_head: int
    attention: int
    dense_mlp: int
    routed_experts: int
    shared_experts: int
    routers: int
    norms: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def param_counts(m: ModelSpec) -> ParamCounts:
    """Count parameters of ``m`` by component (see module docstring for the anchors)."""
    num_moe = sum(1 for layer in m.layers if layer.moe)
    num_dense = m.num_layers - num_moe
    embedding = m.vocab_size * m.hidden_size
    positions = m.max_position_embeddings * m.hidden_size if m.position.value == "learned" else 0
    lm_head = 0 if m.tied_embeddings else embedding
    final_norm = norm_params_per_layer(m) // m.norms_per_layer
    attention = m.num_layers * attention_params(m)
    dense_mlp = num_dense * mlp_params(m, m.ffn)
    routed = shared = routers = routed_active = 0
    if m.moe is not None and num_moe:
        per_expert = mlp_params(m, m.moe.expert_ffn)
        routed = num_moe * m.moe.num_experts * per_expert
        routed_active = num_moe * m.moe.top_k * per_expert
        shared = num_moe * (mlp_params(m, m.moe.shared_ffn) if m.moe.shared_ffn else 0)
        routers = num_moe * router_params(m)
    norms = m.num_layers * norm_params_per_layer(m) + final_norm
    common = embedding + positions + lm_head + attention + dense_mlp + shared + routers + norms
    return ParamCounts(
        total=common + routed,
        active=common + routed_active,
        embedding=embedding,
        positions=positions,
        lm_head=lm_head,
        attention=attention,
        dense_mlp=dense_mlp,
        routed_experts=routed,
        shared_experts=shared,
        routers=routers,
        norms=norms,
    )
