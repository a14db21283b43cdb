"""A request as the scheduler sees it: tokens owed, not phases.

Each request has ``num_computed_tokens`` (tokens whose keys and values are in the KV cache) and
``num_tokens`` (prompt plus sampled output). A step gives it ``num_tokens - num_computed_tokens``
tokens or fewer; prefill, chunked prefill, decode and recompute after preemption are all this one
rule (vLLM v1, ``vllm/v1/core/sched/scheduler.py``: "no prefill phase / no decode phase")::

    prompt (5)          output (2)
    t0 t1 t2 t3 t4 |    o0 o1
    computed = 3 -> owes 4 tokens (t3 t4 o0 o1); after prefill completes it owes 1 per step
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.errors import ConfigError
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_CONTEXT, MAX_SEED, MAX_VOCAB

MAX_TEMPERATURE = 100.0  # past this every distribution is uniform to float precision


class RequestStatus(StrEnum):
    """Where a request is in its life (vLLM v1 ``RequestStatus``, trimmed)."""

    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"
    REJECTED = "rejected"


class FinishReason(StrEnum):
    """Why a request stopped."""

    LENGTH = "length"  # reached max_output_tokens
    STOP = "stop"  # sampled the end-of-sequence token
    REJECTED = "rejected"  # can never fit (reason in ``Request.reject_reason``)
    ABORTED = "abort"  # its client went away (``Scheduler.abort``)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """What the caller asks of a request: how long it may grow, when it stops, how its tokens
    are picked. One class for the simulator and the engine (the simulator ignores the sampling
    fields; the engine's sampler reads them, ``engine.sampling``).

    Attributes:
        max_output_tokens: the most tokens to generate (the target; the request finishes with
            ``FinishReason.LENGTH`` there). OpenAI's ``max_tokens`` maps to it.
        eos_token_id: stop early when this token is sampled, which is kept in the output
            (None: never).
        priority: smaller is more urgent (``priority`` policy only).
        spec_acceptance: per-request draft acceptance rate for speculative decoding, overriding
            the global one (None: use the global rate).
        temperature: 0 means greedy (argmax).
        top_k: keep the k most likely tokens (0 = all).
        top_p: keep the smallest set whose probability reaches top_p (1 = all).
        seed: seeds the request's generator (None: derived from the engine seed and request id).
    """

    max_output_tokens: int = 16
    eos_token_id: int | None = None
    priority: int = 0
    spec_acceptance: float | None = None
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        check_int("max_output_tokens", self.max_output_tokens, 1, MAX_CONTEXT)
        if self.spec_acceptance is not None and not 0.0 <= self.spec_acceptance <= 1.0:
            raise ConfigError(
                f"field spec_acceptance: must be in [0, 1], got {self.spec_acceptance}"
            )
        check_real("temperature", self.temperature, 0, MAX_TEMPERATURE)
        check_int("top_k", self.top_k, 0, MAX_VOCAB)
        check_real("top_p", self.top_p, 0, 1, low_open=True)
        if self.seed is not None:
            check_int("seed", self.seed, 0, MAX_SEED)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class Request:
    """Runtime state of one request (mutable; owned by one scheduler at a time).

    Attributes:
        request_id: unique id.
        prompt_token_ids: the prompt (any int sequence; the engine's are real token ids).
        params: sampling targets.
        arrival_s: arrival time (simulated or wall clock).
        output_token_ids: tokens sampled so far.
        num_computed_tokens: tokens whose KV is in the cache.
        num_external_tokens: prompt tokens whose KV arrives from elsewhere (disaggregated
            prefill): admission allocates slots for them without computing them.
        block_hashes: chained hashes of the full blocks of tokens (prefix caching).
        num_preemptions: times this request lost its KV.
        num_cached_tokens: prompt tokens found in the prefix cache at its first admission
            (None until it is admitted).
    """

    __slots__ = (
        "request_id",
        "prompt_token_ids",
        "params",
        "arrival_s",
        "output_token_ids",
        "num_computed_tokens",
        "num_external_tokens",
        "status",
        "finish_reason",
        "reject_reason",
        "block_hashes",
        "num_preemptions",
        "num_cached_tokens",
        "swapped",
        "seq",
        "num_prompt_tokens",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        params: SamplingParams,
        arrival_s: float = 0.0,
    ) -> None:
        if len(prompt_token_ids) < 1:
            raise ConfigError(f"request {request_id}: field prompt: must hold at least 1 token")
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.num_prompt_tokens = len(prompt_token_ids)
        self.params = params
        self.arrival_s = arrival_s
        self.output_token_ids: list[int] = []
        self.num_computed_tokens = 0
        self.num_external_tokens = 0
        self.status = RequestStatus.WAITING
        self.finish_reason: FinishReason | None = None
        self.reject_reason = ""
        self.block_hashes: list[int] = []
        self.num_preemptions = 0
        self.num_cached_tokens: int | None = None  # prefix-cache hit at first admission
        self.swapped = False
        self.seq = 0  # admission order stamp, set by the scheduler (ties in priority order)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        """Prompt plus sampled tokens: what the KV cache must eventually cover."""
        return self.num_prompt_tokens + len(self.output_token_ids)

    @property
    def max_total_tokens(self) -> int:
        """Prompt plus ``max_output_tokens``: the longest this request can grow."""
        return self.num_prompt_tokens + self.params.max_output_tokens

    @property
    def is_finished(self) -> bool:
        return self.status in (RequestStatus.FINISHED, RequestStatus.REJECTED)

    def token(self, position: int) -> int:
        """Token id at ``position`` of prompt + output."""
        n = self.num_prompt_tokens
        return (
            self.prompt_token_ids[position] if position < n else self.output_token_ids[position - n]
        )

    def tokens(self, start: int, stop: int) -> tuple[int, ...]:
        """Token ids at positions [start, stop) of prompt + output."""
        n = self.num_prompt_tokens
        if start >= n:
            return tuple(self.output_token_ids[start - n : stop - n])
        if stop <= n:
            return tuple(self.prompt_token_ids[start:stop])
        head = tuple(self.prompt_token_ids[start:n]) if start < n else ()
        return head + tuple(self.output_token_ids[max(start - n, 0) : stop - n])

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, {self.status.value}, "
            f"computed={self.num_computed_tokens}/{self.num_tokens})"
        )
