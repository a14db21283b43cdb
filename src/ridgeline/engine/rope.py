"""Rotary position embeddings (RoPE, Su et al. 2021, arXiv:2104.09864), in the "rotate half"
layout that Llama checkpoints use, with the frequency scalings of ``rope_scaling``.

For head dimension d and base θ the inverse frequencies are ``inv_freq_i = θ^(-2i/d)``,
i = 0 … d/2 − 1; position p rotates the pair (x_i, x_{i+d/2}) by the angle ``p · inv_freq_i``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from ridgeline.errors import ConfigError
from ridgeline.specs.model import ModelSpec


def inverse_frequencies(head_dim: int, theta: float) -> torch.Tensor:
    """``θ^(-2i/d)`` for i < d/2 (Su et al. 2021, eq. 15)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # [d/2]
    return 1.0 / (theta**exponents)  # [d/2]


def llama3_scaled(inv_freq: torch.Tensor, scaling: Mapping[str, Any]) -> torch.Tensor:
    """Llama-3.1 frequency scaling (Meta's ``apply_scaling``; transformers
    ``_compute_llama3_parameters``): long wavelengths are divided by ``factor``, short ones are
    kept, and the band between is interpolated smoothly.
    """
    factor = float(scaling["factor"])
    low = float(scaling.get("low_freq_factor", 1.0))
    high = float(scaling.get("high_freq_factor", 4.0))
    old_len = float(scaling.get("original_max_position_embeddings", 8192))
    wavelen = 2 * math.pi / inv_freq  # [d/2]
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)  # [d/2]
    smooth = (old_len / wavelen - low) / (high - low)  # [d/2]
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled  # [d/2]
    medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)  # [d/2]
    return torch.where(medium, smoothed, scaled)  # [d/2]


def scaled_inverse_frequencies(spec: ModelSpec) -> torch.Tensor:
    """The model's inverse frequencies after its ``rope_scaling`` (default, linear, llama3)."""
    inv_freq = inverse_frequencies(spec.head_dim, spec.rope_theta)  # [d/2]
    scaling = spec.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / float(scaling["factor"])  # position interpolation (Chen et al. 2023)
    if kind == "llama3":
        return llama3_scaled(inv_freq, scaling)
    raise ConfigError(f"{spec.source or spec.name}: rope_type '{kind}' is not supported by engine")


def rope_table(spec: ModelSpec, max_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for positions ``0 … max_positions − 1``, fp32, each ``[max_positions, d]``."""
    inv_freq = scaled_inverse_frequencies(spec)  # [d/2]
    positions = torch.arange(max_positions, dtype=torch.float64)  # [P]
    angles = torch.outer(positions, inv_freq)  # [P, d/2]
    angles = torch.cat([angles, angles], dim=-1)  # [P, d]  (rotate-half layout)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [T, heads, d] by per-token ``cos``/``sin`` [T, d] (rotate-half form)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # [T, heads, d/2] each
    rotated = torch.cat([-x2, x1], dim=-1)  # [T, heads, d]
    cos = cos[:, None, :].to(x.dtype)  # [T, 1, d]
    sin = sin[:, None, :].to(x.dtype)  # [T, 1, d]
    return x * cos + rotated * sin  # [T, heads, d]
