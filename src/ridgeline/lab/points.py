"""What defines one measured point of decode (torch-free, so stored points can be read and
compared without torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ridgeline.errors import ConfigError

BACKENDS = ("hf", "ridgeline")
CACHE_KINDS = ("dynamic", "static", "paged")
ATTENTION_IMPLS = ("sdpa", "eager", "paged")
DTYPES = ("fp32", "bf16", "fp16")  # the keys of lab.hf.TORCH_DTYPES


@dataclass(frozen=True, slots=True)
class PointConfig:
    """Everything that defines one measured point (the results store keys on all of it)."""

    model: str = "distilgpt2"
    backend: str = "hf"
    cache: str = "dynamic"
    attn: str = "sdpa"
    batch: int = 1
    context: int = 128
    steps: int = 12
    warmup: int = 3
    memory_steps: int = 3
    profile_steps: int = 2
    threads: int = 1
    dtype: str = "fp32"
    device: str = "cpu"
    seed: int = 0
    weights: str | None = None
    allocator: str = ""  # filled from the environment by the sweep

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"field backend: '{self.backend}' is not one of {BACKENDS}")
        if self.cache not in CACHE_KINDS:
            raise ConfigError(f"field cache: '{self.cache}' is not one of {CACHE_KINDS}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"field dtype: '{self.dtype}' is not one of {', '.join(DTYPES)}")
        for name in ("batch", "context", "steps", "threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"field {name}: must be at least 1, got {getattr(self, name)}")
        for name in ("warmup", "memory_steps", "profile_steps"):
            if getattr(self, name) < 0:
                raise ConfigError(f"field {name}: must be >= 0, got {getattr(self, name)}")

    @property
    def label(self) -> str:
        """Backend label: ``hf/dynamic/sdpa``, with ``+malloc-env`` when allocator variables were
        set (a different allocator is a different backend for the fit)."""
        base = f"{self.backend}/{self.cache}/{self.attn}"
        return base if self.allocator in ("", "glibc default") else base + "+malloc-env"

    @property
    def decode_tokens(self) -> int:
        """Tokens decoded after prefill, all phases together."""
        return self.warmup + self.steps + self.memory_steps + self.profile_steps

    @property
    def kv_len_mean(self) -> float:
        """Mean KV length the timed steps read (context + warm-up + half the timed steps)."""
        return self.context + self.warmup + (self.steps - 1) / 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PointConfig:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})
