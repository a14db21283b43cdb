"""Scheduling policies by name: queue order, preemption victim, and memory reserved at admission.

- ``fcfs``: arrival order; preempt the newest running request (vLLM v1 default).
- ``priority``: smallest ``priority`` first, then arrival; preempt the least urgent running one
  (vLLM v1 ``PriorityRequestQueue``).
- ``contiguous``: FCFS, but each request reserves ``max_model_len`` slots at admission, as
  engines did before PagedAttention (Kwon et al., SOSP 2023, §3: "reserved" and "internal
  fragmentation" waste); no chunked prefill.
- ``static``: a compiled-schedule accelerator (Groq, Spyre, TPU with fixed shapes): a fixed
  number of batch slots and sequence-length buckets chosen ahead of time; each admitted request
  reserves the smallest bucket holding prompt + max output; no chunked prefill. The padding
  (bucket − used) is counted as reserved-but-unused memory.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.serving.request import Request


class PolicyKind(StrEnum):
    """Scheduling policies by name."""

    FCFS = "fcfs"
    PRIORITY = "priority"
    CONTIGUOUS = "contiguous"
    STATIC = "static"


class RequestQueue(Protocol):
    """Waiting requests in admission order."""

    def push(self, request: Request) -> None: ...

    def push_front(self, request: Request) -> None:
        """Requeue a preempted request ahead of new ones."""
        ...

    def peek(self) -> Request: ...

    def pop(self) -> Request: ...

    def remove(self, request: Request) -> None:
        """Take ``request`` out wherever it is (an aborted request)."""
        ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Request]: ...


class FCFSQueue:
    """Arrival order; preempted requests go back to the front (a deque)."""

    __slots__ = ("_q",)

    def __init__(self) -> None:
        self._q: deque[Request] = deque()

    def push(self, request: Request) -> None:
        self._q.append(request)

    def push_front(self, request: Request) -> None:
        self._q.appendleft(request)

    def peek(self) -> Request:
        return self._q[0]

    def pop(self) -> Request:
        return self._q.popleft()

    def remove(self, request: Request) -> None:
        self._q.remove(request)

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._q)


def _urgency(r: Request) -> tuple[int, float, int]:
    return (r.params.priority, r.arrival_s, r.seq)


class PriorityQueue:
    """Smallest (priority, arrival, admission stamp) first (a heap)."""

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, float, int], Request]] = []

    def push(self, request: Request) -> None:
        heapq.heappush(self._heap, (_urgency(request), request))

    push_front = push  # a preempted request keeps its urgency

    def peek(self) -> Request:
        return self._heap[0][1]

    def pop(self) -> Request:
        return heapq.heappop(self._heap)[1]

    def remove(self, request: Request) -> None:
        self._heap = [e for e in self._heap if e[1] is not request]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Request]:
        return (r for _, r in sorted(self._heap, key=lambda e: e[0]))


@dataclass(frozen=True, slots=True)
class Policy:
    """A named policy: how it queues, whom it preempts, what it reserves.

    Attributes:
        kind: the policy's name.
        reserve_len: tokens reserved at admission for ``contiguous`` (max model length).
        buckets: sequence-length buckets for ``static``, ascending.
        num_slots: batch slots for ``static`` (None: the scheduler's max_num_seqs).
    """

    kind: PolicyKind
    reserve_len: int = 0
    buckets: tuple[int, ...] = ()
    num_slots: int | None = None

    @property
    def chunked(self) -> bool:
        """Paged policies chunk prefills; reserving policies run whole prompts."""
        return self.kind in (PolicyKind.FCFS, PolicyKind.PRIORITY)

    def new_queue(self) -> RequestQueue:
        """An empty waiting queue in this policy's order."""
        return PriorityQueue() if self.kind is PolicyKind.PRIORITY else FCFSQueue()

    def victim(self, running: list[Request]) -> Request:
        """The running request to preempt when blocks run out."""
        if self.kind is PolicyKind.PRIORITY:
            return max(running, key=_urgency)
        return running[-1]

    def reserve_tokens(self, request: Request) -> int | None:
        """Slots to reserve at admission (0: grow on demand); None: no reservation can hold it."""
        if self.kind is PolicyKind.CONTIGUOUS:
            return self.reserve_len if request.max_tokens <= self.reserve_len else None
        if self.kind is PolicyKind.STATIC:
            return next((b for b in self.buckets if b >= request.max_tokens), None)
        return 0


def make_policy(
    name: str, max_model_len: int, buckets: tuple[int, ...] = (), num_slots: int | None = None
) -> Policy:
    """A policy by name (fcfs, priority, contiguous, static)."""
    try:
        kind = PolicyKind(name)
    except ValueError:
        raise UnknownNameError("policy", name, [k.value for k in PolicyKind]) from None
    if kind is PolicyKind.STATIC:
        buckets = tuple(sorted(buckets)) or _default_buckets(max_model_len)
        if buckets[0] < 1:
            raise ConfigError(f"field buckets: must be positive, got {buckets}")
    return Policy(kind, max_model_len, buckets, num_slots)


def _default_buckets(max_model_len: int) -> tuple[int, ...]:
    """Powers of two from 256 up to the max model length (compiled shapes)."""
    out, b = [], 256
    while b < max_model_len:
        out.append(b)
        b *= 2
    return (*out, max_model_len)
