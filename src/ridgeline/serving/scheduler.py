"""The phase-less scheduler: running requests first, then waiting ones, under a token budget.

One rule (vLLM v1 ``Scheduler.schedule``, ``vllm/v1/core/sched/scheduler.py``): every request owes
``num_tokens - num_computed_tokens`` tokens; a step gives each running request what it owes (or
the rest of the budget), then admits waiting requests with what is left. Chunked prefill is a
prompt that owes more than the budget; a prefix hit is computed tokens for free; speculative
decoding owes 1 + k tokens::

    budget 8   running: A owes 1 (decode), B owes 1    waiting: C owes 10 (prompt)
    step:      A:1  B:1  C:6 (chunk)  -> next step A:1 B:1 C:4 (rest, then it samples)

When the pool cannot grow a running request, the policy's victim is preempted: recompute (free
its blocks, requeue it at the front, ``num_computed_tokens = 0``) or swap (its blocks move to the
first lower tier and come back at readmission). Waiting requests are not admitted in a step that
preempted. ``schedule()`` returns a ``ScheduledBatch``; the executor runs it; ``update()`` applies
its ``StepResult``. Nothing here knows whether the executor is simulated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.errors import ConfigError
from ridgeline.serving.block_pool import KVBlock
from ridgeline.serving.executor import ScheduledBatch, ScheduledRequest, StepResult
from ridgeline.serving.kv_manager import KVCacheManager, PrefixHit
from ridgeline.serving.policies import Policy, PolicyKind, StaticOptions, make_policy
from ridgeline.serving.request import FinishReason, Request, RequestStatus
from ridgeline.serving.spec_decode import DraftProposer, SpecDecodeConfig, repeat_last_proposer
from ridgeline.specs.inputs import check_int
from ridgeline.specs.limits import MAX_CONTEXT


class PreemptionMode(StrEnum):
    """What preemption does with a victim's KV: drop it (recompute) or move it (swap)."""

    RECOMPUTE = "recompute"
    SWAP = "swap"


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Limits and policy of one scheduler (vLLM defaults where it has them).

    Attributes:
        max_num_batched_tokens: token budget per step.
        max_num_seqs: most requests running at once.
        max_model_len: longest request (prompt + output) accepted; also what ``contiguous``
            reserves per request.
        long_prefill_token_threshold: cap on one prefill chunk (0: the budget is the cap).
        enable_chunked_prefill: split prompts over steps (paged policies only).
        policy: fcfs, priority, contiguous or static.
        preemption: recompute or swap.
        static_buckets: sequence-length buckets of the static policy.
        static_slots: batch slots of the static policy (None: max_num_seqs).
        static: the static policy's compiled prefill chunk, recompilation and prefix mode.
        spec: speculative decoding (None: off).
        async_scheduling: the next step is scheduled when a step starts, so a request that
            arrives while a step runs waits for the step after next (``serving.lookahead``).
    """

    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 128
    max_model_len: int = 8192
    long_prefill_token_threshold: int = 0
    enable_chunked_prefill: bool = True
    policy: PolicyKind = PolicyKind.FCFS
    preemption: PreemptionMode = PreemptionMode.RECOMPUTE
    static_buckets: tuple[int, ...] = ()
    static_slots: int | None = None
    static: StaticOptions | None = None
    spec: SpecDecodeConfig | None = None
    async_scheduling: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", PolicyKind.parse(self.policy))  # a name is accepted
        for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len"):
            check_int(name, getattr(self, name), 1, MAX_CONTEXT)
        check_int("long_prefill_token_threshold", self.long_prefill_token_threshold, 0, MAX_CONTEXT)
        if self.spec and self.max_num_batched_tokens < self.spec.num_draft_tokens + 1:
            raise ConfigError("field max_num_batched_tokens: must hold 1 + spec_k tokens")


def scheduled_tokens(owed: int, cap: int, budget: int) -> int:
    """Tokens a request that owes ``owed`` is given in a step with ``budget`` tokens left: what
    it owes, at most the prefill chunk cap (``long_prefill_token_threshold``; 0: none) and the
    budget (vLLM v1 ``Scheduler.schedule``). A rule over plain numbers, so the simulator's fast
    mode applies it to its per-request lists too."""
    return min(owed, cap or owed, budget)


def admitted_tokens(owed: int, cap: int, budget: int, chunked: bool) -> int | None:
    """Tokens a waiting request that owes ``owed`` is admitted with, or None when it must wait
    for a later step: without chunked prefill a prompt (or a recompute) runs whole."""
    if not chunked and owed > budget:
        return None
    return scheduled_tokens(owed, cap, budget)


@dataclass(slots=True)
class SchedulerStats:
    """Counters a scheduler keeps for metrics."""

    num_preemptions: int = 0
    num_swaps: int = 0
    prompt_tokens_queried: int = 0
    prefix_hit_tokens: int = 0
    tier_hit_tokens: int = 0
    num_steps: int = 0
    num_rejected: int = 0  # a count, not a list: a long-lived server rejects without end


class Scheduler:
    """Continuous batching over a ``KVCacheManager``.

    Args:
        config: limits and policy.
        kv: the KV cache manager (owns the block pool).
        proposer: draft tokens for speculative decoding (default: repeat the last token).
    """

    def __init__(
        self, config: SchedulerConfig, kv: KVCacheManager, proposer: DraftProposer | None = None
    ) -> None:
        self.config = config
        self.kv = kv
        self.policy: Policy = make_policy(
            config.policy,
            config.max_model_len,
            config.static_buckets,
            config.static_slots,
            config.static,
        )
        self.waiting = self.policy.new_queue()
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.stats = SchedulerStats()
        self._proposer = proposer or repeat_last_proposer
        self._seq = 0
        self._step = 0
        self._swap_slots = 0
        self._swapped_slots: dict[str, list[int]] = {}  # request -> its blocks' tier slots
        self._pending_swap_out: list[tuple[int, int]] = []  # (tier slot, device block)
        self._pending_swap_in: list[tuple[int, int]] = []
        self._blocked_on_memory = False

    # ---- intake ------------------------------------------------------------------------------

    @property
    def max_running(self) -> int:
        """Most requests running at once (static: its compiled slots)."""
        slots = self.policy.num_slots if self.policy.kind is PolicyKind.STATIC else None
        return min(self.config.max_num_seqs, slots or self.config.max_num_seqs)

    def add_request(self, request: Request) -> bool:
        """Queue ``request``; False (and status REJECTED with a reason) if it can never fit.

        Raises:
            ConfigError: when a request with the same id is still unfinished here.
        """
        if request.request_id in self.requests:
            raise ConfigError(f"request id {request.request_id!r} is already queued or running")
        reason = self.never_fits(request.max_total_tokens)
        self._seq += 1
        request.seq = self._seq
        if reason is not None:
            request.status = RequestStatus.REJECTED
            request.finish_reason = FinishReason.REJECTED
            request.reject_reason = reason
            self.stats.num_rejected += 1
            return False
        self.requests[request.request_id] = request
        request.status = RequestStatus.WAITING
        self.waiting.push(request)
        if self.waiting.peek() is request:  # a new head (priority order) may fit: try it
            self._blocked_on_memory = False
        return True

    def never_fits(self, max_total_tokens: int) -> str | None:
        """Why a request of at most ``max_total_tokens`` (prompt + outputs) can never run here, as
        ``category: details`` (None when it can)."""
        capacity = self.kv.pool.num_blocks * self.kv.block_size
        n = max_total_tokens
        limit = self.config.max_model_len
        if n > limit:
            return f"longer than max_model_len: prompt + max_output_tokens = {n} > {limit}"
        if n > capacity:
            return f"larger than the KV pool: {n} tokens > {capacity} slots"
        reserve = self.policy.reserve_tokens(n)
        if reserve is None:
            return f"no {self.policy.kind.value} reservation holds it: {n} tokens"
        if reserve > capacity:
            return f"reservation larger than the KV pool: {reserve} > {capacity} slots"
        budget = self.config.max_num_batched_tokens
        # Without chunking a prompt runs whole, and so does the recompute of a preempted request
        # (prompt + output so far, at most max_total_tokens - 1): both must fit one step (vLLM asks
        # max_num_batched_tokens >= max_model_len when chunked prefill is off).
        if not self.chunked and n - 1 > budget:
            return (
                f"over the step budget without chunked prefill: prompt + max_output_tokens - 1 = "
                f"{n - 1} > {budget} tokens"
            )
        return None

    @property
    def chunked(self) -> bool:
        """Whether prompts (and recomputes) may be split over steps."""
        return self.policy.chunked and self.config.enable_chunked_prefill

    def abort(self, request_id: str) -> Request | None:
        """Stop a queued or running request now (its client left): its blocks (or its swap room)
        are freed and it finishes with reason ``abort``. None when it is not here (finished,
        rejected or unknown)."""
        req = self.requests.pop(request_id, None)
        if req is None:
            return None
        if req.status is RequestStatus.RUNNING:
            self.running.remove(req)
            self.kv.free(req)
        else:
            self.waiting.remove(req)
            slots = self._swapped_slots.pop(request_id, None)
            if slots is not None:
                assert self.kv.tiers is not None
                self.kv.tiers.release_swap(len(slots), read=False)
        req.swapped = False
        req.status = RequestStatus.FINISHED
        req.finish_reason = FinishReason.ABORTED
        self._blocked_on_memory = False
        return req

    @property
    def has_unfinished(self) -> bool:
        """Whether any request is running or waiting."""
        return bool(self.running) or len(self.waiting) > 0

    # ---- schedule ----------------------------------------------------------------------------

    def schedule(self) -> ScheduledBatch:
        """Choose this step's tokens: running requests first, then admissions."""
        limit = self.config.max_num_batched_tokens
        picked: dict[str, tuple[Request, int, tuple[int, ...]]] = {}
        budget, preempted, i = limit, False, 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n, drafts = self._owed(req, budget)
            num_preempted = self._grow(req, n, picked)
            preempted = preempted or num_preempted > 0
            if req.status is not RequestStatus.RUNNING:
                continue  # req itself was preempted; running[i] is now the next one
            picked[req.request_id] = (req, n, drafts)
            budget = limit - sum(m for _, m, _ in picked.values()) if num_preempted else budget - n
            i = self.running.index(req) + 1 if num_preempted else i + 1
        if not preempted:
            self._admit(budget, picked)
        return self._batch(picked)

    def _owed(self, req: Request, budget: int) -> tuple[int, tuple[int, ...]]:
        """Tokens to give a running request now, and its draft tokens (spec decode)."""
        owed = req.num_prompt_tokens + len(req.output_token_ids) - req.num_computed_tokens
        spec = self.config.spec
        if spec is not None and owed == 1 and req.output_token_ids:
            k = min(
                spec.num_draft_tokens,
                req.params.max_output_tokens - req.num_output_tokens - 1,
                budget - 1,
            )
            if k > 0:
                return 1 + k, self._proposer(req, k)
        return scheduled_tokens(owed, self.config.long_prefill_token_threshold, budget), ()

    def _grow(
        self, req: Request, n: int, picked: dict[str, tuple[Request, int, tuple[int, ...]]]
    ) -> int:
        """Allocate slots for ``req``, preempting the policy's victims until it fits (or until
        ``req`` itself is the victim). Returns how many requests were preempted."""
        count = 0
        while self.kv.allocate_slots(req, n) is None:
            victim = self.policy.victim(self.running)
            self._preempt(victim)
            picked.pop(victim.request_id, None)
            count += 1
            if victim is req:
                break
        return count

    def _preempt(self, req: Request) -> None:
        """Free ``req``'s blocks (recompute) or move them to the first tier (swap); requeue."""
        self.running.remove(req)
        self._blocked_on_memory = False  # blocks were freed: admission may succeed again
        self.stats.num_preemptions += 1
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED
        blocks = self.kv.table(req.request_id)
        tiers = self.kv.tiers
        swap = self.config.preemption is PreemptionMode.SWAP and tiers is not None
        if (
            swap
            and req.num_computed_tokens > 0
            and tiers is not None
            and tiers.reserve_swap(len(blocks))
        ):
            self.stats.num_swaps += 1
            slots = list(range(self._swap_slots, self._swap_slots + len(blocks)))
            self._swap_slots += len(blocks)
            self._swapped_slots[req.request_id] = slots
            self._pending_swap_out += [(t, b.block_id) for t, b in zip(slots, blocks, strict=True)]
            req.swapped = True
        else:
            req.num_computed_tokens = 0
            req.num_external_tokens = 0  # its transferred KV is gone: recompute it here
        self.kv.free(req)
        self.waiting.push_front(req)

    def _admit(self, budget: int, picked: dict[str, tuple[Request, int, tuple[int, ...]]]) -> None:
        """Admit waiting requests in queue order while budget, slots and blocks last."""
        self._blocked_on_memory = False
        chunked = self.chunked
        while len(self.waiting) and budget > 0 and len(self.running) < self.max_running:
            req = self.waiting.peek()
            hit = self._prefix_hit(req)
            # KV that arrived from a prefill instance counts as computed (disaggregation)
            external = req.num_external_tokens if req.num_computed_tokens == 0 else 0
            owed = req.num_tokens - req.num_computed_tokens - external - hit.num_tokens
            n = admitted_tokens(owed, self.config.long_prefill_token_threshold, budget, chunked)
            if n is None:
                break
            if not self._admit_one(req, n, hit, external):
                self._blocked_on_memory = True
                break
            self.waiting.pop()
            picked[req.request_id] = (req, n, ())
            budget -= n

    def _prefix_hit(self, req: Request) -> PrefixHit:
        if req.num_computed_tokens > 0 or req.num_external_tokens > 0:
            return PrefixHit(block_size=self.kv.block_size)
        return self.kv.find_prefix(req)

    def _admit_one(self, req: Request, n: int, hit: PrefixHit, external: int) -> bool:
        """Allocate ``req``'s table (reservation, hit, external and new tokens) and run it."""
        reserve = self.policy.reserve_tokens(req.max_total_tokens, hit.num_tokens) or 0
        req.num_computed_tokens += external
        if self.kv.allocate_slots(req, n, hit, reserve_tokens=reserve) is None:
            req.num_computed_tokens -= external
            return False
        self._note_hit(req, hit)
        req.num_computed_tokens += hit.num_tokens
        if req.swapped:
            req.swapped = False
            assert self.kv.tiers is not None
            slots = self._swapped_slots.pop(req.request_id)
            self.kv.tiers.release_swap(len(slots))
            table = self.kv.table(req.request_id)
            self._pending_swap_in += [(t, b.block_id) for t, b in zip(slots, table, strict=False)]
        req.status = RequestStatus.RUNNING
        self.running.append(req)
        return True

    def _note_hit(self, req: Request, hit: PrefixHit) -> None:
        if req.num_cached_tokens is not None:
            return
        req.num_cached_tokens = hit.num_tokens
        self.stats.prompt_tokens_queried += req.num_prompt_tokens
        self.stats.prefix_hit_tokens += hit.num_tokens
        self.stats.tier_hit_tokens += len(hit.tier_hashes) * hit.block_size

    def _batch(self, picked: dict[str, tuple[Request, int, tuple[int, ...]]]) -> ScheduledBatch:
        self._step += 1
        self.stats.num_steps += 1
        reqs = []
        for req, n, drafts in picked.values():
            start = req.num_computed_tokens
            stop = start + n - len(drafts)
            reqs.append(
                ScheduledRequest(
                    request_id=req.request_id,
                    token_ids=req.tokens(start, stop) + drafts,
                    start_position=start,
                    block_ids=self.kv.block_ids(req.request_id),
                    num_draft_tokens=len(drafts),
                    sample=stop >= req.num_tokens,
                )
            )
        tiers = self.kv.tiers
        moved_bytes, moved_s = tiers.take_transfer() if tiers is not None else (0.0, 0.0)
        swap_out, self._pending_swap_out = tuple(self._pending_swap_out), []
        swap_in, self._pending_swap_in = tuple(self._pending_swap_in), []
        return ScheduledBatch(
            step=self._step,
            requests=tuple(reqs),
            block_size=self.kv.block_size,
            copies=self.kv.take_copies(),
            swap_in=swap_in,
            swap_out=swap_out,
            transfer_bytes=moved_bytes,
            transfer_s=moved_s,
        )

    # ---- update ------------------------------------------------------------------------------

    def update(self, batch: ScheduledBatch, result: StepResult) -> list[Request]:
        """Apply a step's result; return the requests that finished in it."""
        finished = []
        requests, sampled = self.requests, result.sampled
        caching = self.kv.enable_prefix_caching
        for sr in batch.requests:
            req = requests.get(sr.request_id)
            if req is None or req.status is not RequestStatus.RUNNING:
                continue
            req.num_computed_tokens += len(sr.token_ids)
            if sr.sample:
                self._append(req, sr, sampled.get(sr.request_id, ()))
            if caching:
                self.kv.cache_full_blocks(req)
            if self._is_done(req):
                self._finish(req)
                finished.append(req)
        return finished

    def _append(self, req: Request, sr: ScheduledRequest, tokens: Sequence[int]) -> None:
        if not tokens:
            raise ConfigError(f"executor returned no token for request {req.request_id}")
        rejected = sr.num_draft_tokens - (len(tokens) - 1)
        if rejected < 0:
            raise ConfigError(
                f"executor returned {len(tokens)} tokens for {req.request_id} "
                f"with {sr.num_draft_tokens} drafts"
            )
        kept = tokens
        eos = req.params.eos_token_id
        if eos is not None and eos in tokens:  # stop at the first end-of-sequence token
            kept = tokens[: list(tokens).index(eos) + 1]
            req.finish_reason = FinishReason.STOP
        req.output_token_ids.extend(kept)
        # the KV of rejected drafts, and of accepted ones past an end-of-sequence token, is not
        # the request's: roll back to num_tokens - 1 (vLLM v1 ``update_from_output``)
        unused = rejected + len(tokens) - len(kept)
        if unused:
            req.num_computed_tokens -= unused
            self.kv.trim(req, req.num_tokens)

    def _is_done(self, req: Request) -> bool:
        """Whether ``req`` sampled end-of-sequence (marked by ``_append``) or reached its
        target; the output is cut at the target either way."""
        limit, out = req.params.max_output_tokens, req.output_token_ids
        if len(out) > limit:
            del out[limit:]
        if req.finish_reason is FinishReason.STOP and out[-1] == req.params.eos_token_id:
            return True
        if len(out) >= limit:
            req.finish_reason = FinishReason.LENGTH
            return True
        return False

    def _finish(self, req: Request) -> None:
        req.status = RequestStatus.FINISHED
        self.running.remove(req)
        self.kv.free(req)
        del self.requests[req.request_id]
        self._blocked_on_memory = False

    # ---- closed-form decode runs (the simulator's fast path) ---------------------------------

    def decode_run_limit(self, max_steps: int) -> int:
        """How many next steps are plain decode steps that change nothing but one token per
        running request (no admission, completion, preemption or draft); 0 when not now.

        NOTE: a performance shortcut for executors that can price many steps at once; running
        those steps one by one gives the same blocks, tokens and times.
        """
        if self.config.spec is not None or self.kv.tiers is not None:
            return 0
        if not self.plain_decode_next(
            len(self.running), len(self.waiting), self._blocked_on_memory
        ):
            return 0
        k = max_steps
        for req in self.running:
            out = req.output_token_ids
            owed = req.num_prompt_tokens + len(out) - req.num_computed_tokens
            if owed != 1 or req.params.eos_token_id is not None:
                return 0
            k = min(k, req.params.max_output_tokens - len(out))
        return self._fundable_steps(k)

    def plain_decode_next(self, num_running: int, num_waiting: int, blocked: bool) -> bool:
        """Whether the next step, every one of ``num_running`` requests owing one token, is
        plain decode: the budget holds a token for each and nothing can be admitted (no request
        waits, every slot is taken, or the queue's head was ``blocked`` on memory and nothing
        has changed since). The rule behind ``decode_run_limit`` and the fast mode's decode
        stretches (``sim.stretch``), which hold their state in counts, hence the arguments."""
        if num_running == 0 or num_running > self.config.max_num_batched_tokens:
            return False
        return not num_waiting or blocked or num_running >= self.max_running

    def _fundable_steps(self, k: int) -> int:
        """Largest j <= k such that j decode steps need at most the free blocks."""
        free, bs, tables = self.kv.pool.num_free, self.kv.block_size, self.kv.tables
        starts = [(r.num_computed_tokens, len(tables[r.request_id])) for r in self.running]

        def need(j: int) -> int:
            return sum(max(0, -(-(p + j) // bs) - nb) for p, nb in starts)

        if need(k) <= free:
            return k
        lo, hi = 0, k
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if need(mid) <= free:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def advance_decode(
        self, k: int, sample: Callable[[Request, int], Sequence[int]]
    ) -> list[Request]:
        """Apply ``k`` decode steps at once (see ``decode_run_limit``); blocks are handed out in
        the order step-by-step scheduling would use. Returns the requests that finished."""
        events = []
        bs, tables = self.kv.block_size, self.kv.tables
        for idx, req in enumerate(self.running):
            first = len(tables[req.request_id]) * bs - req.num_computed_tokens
            if first < k:
                events += [(j, idx) for j in range(max(first, 0), k, bs)]
        events.sort()
        new = self.kv.pool.allocate(len(events))  # popped in the order single steps would pop
        assert new is not None, "decode_run_limit funds every step"
        grown: dict[int, list[KVBlock]] = {}
        for (_, idx), block in zip(events, new, strict=True):
            grown.setdefault(idx, []).append(block)
        for idx, blocks in grown.items():
            self.kv.append_blocks(self.running[idx].request_id, blocks)
        self._step += k
        self.stats.num_steps += k
        finished = []
        caching = self.kv.enable_prefix_caching
        for req in list(self.running):
            req.output_token_ids.extend(sample(req, k))
            req.num_computed_tokens += k
            if caching:
                self.kv.cache_full_blocks(req)
            if len(req.output_token_ids) >= req.params.max_output_tokens and self._is_done(req):
                self._finish(req)
                finished.append(req)
        return finished
