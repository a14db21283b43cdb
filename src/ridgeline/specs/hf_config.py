"""Build a ``ModelSpec`` from a Hugging Face ``config.json`` (offline; no network).

Supported ``model_type`` values: gpt2, llama, llama4_text, mistral, mixtral, qwen2, qwen2_moe,
qwen3, qwen3_moe, gemma, gemma2, phi3, deepseek_v2, deepseek_v3. A config that nests its
language model under ``text_config`` (vision-language models such as Llama-4, ``llama4``) is
read from there.

Traps handled on purpose (each has a test):
- ``use_sliding_window: false`` with a ``sliding_window`` value present means *no* window (Qwen2).
- An explicit ``layer_types`` list (newer transformers) decides which layers slide.
- Gemma-2 alternates sliding (even layers) and global (odd layers) attention.
- MLA models report ``num_key_value_heads`` equal to the query heads; their cache stores one
  latent per token instead (``ModelSpec.kv_elements_per_token_per_layer``).
- ``tie_word_embeddings`` defaults differ by family (GPT-2 and Gemma tie; Llama does not).
- Llama-4 has two FFN widths: ``intermediate_size`` is an expert's (and its shared expert's),
  ``intermediate_size_mlp`` a dense layer's; every ``interleave_moe_layer_step``-th layer is MoE
  (transformers ``Llama4TextDecoderLayer``: ``(layer_idx + 1) % step == 0``).

NOTE: Llama-4's chunked local attention (``attention_chunk_size``, on the RoPE layers) is read
as global attention: the same keys while a context is shorter than one chunk (8,192 tokens for
Scout), more than the model attends beyond it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.specs.inputs import parse_json, read_text, short_repr
from ridgeline.specs.limits import (
    MAX_CONTEXT,
    MAX_EXPERTS,
    MAX_FFN,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_LAYERS,
    MAX_RANK,
    MAX_VOCAB,
)
from ridgeline.specs.model import (
    Attention,
    LayerSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
    Norm,
    Position,
    attention_kind,
)

_MISSING = object()


class _Reader:
    """Typed access to a config dict; every error names the field."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    def _get(self, key: str, default: Any) -> Any:
        value = self.data.get(key, default)
        if value is _MISSING:
            raise ConfigError(f"{self.where}: field '{key}' is missing")
        return value

    def integer(
        self, key: str, default: Any = _MISSING, minimum: int = 1, maximum: int = MAX_CONTEXT
    ) -> int:
        """An integer in [minimum, maximum]; the bounds of model sizes are in ``specs.limits``."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(
                f"{self.where}: field '{key}' must be an integer >= {minimum}, "
                f"got {short_repr(value)}"
            )
        if value > maximum:
            raise ConfigError(
                f"{self.where}: field '{key}' = {short_repr(value)} is more than ridgeline "
                f"models (limit {maximum:,})"
            )
        return value

    def opt_integer(self, key: str, maximum: int = MAX_CONTEXT) -> int | None:
        return None if self.data.get(key) is None else self.integer(key, maximum=maximum)

    def integers(self, key: str) -> list[int]:
        """A list of non-negative integers (layer indices); missing or null is empty."""
        values = self.data.get(key) or []
        ok = isinstance(values, list) and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_CONTEXT for v in values
        )
        if not ok:
            raise ConfigError(
                f"{self.where}: field '{key}' must be a list of layer indices, "
                f"got {short_repr(values)}"
            )
        return values

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.where}: field '{key}' must be true or false, got {value!r}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self._get(key, default)
        ok = not isinstance(value, bool) and isinstance(value, int | float)
        if not ok or not math.isfinite(value) or value <= 0:
            raise ConfigError(
                f"{self.where}: field '{key}' must be a finite number > 0, got {short_repr(value)}"
            )
        return float(value)

    def text(self, key: str, default: Any = _MISSING) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            raise ConfigError(
                f"{self.where}: field '{key}' must be a string, got {short_repr(value)}"
            )
        return value


def _gpt2(r: _Reader, name: str) -> ModelSpec:
    hidden = r.integer("n_embd", maximum=MAX_HIDDEN)
    heads = r.integer("n_head", maximum=MAX_HEADS)
    layers = r.integer("n_layer", maximum=MAX_LAYERS)
    inner = r.opt_integer("n_inner", maximum=MAX_FFN) or 4 * hidden
    _check_divisible(r, hidden, heads, "n_embd", "n_head")
    return ModelSpec(
        name=name,
        family="gpt2",
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        ffn=inner,
        vocab_size=r.integer("vocab_size", maximum=MAX_VOCAB),
        max_position_embeddings=r.integer("n_positions", 1024),
        attention=Attention.MHA,
        layers=tuple(LayerSpec() for _ in range(layers)),
        gated_mlp=False,
        activation=r.text("activation_function", "gelu_new"),
        norm=Norm.LAYERNORM,
        position=Position.LEARNED,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        tied_embeddings=r.boolean("tie_word_embeddings", True),
        norm_eps=r.number("layer_norm_epsilon", 1e-5),
        source=r.where,
    )


def _check_divisible(r: _Reader, a: int, b: int, name_a: str, name_b: str) -> None:
    if a % b:
        raise ConfigError(f"{r.where}: field '{name_a}' ({a}) is not divisible by '{name_b}' ({b})")


def _windows(r: _Reader, family: str, layers: int) -> tuple[int | None, ...]:
    """Per-layer sliding window (``None`` = global attention)."""
    window = r.opt_integer("sliding_window")
    if family.startswith("qwen") and not r.boolean("use_sliding_window", False):
        window = None
    types = r.data.get("layer_types")
    if isinstance(types, list):
        if len(types) != layers:
            raise ConfigError(
                f"{r.where}: field 'layer_types' has {len(types)} entries, not {layers}"
            )
        if any(t == "sliding_attention" for t in types) and window is None:
            raise ConfigError(f"{r.where}: field 'sliding_window' is needed by 'layer_types'")
        return tuple(window if t == "sliding_attention" else None for t in types)
    if window is None:
        return (None,) * layers
    if family == "gemma2":
        return tuple(window if i % 2 == 0 else None for i in range(layers))
    if family.startswith("qwen"):
        first = r.integer("max_window_layers", layers, minimum=0)
        return tuple(window if i >= first else None for i in range(layers))
    return (window,) * layers


def _experts(r: _Reader, key: str) -> tuple[int, int]:
    """Routed experts (field ``key``) and the top-k, which cannot exceed them."""
    num = r.integer(key, maximum=MAX_EXPERTS)
    top_k = r.integer("num_experts_per_tok", maximum=MAX_EXPERTS)
    if top_k > num:
        raise ConfigError(
            f"{r.where}: field 'num_experts_per_tok' ({top_k}) exceeds '{key}' ({num})"
        )
    return num, top_k


def _moe(r: _Reader, family: str, layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
    """The MoE block and which layers use it."""
    if family == "mixtral":
        num, top_k = _experts(r, "num_local_experts")
        spec = MoESpec(num, top_k, r.integer("intermediate_size", maximum=MAX_FFN))
        return spec, (True,) * layers
    if family in ("qwen2_moe", "qwen3_moe"):
        shared = (
            r.integer("shared_expert_intermediate_size", 0, minimum=0, maximum=MAX_FFN)
            if family == "qwen2_moe"
            else 0
        )
        num, top_k = _experts(r, "num_experts")
        spec = MoESpec(
            num,
            top_k,
            r.integer("moe_intermediate_size", maximum=MAX_FFN),
            shared_ffn=shared,
            shared_expert_gate=shared > 0,
        )
        step = r.integer("decoder_sparse_step", 1)
        dense_only = set(r.integers("mlp_only_layers"))
        return spec, tuple(i not in dense_only and (i + 1) % step == 0 for i in range(layers))
    if family == "llama4_text":
        return _llama4_moe(r, layers)
    if family in ("deepseek_v2", "deepseek_v3"):
        if r.data.get("n_routed_experts") is None:
            return None, (False,) * layers
        expert = r.integer("moe_intermediate_size", maximum=MAX_FFN)
        num, top_k = _experts(r, "n_routed_experts")
        spec = MoESpec(
            num,
            top_k,
            expert,
            shared_ffn=r.integer("n_shared_experts", 0, minimum=0, maximum=MAX_EXPERTS) * expert,
            router_bias=family == "deepseek_v3",
        )
        first = r.integer("first_k_dense_replace", 0, minimum=0)
        freq = r.integer("moe_layer_freq", 1)
        return spec, tuple(i >= first and i % freq == 0 for i in range(layers))
    return None, (False,) * layers


def _llama4_moe(r: _Reader, layers: int) -> tuple[MoESpec, tuple[bool, ...]]:
    """Llama-4: routed experts of ``intermediate_size`` plus one shared expert of the same
    width (transformers ``Llama4TextMoe``), on every ``interleave_moe_layer_step``-th layer."""
    num, top_k = _experts(r, "num_local_experts")
    expert = r.integer("intermediate_size", maximum=MAX_FFN)
    spec = MoESpec(num, top_k, expert, shared_ffn=expert)
    step = r.integer("interleave_moe_layer_step", 1)
    return spec, tuple((i + 1) % step == 0 for i in range(layers))


def _dense_ffn(r: _Reader, family: str) -> int:
    """A dense MLP layer's width (Llama-4 names it ``intermediate_size_mlp``)."""
    if family == "llama4_text":
        return r.integer("intermediate_size_mlp", maximum=MAX_FFN)
    return r.integer("intermediate_size", maximum=MAX_FFN)


