"""Async scheduling (vLLM v1's default since late 2025): the engine core schedules step k + 1
as soon as it has launched step k, so a request that reaches it while step k runs is first
scheduled in step k + 2::

    steps        |---- k ----|---- k+1 ----|---- k+2 ----|
    scheduled    k+1 ^        k+2 ^          k+3 ^
    arrival            a                                   a is in step k+2: TTFT waits for
                                                           the rest of k and all of k+1

The rule, in step boundaries b (step k runs from b_{k-1} to b_k): a request that arrived at
``a`` is visible to the schedule made at b_k when ``a <= b_{k-1}``; at a boundary where the
engine has nothing else to run (the lookahead step was empty), it sees every request that
has arrived. An idle engine schedules an arriving request at once.

``Lookahead`` holds the requests for the step-by-step loop (``sim.loop``); the fast mode
(``sim.fast``) applies the same rule to its arrival times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(slots=True)
class Lookahead(Generic[T]):
    """Requests received while a step runs, until the schedule that may take them.

    Attributes:
        arrived: received after the step in flight started: seen one schedule later.
        deferred: received by the time the step in flight started: seen by the next schedule.
    """

    arrived: list[T] = field(default_factory=list)
    deferred: list[T] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        return bool(self.arrived or self.deferred)

    def __len__(self) -> int:
        return len(self.arrived) + len(self.deferred)

    def hold(self, item: T, at_step_start: bool) -> None:
        """Receive ``item`` while a step runs (``at_step_start``: at the moment it started,
        which the step's own schedule had already been made without)."""
        (self.deferred if at_step_start else self.arrived).append(item)

    def release(self) -> list[T]:
        """At a step boundary: the requests the next schedule sees; those received during
        the step that just ended wait for the one after."""
        out, self.deferred, self.arrived = self.deferred, self.arrived, []
        return out

    def at_boundary(self, idle: Callable[[], bool]) -> Iterator[T]:
        """At a step boundary: ``release``'s requests, then, when ``idle()`` once they are in
        (the engine has nothing else to run: its lookahead step was empty), every one held."""
        yield from self.release()
        if idle():
            yield from self.flush()

    def flush(self) -> list[T]:
        """At a boundary where the engine has nothing else to run: every request held."""
        out = self.deferred + self.arrived
        self.deferred, self.arrived = [], []
        return out
