"""Transformers models for the lab: built from a config.json with random weights (no download),
or loaded from a local directory, and the KV bytes read straight from their cache objects.

transformers 5.x API notes (https://huggingface.co/docs/transformers/cache_explanation): the
forward kwarg is ``cache=``; caches are ``DynamicCache(config=...)`` and ``StaticCache(config=...,
max_cache_len=N)``; the tensors sit in ``cache.layers[i].keys`` / ``.values`` with shape
[B, kv_heads, T, head_dim].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, StaticCache

from ridgeline.errors import ConfigError
from ridgeline.lab.configs import model_spec
from ridgeline.specs import ModelSpec

TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}

HF_ATTENTION = ("sdpa", "eager")
HF_CACHES = ("dynamic", "static")


@dataclass(frozen=True, slots=True)
class LabModel:
    """A transformers model ready for decode, with the spec the analytic model uses."""

    model: Any  # transformers PreTrainedModel
    spec: ModelSpec
    dtype: torch.dtype
    device: torch.device

    @property
    def param_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)


def build_model(
    raw: dict[str, Any],
    name: str,
    attn: str = "sdpa",
    dtype: str = "fp32",
    device: str = "cpu",
    weights: str | None = None,
    seed: int = 0,
) -> LabModel:
    """A model from ``raw`` (random weights, seeded) or from local weights in ``weights``.

    Raises:
        ConfigError: unknown attention implementation or dtype, or weights that cannot be read.
    """
    if attn not in HF_ATTENTION:
        raise ConfigError(f"field attn: '{attn}' is not one of {', '.join(HF_ATTENTION)}")
    if dtype not in TORCH_DTYPES:
        raise ConfigError(f"field dtype: '{dtype}' is not one of {', '.join(TORCH_DTYPES)}")
    tdtype = TORCH_DTYPES[dtype]
    fields = {k: v for k, v in raw.items() if not k.startswith("_") and k != "model_type"}
    if int(fields.get("bos_token_id") or 0) >= int(fields.get("vocab_size", 1 << 30)):
        fields.update(bos_token_id=None, eos_token_id=None)
    config = AutoConfig.for_model(raw["model_type"], **fields)
    model: Any
    if weights is not None:
        try:
            model = AutoModelForCausalLM.from_pretrained(
                weights,
                config=config,
                attn_implementation=attn,
                dtype=tdtype,
                local_files_only=True,
            )
        except (OSError, ValueError) as e:
            raise ConfigError(f"field --weights: cannot load {weights}: {e}") from None
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=tdtype)
    dev = torch.device(device)
    ready: Any = model.to(dev)
    ready.eval()
    return LabModel(ready, model_spec(raw, name), tdtype, dev)


def new_cache(lm: LabModel, kind: str, max_len: int) -> Any:
    """A fresh DynamicCache, or a StaticCache holding ``max_len`` tokens per sequence."""
    if kind == "dynamic":
        return DynamicCache(config=lm.model.config)
    if kind == "static":
        return StaticCache(config=lm.model.config, max_cache_len=max_len)
    raise ConfigError(f"field cache: '{kind}' is not one of {', '.join(HF_CACHES)}")


def cache_tensors(cache: Any) -> list[torch.Tensor]:
    """Every K and V tensor of a cache, each [B, kv_heads, T, head_dim] (T = max_len if static)."""
    out: list[torch.Tensor] = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        out += [t for t in (keys, values) if isinstance(t, torch.Tensor)]
    return out


def kv_tensor_bytes(cache: Any) -> int:
    """Bytes of the cache's K and V tensors: Σ numel × element size (what the formula counts)."""
    return sum(t.numel() * t.element_size() for t in cache_tensors(cache))


def cache_length(cache: Any) -> int:
    """Tokens stored per sequence (StaticCache returns a tensor: wrap in int)."""
    return int(cache.get_seq_length())


def random_ids(batch: int, length: int, vocab: int, seed: int, device: torch.device) -> Any:
    """Random token ids [batch, length] (no tokenizer offline; random weights make text moot)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, length), generator=gen)  # [B, T]
    return ids.to(device)