def _mla(r: _Reader) -> MLASpec:
    return MLASpec(
        q_lora_rank=r.opt_integer("q_lora_rank", maximum=MAX_RANK),
        kv_lora_rank=r.integer("kv_lora_rank", maximum=MAX_RANK),
        qk_nope_head_dim=r.integer("qk_nope_head_dim", maximum=MAX_HEAD_DIM),
        qk_rope_head_dim=r.integer("qk_rope_head_dim", maximum=MAX_HEAD_DIM),
        v_head_dim=r.integer("v_head_dim", maximum=MAX_HEAD_DIM),
    )


_TIED_BY_DEFAULT = {"gemma", "gemma2"}
_QKV_BIAS = {"qwen2", "qwen2_moe"}
_GELU_FAMILIES = {"gemma", "gemma2"}


def _decoder(r: _Reader, name: str) -> ModelSpec:
    family = r.text("model_type")
    hidden = r.integer("hidden_size", maximum=MAX_HIDDEN)
    heads = r.integer("num_attention_heads", maximum=MAX_HEADS)
    layers = r.integer("num_hidden_layers", maximum=MAX_LAYERS)
    kv_heads = r.integer("num_key_value_heads", heads, maximum=MAX_HEADS)
    head_dim = r.opt_integer("head_dim", maximum=MAX_HEAD_DIM)
    if head_dim is None:
        _check_divisible(r, hidden, heads, "hidden_size", "num_attention_heads")
        head_dim = hidden // heads
    if heads % kv_heads:
        raise ConfigError(
            f"{r.where}: field 'num_key_value_heads' ({kv_heads}) must divide "
            f"'num_attention_heads' ({heads})"
        )
    mla = _mla(r) if family in ("deepseek_v2", "deepseek_v3") else None
    moe, moe_layers = _moe(r, family, layers)
    windows = _windows(r, family, layers)
    attention = Attention.MLA if mla else attention_kind(heads, kv_heads)
    act = r.data.get("hidden_activation") or r.data.get("hidden_act") or "silu"
    return ModelSpec(
        name=name,
        family=family,
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        ffn=_dense_ffn(r, family),
        vocab_size=r.integer("vocab_size", maximum=MAX_VOCAB),
        max_position_embeddings=r.integer("max_position_embeddings", 2048),
        attention=attention,
        layers=tuple(LayerSpec(window=w, moe=m) for w, m in zip(windows, moe_layers, strict=True)),
        gated_mlp=True,
        activation=str(act),
        norm=Norm.RMSNORM,
        position=Position.ROPE,
        qkv_bias=family in _QKV_BIAS or r.boolean("attention_bias", False),
        o_bias=r.boolean("attention_bias", False),
        mlp_bias=r.boolean("mlp_bias", False),
        qk_norm=family in ("qwen3", "qwen3_moe"),
        norms_per_layer=4 if family == "gemma2" else 2,
        tied_embeddings=r.boolean("tie_word_embeddings", family in _TIED_BY_DEFAULT),
        norm_eps=r.number("rms_norm_eps", 1e-6),
        rope_theta=_rope_theta(r),
        rope_scaling=_rope_scaling(r),
        mla=mla,
        moe=moe,
        source=r.where,
    )


