"""Simulation jobs: one bounded ``ridgeline.sim.simulate`` run at a time, with its progress.

``POST /api/simulate`` validates the request, sizes the KV pool (a model that leaves no room is a
422 at once) and queues a job; ``GET /api/simulate/{id}`` reports ``done``/``total`` until the
result is there. A run that passes ``MAX_SIM_SECONDS`` of wall time is stopped and reported as
failed. Only the last ``MAX_JOBS`` jobs are kept.

    queued ──▶ running ──▶ done
                  └──────▶ failed (time limit, or an error the library raised)
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ridgeline.errors import RidgelineError
from ridgeline.sim import (
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
from ridgeline.web.schemas import MAX_SIM_SECONDS, SimulateBody

MAX_JOBS = 16
CDF_POINTS = 200


class TimeLimitExceeded(RidgelineError):
    """A simulation ran past the explorer's wall-time limit."""


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


def result_view(r: SimResult) -> dict[str, Any]:
    """``SimResult.to_dict()`` plus what the panel draws: latency CDFs and KV use over time."""
    return {
        **r.to_dict(),
        "cdf": {
            "ttft_s": _cdf([q.ttft_s for q in r.requests]),
            "e2e_s": _cdf([q.e2e_s for q in r.requests]),
        },
        "kv_timeline": {"time_s": list(r.timeline.time_s), "used_frac": list(r.timeline.used_frac)},
    }


def plan(
    body: SimulateBody, model: ModelSpec, acc: Accelerator
) -> tuple[SimConfig, list[RequestSpec]]:
    """The configuration and requests of a run; raises ``CapacityError`` when KV has no room."""
    cfg = SimConfig(model, acc, dtypes=body.dtypes(), label=f"{model.name} on {acc.name}")
    kv_pool_blocks(cfg)
    spec = WorkloadSpec(
        num_requests=body.num_requests,
        rate_per_s=body.rate_per_s,
        prompt=Lengths(LengthDist.FIXED, body.prompt_len),
        output=Lengths(LengthDist.FIXED, body.output_len),
        seed=body.seed,
    )
    return cfg, generate(spec)


class Jobs:
    """The job table and the single worker thread that runs them in order."""

    def __init__(self, time_limit_s: float = MAX_SIM_SECONDS) -> None:
        self.time_limit_s = time_limit_s
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # made on the first submit
        self._stopping = threading.Event()

    def submit(self, cfg: SimConfig, requests: list[RequestSpec]) -> Job:
        job = Job(uuid.uuid4().hex[:12], total=len(requests))
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > MAX_JOBS:
                self._jobs.popitem(last=False)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ridgeline-sim")
            self._pool.submit(self._run, job, cfg, requests)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def _run(self, job: Job, cfg: SimConfig, requests: list[RequestSpec]) -> None:
        job.status, job.started_s = "running", time.monotonic()
        deadline = job.started_s + self.time_limit_s

        def progress(done: int) -> None:
            job.done = done
            if self._stopping.is_set():
                raise TimeLimitExceeded("the explorer is shutting down")
            if time.monotonic() > deadline:
                raise TimeLimitExceeded(
                    f"stopped after {self.time_limit_s:g} s at {done} of {job.total} requests: "
                    f"use 'ridgeline simulate' for runs this long"
                )

        try:
            job.result = result_view(simulate(cfg, requests, progress))
            job.status = "done"
        except RidgelineError as e:
            job.error, job.status = str(e), "failed"
        except Exception as e:  # noqa: BLE001 -- a bug in a run is reported on the job, not lost
            job.error, job.status = f"internal error: {type(e).__name__}: {e}", "failed"
        finally:
            job.finished_s = time.monotonic()

    def start(self) -> None:
        """Accept jobs again (an app's lifespan may start and stop more than once in tests)."""
        self._stopping.clear()

    def shutdown(self) -> None:
        """Drop queued jobs and stop the running one at its next progress report."""
        self._stopping.set()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
