"""Scheduling policies by name: queue order, preemption victim, and memory reserved at admission.

- ``fcfs``: arrival order; preempt the newest running request (vLLM v1 default).
- ``priority``: smallest ``priority`` first, then arrival; preempt the least urgent running one
  (vLLM v1 ``PriorityRequestQueue``).
- ``reserve``: FCFS, but each request reserves its prompt and every output token it may produce
  at admission, so no running request ever needs a block it cannot get and none is preempted
  (TensorRT-LLM's ``GUARANTEED_NO_EVICT`` capacity scheduler); prompts still run in chunks.
- ``contiguous``: FCFS, but each request reserves ``max_model_len`` slots at admission, as
  engines did before PagedAttention (Kwon et al., SOSP 2023, §3: "reserved" and "internal
  fragmentation" waste); no chunked prefill.
- ``static``: a compiled-schedule accelerator (Groq, Spyre, TPU with fixed shapes): a fixed
  number of batch slots and sequence-length buckets chosen ahead of time; each admitted request
  reserves the smallest bucket holding prompt + max output. The padding (bucket − used) is
  counted as reserved-but-unused memory (its time is priced by ``sim.compiled``). Prompts run
  whole unless ``chunk_tokens`` names the compiled prefill chunk. A request longer than every
  bucket is refused, or, with ``recompile``, gets a bucket compiled for it (its length rounded up
  to a power of two). With prefix caching, ``prefix_copy`` copies a cached prefix into the
  request's own bucket-sized buffer (it reserves the whole bucket besides the shared blocks);
  otherwise the compiled program reads the prefix in place (the shared blocks count toward the
  bucket).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.serving.request import Request

T = TypeVar("T")


class PolicyKind(StrEnum):
    """Scheduling policies by name."""

    FCFS = "fcfs"
    PRIORITY = "priority"
    CONTIGUOUS = "contiguous"
    STATIC = "static"
    RESERVE = "reserve"

    @classmethod
    def parse(cls, name: str | PolicyKind) -> PolicyKind:
        """The policy called ``name``; an unknown name is a ``UnknownNameError``."""
        try:
            return cls(name)
        except ValueError:
            raise UnknownNameError("policy", str(name), [k.value for k in cls]) from None

    @property
    def reserves_at_admission(self) -> bool:
        """Contiguous and static reserve a request's whole length when they admit it, and so
        run each prompt in one step (no chunked prefill)."""
        return self in (PolicyKind.CONTIGUOUS, PolicyKind.STATIC)


def step_token_budget(policy: PolicyKind, chunk_tokens: int, max_model_len: int) -> int:
    """Token budget of one scheduler step (vLLM's ``max_num_batched_tokens``).

    ``chunk_tokens`` is the chunked-prefill budget; 0 turns chunking off, and the budget becomes
    ``max_model_len`` so that the longest prompt fits one step. A policy that reserves at
    admission runs whole prompts, so its budget is never below ``max_model_len`` either (vLLM
    v1 ``SchedulerConfig``: without chunked prefill, ``max_num_batched_tokens`` must be at least
    ``max_model_len``).
    """
    if policy.reserves_at_admission:
        return max(chunk_tokens, max_model_len)
    return chunk_tokens or max_model_len


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
        chunk_tokens: ``static``: the compiled prefill chunk (0: whole prompts).
        recompile: ``static``: compile a bucket for a request longer than every bucket.
        prefix_copy: ``static``: copy a cached prefix into the request's own buffer.
    """

    kind: PolicyKind
    reserve_len: int = 0
    buckets: tuple[int, ...] = ()
    num_slots: int | None = None
    chunk_tokens: int = 0
    recompile: bool = False
    prefix_copy: bool = False

    @property
    def chunked(self) -> bool:
        """Paged policies chunk prefills; ``static`` chunks with a compiled chunk; ``contiguous``
        runs whole prompts."""
        if self.kind is PolicyKind.STATIC:
            return self.chunk_tokens > 0
        return self.kind in (PolicyKind.FCFS, PolicyKind.PRIORITY, PolicyKind.RESERVE)

    def new_queue(self) -> RequestQueue:
        """An empty waiting queue in this policy's order."""
        return PriorityQueue() if self.kind is PolicyKind.PRIORITY else FCFSQueue()

    def victim(self, running: list[Request]) -> Request:
        """The running request to preempt when blocks run out."""
        return self.victim_of(running, _urgency)

    def victim_of(self, running: Sequence[T], urgency: Callable[[T], tuple[int, float, int]]) -> T:
        """The entry of ``running`` (in admission order) to preempt: the least urgent by
        ``urgency`` (priority, arrival, admission stamp) under the priority policy, else the
        last admitted (vLLM v1). Over any entries, so the simulator's fast mode asks it with
        indices."""
        if self.kind is PolicyKind.PRIORITY:
            return max(running, key=urgency)
        return running[-1]

    def reserve_tokens(self, max_total_tokens: int, hit_tokens: int = 0) -> int | None:
        """Slots to reserve at admission for a request of at most ``max_total_tokens`` (prompt +
        outputs; 0: grow on demand); None: no reservation can hold it.

        ``hit_tokens``: the cached prefix found for the request (``static`` with
        ``prefix_copy`` reserves its own bucket beside those shared blocks)."""
        if self.kind is PolicyKind.CONTIGUOUS:
            return self.reserve_len if max_total_tokens <= self.reserve_len else None
        if self.kind is PolicyKind.RESERVE:
            return max_total_tokens
        if self.kind is PolicyKind.STATIC:
            bucket = self.bucket_for(max_total_tokens)
            if bucket is None:
                return None
            return bucket + hit_tokens if self.prefix_copy else bucket
        return 0

    def bucket_for(self, tokens: int) -> int | None:
        """``static``: the smallest bucket holding ``tokens``; past the last one, a bucket
        compiled on demand (``recompile``: the next power of two) or None (refused)."""
        bucket = next((b for b in self.buckets if b >= tokens), None)
        if bucket is None and self.recompile:
            return 1 << max(0, (tokens - 1).bit_length())
        return bucket


@dataclass(frozen=True, slots=True)
class StaticOptions:
    """What a compiled-schedule machine fixes besides its buckets and slots (``Policy``)."""

    chunk_tokens: int = 0
    recompile: bool = False
    prefix_copy: bool = False


def make_policy(
    name: str | PolicyKind,
    max_model_len: int,
    buckets: tuple[int, ...] = (),
    num_slots: int | None = None,
    static: StaticOptions | None = None,
) -> Policy:
    """A policy by name (fcfs, priority, contiguous, static, reserve)."""
    kind = PolicyKind.parse(name)
    if kind is PolicyKind.STATIC:
        buckets = tuple(sorted(buckets)) or _default_buckets(max_model_len)
        if buckets[0] < 1:
            raise ConfigError(f"field buckets: must be positive, got {buckets}")
        opt = static or StaticOptions()
        if opt.chunk_tokens < 0:
            raise ConfigError(f"field chunk_tokens: must be >= 0, got {opt.chunk_tokens}")
        return Policy(
            kind,
            max_model_len,
            buckets,
            num_slots,
            opt.chunk_tokens,
            opt.recompile,
            opt.prefix_copy,
        )
    return Policy(kind, max_model_len, buckets, num_slots)


def _default_buckets(max_model_len: int) -> tuple[int, ...]:
    """Powers of two from 256 up to the max model length (compiled shapes)."""
    out, b = [], 256
    while b < max_model_len:
        out.append(b)
        b *= 2
    return (*out, max_model_len)
