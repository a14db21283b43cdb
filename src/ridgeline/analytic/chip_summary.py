"""One accelerator of the catalog summarised: its ridge point against each memory level, and
the stable JSON of ``ridgeline hw list/show --json`` and the explorer's ``/api/accelerators``.

Light on purpose (the specs layer only): ``ridgeline hw list`` and ``hw show`` load neither
numpy nor the cost model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.html import html_table


@dataclass(frozen=True, slots=True)
class LevelRidge:
    """The bf16 ridge point (FLOP per byte) against one memory level; ``None`` where the level's
    bandwidth is unknown."""

    level: str
    bandwidth_bytes_per_s: float | None
    ridge_point_flops_per_byte: float | None


def ridge_points(acc: Accelerator, dtype: DType = DType.BF16) -> list[LevelRidge]:
    """The ridge point against every memory level whose bandwidth is known."""
    return [
        LevelRidge(lvl.name, lvl.bandwidth_bytes_per_s, acc.ridge_point(dtype, lvl.name))
        for lvl in acc.levels
    ]


@dataclass(frozen=True, slots=True)
class AcceleratorSummary:
    """One accelerator of the catalog with the ridge point against each of its levels."""

    accelerator: Accelerator
    ridge_points: tuple[LevelRidge, ...]

    def to_dict(self) -> dict[str, Any]:
        acc = self.accelerator
        return {
            "name": acc.name,
            "kind": acc.kind,
            "vendor": acc.vendor,
            "description": acc.description,
            "cores": acc.cores,
            "core_name": acc.core_name,
            "device_level": acc.device_level,
            "device_capacity_bytes": acc.device_capacity_bytes,
            "device_installed_bytes": acc.device_installed_bytes,
            "orchestrator": acc.orchestrator,
            "device_bandwidth_bytes_per_s": acc.device_bandwidth_bytes_per_s,
            "peak_flops_per_s": {k.value: v for k, v in acc.peak_flops_per_s.items()},
            "ridge_point_flops_per_byte": acc.ridge_point(),
            "levels": [_level_dict(lvl) for lvl in acc.levels],
            "ridge_points": [
                {"level": r.level, "ridge_point_flops_per_byte": r.ridge_point_flops_per_byte}
                for r in self.ridge_points
            ],
            "interconnect": _link_dict(acc),
            "sources": dict(acc.sources),
            "references": dict(acc.references),
            "notes": list(acc.notes),
        }

    def _repr_html_(self) -> str:
        rows = [
            (lvl.name, lvl.total_capacity_bytes, lvl.bandwidth_bytes_per_s, lvl.managed_by.value)
            for lvl in self.accelerator.levels
        ]
        return html_table(
            ("level", "bytes", "bytes/s", "managed by"), rows, f"{self.accelerator.description}"
        )


def _level_dict(lvl: Any) -> dict[str, Any]:
    return {
        "name": lvl.name,
        "capacity_bytes": lvl.capacity_bytes,
        "instances": lvl.instances,
        "total_capacity_bytes": lvl.total_capacity_bytes,
        "usable_bytes": lvl.usable_bytes,
        "bandwidth_bytes_per_s": lvl.bandwidth_bytes_per_s,
        "managed_by": lvl.managed_by.value,
        "local_memory": None
        if lvl.managed_by.local_memory is None
        else lvl.managed_by.local_memory.value,
        "scope": lvl.scope.value,
        "note": lvl.note,
        "sources": dict(lvl.sources),
    }


def _link_dict(acc: Accelerator) -> dict[str, Any] | None:
    link = acc.interconnect
    if link is None:
        return None
    return {
        "kind": link.kind,
        "topology": link.topology.value,
        "parallelism": link.parallelism.value,
        "links": link.links,
        "link_bandwidth_bytes_per_s": link.link_bandwidth_bytes_per_s,
        "egress_bandwidth_bytes_per_s": link.egress_bandwidth_bytes_per_s,
        "bidirectional_bytes_per_s": link.bidirectional_bytes_per_s,
        "latency_s": link.latency_s,
        "domain_chips": link.domain_chips,
        "note": link.note,
        "sources": dict(link.sources),
    }


def accelerator_summary(acc: Accelerator) -> AcceleratorSummary:
    """``acc`` with its ridge point (bf16) against every memory level of known bandwidth."""
    return AcceleratorSummary(acc, tuple(ridge_points(acc)))
