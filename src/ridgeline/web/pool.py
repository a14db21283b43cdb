"""Worker processes for the explorer's compute: a hard deadline, cancellation, bounded memory.

A request's work (an analytic view, a simulation) runs in one of a few worker processes, never
in the server's own: the event loop stays free for cheap requests, a worker past its deadline or
whose client went away is killed (and replaced), and a worker's memory is capped and returned to
the system when it dies. Workers die with the server (a watchdog on the parent).

    server                                    worker (spawned, niced, memory-capped)
    acquire an idle worker (wait <= deadline)
    send (kind, body)           ──────────▶   TASKS[kind](body, progress)
    poll: result? client gone? past deadline? ◀── ("progress", n) ... ("ok", result) | ("error", loc, msg)
    kill + replace the worker if it must stop

The core is synchronous and thread-safe (simulation jobs run it from a thread); ``run_async``
polls the same way from the event loop without blocking it.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from multiprocessing.connection import Connection
from typing import Any

from ridgeline.sweep.backends import die_with_parent

POLL_S = 0.01  # how often a waiting request looks at its worker (and its client)
STARTUP_GRACE_S = 120.0  # a request may wait this much longer while the first workers start
Disconnected = Callable[[], Awaitable[bool]]
WORKER_NICE = 5  # workers yield the CPU to the server, so cheap requests stay fast


class Status(StrEnum):
    """How a task ended."""

    OK = "ok"
    ERROR = "error"  # the library refused the input: a 4xx naming the field
    CRASHED = "crashed"  # a bug in the library, or the worker died (out of memory)
    DEADLINE = "deadline"  # ran past its deadline: the worker was killed
    BUSY = "busy"  # no worker came free before the deadline
    CANCELLED = "cancelled"  # the client went away, or the server is stopping


@dataclass(frozen=True, slots=True)
class Outcome:
    """What came back from a task: its result, or why there is none."""

    status: Status
    result: Any = None
    loc: tuple[str, ...] = ("body",)
    message: str = ""
    kind: str = "value_error"


def _limit_memory(max_bytes: int) -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
    except (ImportError, ValueError, OSError):  # not on this platform: the deadline still holds
        pass


def worker_main(conn: Connection, max_bytes: int) -> None:
    """A worker process: run tasks from ``conn`` until the server closes it or goes away."""
    die_with_parent()
    os.nice(WORKER_NICE)
    _limit_memory(max_bytes)
    from ridgeline.web.tasks import run_task  # the heavy imports happen here, in the worker

    conn.send(("ready",))
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(run_task(kind, payload, lambda done: conn.send(("progress", done))))


def _context() -> Any:
    """``forkserver`` where there is one: a clean single-threaded process that has imported the
    workers' modules once, so a killed worker is replaced by a fork in milliseconds (``fork``
    from the threaded server could copy a held lock); ``spawn`` elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["ridgeline.web.tasks"])
    return ctx


class _Worker:
    __slots__ = ("proc", "conn", "ready", "busy")

    def __init__(self, ctx: Any, max_bytes: int) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, max_bytes), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.busy = False

    def check_ready(self) -> bool:
        if not self.ready and self.proc.is_alive() and self.conn.poll():
            self.ready = self.conn.recv() == ("ready",)
        return self.ready

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(1.0)
        # a shutdown racing a timed-out task can find the pipe's descriptor already gone (EBADF)
        with contextlib.suppress(OSError):
            self.conn.close()


class WorkerPool:
    """``size`` worker processes, started on first use.

    Args:
        size: workers (at most this many tasks run at once).
        max_bytes: address-space cap of each worker.
    """

    def __init__(self, size: int, max_bytes: int) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._ctx = _context()
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self.warm = False  # a worker has been ready once: waiting past a deadline is busyness

    def _fill(self) -> None:
        self._workers = [w for w in self._workers if w.proc.is_alive()]
        while len(self._workers) < self.size:
            self._workers.append(_Worker(self._ctx, self.max_bytes))

    def try_acquire(self) -> _Worker | None:
        """An idle, ready worker marked busy, or None (never blocks)."""
        with self._lock:
            if self._closed:
                return None
            self._fill()
            for w in self._workers:
                if not w.busy and w.check_ready():
                    w.busy = self.warm = True
                    return w
        return None

    def release(self, worker: _Worker) -> None:
        with self._lock:
            worker.busy = False

    def discard(self, worker: _Worker) -> None:
        """Kill a worker that must stop now (its replacement starts at the next acquire)."""
        worker.kill()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def close(self) -> None:
        """Kill every worker; the pool takes no more tasks."""
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
        for w in workers:
            w.kill()

    @property
    def closed(self) -> bool:
        return self._closed


