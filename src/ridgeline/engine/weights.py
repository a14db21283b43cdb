"""Weights for ``CausalLM``: seeded random ones, or a local Hugging Face safetensors directory.

Name mapping (engine ← Hugging Face), per layer ``i``; ``cat`` stacks along the output dim,
``ᵀ`` transposes GPT-2's ``Conv1D`` weights, which are stored ``[in, out]``:

=====================================  ==========================================================
engine                                 GPT-2 (``transformer.`` prefix optional)
=====================================  ==========================================================
embed_tokens.weight                    wte.weight
embed_positions.weight                 wpe.weight
layers.i.attn_norm.{weight,bias}       h.i.ln_1.{weight,bias}
layers.i.attn.qkv.weight / .bias       h.i.attn.c_attn.weightᵀ / .bias
layers.i.attn.o_proj.weight / .bias    h.i.attn.c_proj.weightᵀ / .bias
layers.i.mlp_norm.{weight,bias}        h.i.ln_2.{weight,bias}
layers.i.mlp.up.weight / .bias         h.i.mlp.c_fc.weightᵀ / .bias
layers.i.mlp.down.weight / .bias       h.i.mlp.c_proj.weightᵀ / .bias
final_norm.{weight,bias}               ln_f.{weight,bias}
lm_head.weight                         tied to wte.weight
=====================================  ==========================================================

=====================================  ==========================================================
engine                                 Llama / Mistral / Qwen2 (``model.`` prefix)
=====================================  ==========================================================
embed_tokens.weight                    model.embed_tokens.weight
layers.i.attn_norm.weight              model.layers.i.input_layernorm.weight
layers.i.attn.qkv.{weight,bias}        cat(self_attn.q_proj, k_proj, v_proj).{weight,bias}
layers.i.attn.o_proj.weight            model.layers.i.self_attn.o_proj.weight
layers.i.mlp_norm.weight               model.layers.i.post_attention_layernorm.weight
layers.i.mlp.up.weight                 cat(mlp.gate_proj, mlp.up_proj).weight
layers.i.mlp.down.weight               model.layers.i.mlp.down_proj.weight
final_norm.weight                      model.norm.weight
lm_head.weight                         lm_head.weight (or model.embed_tokens.weight when tied)
=====================================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ridgeline.engine.model import CausalLM
from ridgeline.errors import ConfigError
from ridgeline.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class Rule:
    """One engine tensor = ``cat`` of Hugging Face tensors (each transposed if ``transpose``)."""

    engine: str
    hf: tuple[str, ...]
    transpose: bool = False


def _gpt2_layer(i: int) -> list[Rule]:
    p = f"h.{i}."
    rules = [
        Rule(f"layers.{i}.attn.qkv.weight", (p + "attn.c_attn.weight",), True),
        Rule(f"layers.{i}.attn.qkv.bias", (p + "attn.c_attn.bias",)),
        Rule(f"layers.{i}.attn.o_proj.weight", (p + "attn.c_proj.weight",), True),
        Rule(f"layers.{i}.attn.o_proj.bias", (p + "attn.c_proj.bias",)),
        Rule(f"layers.{i}.mlp.up.weight", (p + "mlp.c_fc.weight",), True),
        Rule(f"layers.{i}.mlp.up.bias", (p + "mlp.c_fc.bias",)),
        Rule(f"layers.{i}.mlp.down.weight", (p + "mlp.c_proj.weight",), True),
        Rule(f"layers.{i}.mlp.down.bias", (p + "mlp.c_proj.bias",)),
    ]
    for ours, theirs in (("attn_norm", "ln_1"), ("mlp_norm", "ln_2")):
        rules += [Rule(f"layers.{i}.{ours}.{w}", (f"{p}{theirs}.{w}",)) for w in ("weight", "bias")]
    return rules


def _gpt2_rules(spec: ModelSpec, num_layers: int) -> list[Rule]:
    rules = [
        Rule("embed_tokens.weight", ("wte.weight",)),
        Rule("embed_positions.weight", ("wpe.weight",)),
        Rule("final_norm.weight", ("ln_f.weight",)),
        Rule("final_norm.bias", ("ln_f.bias",)),
    ]
    if not spec.tied_embeddings:
        rules.append(Rule("lm_head.weight", ("lm_head.weight",)))
    return rules + [r for i in range(num_layers) for r in _gpt2_layer(i)]


def _llama_layer(spec: ModelSpec, i: int) -> list[Rule]:
    p = f"model.layers.{i}."
    qkv = tuple(p + f"self_attn.{x}_proj" for x in "qkv")
    gate_up = (p + "mlp.gate_proj", p + "mlp.up_proj")
    rules = [
        Rule(f"layers.{i}.attn_norm.weight", (p + "input_layernorm.weight",)),
        Rule(f"layers.{i}.mlp_norm.weight", (p + "post_attention_layernorm.weight",)),
        Rule(f"layers.{i}.attn.qkv.weight", tuple(n + ".weight" for n in qkv)),
        Rule(f"layers.{i}.attn.o_proj.weight", (p + "self_attn.o_proj.weight",)),
        Rule(f"layers.{i}.mlp.up.weight", tuple(n + ".weight" for n in gate_up)),
        Rule(f"layers.{i}.mlp.down.weight", (p + "mlp.down_proj.weight",)),
    ]
    if spec.qkv_bias:
        rules.append(Rule(f"layers.{i}.attn.qkv.bias", tuple(n + ".bias" for n in qkv)))
    if spec.o_bias:
        rules.append(Rule(f"layers.{i}.attn.o_proj.bias", (p + "self_attn.o_proj.bias",)))
    if spec.mlp_bias:
        rules.append(Rule(f"layers.{i}.mlp.up.bias", tuple(n + ".bias" for n in gate_up)))
        rules.append(Rule(f"layers.{i}.mlp.down.bias", (p + "mlp.down_proj.bias",)))
    return rules


def _llama_rules(spec: ModelSpec, num_layers: int) -> list[Rule]:
    rules = [
        Rule("embed_tokens.weight", ("model.embed_tokens.weight",)),
        Rule("final_norm.weight", ("model.norm.weight",)),
    ]
    if not spec.tied_embeddings:
        rules.append(Rule("lm_head.weight", ("lm_head.weight",)))
    return rules + [r for i in range(num_layers) for r in _llama_layer(spec, i)]


def name_map(spec: ModelSpec, num_layers: int | None = None) -> tuple[Rule, ...]:
    """The engine ← Hugging Face rules of the module docstring for the first ``num_layers``."""
    n = num_layers or spec.num_layers
    rules = _gpt2_rules(spec, n) if spec.family == "gpt2" else _llama_rules(spec, n)
    return tuple(rules)


def _normalise(spec: ModelSpec, name: str) -> str:
    """GPT-2 checkpoints exist with and without the ``transformer.`` prefix."""
    if spec.family == "gpt2" and name.startswith("transformer."):
        return name[len("transformer.") :]
    return name


def from_hf_state(
    model: CausalLM, tensors: Mapping[str, torch.Tensor], where: str = "weights"
) -> None:
    """Copy Hugging Face-named ``tensors`` into ``model`` (cast to its dtype).

    Raises:
        ConfigError: naming the first tensor that is missing or has the wrong shape.
    """
    spec = model.spec
    hf = {_normalise(spec, k): v for k, v in tensors.items()}
    params = dict(model.named_parameters())
    for rule in name_map(spec, model.num_layers):
        missing = [n for n in rule.hf if n not in hf]
        if missing:
            raise ConfigError(f"{where}: tensor '{missing[0]}' is missing")
        parts = [hf[n].t() if rule.transpose else hf[n] for n in rule.hf]
        value = torch.cat(parts, dim=0)  # stacked along the output dimension
        target = params[rule.engine]
        if value.shape != target.shape:
            raise ConfigError(
                f"{where}: tensor '{rule.hf[0]}' gives shape {tuple(value.shape)} for "
                f"'{rule.engine}', expected {tuple(target.shape)}"
            )
        with torch.no_grad():
            target.copy_(value.to(target.dtype))


def to_hf_state(model: CausalLM) -> dict[str, torch.Tensor]:
    """The inverse mapping: ``model``'s weights under Hugging Face names (for tests, export)."""
    params = dict(model.named_parameters())
    out: dict[str, torch.Tensor] = {}
    for rule in name_map(model.spec, model.num_layers):
        value = params[rule.engine].detach()
        parts = value.split(_split_sizes(model.spec, rule), dim=0) if len(rule.hf) > 1 else (value,)
        gpt2_body = model.spec.family == "gpt2" and rule.engine != "lm_head.weight"
        prefix = "transformer." if gpt2_body else ""
        for name, part in zip(rule.hf, parts, strict=True):
            out[prefix + name] = (part.t() if rule.transpose else part).contiguous().clone()
    return out


def _split_sizes(spec: ModelSpec, rule: Rule) -> list[int]:
    if ".qkv." in rule.engine:
        kv = spec.num_kv_heads * spec.head_dim
        return [spec.num_heads * spec.head_dim, kv, kv]
    return [spec.ffn, spec.ffn]  # gate, up


def load_safetensors_dir(model: CausalLM, directory: str | Path) -> None:
    """Load every ``*.safetensors`` file of a local Hugging Face directory into ``model``."""
    from safetensors.torch import load_file

    files = sorted(Path(directory).glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{directory}: no *.safetensors file (only safetensors are read)")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(load_file(str(f)))
    from_hf_state(model, tensors, str(directory))


def init_random(model: CausalLM, generator: torch.Generator, std: float = 0.02) -> None:
    """Seeded random weights: matrices and biases ~ N(0, std²), norm weights ~ 1 + N(0, 0.1²).

    Drawn in fp32 in parameter-name order, then cast, so a seed gives the same model in any dtype.
    """
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            draw = torch.randn(p.shape, generator=generator, dtype=torch.float32)
            value = 1.0 + 0.1 * draw if "norm" in name and name.endswith("weight") else std * draw
            p.copy_(value.to(p.dtype))
