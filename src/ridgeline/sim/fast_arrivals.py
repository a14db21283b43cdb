"""The fast mode's arrivals: which requests each schedule sees.

Without async scheduling, the schedule at a step's end sees every request that has arrived;
with it (``serving.lookahead``), only those that arrived by the time that step started, unless
the engine has nothing else to run: then it sees them all. The step-by-step loop holds the
requests in a ``Lookahead``; here the rule is read off the arrival times and the step log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.sim.lines import Horizon

if TYPE_CHECKING:
    from ridgeline.sim.fast import _FastInstance

_INF = float("inf")


def seen(inst: _FastInstance, nxt: int, now: float, idle: bool = False) -> int:
    """Submit the arrivals from ``nxt`` on that the schedule at ``now`` (a step's end) sees
    (``idle``: an engine that ran nothing sees all); the index of the first unseen."""
    arr, n = inst.arrival, len(inst.arrival)
    for limit in (inst.steps.last_start, now) if inst.lag and not idle else (now,):
        while nxt < n and arr[nxt] <= limit:
            inst.submit(nxt)
            nxt += 1
        if inst.running or inst.fifo or inst.heap:
            break
    return nxt


def next_step(inst: _FastInstance, now: float, nxt: int) -> tuple[float | None, int]:
    """The step or stretch from ``now`` and when it ends (None: nothing ran), and the first
    arrival not yet seen. A schedule that runs nothing while requests are held makes the
    engine take them all and schedule again, as the step-by-step loop does."""
    arr, n = inst.arrival, len(inst.arrival)
    end = None
    for retry in (False, True):
        if inst.running or inst.fifo or inst.heap:
            end = inst.advance(now, Horizon(arr[nxt] if nxt < n else _INF, inst.lag))
        if end is not None or retry or not (inst.lag and nxt < n and arr[nxt] <= now):
            break
        nxt = seen(inst, nxt, now, idle=True)
    return end, nxt
