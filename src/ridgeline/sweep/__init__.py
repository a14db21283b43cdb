"""sweep: sweeps over accelerators, deployments, models, policies and workloads, and the capacity
search of each configuration (the highest request rate within the SLOs), on a local process pool
or a Ray cluster, with results stored as each probe finishes.

Layer rule: imports ``errors``, ``specs``, ``analytic``, ``serving`` and ``sim`` only; never the
faces (``cli``, ``report``, ``web``), never torch. Ray and pyarrow are imported lazily, only by the
backend or store that needs them.
"""

import sys
import types
from typing import TYPE_CHECKING, Any

from ridgeline.specs.lazy import lazy_exports

if TYPE_CHECKING:
    from ridgeline.sweep.backends import Backend as Backend
    from ridgeline.sweep.backends import LocalBackend as LocalBackend
    from ridgeline.sweep.backends import ProbeTask as ProbeTask
    from ridgeline.sweep.backends import RayBackend as RayBackend
    from ridgeline.sweep.backends import SharedContext as SharedContext
    from ridgeline.sweep.backends import make_backend as make_backend
    from ridgeline.sweep.kinds import BackendKind as BackendKind
    from ridgeline.sweep.kinds import Objective as Objective
    from ridgeline.sweep.kinds import StoreFormat as StoreFormat
    from ridgeline.sweep.point import ChipSplit as ChipSplit
    from ridgeline.sweep.point import Configuration as Configuration
    from ridgeline.sweep.point import PointResult as PointResult
    from ridgeline.sweep.point import PointSimulator as PointSimulator
    from ridgeline.sweep.point import Policy as Policy
    from ridgeline.sweep.point import RequestLatencies as RequestLatencies
    from ridgeline.sweep.point import Slo as Slo
    from ridgeline.sweep.point import point_key as point_key
    from ridgeline.sweep.point import simulate_point as simulate_point
    from ridgeline.sweep.point import summarize as summarize
    from ridgeline.sweep.report import SweepReport as SweepReport
    from ridgeline.sweep.report import sweep_report as sweep_report
    from ridgeline.sweep.runner import Progress as Progress
    from ridgeline.sweep.runner import SweepOutcome as SweepOutcome
    from ridgeline.sweep.runner import run_sweep as run_sweep
    from ridgeline.sweep.runner import weights_fit as weights_fit
    from ridgeline.sweep.search import Bracket as Bracket
    from ridgeline.sweep.search import FrontPoint as FrontPoint
    from ridgeline.sweep.search import Status as Status
    from ridgeline.sweep.search import next_rate as next_rate
    from ridgeline.sweep.search import pareto_front as pareto_front
    from ridgeline.sweep.simulator import ServingSimulator as ServingSimulator
    from ridgeline.sweep.simulator import default_simulator as default_simulator
    from ridgeline.sweep.simulator import load_simulator as load_simulator
    from ridgeline.sweep.spec import Price as Price
    from ridgeline.sweep.spec import SearchSettings as SearchSettings
    from ridgeline.sweep.spec import SweepSpec as SweepSpec
    from ridgeline.sweep.spec import load_spec as load_spec
    from ridgeline.sweep.spec import spec_from_dict as spec_from_dict
    from ridgeline.sweep.spec import with_overrides as with_overrides
    from ridgeline.sweep.store import ConfigResult as ConfigResult
    from ridgeline.sweep.store import ParquetStore as ParquetStore
    from ridgeline.sweep.store import SqliteStore as SqliteStore
    from ridgeline.sweep.store import SweepData as SweepData
    from ridgeline.sweep.store import open_store as open_store
    from ridgeline.sweep.store import read_store as read_store
    from ridgeline.sweep.workload import Arrival as Arrival
    from ridgeline.sweep.workload import Lengths as Lengths
    from ridgeline.sweep.workload import Requests as Requests
    from ridgeline.sweep.workload import RequestTable as RequestTable
    from ridgeline.sweep.workload import WorkloadSpec as WorkloadSpec
    from ridgeline.sweep.workload import at_rate as at_rate
    from ridgeline.sweep.workload import load_table as load_table
    from ridgeline.sweep.workload import read_trace as read_trace

# Arrival, Lengths and WorkloadSpec are the simulator's (ridgeline.sim)
__getattr__, __dir__ = lazy_exports(__name__, __file__)


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
