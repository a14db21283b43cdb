"""Replicas of one deployment, behind a router.

A replica is a simulated instance on the pricing's deployment (``SimConfig.pricing``): the same
``Scheduler`` and ``CostModelExecutor``, its steps priced by the deployment's cost model
(``sim.deployment_cost`` on many chips) and its KV pool sized by the one rule
(``analytic.memory``: every chip's share, times the chips holding distinct KV).

Requests reach replicas through a ``Router``::

    arrivals --> router --+--> replica 0: TP x PP chips, one Scheduler
                          +--> replica 1: ...
                          +--> replica n-1

- ``round_robin``: the i-th arriving request goes to replica i mod n;
- ``least_outstanding``: the replica with the fewest running + waiting requests (ties: lowest
  index), the base simulation's own rule for a pool of instances.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.errors import ConfigError
from ridgeline.serving.request import Request
from ridgeline.sim.deployment_cost import DeploymentStepCost
from ridgeline.sim.early import LateStop
from ridgeline.sim.executor import StepCost
from ridgeline.sim.loop import Role, SimConfig, Simulation, _Instance
from ridgeline.sim.metrics import SimResult
from ridgeline.sim.workload import RequestSpec

__all__ = [
    "DeploymentStepCost",
    "ReplicaRun",
    "ReplicaSet",
    "ReplicaSimulation",
    "Router",
    "simulate_replicas",
]


class Router(StrEnum):
    """How arriving requests are spread over replicas."""

    ROUND_ROBIN = "round_robin"
    LEAST_OUTSTANDING = "least_outstanding"


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    """``replicas`` copies of the pricing's deployment behind a router."""

    replicas: int = 1
    router: Router = Router.LEAST_OUTSTANDING

    def __post_init__(self) -> None:
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int):
            raise ConfigError(f"field replicas: expected an integer, got {self.replicas!r}")
        if self.replicas < 1:
            raise ConfigError(f"field replicas: must be >= 1, got {self.replicas}")


@dataclass(frozen=True, slots=True)
class ReplicaRun:
    """A simulation over replicas: the usual summary and which replica served each request."""

    result: SimResult
    assignments: Mapping[str, int]

    def requests_per_replica(self) -> list[int]:
        counts = [0] * (max(self.assignments.values(), default=-1) + 1)
        for index in self.assignments.values():
            counts[index] += 1
        return counts


class ReplicaSimulation(Simulation):
    """The base event loop over ``replicas.replicas`` mixed instances of the pricing's
    deployment."""

    def __init__(
        self,
        cfg: SimConfig,
        workload: Sequence[RequestSpec],
        replicas: ReplicaSet,
        cost: DeploymentStepCost | None = None,
    ) -> None:
        if cfg.disagg is not None:
            raise ConfigError("field disagg: replicas and disaggregation do not combine yet")
        self.replica_set = replicas
        self._given_cost = cost
        self.assignments: dict[str, int] = {}
        self._arrivals = 0
        super().__init__(cfg, workload)

    def _make_cost(self) -> StepCost:
        return self._given_cost or super()._make_cost()

    def _make_instances(self) -> list[_Instance]:
        return [self._instance(i, Role.MIXED) for i in range(self.replica_set.replicas)]

    def _least_loaded(self, role: Role) -> _Instance:
        """The routing hook of the base loop: the router's choice for the next arrival."""
        if self.replica_set.router is Router.ROUND_ROBIN:
            inst = self.instances[self._arrivals % len(self.instances)]
        else:
            inst = super()._least_loaded(role)
        self._arrivals += 1
        return inst

    def _submit(self, inst: _Instance, req: Request) -> None:
        self.assignments[req.request_id] = inst.index
        super()._submit(inst, req)

    def run(
        self, progress: Callable[[int], None] | None = None, stop: LateStop | None = None
    ) -> SimResult:
        result = super().run(progress, stop)
        if len(self.instances) == 1:  # the fast mode routes nothing: one replica serves all
            self.assignments = {r.request_id: 0 for r in self.workload}
        return result


def simulate_replicas(
    cfg: SimConfig,
    workload: Sequence[RequestSpec],
    replicas: ReplicaSet,
    cost: DeploymentStepCost | None = None,
) -> ReplicaRun:
    """Run ``workload`` over ``replicas`` of ``cfg.pricing``'s deployment; ``cost`` prices the
    steps in place of the deployment's own cost model when given."""
    sim = ReplicaSimulation(cfg, workload, replicas, cost)
    return ReplicaRun(sim.run(), dict(sim.assignments))
