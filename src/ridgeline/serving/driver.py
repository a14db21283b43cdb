"""The step loop an executor plugs into: schedule → execute → update, until no work is left.

This is the whole contract between the runtime and a machine (nano-vllm's ``step()``), and the
one loop of the real engine (``engine.LLM.step`` runs it), its HTTP server and the tests:

    loop = ServingLoop(scheduler, executor)
    loop.add(Request("a", prompt_ids, SamplingParams(32)))
    finished = loop.run()          # requests in the order they finished

The simulator uses its own event loop (arrivals in simulated time, closed-form decode runs) over
the same ``Scheduler``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.errors import RidgelineError
from ridgeline.serving.executor import Executor, ScheduledBatch, StepResult
from ridgeline.serving.request import Request
from ridgeline.serving.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """One step: what ran, what the machine returned, which requests finished."""

    batch: ScheduledBatch
    result: StepResult
    finished: tuple[Request, ...]


class ServingLoop:
    """Drive a ``Scheduler`` with an ``Executor`` step by step.

    Args:
        scheduler: the scheduler (owns the KV cache manager).
        executor: runs each scheduled batch.
    """

    def __init__(self, scheduler: Scheduler, executor: Executor) -> None:
        self.scheduler = scheduler
        self.executor = executor
        self.elapsed_s = 0.0

    def add(self, request: Request) -> bool:
        """Queue a request; False when it was rejected (reason in ``request.reject_reason``)."""
        return self.scheduler.add_request(request)

    def step(self) -> StepOutcome | None:
        """Run one step; None when none could run (nothing unfinished, or nothing fits now)."""
        if not self.scheduler.has_unfinished:
            return None
        batch = self.scheduler.schedule()
        if not batch.requests:
            return None
        result = self.executor.execute(batch)
        self.elapsed_s += result.time_s
        finished = self.scheduler.update(batch, result)
        return StepOutcome(batch, result, tuple(finished))

    def run(self, max_steps: int = 1_000_000) -> list[Request]:
        """Step until every request finished; returns them in finishing order."""
        done: list[Request] = []
        for _ in range(max_steps):
            outcome = self.step()
            if outcome is None:
                if self.scheduler.has_unfinished:
                    raise RidgelineError(
                        "scheduler has waiting requests but cannot run any of them"
                    )
                return done
            done.extend(outcome.finished)
        raise RidgelineError(f"requests still running after {max_steps} steps")