def _outcome(message: tuple[Any, ...]) -> Outcome:
    status = Status(message[0])
    if status is Status.OK:
        return Outcome(status, result=message[1])
    if status is Status.ERROR:
        return Outcome(status, loc=tuple(message[1]), message=message[2], kind=message[3])
    return Outcome(status, message=message[1])


@dataclass(slots=True)
class _Run:
    """One task on one worker: reads what the worker sends until the task ends."""

    pool: WorkerPool
    worker: _Worker
    deadline: float
    on_progress: Callable[[int], None] | None

    def poll(self) -> Outcome | None:
        """The outcome if the task ended (or must end now), else None."""
        conn = self.worker.conn
        try:
            while conn.poll():
                message = conn.recv()
                if message[0] != "progress":
                    self.pool.release(self.worker)
                    return _outcome(message)
                if self.on_progress is not None:
                    self.on_progress(message[1])
        except (EOFError, OSError):
            self.pool.discard(self.worker)
            return Outcome(Status.CRASHED, message="the worker died (out of memory?)")
        if time.monotonic() > self.deadline or self.pool.closed:
            return self.stop(Status.DEADLINE if not self.pool.closed else Status.CANCELLED)
        return None

    def stop(self, status: Status) -> Outcome:
        self.pool.discard(self.worker)
        return Outcome(status)


@dataclass(frozen=True, slots=True)
class Task:
    """One piece of work: what to run, and how long it may wait for a worker and then run.

    Attributes:
        kind: a key of ``web.tasks.TASKS``.
        payload: the request body as plain JSON values.
        run_s: seconds it may run once a worker took it.
        wait_by: monotonic time by which a worker must take it (and, for a request, the end of
            its whole deadline: ``run_s`` is then what is left).
    """

    kind: str
    payload: Any
    run_s: float
    wait_by: float


def _start(pool: WorkerPool, task: Task, progress: Any) -> _Run | Outcome | None:
    """A started run, an outcome (the pool is closed, or no worker came in time), or None: no
    worker is free yet."""
    if pool.closed:
        return Outcome(Status.CANCELLED)
    now = time.monotonic()
    grace = 0.0 if pool.warm else STARTUP_GRACE_S  # the server's own start is not the task's
    if now > task.wait_by + grace:
        return Outcome(Status.BUSY)
    worker = pool.try_acquire()
    if worker is None:
        return None
    worker.conn.send((task.kind, task.payload))
    return _Run(pool, worker, now + task.run_s, progress)


def run_blocking(
    pool: WorkerPool, task: Task, on_progress: Callable[[int], None] | None = None
) -> Outcome:
    """Run one task and wait for it (from a thread); killed ``task.run_s`` after it starts."""
    run: _Run | Outcome | None = None
    while run is None:
        run = _start(pool, task, on_progress)
        if run is None:
            time.sleep(POLL_S)
    while isinstance(run, _Run):
        outcome = run.poll()
        if outcome is not None:
            return outcome
        time.sleep(POLL_S)
    return run


async def run_async(
    pool: WorkerPool, kind: str, payload: Any, timeout_s: float, is_disconnected: Disconnected
) -> Outcome:
    """Run one task without blocking the event loop, within ``timeout_s`` in all (waiting for
    a worker included); killed at the deadline, when the client disconnects, or when the
    request is cancelled (the server shuts down)."""
    deadline = time.monotonic() + timeout_s
    run: _Run | Outcome | None = None
    try:
        while run is None:
            # the whole time limit when the pool was still starting (see ``STARTUP_GRACE_S``)
            left = deadline - time.monotonic() if pool.warm else timeout_s
            run = _start(pool, Task(kind, payload, left, deadline), None)
            if run is None:
                await asyncio.sleep(POLL_S)
                if await is_disconnected():
                    return Outcome(Status.CANCELLED)
        while isinstance(run, _Run):
            outcome = run.poll()
            if outcome is not None:
                run = outcome
                break
            await asyncio.sleep(POLL_S)
            if await is_disconnected():
                run = run.stop(Status.CANCELLED)
    except asyncio.CancelledError:
        if isinstance(run, _Run):
            run.stop(Status.CANCELLED)
        raise
    return run
