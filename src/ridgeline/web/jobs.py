"""Simulation jobs: one bounded ``ridgeline.sim.simulate`` run at a time, with its progress.

``POST /api/simulate`` validates the request, sizes the KV pool (a model that leaves no room is a
422 at once) and queues a job; ``GET /api/simulate/{id}`` reports ``done``/``total`` until the
result is there. Jobs run one at a time in a worker process (``web.pool``); a run that passes
``MAX_SIM_SECONDS`` of wall time is stopped there and then (its worker is killed) and reported as
failed. Only the last ``MAX_JOBS`` jobs are kept.

    queued ──▶ running ──▶ done
                  └──────▶ failed (time limit, or an error the library raised)
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ridgeline.analytic.deployment import Deployment
from ridgeline.analytic.pricing import Pricing
from ridgeline.sim import (
    Arrival,
    LengthDist,
    Lengths,
    RequestSpec,
    SimConfig,
    SimResult,
    WorkloadSpec,
    generate,
    kv_pool_blocks,
    simulate,
)
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.web.pool import Status, Task, WorkerPool, run_blocking
from ridgeline.web.schemas import MAX_SIM_SECONDS, SimulateBody

MAX_JOBS = 16
CDF_POINTS = 200
WORKER_MEMORY_BYTES = 4 * 2**30  # address space of a worker (numpy and its arenas included)


@dataclass(slots=True)
class Job:
    """One simulation's state, as ``GET /api/simulate/{id}`` reports it."""

    id: str
    total: int
    status: str = "queued"
    done: int = 0
    started_s: float = field(default_factory=time.monotonic)
    finished_s: float | None = None
    error: str | None = None
    result: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        end = self.finished_s if self.finished_s is not None else time.monotonic()
        return {
            "id": self.id,
            "status": self.status,
            "done": self.done,
            "total": self.total,
            "elapsed_s": end - self.started_s,
            "error": self.error,
            "result": self.result,
        }


def _cdf(values: list[float]) -> dict[str, list[float]]:
    """Sorted finite values and their cumulative fractions, thinned to ``CDF_POINTS``."""
    x = np.sort(np.asarray([v for v in values if np.isfinite(v)], dtype=float))
    if x.size == 0:
        return {"x": [], "p": []}
    idx = np.unique(np.linspace(0, x.size - 1, min(CDF_POINTS, x.size)).round().astype(int))
    return {"x": x[idx].tolist(), "p": ((idx + 1) / x.size).tolist()}


def result_view(r: SimResult, pricing: Pricing) -> dict[str, Any]:
    """``SimResult.to_dict()`` plus how its steps were priced and what the panel draws: latency
    CDFs and KV use over time."""
    return {
        **r.to_dict(),
        "mode": pricing.mode.value,
        "pricing": pricing.to_dict(),
        "cdf": {
            "ttft_s": _cdf([q.ttft_s for q in r.requests]),
            "e2e_s": _cdf([q.e2e_s for q in r.requests]),
        },
        "kv_timeline": {"time_s": list(r.timeline.time_s), "used_frac": list(r.timeline.used_frac)},
    }


def plan(
    body: SimulateBody, model: ModelSpec, acc: Accelerator
) -> tuple[SimConfig, list[RequestSpec]]:
    """The configuration and requests of a run: one pricing (``body.mode`` on the TP x PP
    deployment, at the body's data types); raises ``CapacityError`` when KV has no room."""
    dep = Deployment(acc, body.tensor_parallel, body.pipeline_parallel)
    pricing = Pricing.of(dep, body.mode, body.dtypes())
    cfg = SimConfig(
        model,
        pricing,
        memory_utilization=body.memory_utilization,
        label=f"{model.name} on {dep.label if dep.chips > 1 else acc.name}",
    )
    kv_pool_blocks(cfg)
    spec = WorkloadSpec(
        num_requests=body.num_requests,
        rate_per_s=body.rate_per_s,
        arrival=Arrival(body.arrival),
        prompt=Lengths(LengthDist.FIXED, body.prompt_len),
        output=Lengths(LengthDist.FIXED, body.output_len),
        seed=body.seed,
    )
    return cfg, generate(spec)


def run_simulation(
    body: SimulateBody, model: ModelSpec, acc: Accelerator, progress: Callable[[int], None]
) -> dict[str, Any]:
    """Plan and run one simulation (in a worker process): the result as the panel draws it."""
    cfg, requests = plan(body, model, acc)
    return result_view(simulate(cfg, requests, progress), cfg.pricing)


class Jobs:
    """The job table, and a runner thread that hands jobs in order to one worker process
    (``web.pool``), which is killed when a job passes the time limit or the server stops."""

    def __init__(self, time_limit_s: float = MAX_SIM_SECONDS) -> None:
        self.time_limit_s = time_limit_s
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._runner: ThreadPoolExecutor | None = None  # made on the first submit
        self._pool = WorkerPool(1, WORKER_MEMORY_BYTES)

    def submit(self, body: SimulateBody) -> Job:
        job = Job(uuid.uuid4().hex[:12], total=body.num_requests)
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > MAX_JOBS:
                self._jobs.popitem(last=False)
            if self._runner is None:
                self._runner = ThreadPoolExecutor(1, thread_name_prefix="ridgeline-sim")
            self._runner.submit(self._run, job, body.model_dump(mode="json"))
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def _run(self, job: Job, payload: dict[str, Any]) -> None:
        job.status, job.started_s = "running", time.monotonic()

        def progress(done: int) -> None:
            job.done = done

        task = Task("simulate", payload, self.time_limit_s, math.inf)
        outcome = run_blocking(self._pool, task, progress)
        job.finished_s = time.monotonic()
        if outcome.status is Status.OK:
            job.result, job.done, job.status = outcome.result, job.total, "done"
            return
        job.status = "failed"
        job.error = {
            Status.DEADLINE: f"stopped after {self.time_limit_s:g} s at {job.done} of "
            f"{job.total} requests: use 'ridgeline simulate' for runs this long",
            Status.CANCELLED: "the explorer is shutting down",
        }.get(outcome.status, outcome.message)

    def start(self) -> None:
        """Accept jobs again (an app's lifespan may start and stop more than once in tests)."""
        if self._pool.closed:
            self._pool = WorkerPool(1, WORKER_MEMORY_BYTES)

    def shutdown(self) -> None:
        """Drop queued jobs and kill the running one now."""
        self._pool.close()
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is not None:
            runner.shutdown(wait=False, cancel_futures=True)