def _rope_params(r: _Reader) -> dict[str, Any]:
    """transformers >= 5 writes ``rope_parameters`` (theta and scaling in one dict) instead of
    ``rope_theta`` and ``rope_scaling``; both spellings are read."""
    params = r.data.get("rope_parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise ConfigError(f"{r.where}: field 'rope_parameters' must be an object")
    return params


def _rope_theta(r: _Reader) -> float:
    theta = _rope_params(r).get("rope_theta")
    if theta is None:
        return r.number("rope_theta", 10000.0)
    return _Reader({"rope_parameters.rope_theta": theta}, r.where).number(
        "rope_parameters.rope_theta", 10000.0
    )


def _rope_scaling(r: _Reader) -> dict[str, Any] | None:
    params = _rope_params(r)
    if params.get("rope_type", "default") != "default":
        return {k: v for k, v in params.items() if k != "rope_theta"}
    scaling = r.data.get("rope_scaling")
    return scaling if isinstance(scaling, dict) else None


_FAMILIES: dict[str, Callable[[_Reader, str], ModelSpec]] = {
    "gpt2": _gpt2,
    **{
        f: _decoder
        for f in (
            "llama",
            "llama4_text",
            "mistral",
            "mixtral",
            "qwen2",
            "qwen2_moe",
            "qwen3",
            "qwen3_moe",
            "gemma",
            "gemma2",
            "phi3",
            "deepseek_v2",
            "deepseek_v3",
        )
    },
}


def supported_families() -> list[str]:
    """The ``model_type`` values ridgeline reads."""
    return sorted(_FAMILIES)


def parse_config(data: dict[str, Any], name: str, where: str = "config.json") -> ModelSpec:
    """Build a ``ModelSpec`` from a parsed config.json.

    Raises:
        ConfigError: naming the field that is missing, malformed or unsupported.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a JSON object")
    family = data.get("model_type")
    if family is not None and not isinstance(family, str):
        raise ConfigError(f"{where}: field 'model_type' must be a string, got {short_repr(family)}")
    if family not in _FAMILIES and isinstance(data.get("text_config"), dict):
        return parse_config(data["text_config"], name, f"{where}:text_config")
    if family is None:
        raise ConfigError(f"{where}: field 'model_type' is missing")
    if family not in _FAMILIES:
        raise ConfigError(
            f"{where}: field 'model_type' = '{family}' is not supported "
            f"(supported: {', '.join(supported_families())})"
        )
    return _FAMILIES[family](_Reader(data, where), name)


def load_config_file(path: str | Path, name: str | None = None) -> ModelSpec:
    """Load a config.json file, or a directory holding one."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    data = parse_json(read_text(path), str(path))
    default_name = path.parent.name if path.name == "config.json" else path.stem
    return parse_config(data, name or default_name, str(path))


@cache
def _catalog_files() -> dict[str, str]:
    root = resources.files("ridgeline.data").joinpath("models")
    return {
        e.name[: -len(".json")]: e.read_text() for e in root.iterdir() if e.name.endswith(".json")
    }


def model_names() -> list[str]:
    """Names of the shipped model configs, sorted."""
    return sorted(_catalog_files())


def get_model(name_or_path: str | ModelSpec) -> ModelSpec:
    """A shipped model by name (any case: ``Llama-3.1-8B`` is ``llama-3.1-8b``), or one loaded
    from a config.json path or directory."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    files = _catalog_files()
    name = name_or_path.lower()
    if name in files:
        where = f"catalog/{name}"
        return parse_config(parse_json(files[name], where), name, where)
    if name_or_path.endswith(".json") or "/" in name_or_path or Path(name_or_path).is_dir():
        return load_config_file(name_or_path)
    raise UnknownNameError("model", name_or_path, files)
