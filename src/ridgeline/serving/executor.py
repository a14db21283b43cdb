"""The executor seam: the only thing the scheduler needs from a machine.

The scheduler hands a ``ScheduledBatch`` to ``Executor.execute`` and gets a ``StepResult`` back.
The simulator's executor prices the batch with the analytic cost model; the engine's runs a real
forward pass over paged KV tensors. Nothing in ``serving`` may assume which one it talks to.

Slot layout of one request (block_size = 4), for the engine's writes::

    block_ids   = (7, 2, 9)
    positions     0 1 2 3 | 4 5 6 7 | 8 9 . .
    blocks        ---7--- | ---2--- | ---9---
    slot(p)     = block_ids[p // block_size] * block_size + p % block_size
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ScheduledRequest:
    """One request's share of a step.

    Attributes:
        request_id: the request.
        token_ids: tokens computed this step: a prompt chunk, or the last sampled token followed
            by ``num_draft_tokens`` speculative tokens.
        start_position: position of ``token_ids[0]`` (= tokens already in the KV cache).
        block_ids: the request's block table after this step's allocation; covers
            ``start_position + len(token_ids)`` positions.
        num_draft_tokens: trailing speculative tokens in ``token_ids`` to verify.
        sample: whether the step samples a token for this request (False for a prefill chunk
            that does not reach the end of the prompt).
    """

    request_id: str
    token_ids: tuple[int, ...]
    start_position: int
    block_ids: tuple[int, ...]
    num_draft_tokens: int = 0
    sample: bool = True

    @property
    def num_new_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def context_len(self) -> int:
        """Tokens in the KV cache once this step's keys and values are written."""
        return self.start_position + len(self.token_ids)

    def slot(self, position: int, block_size: int) -> int:
        """Flat KV slot of ``position`` (see the module diagram)."""
        return self.block_ids[position // block_size] * block_size + position % block_size


@dataclass(frozen=True, slots=True)
class ScheduledBatch:
    """Everything one step computes, plus the KV block moves that must happen first.

    ``copies`` are copy-on-write block copies (src, dst) on the device; ``swap_in``/``swap_out``
    are (tier block, device block) moves between KV tiers, whose transfer time the executor
    charges to the step. ``transfer_s`` is that time as the scheduler's tier model prices it
    (offloads, prefix loads, swaps since the previous step); a simulated executor adds it to the
    step, a real one that performs the copies measures them instead.
    """

    step: int
    requests: tuple[ScheduledRequest, ...]
    block_size: int
    copies: tuple[tuple[int, int], ...] = ()
    swap_in: tuple[tuple[int, int], ...] = ()
    swap_out: tuple[tuple[int, int], ...] = ()
    transfer_bytes: float = 0.0
    transfer_s: float = 0.0

    @property
    def num_tokens(self) -> int:
        return sum(len(r.token_ids) for r in self.requests)


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step produced: per request, the tokens it appends (accepted drafts plus one
    sampled token; empty when ``sample`` was False) and the step's duration."""

    sampled: Mapping[str, tuple[int, ...]]
    time_s: float
    extra: Mapping[str, float] = field(default_factory=dict)


class Executor(Protocol):
    """Runs one scheduled batch: a cost model in ``sim``, a forward pass in ``engine``."""

    def execute(self, batch: ScheduledBatch) -> StepResult: ...
