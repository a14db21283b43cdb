"""Which point simulator a sweep runs: ridgeline's serving simulator (``sim``) by default, or any
object with ``simulate(config, requests, seed)`` and ``fits(config)`` named as ``module:factory``.

The default maps a sweep ``Configuration`` onto the simulator's own types::

    Policy knobs      ──▶ SchedulerConfig (budget, max seqs, chunk size, policy, spec k)
                          + SimConfig (block size, prefix caching, seed)
    ChipSplit + chip  ──┐
    data types, mode  ──┴▶ analytic.Pricing (its deployment: one chip, or many, as any
                           simulation prices it; its KV pool: the one rule, ``analytic.memory``)
    Requests          ──▶ RequestSpec per request (token ids are unique labels, no shared prefix)
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import numpy as np

from ridgeline.analytic.deploy import check_deployment
from ridgeline.analytic.deployment import Deployment
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.serving.spec_decode import SpecDecodeConfig
from ridgeline.sim import RequestSpec, SimConfig, SimResult, Simulation, Tokens, kv_pool_blocks
from ridgeline.sim.early import LateStop, late_limit
from ridgeline.specs import get_accelerator, get_model
from ridgeline.sweep.point import Configuration, PointSimulator, RequestLatencies, Slo
from ridgeline.sweep.workload import Requests

# Token-id labels: request i's prompt is range(i·2^32, ...), its output the same shifted by
# 2^62, so no two requests share a block hash (a trace says nothing about shared prefixes).
_REQUEST_SPAN = 1 << 32
_OUTPUT_BASE = 1 << 62


@dataclass(frozen=True, slots=True)
class ServingSimulator:
    """ridgeline's serving simulator (event loop + cost-model executor) as a ``PointSimulator``.

    Attributes:
        memory_utilization: fraction of each chip's device memory for weights, reserve and KV
            (vLLM's ``gpu_memory_utilization``; None: the runtime's default, ``analytic.memory``).
        spec_acceptance: draft acceptance rate when a policy sets ``num_speculative_tokens``.
    """

    memory_utilization: float | None = None
    spec_acceptance: float = 0.7

    def sim_config(self, config: Configuration, max_model_len: int, seed: int) -> SimConfig:
        """The simulator's configuration for a sweep configuration."""
        p = config.policy
        k = p.num_speculative_tokens
        sched = SchedulerConfig(
            max_num_batched_tokens=p.max_num_batched_tokens,
            max_num_seqs=p.max_num_seqs,
            max_model_len=max_model_len,
            long_prefill_token_threshold=p.long_prefill_token_threshold or 0,
            policy=PolicyKind.parse(p.scheduler),
            spec=SpecDecodeConfig(k, self.spec_acceptance) if k else None,
        )
        return SimConfig(
            get_model(config.model),
            self.pricing(config),
            sched,
            block_size=p.block_size,
            prefix_caching=p.enable_prefix_caching,
            memory_utilization=self.memory_utilization,
            seed=seed,
            label=config.label,
        )

    def deployment(self, config: Configuration) -> Deployment:
        """The analytic deployment of ``config``'s split on its accelerator."""
        split = config.deployment
        acc = get_accelerator(config.accelerator)
        return Deployment(acc, split.tensor_parallel, split.pipeline_parallel)

    def pricing(self, config: Configuration) -> Pricing:
        """How ``config``'s steps are priced: its mode on its deployment, at its data types."""
        return Pricing.of(self.deployment(config), config.mode, config.dtypes.dtypes)

    def fits(self, config: Configuration) -> bool:
        """Whether the split is possible and leaves room for KV (the one KV-pool rule)."""
        try:
            cfg = self.sim_config(config, 8192, 0)
            check_deployment(cfg.model, cfg.pricing.deployment)
            kv_pool_blocks(cfg)
        except (CapacityError, ConfigError):
            return False
        return True

    def simulate(self, config: Configuration, requests: Requests, seed: int) -> RequestLatencies:
        """Simulate ``requests`` on one replica of ``config``."""
        return self._run(config, requests, seed, None)

    def simulate_until_decided(
        self, config: Configuration, requests: Requests, seed: int, slo: Slo
    ) -> RequestLatencies:
        """``simulate``, stopped once the ``slo.percentile``-th TTFT is certainly over
        ``slo.ttft_s`` (``sim.early``)."""
        n = requests.num_requests
        return self._run(
            config, requests, seed, LateStop(slo.ttft_s, late_limit(n, slo.percentile))
        )

    def _run(
        self, config: Configuration, requests: Requests, seed: int, stop: LateStop | None
    ) -> RequestLatencies:
        longest = int(np.max(requests.prompt_tokens + requests.output_tokens))
        cfg = self.sim_config(config, longest, seed)
        sim = Simulation(cfg, request_specs(requests))
        result = sim.run(stop=stop)
        return request_latencies(result, requests.num_requests, sim.stopped)


def request_id(index: int) -> str:
    """The id of the ``index``-th request of a probe (arrival order)."""
    return f"r{index}"


def request_specs(requests: Requests) -> list[RequestSpec]:
    """The simulator's requests of one probe (token ids as labels, see ``_REQUEST_SPAN``)."""
    specs = []
    for i, (t, p, o) in enumerate(
        zip(
            requests.arrival_s.tolist(),
            requests.prompt_tokens.tolist(),
            requests.output_tokens.tolist(),
            strict=True,
        )
    ):
        base = i * _REQUEST_SPAN
        prompt = Tokens((range(base, base + p),))
        output = Tokens((range(_OUTPUT_BASE + base, _OUTPUT_BASE + base + o),))
        specs.append(RequestSpec(request_id(i), t, prompt, output))
    return specs


def request_latencies(result: SimResult, n: int, stopped: bool) -> RequestLatencies:
    """Per-request arrays in arrival order; a rejected request never gets a token (inf), nor,
    when the run ``stopped`` early, does one it had not finished."""
    ttft, tpot = np.full(n, math.inf), np.full(n, math.inf)
    out = np.zeros(n, dtype=np.int64)
    index = {request_id(i): i for i in range(n)}  # ids are made by ``request_specs``
    for m in result.requests:
        i = index[m.request_id]
        out[i] = m.output_len
        if not m.rejected and not (stopped and math.isnan(m.e2e_s)):
            ttft[i], tpot[i] = m.ttft_s, m.tpot_s
        elif not m.rejected and not math.isnan(m.ttft_s):
            ttft[i] = m.ttft_s  # it got its first token, not its last
    return RequestLatencies(ttft, tpot, out, result.makespan_s, result.num_steps, stopped)


def default_simulator() -> PointSimulator:
    """ridgeline's serving simulator behind the ``PointSimulator`` seam."""
    return ServingSimulator()


def load_simulator(ref: str | None) -> PointSimulator:
    """``None`` → the default simulator; ``"pkg.mod:factory"`` → ``factory()`` from that module.

    Raises:
        ConfigError: the reference is malformed, or its module or factory cannot be found.
    """
    if ref is None:
        return default_simulator()
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--simulator {ref!r}: expected module:factory")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"--simulator {ref!r}: {e}") from e
    sim = factory()
    for method in ("simulate", "fits"):
        if not callable(getattr(sim, method, None)):
            raise ConfigError(f"--simulator {ref!r}: {attr}() has no {method}() method")
    return sim  # type: ignore[no-any-return]
