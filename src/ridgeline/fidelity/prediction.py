"""``ridgeline predict``: throughput and latency of a deployment, through the serving simulator.

A prediction runs the same scheduler and block manager as every simulation, on a TP x PP
deployment (``sim.replicas``), priced by the ``Pricing`` the request describes (calibrated by
default, ``analytic.pricing``):

- offline: ``requests`` requests all queued at t = 0 with fixed ISL/OSL, as TensorRT-LLM's and
  vLLM's throughput benchmarks run them; the running batch is limited only by the KV cache and
  ``max_seqs``;
- fixed batch: ``batch`` requests at t = 0 with ``max_seqs = batch`` (per-user decode speed);
- closed loop: ``concurrency`` clients, each sending its next request when the last one ends
  (``requests``, default four per client, queued with ``max_seqs = concurrency``; TTFT counts
  from admission, not from the queue);
- under load: Poisson arrivals at ``rate_rps``.

The KV pool follows the one rule every path uses (``analytic.memory``: vLLM's
``gpu_memory_utilization``, ``memory_utilization`` here, of each chip for its share of the weights,
the reserve of a profile step of ``max_num_batched_tokens`` tokens over the running limit, and the KV cache).

``engine`` names a serving-engine profile (``specs.engines``: vllm, trtllm, generic): its
scheduler limits and their defaults, block size, prefix caching, kernel terms and host work per
step and request (calibrated mode) then replace the throughput benchmark's defaults above.

A prediction reports p50/p90/p99 of TTFT, TPOT, ITL and end-to-end latency, and output, input
and total tokens per second of the whole system and per chip (tp x pp x dp chips).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ridgeline.analytic import Dtypes, Phase
from ridgeline.analytic.deploy import (
    Deployment,
    DeploymentCost,
    check_deployment,
    deployment_cost,
)
from ridgeline.analytic.memory import chip_budget
from ridgeline.analytic.pricing import Pricing
from ridgeline.defaults import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_SEQS
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.fidelity.trace import Recorder, Trace
from ridgeline.sim.engines import EngineRun, ServingSetup, engine_sim_config
from ridgeline.sim.loop import SimConfig, kv_pool_blocks
from ridgeline.sim.metrics import Percentiles, SimResult
from ridgeline.sim.replicas import ReplicaSet, Router, simulate_replicas
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import Accelerator, ModelSpec, get_accelerator, get_model
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.engines import get_engine
from ridgeline.specs.limits import MAX_RATE_PER_S

DEFAULT_REQUESTS = 1000
BLOCK_SIZE = 16
MAX_PREDICT_REQUESTS = 100_000
CLIENT_REQUESTS = 4  # requests per closed-loop client when none are given


def compute_dtype(weight: DType) -> DType:
    """The format matmuls run in (``analytic.Dtypes.serving``)."""
    return Dtypes.serving(weight).act


@dataclass(frozen=True, slots=True)
class PredictRequest:
    """What to predict (module docstring): at most one of ``batch`` and ``concurrency``;
    ``requests`` defaults to ``batch``, to four per client, or to ``DEFAULT_REQUESTS``;
    ``rate_rps`` spreads the requests as Poisson arrivals instead of queueing them at t = 0."""

    hardware: str | Accelerator
    model: str | ModelSpec
    isl: int
    osl: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    expert_parallel: int = 1
    weight_dtype: DType = DType.BF16
    kv_dtype: DType | None = None
    requests: int | None = None
    batch: int | None = None
    concurrency: int | None = None
    max_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    memory_utilization: float | None = None
    rate_rps: float | None = None
    mode: CostMode = CostMode.CALIBRATED
    seed: int = 0
    engine: str | None = None

    def __post_init__(self) -> None:
        for name in ("isl", "osl", "tensor_parallel", "pipeline_parallel", "data_parallel"):
            _check_int(name, getattr(self, name), 1, 10_000_000)
        _check_int("expert_parallel", self.expert_parallel, 1, 10_000_000)
        for name in ("max_seqs", "max_num_batched_tokens"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), 1, 10_000_000)
        if self.requests is not None and self.batch is not None:
            raise ConfigError("field requests/batch: give one of them, not both")
        if self.batch is not None and self.concurrency is not None:
            raise ConfigError("field batch/concurrency: give one of them, not both")
        for name in ("requests", "batch", "concurrency"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), 1, MAX_PREDICT_REQUESTS)
        u = self.memory_utilization
        if u is not None and (not 0.0 < u <= 1.0 or math.isnan(u)):
            raise ConfigError(f"field memory_utilization: must be in (0, 1], got {u}")
        if self.rate_rps is not None and not 0.0 < self.rate_rps <= MAX_RATE_PER_S:
            raise ConfigError(
                f"field rate_rps: must be in (0, {MAX_RATE_PER_S:g}], got {self.rate_rps}"
            )
        if self.rate_rps is not None and (self.batch or self.concurrency) is not None:
            other = "batch" if self.batch is not None else "concurrency"
            raise ConfigError(  # the rate would have been dropped: a batch starts at t = 0
                f"field rate_rps/{other}: Poisson arrivals or a {other} at t = 0, not both"
            )

    @property
    def dtypes(self) -> Dtypes:
        return Dtypes.serving(self.weight_dtype, self.kv_dtype)

    def pricing(self) -> Pricing:
        """How every step of the prediction is priced: ``mode`` on the TP x PP deployment of
        ``hardware``, at ``dtypes`` (built once per prediction and passed down)."""
        acc = get_accelerator(self.hardware)
        dep = Deployment(
            acc, self.tensor_parallel, self.pipeline_parallel, expert_parallel=self.expert_parallel
        )
        return Pricing.of(dep, self.mode, self.dtypes)

    @property
    def num_requests(self) -> int:
        """Requests of the whole system (a batch or clients per instance)."""
        if self.batch is not None:
            return self.batch * self.data_parallel
        if self.requests is not None:
            return self.requests
        if self.concurrency is not None:
            return CLIENT_REQUESTS * self.concurrency * self.data_parallel
        return DEFAULT_REQUESTS

    @property
    def running_limit(self) -> int | None:
        """Most requests running at once on one instance (None: the engine's default)."""
        default = DEFAULT_MAX_SEQS if self.engine is None else None
        return self.batch or self.concurrency or self.max_seqs or default

    @property
    def token_budget(self) -> int | None:
        """Tokens per step (None: the engine's default)."""
        default = DEFAULT_MAX_NUM_BATCHED_TOKENS if self.engine is None else None
        return self.max_num_batched_tokens or default


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"field {name}: must be an integer in {low}..{high}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Prediction:
    """A predicted throughput and latency, and what limits it.

    Attributes:
        output_tokens_per_s: output tokens per second of the whole system (all instances).
        per_user_tokens_per_s: 1 / mean TPOT, what one user sees while generating.
        ttft_s, tpot_s: means over requests.
        batch: time-weighted mean running batch of an instance.
        bound: what limits a representative decode step (``analytic.binding.Verdict.text``).
        mode: ``calibrated`` or ``ideal``; ``label`` the pricing's, for tables.
        kv_blocks: the KV pool of an instance (``analytic.memory``), ``block_tokens`` a block.
        max_batch: requests of isl + osl tokens that pool holds at once.
        ttft, tpot, itl, e2e: mean and p50/p90/p99 of each latency (seconds; TTFT and
            end-to-end from admission in a closed loop).
        input_tokens_per_s, total_tokens_per_s: prompt and all tokens per second of the system.
        chips: chips of the system (tp x pp x dp); the per-chip figures divide by them.
        engine: the engine profile (``generic``: the throughput benchmark's defaults).
    """

    hardware: str
    model: str
    deployment: str
    mode: CostMode
    output_tokens_per_s: float
    per_user_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    batch: float
    bound: str
    kv_blocks: int
    num_requests: int
    makespan_s: float
    label: str = ""
    block_tokens: int = BLOCK_SIZE
    max_batch: int = 0
    memory: str = ""  # where one chip's memory goes (``analytic.memory.ChipBudget.sentence``)
    ttft: Percentiles = Percentiles(0.0, 0.0, 0.0, 0.0)
    tpot: Percentiles = Percentiles(0.0, 0.0, 0.0, 0.0)
    itl: Percentiles = Percentiles(0.0, 0.0, 0.0, 0.0)
    e2e: Percentiles = Percentiles(0.0, 0.0, 0.0, 0.0)
    input_tokens_per_s: float = 0.0
    total_tokens_per_s: float = 0.0
    chips: int = 1
    engine: str = "generic"

    def per_chip(self, tokens_per_s: float) -> float:
        return tokens_per_s / self.chips

    def to_dict(self) -> dict[str, Any]:
        names = ("ttft", "tpot", "itl", "e2e")
        latencies = {f"{n}_s_percentiles": asdict(getattr(self, n)) for n in names}
        return {
            "schema": "ridgeline.predict/2",
            "hardware": self.hardware,
            "model": self.model,
            "deployment": self.deployment,
            "mode": self.mode.value,
            "label": self.label,
            "output_tokens_per_s": self.output_tokens_per_s,
            "per_user_tokens_per_s": self.per_user_tokens_per_s,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "batch": self.batch,
            "bound": self.bound,
            "kv_blocks": self.kv_blocks,
            "kv_tokens": self.kv_blocks * self.block_tokens,
            "max_batch": self.max_batch,
            "memory_per_chip": self.memory,
            "num_requests": self.num_requests,
            "makespan_s": self.makespan_s,
            "engine": self.engine,
            **latencies,
            "input_tokens_per_s": self.input_tokens_per_s,
            "total_tokens_per_s": self.total_tokens_per_s,
            "chips": self.chips,
            "per_chip": {
                "output_tokens_per_s": self.per_chip(self.output_tokens_per_s),
                "input_tokens_per_s": self.per_chip(self.input_tokens_per_s),
                "total_tokens_per_s": self.per_chip(self.total_tokens_per_s),
            },
        }


def _workload(req: PredictRequest) -> list[RequestSpec]:
    n, isl, osl = req.num_requests, req.isl, req.osl
    rng = random.Random(req.seed)
    t, out = 0.0, []
    for i in range(n):
        if req.rate_rps is not None:
            t += rng.expovariate(req.rate_rps)
        base = i * (isl + osl)
        out.append(
            RequestSpec(f"r{i}", t, range(base, base + isl), range(base + isl, base + isl + osl))
        )
    return out


def _sim_config(req: PredictRequest, model: ModelSpec, pricing: Pricing) -> SimConfig:
    """The simulated instance: ``pricing``'s deployment, the engine profile's scheduler (the
    request's limits, else the engine's or the benchmark's) and its KV pool under the one rule,
    stopped where the running limit's requests are held."""
    setup = ServingSetup(
        max_num_batched_tokens=req.token_budget,
        max_num_seqs=req.running_limit,
        max_model_len=req.isl + req.osl,
        memory_utilization=req.memory_utilization,
        prefix_caching=None if req.engine else False,
    )
    run = EngineRun(get_engine(req.engine or "generic"), setup)
    cfg = replace(engine_sim_config(model, pricing, run), seed=req.seed)
    blocks = kv_pool_blocks(cfg)
    need = math.ceil((req.isl + req.osl) / cfg.block_size)
    if blocks < need:
        raise CapacityError(
            f"{model.name} on {pricing.deployment.label}: one request of {req.isl + req.osl} "
            f"tokens needs {need} KV blocks, and the memory left after the weights and the "
            f"reserve holds {blocks}"
        )
    # NOTE: blocks beyond what max_seqs requests can hold are never touched (no request shares
    # a prefix here), so the pool stops there: same schedule, far fewer blocks to build.
    return replace(cfg, num_blocks=min(blocks, cfg.scheduler.max_num_seqs * need))


def _bound(model: ModelSpec, pricing: Pricing, req: PredictRequest, batch: float) -> DeploymentCost:
    w = pricing.workload(Phase.DECODE, max(1, round(batch)), req.isl + req.osl // 2)
    return deployment_cost(model, pricing, w, microbatches=1)


def predict(req: PredictRequest) -> Prediction:
    """Simulate ``req`` and summarise it (see the module docstring).

    Raises:
        ConfigError: an impossible split or option (names the field).
        CapacityError: the weights, or one request's KV, do not fit the deployment.
    """
    model, pricing = get_model(req.model), req.pricing()
    check_deployment(model, pricing.deployment)
    cfg = _sim_config(req, model, pricing)
    replicas = ReplicaSet(req.data_parallel, Router.ROUND_ROBIN)
    result = simulate_replicas(cfg, _workload(req), replicas).result
    return _summary(req, model, cfg, result)


def _summary(
    req: PredictRequest, model: ModelSpec, cfg: SimConfig, result: SimResult
) -> Prediction:
    pricing = cfg.pricing
    dep = pricing.deployment
    if result.num_completed == 0:
        raise CapacityError(f"{model.name} on {dep.label}: no request completed")
    tpot = result.tpot_s.mean
    ttft, e2e = result.ttft_s, result.e2e_s
    if req.concurrency is not None:  # a client's clock starts when its request is admitted
        done = [r for r in result.requests if not r.rejected]
        ttft = Percentiles.of([r.ttft_s - r.queue_s for r in done])
        e2e = Percentiles.of([r.e2e_s - r.queue_s for r in done])
    full = kv_pool_blocks(replace(cfg, num_blocks=None))
    return Prediction(
        hardware=dep.accelerator.name,
        model=model.name,
        deployment=dep.label if req.data_parallel == 1 else f"{req.data_parallel} x {dep.label}",
        mode=pricing.mode,
        output_tokens_per_s=result.output_tokens_per_s,
        per_user_tokens_per_s=1.0 / tpot if tpot > 0 else math.inf,
        ttft_s=ttft.mean,
        tpot_s=tpot,
        batch=result.mean_running,
        bound=_bound(model, pricing, req, result.mean_running).binding.text,
        kv_blocks=full,
        num_requests=result.num_requests,
        makespan_s=result.makespan_s,
        label=pricing.label,
        block_tokens=cfg.block_size,
        max_batch=full // math.ceil((req.isl + req.osl) / cfg.block_size),
        memory=chip_budget(model, dep, cfg.pricing.dtypes, cfg.memory_rule).sentence(),
        ttft=ttft,
        tpot=result.tpot_s,
        itl=result.itl_s,
        e2e=e2e,
        input_tokens_per_s=result.total_tokens_per_s - result.output_tokens_per_s,
        total_tokens_per_s=result.total_tokens_per_s,
        chips=dep.chips * req.data_parallel,
        engine=req.engine or "generic",
    )


def with_mode(req: PredictRequest, mode: CostMode) -> PredictRequest:
    return replace(req, mode=mode)


def record(req: PredictRequest) -> Trace:
    """Simulate ``req`` once with every step at one second and return its ``Trace``, which
    re-times the run under any calibration (``fidelity.trace``; queued requests only).

    Data-parallel instances are identical, so one instance is recorded with its share of the
    requests and the throughput scaled by their number.
    """
    if req.rate_rps is not None:
        raise ConfigError("field rate_rps: a run with arrivals over time cannot be re-timed")
    model = get_model(req.model)
    one = replace(req, data_parallel=1, mode=CostMode.IDEAL)
    if req.batch is None:
        one = replace(one, requests=max(1, req.num_requests // req.data_parallel))
    from_admission = req.concurrency is not None
    pricing = one.pricing()
    check_deployment(model, pricing.deployment)
    cfg = _sim_config(one, model, pricing)
    recorder = Recorder(model, pricing)
    dep = pricing.deployment
    result = simulate_replicas(cfg, _workload(one), ReplicaSet(), recorder).result
    done = [r for r in result.requests if not r.rejected]
    if len(done) != result.num_requests:
        raise CapacityError(f"{model.name} on {dep.label}: some requests were rejected")
    outputs = np.array([r.output_len for r in done])
    first = np.array([round(r.ttft_s) - 1 for r in done])
    gaps = np.array([round(r.tpot_s * (r.output_len - 1)) if r.output_len > 1 else 0 for r in done])
    admitted = np.array([round(r.queue_s) for r in done]) if from_admission else None
    return recorder.trace(first, first + gaps, outputs, admitted, float(req.data_parallel))
