"""The fallback rule for compute peaks: which listed peak prices a format a chip does not list.

An accelerator's file gives peaks for the formats its datasheet quotes (an H100 fp32, bf16, fp8;
a TPU v5e only bf16 and int8). A workload may ask for another (fp32 activations on a TPU, fp8
weights on an A100); ``data/peak_fallback.toml`` says, per format, which listed format stands in
and how many of its products one product takes, each with its source. Every chain ends on bf16
or fp16, and every catalog file lists one of them, so every format has a peak on every chip.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ridgeline.specs.dtypes import DType


@dataclass(frozen=True, slots=True)
class Stand:
    """One link of a fallback chain: ``dtype``'s peak ÷ ``passes`` stands in, for ``source``."""

    dtype: DType
    passes: int
    source: str


@dataclass(frozen=True, slots=True)
class PeakRule:
    """The peak a chip gives one compute format: ``flops_per_s`` = the peak of ``stand.dtype`` ÷
    ``stand.passes`` (``stand.dtype`` is the asked format itself where the chip lists it)."""

    dtype: DType
    flops_per_s: float
    stand: Stand

    @property
    def listed(self) -> bool:
        """True where the chip's file gives this format's own peak."""
        return self.stand.dtype == self.dtype


@cache
def fallback_chains() -> dict[DType, tuple[Stand, ...]]:
    """Every format's chain, as ``data/peak_fallback.toml`` gives it (read once)."""
    text = resources.files("ridgeline.data").joinpath("peak_fallback.toml").read_text()
    chains = {}
    for name, table in tomllib.loads(text).items():
        chain = tuple(
            Stand(DType(s["dtype"]), int(s["passes"]), s["source"]) for s in table["chain"]
        )
        chains[DType(name)] = chain
    return chains
