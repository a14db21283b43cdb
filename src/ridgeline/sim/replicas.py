"""Replicas that are deployments of many chips, behind a router.

A replica runs the same ``Scheduler`` and ``CostModelExecutor`` as any simulated instance; only
its cost model and its KV pool change:

- step time: ``analytic.deploy`` per chip (Megatron-LM split of every op), plus the pass's
  all-reduces, logits gather and stage sends. One step is one microbatch passing every stage
  (NOTE: no microbatching inside a step, so a deep pipeline idles in its bubble; ``analytic``'s
  ``deployment_cost(..., microbatches=1)`` gives the same time, which a test checks);
- KV pool: what every chip has left after its share of the weights, times the chips that hold
  distinct KV (pp stages x tp chips, fewer when KV heads replicate).

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
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from ridgeline.analytic import Deployment, Dtypes, Efficiency
from ridgeline.analytic.collectives import LinkTerms
from ridgeline.analytic.deploy import check_deployment, chip_op_costs, kv_share, pass_links
from ridgeline.analytic.kv import weights_bytes
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.serving.request import Request
from ridgeline.sim.early import LateStop
from ridgeline.sim.executor import StepCost, StepCostModel
from ridgeline.sim.loop import Role, SimConfig, Simulation, _Instance
from ridgeline.sim.metrics import SimResult
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import ModelSpec
from ridgeline.specs.calibration import CostMode


class Router(StrEnum):
    """How arriving requests are spread over replicas."""

    ROUND_ROBIN = "round_robin"
    LEAST_OUTSTANDING = "least_outstanding"


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    """``replicas`` copies of one deployment behind a router."""

    deployment: Deployment
    replicas: int = 1
    router: Router = Router.LEAST_OUTSTANDING

    def __post_init__(self) -> None:
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int):
            raise ConfigError(f"field replicas: expected an integer, got {self.replicas!r}")
        if self.replicas < 1:
            raise ConfigError(f"field replicas: must be >= 1, got {self.replicas}")


class DeploymentStepCost(StepCostModel):
    """``StepCostModel`` of a replica deployed on many chips.

    Per-op FLOPs and bytes are one chip's share after the tensor-parallel split, summed over the
    stages (a lone microbatch visits them one after another); the links add an affine term in
    the step's sequences and tokens.
    """

    def __init__(
        self,
        model: ModelSpec,
        deployment: Deployment,
        dtypes: Dtypes | None = None,
        efficiency: Efficiency | None = None,
        mode: CostMode = CostMode.IDEAL,
    ) -> None:
        check_deployment(model, deployment)
        self.deployment = deployment  # read by _terms while the base class builds its tables
        super().__init__(model, deployment.accelerator, dtypes, efficiency, mode)
        # link times by (sequences, tokens): a run asks for the same few shapes step after step
        self._links: dict[tuple[float, float], float] = {}

    def _terms(self, shape: object) -> tuple[np.ndarray, ...]:
        costs = chip_op_costs(self.model, self.deployment.tensor_parallel, shape, self.dtypes)  # type: ignore[arg-type]
        kv = np.array([c.kv_bytes for c in costs])
        compute = self._ideal_compute_s([c.flops for c in costs], tuple(c.kind for c in costs))
        return (
            compute,
            np.array([c.bytes for c in costs]) - kv,
            kv,
            np.array([c.gemm_rows for c in costs]),
        )

    def link_s(self, num_seqs: float, num_tokens: float) -> float:
        """Link time of one step of ``num_seqs`` sequences adding ``num_tokens`` tokens."""
        key = (num_seqs, num_tokens)
        t = self._links.get(key)
        if t is None:
            links = pass_links(
                self.model, self.deployment, num_seqs, num_tokens, self.dtypes, self.calibration
            )
            t = self._links[key] = links.time_s
        return t

    def link_terms(self, num_seqs: float, num_tokens: float) -> LinkTerms:
        """``link_s`` split by calibration term (``analytic.collectives.LinkTerms``)."""
        return pass_links(self.model, self.deployment, num_seqs, num_tokens, self.dtypes).terms

    def step_time_s(self, new: Sequence[int], prior: Sequence[int]) -> float:
        return super().step_time_s(new, prior) + self.link_s(len(new), float(sum(new)))

    def decode_run_s(self, prior: Sequence[int], k: int) -> np.ndarray:
        if not self.affine:  # the base prices each step with step_time_s, links included
            return super().decode_run_s(prior, k)
        batch = float(len(prior))
        return super().decode_run_s(prior, k) + self.link_s(batch, batch)

    def grouped_step_s(
        self, batch: int, total: int, new: Sequence[int], prior: Sequence[int]
    ) -> float | None:
        t = super().grouped_step_s(batch, total, new, prior)
        if t is None:
            return None
        return t + self.link_s(batch + len(new), float(batch + sum(new)))

    def decode_segments_s(self, segments: Sequence[tuple[int, int, int]]) -> list[float] | None:
        times = super().decode_segments_s(segments)
        if times is None:
            return None
        links: list[float] = []
        for b, _, k in segments:
            links += [self.link_s(float(b), float(b))] * k
        return [t + link for t, link in zip(times, links, strict=True)]


def replica_kv_blocks(cfg: SimConfig, deployment: Deployment) -> int:
    """KV blocks of one replica: each chip's ``memory_utilization`` share left after its
    1/chips of the weights, times pp / kv_share (the chips holding distinct KV heads)."""
    chips = deployment.chips
    per_chip = cfg.hw.device_capacity_bytes * cfg.memory_utilization - (
        weights_bytes(cfg.model, cfg.dtypes.weight) / chips
    )
    share = kv_share(cfg.model, deployment.tensor_parallel)
    blocks = int(per_chip * deployment.pipeline_parallel / share // cfg.block_bytes)
    if blocks < 1:
        raise CapacityError(
            f"{cfg.model.name} leaves no room for KV on {deployment.label} "
            f"(each chip short by {-per_chip / 1e9:.2f} GB); use more chips per replica"
        )
    return blocks


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
    """The base event loop over ``replicas.replicas`` mixed instances of one deployment."""

    def __init__(
        self,
        cfg: SimConfig,
        workload: Sequence[RequestSpec],
        replicas: ReplicaSet,
        cost: DeploymentStepCost | None = None,
    ) -> None:
        if cfg.disagg is not None:
            raise ConfigError("field disagg: replicas and disaggregation do not combine yet")
        dep = replicas.deployment
        cfg = replace(cfg, hw=dep.accelerator)
        cfg = replace(cfg, num_blocks=cfg.num_blocks or replica_kv_blocks(cfg, dep))
        self.replica_set = replicas
        self._given_cost = cost
        self.assignments: dict[str, int] = {}
        self._arrivals = 0
        super().__init__(cfg, workload)

    def _make_cost(self) -> StepCost:
        cfg = self.cfg
        return self._given_cost or DeploymentStepCost(
            cfg.model, self.replica_set.deployment, cfg.dtypes, cfg.efficiency, cfg.mode
        )

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
    """Run ``workload`` over ``replicas`` (``cfg.hw`` is replaced by the deployment's chip);
    ``cost`` prices the steps in place of the deployment's own cost model when given."""
    sim = ReplicaSimulation(cfg, workload, replicas, cost)
    return ReplicaRun(sim.run(), dict(sim.assignments))
