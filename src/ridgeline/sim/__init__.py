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
    from ridgeline.serving.disagg import Disagg as Disagg
    from ridgeline.sim.executor import CostModelExecutor as CostModelExecutor
    from ridgeline.sim.executor import RequestPlan as RequestPlan
    from ridgeline.sim.executor import StepCostModel as StepCostModel
    from ridgeline.sim.executor import step_cost_model as step_cost_model
    from ridgeline.sim.loop import SimConfig as SimConfig
    from ridgeline.sim.loop import Simulation as Simulation
    from ridgeline.sim.loop import kv_pool_blocks as kv_pool_blocks
    from ridgeline.sim.loop import simulate as simulate
    from ridgeline.sim.metrics import SLO as SLO
    from ridgeline.sim.metrics import Percentiles as Percentiles
    from ridgeline.sim.metrics import RequestMetrics as RequestMetrics
    from ridgeline.sim.metrics import SimResult as SimResult
    from ridgeline.sim.traces import load_trace as load_trace
    from ridgeline.sim.traces import trace_columns as trace_columns
    from ridgeline.sim.traces import trace_rows as trace_rows
    from ridgeline.sim.workload import Arrival as Arrival
    from ridgeline.sim.workload import LengthDist as LengthDist
    from ridgeline.sim.workload import Lengths as Lengths
    from ridgeline.sim.workload import RequestSpec as RequestSpec
    from ridgeline.sim.workload import Tokens as Tokens
    from ridgeline.sim.workload import WorkloadSpec as WorkloadSpec
    from ridgeline.sim.workload import generate as generate
    from ridgeline.sim.workload import parse_lengths as parse_lengths

__getattr__, __dir__ = lazy_exports(__name__, __file__)
