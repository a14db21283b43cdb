"""Who manages the KV cache on each kind of accelerator, and who provides each runtime technique
(``data/kv_management.toml``: one entry per catalog ``kind``, a source per entry)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources

from ridgeline.errors import ConfigError


class Technique(StrEnum):
    """The seven runtime techniques of KV management (course module 7)."""

    CONTINUOUS_BATCHING = "continuous_batching"
    PAGED_ATTENTION = "paged_attention"
    PREFIX_CACHING = "prefix_caching"
    CHUNKED_PREFILL = "chunked_prefill"
    DISAGGREGATION = "disaggregation"
    TIERING = "tiering"
    SPECULATIVE_DECODING = "speculative_decoding"

    @property
    def label(self) -> str:
        """The technique's name as text (``chunked prefill``)."""
        return self.value.replace("_", " ")


class Provider(StrEnum):
    """Who provides a technique."""

    RUNTIME = "runtime"
    COMPILER = "compiler"
    BOTH = "runtime + compiler"
    NOBODY = "nobody"


@dataclass(frozen=True, slots=True)
class TechniquePractice:
    """One technique on one kind of accelerator: who provides it, what it becomes, the source."""

    technique: Technique
    provider: Provider
    becomes: str
    source: str


@dataclass(frozen=True, slots=True)
class KVPractice:
    """How one kind of accelerator manages its KV cache."""

    kind: str
    allocator: Provider
    granularity: str
    source: str
    techniques: tuple[TechniquePractice, ...]

    def technique(self, t: Technique) -> TechniquePractice:
        return next(p for p in self.techniques if p.technique is t)


def _practice(kind: str, entry: dict[str, object]) -> KVPractice:
    try:
        techniques = tuple(
            TechniquePractice(
                t,
                Provider(str(e["provider"])),  # type: ignore[index]
                str(e["becomes"]),  # type: ignore[index]
                str(e["source"]),  # type: ignore[index]
            )
            for t in Technique
            for e in (entry[t.value],)
        )
        return KVPractice(
            kind,
            Provider(str(entry["allocator"])),
            str(entry["granularity"]),
            str(entry["source"]),
            techniques,
        )
    except (KeyError, ValueError, TypeError) as e:
        raise ConfigError(f"kv_management.toml [{kind}]: bad or missing field: {e}") from None


@cache
def _practices() -> dict[str, KVPractice]:
    text = resources.files("ridgeline.data").joinpath("kv_management.toml").read_text()
    data = tomllib.loads(text)
    return {k: _practice(k, v) for k, v in data.items() if k != "references"}


def kv_practice(kind: str) -> KVPractice:
    """The KV practice of accelerators of ``kind`` (gpu, tpu, wafer, lpu, dataflow)."""
    practices = _practices()
    if kind not in practices:
        raise ConfigError(f"field kind: no KV practice for '{kind}' (have {', '.join(practices)})")
    return practices[kind]
