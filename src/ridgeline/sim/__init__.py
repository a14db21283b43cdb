"""sim: the serving simulator — workloads and traces, the cost-model executor, the event loop
and its metrics. It drives the same ``serving.Scheduler`` the real engine uses.

Layer rule: imports ``serving``, ``analytic``, ``specs`` and ``errors`` only; never torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.sim.native import guard
from ridgeline.specs.lazy import lazy_exports

guard()  # before the fast mode's modules load: a stale compiled copy must not (sim.native)

if TYPE_CHECKING:
    from ridgeline.serving.disagg import Disagg
    from ridgeline.sim.executor import (
        CostModelExecutor,
        RequestPlan,
        StepCostModel,
        step_cost_model,
    )
    from ridgeline.sim.loop import SimConfig, Simulation, kv_pool_blocks, simulate
    from ridgeline.sim.metrics import SLO, Percentiles, RequestMetrics, SimResult
    from ridgeline.sim.traces import load_trace, trace_columns, trace_rows
    from ridgeline.sim.workload import (
        Arrival,
        LengthDist,
        Lengths,
        RequestSpec,
        Tokens,
        WorkloadSpec,
        generate,
        parse_lengths,
    )

__all__ = [
    "SLO",
    "Arrival",
    "CostModelExecutor",
    "Disagg",
    "LengthDist",
    "Lengths",
    "Percentiles",
    "RequestMetrics",
    "RequestPlan",
    "RequestSpec",
    "SimConfig",
    "SimResult",
    "Simulation",
    "StepCostModel",
    "Tokens",
    "WorkloadSpec",
    "generate",
    "kv_pool_blocks",
    "load_trace",
    "parse_lengths",
    "simulate",
    "step_cost_model",
    "trace_columns",
    "trace_rows",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ridgeline.serving.disagg": ("Disagg",),
        "ridgeline.sim.executor": (
            "CostModelExecutor",
            "RequestPlan",
            "StepCostModel",
            "step_cost_model",
        ),
        "ridgeline.sim.loop": (
            "SimConfig",
            "Simulation",
            "kv_pool_blocks",
            "simulate",
        ),
        "ridgeline.sim.metrics": (
            "SLO",
            "Percentiles",
            "RequestMetrics",
            "SimResult",
        ),
        "ridgeline.sim.traces": (
            "load_trace",
            "trace_columns",
            "trace_rows",
        ),
        "ridgeline.sim.workload": (
            "Arrival",
            "LengthDist",
            "Lengths",
            "RequestSpec",
            "Tokens",
            "WorkloadSpec",
            "generate",
            "parse_lengths",
        ),
    },
)
