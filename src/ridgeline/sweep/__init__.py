"""sweep: sweeps over accelerators, deployments, models, policies and workloads, and the capacity
search of each configuration (the highest request rate within the SLOs), on a local process pool
or a Ray cluster, with results stored as each probe finishes.

Layer rule: imports ``errors``, ``specs``, ``analytic``, ``serving`` and ``sim`` only; never the
faces (``cli``, ``report``, ``web``), never torch. Ray and pyarrow are imported lazily, only by the
backend or store that needs them.
"""

import sys
import types
from typing import Any

from ridgeline.sweep.backends import (
    Backend,
    BackendKind,
    LocalBackend,
    ProbeTask,
    RayBackend,
    SharedContext,
    make_backend,
)
from ridgeline.sweep.point import (
    ChipSplit,
    Configuration,
    PointResult,
    PointSimulator,
    Policy,
    RequestLatencies,
    Slo,
    point_key,
    simulate_point,
    summarize,
)
from ridgeline.sweep.report import SweepReport, sweep_report
from ridgeline.sweep.runner import Progress, SweepOutcome, run_sweep, weights_fit
from ridgeline.sweep.search import Bracket, FrontPoint, Status, next_rate, pareto_front
from ridgeline.sweep.simulator import ServingSimulator, default_simulator, load_simulator
from ridgeline.sweep.spec import (
    Objective,
    Price,
    SearchSettings,
    SweepSpec,
    load_spec,
    spec_from_dict,
    with_overrides,
)
from ridgeline.sweep.store import (
    ConfigResult,
    ParquetStore,
    SqliteStore,
    StoreFormat,
    SweepData,
    open_store,
    read_store,
)
from ridgeline.sweep.workload import (
    Arrival,
    Lengths,
    Requests,
    RequestTable,
    WorkloadSpec,
    at_rate,
    load_table,
    read_trace,
)  # Arrival, Lengths and WorkloadSpec are the simulator's (ridgeline.sim)

__all__ = [
    "Arrival",
    "Backend",
    "BackendKind",
    "Bracket",
    "ConfigResult",
    "Configuration",
    "ChipSplit",
    "FrontPoint",
    "Lengths",
    "LocalBackend",
    "Objective",
    "ParquetStore",
    "PointResult",
    "PointSimulator",
    "Policy",
    "Price",
    "ProbeTask",
    "Progress",
    "RayBackend",
    "RequestLatencies",
    "RequestTable",
    "Requests",
    "SearchSettings",
    "ServingSimulator",
    "SharedContext",
    "Slo",
    "SqliteStore",
    "Status",
    "StoreFormat",
    "SweepData",
    "SweepOutcome",
    "SweepReport",
    "SweepSpec",
    "WorkloadSpec",
    "at_rate",
    "default_simulator",
    "load_simulator",
    "load_spec",
    "load_table",
    "make_backend",
    "next_rate",
    "open_store",
    "pareto_front",
    "point_key",
    "read_store",
    "read_trace",
    "run_sweep",
    "simulate_point",
    "spec_from_dict",
    "summarize",
    "sweep_report",
    "weights_fit",
    "with_overrides",
]


class _CallableModule(types.ModuleType):
    """This package, callable as the analytic ``ridgeline.sweep`` function.

    NOTE: importing a submodule binds it as an attribute of its parent, so the first
    ``import ridgeline.sweep`` replaces the top-level ``rl.sweep`` (the vectorised analytic sweep
    of ``ridgeline.analytic``) with this package. Calling the package forwards to that function, so
    ``rl.sweep(model, acc, phase, batch, context)`` keeps working whatever was imported first.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ridgeline.analytic import sweep as analytic_sweep

        return analytic_sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
