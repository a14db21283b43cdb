"""Disaggregated serving over pools of many-chip instances: a prefill pool and a decode pool,
each instance a deployment of its own (tensor x pipeline parallel), the KV crossing the
accelerator's interconnect in between.

The base loop's disaggregation (``sim.loop``, ``serving.disagg``) runs instances that share
the configuration's deployment; here each pool has its own::

    arrivals --> prefill pool: num_prefill x (TP_p x PP_p chips) --KV over the links-->
                 decode pool:  num_decode  x (TP_d x PP_d chips)

- step time: the configuration's pricing moved to the pool's deployment
  (``Pricing.on``; ``sim.executor.step_cost_model``);
- KV pool: the one rule (``analytic.memory``) on the pool's deployment;
- the KV transfer (``pool_link``): a prompt's KV is sharded over the prefill instance's chips
  and lands sharded over the decode instance's; every chip sends its own shard over its own
  links, so min(chips_p, chips_d) chips' egress carries it at once, after one hop's latency
  (the shard-to-shard layout of vLLM's NIXL connector, vllm/distributed/kv_transfer; DistServe,
  Zhong et al., OSDI 2024, §4 places the two phases in one node for this bandwidth).

``SimConfig.pricing`` is the decode pool's; requests go to the least loaded instance of each
pool (the base loop's rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ridgeline.analytic import Deployment
from ridgeline.analytic.memory import kv_pool_blocks as rule_blocks
from ridgeline.errors import ConfigError
from ridgeline.serving.disagg import MAX_INSTANCES, Disagg
from ridgeline.sim.executor import StepCost, step_cost_model
from ridgeline.sim.loop import Role, SimConfig, Simulation
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs.inputs import check_int


@dataclass(frozen=True, slots=True)
class PoolSet:
    """A prefill pool and a decode pool of one accelerator, each of identical deployments."""

    prefill: Deployment
    decode: Deployment
    num_prefill: int = 1
    num_decode: int = 1

    def __post_init__(self) -> None:
        check_int("num_prefill", self.num_prefill, 1, MAX_INSTANCES)
        check_int("num_decode", self.num_decode, 1, MAX_INSTANCES)
        if self.prefill.accelerator.name != self.decode.accelerator.name:
            raise ConfigError("field pools: prefill and decode run on one accelerator")

    @property
    def chips(self) -> int:
        return self.num_prefill * self.prefill.chips + self.num_decode * self.decode.chips


def pool_link(pools: PoolSet) -> Disagg:
    """The KV link between the pools (module docstring): one hop's latency, and the egress of
    min(chips_p, chips_d) chips side by side.

    Raises:
        ConfigError: the accelerator's catalog file describes no interconnect.
    """
    link = pools.decode.accelerator.interconnect
    if link is None:
        raise ConfigError(
            f"field pools: {pools.decode.accelerator.name} has no interconnect in its catalog "
            "file, so no KV can move between instances"
        )
    lanes = min(pools.prefill.chips, pools.decode.chips)
    return Disagg(
        num_prefill=pools.num_prefill,
        num_decode=pools.num_decode,
        link_bandwidth_bytes_per_s=lanes * link.egress_bandwidth_bytes_per_s,
        link_latency_s=link.latency_s,
    )


class PoolSimulation(Simulation):
    """The base event loop over a prefill pool and a decode pool of their own deployments."""

    def __init__(self, cfg: SimConfig, workload: Sequence[RequestSpec], pools: PoolSet) -> None:
        self.pools = pools
        cfg = replace(cfg, pricing=cfg.pricing.on(pools.decode), disagg=pool_link(pools))
        self._prefill_pricing = cfg.pricing.on(pools.prefill)
        self._prefill_blocks = rule_blocks(
            cfg.model, pools.prefill, cfg.dtypes, cfg.block_bytes, cfg.memory_rule
        )
        self._prefill_cost = step_cost_model(cfg.model, self._prefill_pricing)
        super().__init__(cfg, workload)

    def _role_cost(self, role: Role) -> StepCost:
        return self._prefill_cost if role is Role.PREFILL else self.cost

    def _role_blocks(self, role: Role) -> int:
        return self._prefill_blocks if role is Role.PREFILL else self.num_blocks
