"""``ridgeline predict``: throughput and latency of a deployment, through the serving simulator.

A prediction runs the same scheduler and block manager as every simulation, on a TP x PP
deployment (``sim.replicas``), priced ideal or calibrated:

- offline: ``requests`` requests all queued at t = 0 with fixed ISL/OSL, as TensorRT-LLM's and
  vLLM's throughput benchmarks run them; the running batch is limited only by the KV cache and
  ``max_seqs``;
- fixed batch: ``batch`` requests at t = 0 with ``max_seqs = batch`` (per-user decode speed);
- closed loop: ``concurrency`` clients, each sending its next request when the last one ends
  (``requests``, default four per client, queued with ``max_seqs = concurrency``; TTFT counts
  from admission, not from the queue);
- under load: Poisson arrivals at ``rate_rps``.

KV capacity follows TensorRT-LLM's ``kv_cache_free_gpu_mem_fraction``: each chip gives
``memory_fraction`` (default 0.9) of what its share of the weights leaves to the KV cache.

``engine`` names a serving-engine profile (``specs.engines``: vllm, trtllm, generic): its
scheduler limits and their defaults, block size, prefix caching and host work per step and
request (calibrated mode) then replace the throughput benchmark's defaults above.

A prediction reports p50/p90/p99 of TTFT, TPOT, ITL and end-to-end latency, and output, input
and total tokens per second of the whole system and per chip (tp x pp x dp chips).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ridgeline.analytic import Dtypes, Phase, Workload
from ridgeline.analytic.deploy import (
    Deployment,
    DeploymentCost,
    check_deployment,
    deployment_cost,
    kv_share,
)
from ridgeline.analytic.kv import kv_bytes_per_token, weights_bytes
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.fidelity.trace import Recorder, Trace
from ridgeline.sim.engines import EngineRun, ServingSetup, engine_sim_config
from ridgeline.sim.loop import SimConfig
from ridgeline.sim.metrics import Percentiles, SimResult
from ridgeline.sim.replicas import ReplicaSet, Router, simulate_replicas
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import Accelerator, ModelSpec, get_accelerator, get_model
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.engines import get_engine

DEFAULT_REQUESTS = 1000
DEFAULT_MAX_SEQS = 256  # vLLM's max_num_seqs
DEFAULT_MAX_TOKENS = 8192  # TensorRT-LLM's max_num_tokens
DEFAULT_MEMORY_FRACTION = 0.9  # TensorRT-LLM's kv_cache_free_gpu_mem_fraction
BLOCK_SIZE = 16
MAX_PREDICT_REQUESTS = 100_000
CLIENT_REQUESTS = 4  # requests per closed-loop client when none are given


def compute_dtype(weight: DType) -> DType:
    """The format matmuls run in: FP8/FP4 checkpoints run W8A8/W4A4 on tensor cores (TensorRT-LLM's
    FP8 and NVFP4 recipes); integer weight-only formats dequantise to bf16 (AWQ, GPTQ)."""
    return weight if weight in (DType.FP8, DType.FP4, DType.FP16) else DType.BF16


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
    max_tokens: int | None = None
    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    rate_rps: float | None = None
    mode: CostMode = CostMode.CALIBRATED
    seed: int = 0
    engine: str | None = None

    def __post_init__(self) -> None:
        for name in ("isl", "osl", "tensor_parallel", "pipeline_parallel", "data_parallel"):
            _check_int(name, getattr(self, name), 1, 10_000_000)
        _check_int("expert_parallel", self.expert_parallel, 1, 10_000_000)
        for name in ("max_seqs", "max_tokens"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), 1, 10_000_000)
        if self.requests is not None and self.batch is not None:
            raise ConfigError("field requests/batch: give one of them, not both")
        if self.batch is not None and self.concurrency is not None:
            raise ConfigError("field batch/concurrency: give one of them, not both")
        for name in ("requests", "batch", "concurrency"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), 1, MAX_PREDICT_REQUESTS)
        if not 0.0 < self.memory_fraction <= 1.0 or math.isnan(self.memory_fraction):
            raise ConfigError(
                f"field memory_fraction: must be in (0, 1], got {self.memory_fraction}"
            )
        if self.rate_rps is not None and not 0.0 < self.rate_rps < math.inf:
            raise ConfigError(f"field rate_rps: must be a positive number, got {self.rate_rps}")

    @property
    def dtypes(self) -> Dtypes:
        kv = self.kv_dtype or (
            DType.FP8 if self.weight_dtype in (DType.FP8, DType.FP4) else DType.BF16
        )
        return Dtypes(weight=self.weight_dtype, act=compute_dtype(self.weight_dtype), kv=kv)

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
        return self.max_tokens or (DEFAULT_MAX_TOKENS if self.engine is None else None)

    @property
    def deployment_args(self) -> tuple[int, int, int]:
        return self.tensor_parallel, self.pipeline_parallel, self.expert_parallel


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
        bound: what limits a representative decode step (``analytic.deploy.Binding``).
        mode: ``calibrated`` or ``ideal``.
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
            "schema": "ridgeline.predict/1",
            "hardware": self.hardware,
            "model": self.model,
            "deployment": self.deployment,
            "mode": self.mode.value,
            "output_tokens_per_s": self.output_tokens_per_s,
            "per_user_tokens_per_s": self.per_user_tokens_per_s,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "batch": self.batch,
            "bound": self.bound,
            "kv_blocks": self.kv_blocks,
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


def kv_blocks(
    model: ModelSpec,
    dep: Deployment,
    dtypes: Dtypes,
    memory_fraction: float,
    block_size: int = BLOCK_SIZE,
) -> int:
    """KV blocks of one instance: each chip's ``memory_fraction`` of what its 1/chips of the
    weights leave, times the chips holding distinct KV (pp / kv_share(tp))."""
    acc = dep.accelerator
    free = acc.device_capacity_bytes - weights_bytes(model, dtypes.weight) / dep.chips
    if free <= 0:
        raise CapacityError(
            f"{model.name} does not fit {dep.label}: each chip needs "
            f"{weights_bytes(model, dtypes.weight) / dep.chips / 1e9:.3g} GB of weights and has "
            f"{acc.device_capacity_bytes / 1e9:.3g} GB of {acc.device_level}; add chips"
        )
    per_token = kv_bytes_per_token(model, dtypes.kv) * kv_share(model, dep.tensor_parallel)
    return int(memory_fraction * free * dep.pipeline_parallel / (per_token * block_size))


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


def _sim_config(req: PredictRequest, model: ModelSpec, dep: Deployment) -> SimConfig:
    setup = ServingSetup(
        max_num_batched_tokens=req.token_budget,
        max_num_seqs=req.running_limit,
        max_model_len=req.isl + req.osl,
        prefix_caching=None if req.engine else False,
    )
    engine = get_engine(req.engine or "generic")
    cfg = replace(
        engine_sim_config(model, dep.accelerator, EngineRun(engine, setup, req.dtypes, req.mode)),
        seed=req.seed,
    )
    blocks = kv_blocks(model, dep, req.dtypes, req.memory_fraction, cfg.block_size)
    need = math.ceil((req.isl + req.osl) / cfg.block_size)
    if blocks < need:
        raise CapacityError(
            f"{model.name} on {dep.label}: one request of {req.isl + req.osl} tokens needs {need} "
            f"KV blocks, and the memory left after the weights holds {blocks}"
        )
    # NOTE: blocks beyond what max_seqs requests can hold are never touched (no request shares
    # a prefix here), so the pool stops there: same schedule, far fewer blocks to build.
    return replace(cfg, num_blocks=min(blocks, cfg.scheduler.max_num_seqs * need))


def _bound(model: ModelSpec, dep: Deployment, req: PredictRequest, batch: float) -> DeploymentCost:
    w = Workload(Phase.DECODE, max(1, round(batch)), req.isl + req.osl // 2, dtypes=req.dtypes)
    return deployment_cost(model, dep, w, microbatches=1, mode=req.mode)


def predict(req: PredictRequest) -> Prediction:
    """Simulate ``req`` and summarise it (see the module docstring).

    Raises:
        ConfigError: an impossible split or option (names the field).
        CapacityError: the weights, or one request's KV, do not fit the deployment.
    """
    model, acc = get_model(req.model), get_accelerator(req.hardware)
    dep = Deployment(acc, *req.deployment_args)
    check_deployment(model, dep)
    cfg = _sim_config(req, model, dep)
    replicas = ReplicaSet(dep, req.data_parallel, Router.ROUND_ROBIN)
    result = simulate_replicas(cfg, _workload(req), replicas).result
    return _summary(req, model, dep, cfg, result)


def _summary(
    req: PredictRequest, model: ModelSpec, dep: Deployment, cfg: SimConfig, result: SimResult
) -> Prediction:
    if result.num_completed == 0:
        raise CapacityError(f"{model.name} on {dep.label}: no request completed")
    tpot = result.tpot_s.mean
    ttft_p, e2e_p = result.ttft_s, result.e2e_s
    if req.concurrency is not None:  # a client's clock starts when its request is admitted
        done = [r for r in result.requests if not r.rejected]
        ttft_p = Percentiles.of([r.ttft_s - r.queue_s for r in done])
        e2e_p = Percentiles.of([r.e2e_s - r.queue_s for r in done])
    chips = dep.chips * req.data_parallel
    return Prediction(
        hardware=dep.accelerator.name,
        model=model.name,
        deployment=dep.label if req.data_parallel == 1 else f"{req.data_parallel} x {dep.label}",
        mode=req.mode,
        output_tokens_per_s=result.output_tokens_per_s,
        per_user_tokens_per_s=1.0 / tpot if tpot > 0 else math.inf,
        ttft_s=ttft_p.mean,
        tpot_s=tpot,
        batch=result.mean_running,
        bound=_bound(model, dep, req, result.mean_running).binding.value,
        kv_blocks=cfg.num_blocks or 0,
        num_requests=result.num_requests,
        makespan_s=result.makespan_s,
        ttft=ttft_p,
        tpot=result.tpot_s,
        itl=result.itl_s,
        e2e=e2e_p,
        input_tokens_per_s=result.total_tokens_per_s - result.output_tokens_per_s,
        total_tokens_per_s=result.total_tokens_per_s,
        chips=chips,
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
    model, acc = get_model(req.model), get_accelerator(req.hardware)
    dep = Deployment(acc, *req.deployment_args)
    check_deployment(model, dep)
    one = replace(req, data_parallel=1, mode=CostMode.IDEAL)
    if req.batch is None:
        one = replace(one, requests=max(1, req.num_requests // req.data_parallel))
    from_admission = req.concurrency is not None
    cfg = _sim_config(one, model, dep)
    recorder = Recorder(model, dep, cfg.dtypes)
    result = simulate_replicas(cfg, _workload(one), ReplicaSet(dep), recorder).result
    done = [r for r in result.requests if not r.rejected]
    if len(done) != result.num_requests:
        raise CapacityError(f"{model.name} on {dep.label}: some requests were rejected")
    outputs = np.array([r.output_len for r in done])
    first = np.array([round(r.ttft_s) - 1 for r in done])
    gaps = np.array([round(r.tpot_s * (r.output_len - 1)) if r.output_len > 1 else 0 for r in done])
    admitted = np.array([round(r.queue_s) if from_admission else -1 for r in done])
    return recorder.trace(first, first + gaps, outputs, admitted, float(req.data_parallel))
