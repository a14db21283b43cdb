"""What an inference runtime keeps on a chip besides weights and KV (``data/runtime_memory.toml``).

Two kinds, by who manages the accelerator's device memory: a runtime allocator (vLLM's
``gpu_memory_utilization`` rule on GPUs, TPUs and Spyre) or a whole-graph compiler that places
every byte (Cerebras, Groq). ``analytic.memory`` turns these terms into the KV pool.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ridgeline.errors import ConfigError
from ridgeline.specs.hardware import Accelerator, ManagedBy
from ridgeline.specs.inputs import validation_message


@dataclass(frozen=True, slots=True)
class RuntimeMemory:
    """The memory terms of one kind of runtime.

    Attributes:
        kind: ``runtime`` or ``compiler``.
        description: what manages the memory, in words.
        memory_utilization: default fraction of each chip's device memory the engine may use
            for weights, reserve and KV (vLLM's ``gpu_memory_utilization``).
        workspace_bytes: memory held outside the tensors on each chip (CUDA context, library
            workspaces, communication buffers).
        sampler_bytes_per_logit: bytes the profile step's sampler holds per sequence and
            vocabulary entry.
        activation_share: fraction of the profile step's activations kept out of the KV cache.
        sources: source per term.
    """

    kind: str
    description: str
    memory_utilization: float
    workspace_bytes: float
    sampler_bytes_per_logit: float
    activation_share: float
    sources: Mapping[str, str] = field(default_factory=dict)


class _Term(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    source: Annotated[str, Field(min_length=1)]


class _Kind(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str
    memory_utilization: _Term
    workspace_bytes: _Term
    sampler_bytes_per_logit: _Term
    activation_share: _Term


_TERMS = ("memory_utilization", "workspace_bytes", "sampler_bytes_per_logit", "activation_share")


def _kind(name: str, data: object) -> RuntimeMemory:
    try:
        k = _Kind.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"runtime_memory.toml [{name}]: {validation_message(e)}") from None
    if not 0 < k.memory_utilization.value <= 1 or k.activation_share.value > 1:
        raise ConfigError(f"runtime_memory.toml [{name}]: fractions must be in (0, 1]")
    return RuntimeMemory(
        kind=name,
        description=k.description,
        memory_utilization=k.memory_utilization.value,
        workspace_bytes=k.workspace_bytes.value,
        sampler_bytes_per_logit=k.sampler_bytes_per_logit.value,
        activation_share=k.activation_share.value,
        sources={t: getattr(k, t).source for t in _TERMS},
    )


@cache
def _kinds() -> dict[str, RuntimeMemory]:
    text = resources.files("ridgeline.data").joinpath("runtime_memory.toml").read_text()
    data = tomllib.loads(text)
    return {name: _kind(name, entry) for name, entry in data.items() if name != "references"}


def runtime_memory(acc: Accelerator) -> RuntimeMemory:
    """The memory terms of the runtime that serves on ``acc``: a whole-graph compiler where
    the device level is compiler-managed, a runtime allocator otherwise."""
    compiled = acc.device.managed_by is ManagedBy.COMPILER
    return _kinds()["compiler" if compiled else "runtime"]
