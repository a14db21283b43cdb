"""Which resource binds a step: one vocabulary and one rule for every face (``questions``,
``compare``, ``deploy``, the quiz, the report, the notebooks).

Two verdicts answer two questions, and every face names which one it shows:

- **on the roofline** (course modules 1, 2 and 4): capacity when weights + KV do not fit the
  chip's usable device memory; otherwise compute when the step's arithmetic intensity reaches
  the ridge point of the device level, bandwidth of that level below it (Williams, Waterman and
  Patterson, "Roofline", CACM 2009). Datasheet peaks, no latencies: what a learner computes.
- **expected** (the calibrated model, ``analytic.calibrated``): the resource the step spends the
  largest share of its busy time on, from the same per-operator costs — compute-bound operators,
  bandwidth-bound ones, chip-to-chip links, or fixed per-layer latency (kernel launches on a
  GPU, a layer laid out across a wafer's fabric).

Decode at batch 1 is bandwidth-bound on the roofline of every accelerator whose ridge point is
above one FLOP per byte; where the expected verdict differs (fixed latency on a wafer), both
are shown side by side, never one in place of the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ridgeline.specs.calibration import CostMode


class Resource(StrEnum):
    """What a step waits on."""

    CAPACITY = "capacity"  # it does not run: weights + KV exceed the memory
    COMPUTE = "compute"
    BANDWIDTH = "bandwidth"  # of the level the weights and KV stream from
    INTERCONNECT = "interconnect"
    LATENCY = "fixed latency"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Which resource binds a step, in one pricing mode.

    Attributes:
        resource: what the step waits on.
        mode: ``ideal`` for the roofline verdict, ``calibrated`` for the expected one.
        level: the memory level whose bandwidth binds (``hbm``, ``lpddr5``, ``sram``), else "".
        share: the resource's share of the step's busy time (1 for a roofline verdict).
    """

    resource: Resource
    mode: CostMode
    level: str = ""
    share: float = 1.0

    @property
    def text(self) -> str:
        """``hbm bandwidth``, ``compute``, ``fixed latency``, ``interconnect`` or ``capacity``."""
        if self.resource is Resource.BANDWIDTH and self.level:
            return f"{self.level} bandwidth"
        return self.resource.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "resource": self.resource.value,
            "text": self.text,
            "mode": self.mode.value,
            "level": self.level or None,
            "share": self.share,
        }


def roofline_verdict(
    intensity: float, ridge_point: float, level: str, fits: bool = True
) -> Verdict:
    """The course's verdict: capacity if it does not fit, else intensity against the ridge
    point of ``level`` (compute at or above it, ``level`` bandwidth below)."""
    if not fits:
        return Verdict(Resource.CAPACITY, CostMode.IDEAL)
    if intensity >= ridge_point:
        return Verdict(Resource.COMPUTE, CostMode.IDEAL)
    return Verdict(Resource.BANDWIDTH, CostMode.IDEAL, level)


@dataclass(frozen=True, slots=True)
class BusyTime:
    """Where a step's busy time goes, in seconds (one chip of one pipeline slot)."""

    compute_s: float  # operators whose FLOPs take longer than their bytes
    memory_s: float  # operators whose bytes take longer
    interconnect_s: float
    latency_s: float  # fixed per-layer latency

    @property
    def total_s(self) -> float:
        return self.compute_s + self.memory_s + self.interconnect_s + self.latency_s


def share_verdict(busy: BusyTime, mode: CostMode, level: str) -> Verdict:
    """The resource with the largest share of ``busy`` (``level``: the memory whose bandwidth
    the bandwidth-bound operators wait on). Ties go to the first of compute, bandwidth,
    interconnect, latency."""
    parts = (
        (Resource.COMPUTE, busy.compute_s),
        (Resource.BANDWIDTH, busy.memory_s),
        (Resource.INTERCONNECT, busy.interconnect_s),
        (Resource.LATENCY, busy.latency_s),
    )
    resource, seconds = max(parts, key=lambda p: p[1])
    share = seconds / busy.total_s if busy.total_s else 1.0
    return Verdict(resource, mode, level if resource is Resource.BANDWIDTH else "", share)
