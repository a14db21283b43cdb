"""Model configs for the lab (torch-free): a catalog name or a config.json, widened where the lab
needs more positions, and the analytic ``ModelSpec`` of the very config the lab builds."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.specs import ModelSpec, parse_config


def _catalog_config(name: str) -> dict[str, Any] | None:
    entry = resources.files("ridgeline.data").joinpath("models", f"{name}.json")
    return json.loads(entry.read_text()) if entry.is_file() else None


def raw_config(model: str) -> dict[str, Any]:
    """The config.json of a catalog model name, a config.json path, or a model directory."""
    shipped = _catalog_config(model)
    if shipped is not None:
        return shipped
    path = Path(model)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise UnknownNameError("model (catalog name or config.json path)", model, [])
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise ConfigError(f"{path}: field 'model_type' is missing")
    return data


def with_positions(raw: dict[str, Any], min_positions: int) -> dict[str, Any]:
    """The config with room for ``min_positions`` tokens.

    NOTE: GPT-2 configs stop at n_positions = 1024, so context 1024 plus decode steps would index
    past the learned position table; the lab widens it (distilgpt2: +0.8 M params at 2048), which
    a decode step does not read beyond the rows it gathers.
    """
    out = dict(raw)
    for key in ("n_positions", "n_ctx", "max_position_embeddings"):
        if key in out and int(out[key]) < min_positions:
            out[key] = _round_up(min_positions, 1024)
    return out


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def model_spec(raw: dict[str, Any], name: str) -> ModelSpec:
    """The analytic ``ModelSpec`` of the same config the lab builds."""
    return parse_config(raw, name, f"lab/{name}")
