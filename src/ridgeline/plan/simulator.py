"""How a plan's probes are simulated: one copy of a layout, behind the sweep's ``PointSimulator``
seam, so the sweep's backends (a local process pool, or Ray) run them.

A probe is a sweep ``Configuration`` at a rate: the configuration's policy is named after the
layout's key, and this simulator reads the layout (formats, splits, instance counts, knobs)
from its own table, which travels to every worker once with the backend's shared context::

    Configuration(policy.name = layout.key) ──▶ PlanSimulator.layouts[key]
        aggregated     ──▶ sim.loop.Simulation on the split's deployment (one replica)
        disaggregated  ──▶ sim.pools.PoolSimulation (x prefill + y decode instances)

Every step is priced as ``predict`` prices it: the plan's pricing value on the layout's
deployment and formats (``analytic.pricing``), the KV pool by the one rule (``analytic.memory``)
with the layout's token budget and max seqs as the profile step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ridgeline.analytic.pricing import Pricing
from ridgeline.plan.space import BLOCK_SIZE, Layout
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import SimConfig
from ridgeline.sim.early import LateStop, late_limit
from ridgeline.sim.loop import Simulation
from ridgeline.sim.pools import PoolSet, PoolSimulation
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.sweep.point import ChipSplit, Configuration, Policy, RequestLatencies, Slo
from ridgeline.sweep.simulator import request_latencies, request_specs
from ridgeline.sweep.workload import Requests, WorkloadSpec


@dataclass(frozen=True, slots=True)
class PlanSimulator:
    """A ``PointSimulator`` over the layouts of one plan (module docstring).

    Attributes:
        models: model name -> spec, for every plan run together.
        accelerators: catalog name -> accelerator, for every layout's chip.
        layouts: (model name, layout key) -> layout.
        pricing: the plan's pricing value (mode and terms), moved to each layout's deployment
            and formats.
    """

    models: Mapping[str, ModelSpec]
    accelerators: Mapping[str, Accelerator]
    layouts: Mapping[tuple[str, str], Layout]
    pricing: Pricing

    def fits(self, config: Configuration) -> bool:
        """Every layout of the table passed the screen's memory rule."""
        return (config.model, config.policy.name) in self.layouts

    def simulate(self, config: Configuration, requests: Requests, seed: int) -> RequestLatencies:
        return self._run(config, requests, seed, None)

    def simulate_until_decided(
        self, config: Configuration, requests: Requests, seed: int, slo: Slo
    ) -> RequestLatencies:
        """``simulate``, stopped once the ``slo.percentile``-th TTFT is certainly missed."""
        stop = LateStop(slo.ttft_s, late_limit(requests.num_requests, slo.percentile))
        return self._run(config, requests, seed, stop)

    def simulation(
        self, model: ModelSpec, layout: Layout, requests: Requests, seed: int
    ) -> Simulation:
        """The simulation of one copy of ``layout`` serving ``requests``."""
        acc = self.accelerators[layout.accelerator]
        longest = int(np.max(requests.prompt_tokens + requests.output_tokens))
        sched = SchedulerConfig(
            max_num_batched_tokens=layout.knobs.max_num_batched_tokens,
            max_num_seqs=layout.knobs.max_num_seqs,
            max_model_len=longest,
        )
        decode = layout.decode.deployment(acc)
        pricing = self.pricing.on(decode).with_dtypes(layout.formats.dtypes)
        cfg = SimConfig(model, pricing, sched, block_size=BLOCK_SIZE, seed=seed, label=layout.key)
        specs = request_specs(requests)
        if layout.prefill is None:
            return Simulation(cfg, specs)
        pools = PoolSet(
            layout.prefill.deployment(acc), decode, layout.num_prefill, layout.num_decode
        )
        return PoolSimulation(cfg, specs, pools)

    def _run(
        self, config: Configuration, requests: Requests, seed: int, stop: LateStop | None
    ) -> RequestLatencies:
        layout = self.layouts[(config.model, config.policy.name)]
        sim = self.simulation(self.models[config.model], layout, requests, seed)
        result = sim.run(stop=stop)
        return request_latencies(result, requests.num_requests, sim.stopped)


def probe_config(model_name: str, layout: Layout, workload: WorkloadSpec) -> Configuration:
    """The sweep configuration that names ``layout`` (its policy carries the layout's key and
    knobs; its split is the decode instance's)."""
    d = layout.decode
    policy = Policy(
        name=layout.key,
        block_size=BLOCK_SIZE,
        max_num_batched_tokens=layout.knobs.max_num_batched_tokens,
        max_num_seqs=layout.knobs.max_num_seqs,
    )
    split = ChipSplit(d.chips, d.tensor, d.pipeline)
    return Configuration(model_name, layout.accelerator, split, policy, workload)
