"""How many tokens of KV fit in a scratchpad, and the bytes a decode step moves (torch-free): per layer and KV head, per layer, and
for the whole model, in one instance of a per-core memory level (default: one IBM Spyre core's
LX, 2 MiB).

One token of one KV head of one layer stores a key and a value: 2 × head_dim × bytes
(Pope et al. 2023, §2); MLA stores its latent instead (``ModelSpec.kv_elements_per_token_per_layer``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ridgeline.analytic import Dtypes, UniformShape, op_terms
from ridgeline.errors import ConfigError
from ridgeline.specs import DType, ModelSpec, get_accelerator
from ridgeline.specs.hardware import Accelerator, ManagedBy, Scope


@dataclass(frozen=True, slots=True)
class ScratchpadFit:
    model: str
    accelerator: str
    level: str
    capacity_bytes: float
    dtype: str
    bytes_per_token_per_head: float
    bytes_per_token_per_layer: float
    tokens_per_head: int  # one layer, one KV head
    tokens_per_layer: int  # one layer, all KV heads
    tokens_all_layers: int  # the whole model's KV

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def scratchpad_level(acc: Accelerator, level: str | None = None) -> str:
    """The named level, or the first per-core software-managed one (Spyre LX, CUDA smem)."""
    if level is not None:
        acc.level(level)
        return level
    for lvl in acc.levels:
        if lvl.scope is Scope.CORE and lvl.managed_by in (ManagedBy.COMPILER, ManagedBy.KERNEL):
            return lvl.name
    raise ConfigError(f"{acc.name}: field levels: no per-core scratchpad; name one with --level")


def scratchpad_fit(
    spec: ModelSpec, hw: str = "ibm-spyre", dtype: DType = DType.FP16, level: str | None = None
) -> ScratchpadFit:
    """Tokens of ``spec``'s KV that one instance of the scratchpad level holds."""
    acc = get_accelerator(hw)
    name = scratchpad_level(acc, level)
    lvl = acc.level(name)
    cap = lvl.usable_bytes if lvl.usable_bytes is not None else lvl.capacity_bytes
    per_layer = spec.kv_elements_per_token_per_layer * dtype.bytes
    per_head = per_layer / spec.kv_heads_cached
    return ScratchpadFit(
        model=spec.name,
        accelerator=acc.name,
        level=name,
        capacity_bytes=cap,
        dtype=dtype.value,
        bytes_per_token_per_head=per_head,
        bytes_per_token_per_layer=per_layer,
        tokens_per_head=int(cap // per_head),
        tokens_per_layer=int(cap // per_layer),
        tokens_all_layers=int(cap // (per_layer * spec.num_layers)),
    )


def analytic_step_bytes(spec: ModelSpec, batch: int, kv_len: int, dtype: str = "fp32") -> float:
    """Bytes one decode step reads and writes (``analytic.op_terms``: weights, KV, activations)."""
    dt = DType.parse(dtype)
    shape = UniformShape(num_seqs=float(batch), new_per_seq=1.0, prior_per_seq=float(kv_len))
    return float(
        sum(t.bytes_read + t.bytes_written for t in op_terms(spec, shape, Dtypes(dt, dt, dt)))
    )
