"""The sweep's named choices that a command's options offer: where probes run, what ranks
the configurations, how a sweep is stored.

Light on purpose (the standard library only): ``ridgeline sweep ... --help`` and ``plan --help``
list these choices without loading numpy or the simulator.
"""

from __future__ import annotations

from enum import StrEnum


class BackendKind(StrEnum):
    """Where probes run: a process pool here, or a Ray cluster."""

    LOCAL = "local"
    RAY = "ray"


class Objective(StrEnum):
    """What the sweep ranks configurations by: the capacity (highest rate meeting the SLOs,
    DistServe's goodput), absolute or per chip, per dollar, per watt."""

    GOODPUT = "goodput"  # req/s
    GOODPUT_PER_CHIP = "goodput_per_chip"  # req/s per chip
    GOODPUT_PER_DOLLAR = "goodput_per_dollar"  # requests per dollar
    GOODPUT_PER_WATT = "goodput_per_watt"  # requests per joule (req/s per W)

    @property
    def unit(self) -> str:
        return {
            Objective.GOODPUT: "req/s",
            Objective.GOODPUT_PER_CHIP: "req/s/chip",
            Objective.GOODPUT_PER_DOLLAR: "req/$",
            Objective.GOODPUT_PER_WATT: "req/J",
        }[self]


class StoreFormat(StrEnum):
    """How a sweep is stored."""

    SQLITE = "sqlite"
    PARQUET = "parquet"
