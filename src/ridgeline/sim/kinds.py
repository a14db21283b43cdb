"""The simulator's named choices that a command's options offer: workload kinds and
inference-perf's load types and prompt reuse.

Light on purpose (the standard library only): a command's ``--help`` lists these choices
without loading numpy or the simulator. ``sim.presets`` and ``sim.inference_perf`` use them.
"""

from __future__ import annotations

from enum import StrEnum


class WorkloadKind(StrEnum):
    """Synthetic workload kinds (``sim.presets.workload_of_kind`` gives each its defaults)."""

    POISSON = "poisson"
    GAMMA = "gamma"
    OFFLINE = "offline"
    SHARED_PREFIX = "shared-prefix"
    MULTI_TURN = "multi-turn"


class LoadKind(StrEnum):
    """inference-perf's rate-based load types."""

    CONSTANT = "constant"
    POISSON = "poisson"


class Questions(StrEnum):
    """Whether requests recur (inference-perf cycles its prompts) or each has its own."""

    CYCLED = "cycled"
    UNIQUE = "unique"
