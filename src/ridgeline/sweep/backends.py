"""Where probes run: ``local`` (a process pool over this machine's cores, the default) or
``ray`` (a local Ray cluster by default, or an existing one with ``address``).

Both take the sweep's shared context (the simulator, each workload's request table, the SLOs)
*once* — a process pool hands it to each worker through its initializer, Ray puts it in the
object store — and then tasks that carry only a configuration, a rate and a seed. A probe is a
pure function of those, so both backends give the same results bit for bit; only the order in
which probes finish differs, and the runner never lets that order decide anything.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Protocol

from ridgeline.errors import ConfigError
from ridgeline.sweep.kinds import BackendKind
from ridgeline.sweep.point import Configuration, PointResult, PointSimulator, Slo, simulate_point
from ridgeline.sweep.workload import RequestTable, at_rate


@dataclass(frozen=True, slots=True)
class SharedContext:
    """What every probe needs and no task carries: shipped to each worker once."""

    simulator: PointSimulator
    tables: Mapping[str, RequestTable]  # workload name -> its requests before timing
    slo: Slo
    decide_early: bool = True  # stop a probe once its TTFT objective is certainly missed


@dataclass(frozen=True, slots=True)
class ProbeTask:
    """One simulation to run: a configuration at a rate, with the sweep's seed."""

    key: str
    config: Configuration
    rate_rps: float
    seed: int


def run_probe(ctx: SharedContext, task: ProbeTask) -> PointResult:
    """Lay the workload out at the task's rate and simulate it."""
    workload = task.config.workload
    table = ctx.tables[workload.name]
    n = workload.requests_at(task.rate_rps, len(table.prompt_tokens))
    requests = at_rate(table, workload.arrival, task.rate_rps, task.seed, n)
    return simulate_point(
        ctx.simulator, task.config, requests, ctx.slo, task.seed, ctx.decide_early
    )


class Backend(Protocol):
    """Runs probes somewhere; yields each (task, result) as it finishes."""

    def start(self, ctx: SharedContext) -> None:
        """Ship ``ctx`` to the workers, once."""
        ...

    def run(self, tasks: Sequence[ProbeTask]) -> Iterator[tuple[ProbeTask, PointResult]]:
        """Run ``tasks``; yield each with its result as it finishes (any order)."""
        ...

    def close(self) -> None:
        """Release the workers (and a Ray cluster this backend started)."""
        ...


PARENT_POLL_S = 0.2


def die_with_parent(interval_s: float = PARENT_POLL_S) -> None:
    """Exit this (worker) process within ``interval_s`` of its parent's death, however the
    parent died (SIGKILL included): a daemon thread watches for this process being adopted.

    NOTE: ``os._exit``, not ``sys.exit``: the worker may be in the middle of a probe, and
    nothing it holds needs cleaning up (its results go to a parent that is gone).
    """

    parent_pid = os.getppid()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, name="ridgeline-parent-watch", daemon=True).start()


# NOTE: a process pool's initializer can pass state to later tasks only through the worker
# process's module namespace; this dict is that channel, written once in each worker process
# (never in the parent).
_WORKER: dict[str, SharedContext] = {}


def _init_worker(ctx: SharedContext) -> None:
    die_with_parent()
    _WORKER["ctx"] = ctx


def _worker_probe(task: ProbeTask) -> PointResult:
    return run_probe(_WORKER["ctx"], task)


class LocalBackend:
    """A process pool (``spawn``ed workers) over ``workers`` cores; ``workers=1`` runs in this
    process, with no pool at all."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._ctx: SharedContext | None = None
        self._pool: ProcessPoolExecutor | None = None

    def start(self, ctx: SharedContext) -> None:
        self._ctx = ctx
        if self.workers > 1:
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(ctx,),
            )

    def run(self, tasks: Sequence[ProbeTask]) -> Iterator[tuple[ProbeTask, PointResult]]:
        assert self._ctx is not None, "start() first"
        if self._pool is None:
            for task in tasks:
                yield task, run_probe(self._ctx, task)
            return
        futures: dict[Future[PointResult], ProbeTask] = {
            self._pool.submit(_worker_probe, t): t for t in tasks
        }
        for f in as_completed(futures):
            yield futures[f], f.result()

    def close(self) -> None:
        """Stop the workers; a probe still running is killed, not waited for (an interrupted
        sweep resumes from its store)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            processes = list(getattr(pool, "_processes", {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for p in processes:
                p.kill()


def _ray_probe(ctx: SharedContext, task: ProbeTask) -> PointResult:
    return run_probe(ctx, task)


class RayBackend:
    """Ray tasks: ``ray.init()`` starts a local cluster unless ``address`` names one (or Ray is
    already initialized, in which case the caller owns it). The shared context is put in the
    object store once; each task gets its reference, not its contents."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self._owns_ray = False
        self._ctx_ref: Any = None
        self._remote: Any = None

    def start(self, ctx: SharedContext) -> None:
        try:
            import ray
        except ImportError as e:
            raise ConfigError("--backend ray needs ray: pip install 'ridgeline[ray]'") from e
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address is None:
                kwargs["num_cpus"] = self.num_cpus
            ray.init(address=self.address, **kwargs)
            self._owns_ray = True
        self._ctx_ref = ray.put(ctx)
        self._remote = ray.remote(_ray_probe)

    def run(self, tasks: Sequence[ProbeTask]) -> Iterator[tuple[ProbeTask, PointResult]]:
        import ray

        pending = {self._remote.remote(self._ctx_ref, t): t for t in tasks}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            yield pending.pop(ref), ray.get(ref)

    def close(self) -> None:
        import ray

        self._ctx_ref = None
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


def make_backend(
    kind: BackendKind, workers: int | None = None, address: str | None = None
) -> Backend:
    """The backend called ``kind``; ``workers`` caps local processes or Ray CPUs."""
    if kind is BackendKind.RAY:
        return RayBackend(address, workers)
    return LocalBackend(workers)
