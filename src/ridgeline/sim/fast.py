"""The simulator's fast mode: one instance's scheduler state in lists, decoding requests advanced
by a shared counter, and every predictable stretch of decode steps in closed form.

For one mixed instance (any policy, preemption by recompute, prefix caching (``sim.fast_cache``),
async scheduling; no KV tiers, speculative decoding, disaggregation, compiled shapes or closed
loops), this module applies ``Scheduler.schedule`` and ``update``'s rules to per-request lists::

    arrivals     a0                    a1
    steps      |m|d d d d d d d d d d|m|d d d d d|d d d d ...
                 ^ a group step: the decoding requests take one token each (no loop over them,
                   priced from their count and token sum), a prompt in chunks (the chunker) its
                   chunk, admitted requests theirs
                   ^ a stretch (``sim.stretch``): all owe one token, none can be admitted: one
                     vector of step times up to the step in flight when the next request
                     arrives, through completions while nothing waits

Anything else (a preemption, more decoders than the budget, two prompts in chunks) is a general
step over explicit per-request values.

**The rules are the scheduler's.** What a request is given and admitted with
(``serving.scheduler.scheduled_tokens``, ``admitted_tokens``), whether the next step is plain
decode so a stretch may run (``Scheduler.plain_decode_next``, as ``decode_run_limit`` asks) and
whom a preemption takes (``Policy.victim_of``) are called here over the lists; this module
keeps the state, the closed forms and the order of block grants. Still restated here: the
free-block bound of a stretch (``sim.stretch.fundable``, over a histogram of block residues).

**The decode group.** A member takes one token every step, so its computed and output counts are
``base + D`` for a shared step counter D; it finishes when D reaches its ``fin`` (a heap gives the
next). Without prefix caching no block's identity is observed, so the pool is a count; a paged
member holds ``ceil(computed / block_size)`` blocks and takes one more when its computed count is
a multiple of the block size, at D ≡ −base (mod block size): a histogram of residues gives every
step's new blocks. A stretch stops before the first step the free blocks cannot fund, which then
preempts as stepping would. Reserving policies hold their reservation and never cross.

**Metrics.** Every member got its last token at the end of the previous step, so a step's
inter-token gap is shared by all (stored once with their count); members that waited in an
earlier step (``stale``) add their own gap once. A member's last token is its completion.

``tests/sim/test_sim_fast.py`` (Hypothesis) holds this module to the step-by-step loop: the same
finished and rejected requests, TTFT and TPOT to 1e-9, KV peak, steps and preemptions."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.scheduler import admitted_tokens, scheduled_tokens
from ridgeline.sim.early import LateCounter
from ridgeline.sim.executor import StepCostModel
from ridgeline.sim.fast_arrivals import next_step, seen
from ridgeline.sim.fast_cache import (
    cache_last_prompts,
    cache_prompt,
    cached_blocks,
    free_table,
    no_returning,
    take_admitted,
    take_group,
)
from ridgeline.sim.fast_off import fast_mode_off
from ridgeline.sim.lines import Horizon
from ridgeline.sim.metrics import SimResult
from ridgeline.sim.step_log import StepLog
from ridgeline.sim.stretch import stretch
from ridgeline.sim.summary import RunStats, summarize

if TYPE_CHECKING:
    from ridgeline.sim.loop import Simulation

_INF = float("inf")


def covers(sim: Simulation) -> bool:
    """Whether the fast mode reproduces ``sim``'s step-by-step run (see the module docstring);
    ``sim.fast_off.fast_mode_off`` says why not."""
    return fast_mode_off(sim) is None


def run(
    sim: Simulation,
    progress: Callable[[int], None] | None = None,
    late: LateCounter | None = None,
) -> tuple[SimResult, bool]:
    """Run ``sim`` in the fast mode (``covers(sim)`` must hold); the result, and whether
    ``late`` stopped it early."""
    state = _FastInstance(sim)
    stopped = state.loop(progress, late)
    samples, gaps = state.steps.arrays(state.num_blocks, state.bs)
    sim.log.itl_chunks.append(gaps)
    return summarize(sim.log, samples, state.stats()), stopped


class _FastInstance:
    """One mixed instance's scheduler, block pool and executor, over per-request lists."""

    def __init__(self, sim: Simulation) -> None:
        cfg, sched = sim.cfg, sim.instances[0].scheduler
        # ``covers`` keeps compiled-shape runs out, so the cost is a StepCostModel
        assert isinstance(sim.cost, StepCostModel)
        self.sched, self.cost, self.log = sched, sim.cost, sim.log
        self.label, self.slo = cfg.label, cfg.slo
        order = sorted(sim.workload, key=lambda r: r.arrival_s)  # the log's order
        delay = cfg.host.work.request_s  # requests reach the scheduler this late (sim.loop)
        self.arrival = [a + delay for a in self.log.arrival] if delay else self.log.arrival
        self.P = [r.prompt_len for r in order]
        self.maxnew = [r.output_len for r in order]
        self.prio = [r.priority for r in order]
        n = len(order)
        # explicit values (outside the decode group); the log counts the outputs
        self.comp, self.held, self.nout = [0] * n, [0] * n, self.log.num_out
        self.stamp, self.npre, self.reserve = [0] * n, [0] * n, [0] * n
        self.is_running, self.admitted = [False] * n, [False] * n
        self.bs, self.num_blocks, self.free = cfg.block_size, sim.num_blocks, sim.num_blocks
        self.cache = cached_blocks(cfg, sim.num_blocks, order)  # with prefix caching
        self.first_hit = [0] * n  # tokens a request found cached when first admitted
        self.hit_tokens = 0
        self.last_prompt: list[int] = []  # members whose next token is their prompt's last
        c = cfg.scheduler
        self.limit, self.cap = c.max_num_batched_tokens, c.long_prefill_token_threshold
        self.max_running = sched.max_running
        self.chunked = sched.policy.chunked and c.enable_chunked_prefill
        self.priority = sched.policy.kind is PolicyKind.PRIORITY
        self.fifo: deque[int] = deque()
        self.heap: list[tuple[tuple[int, float, int], int]] = []
        self.running: list[int] = []
        self.blocked = False
        self.num_steps = self.num_preemptions = self.queried = self.seq = self.done = 0
        self.steps = StepLog()
        self._verdicts: dict[int, tuple[str | None, int]] = {}
        # the decode group: computed = cbase + D, outputs = obase + D, finished at D = fin
        self.grouped, self.D, self.last_end = True, 0, 0.0
        self.cbase, self.obase = [0] * n, [0] * n
        self.gsum = 0  # Σ cbase over the members: they hold gsum + members·D computed tokens
        # the grouped closed forms, when the cost model offers them
        self.closed_forms = self.cost if self.cost.offers_grouped_forms() else None
        self.pace = 0.0  # the last decode step's time: how many steps reach the next arrival
        self.tight, self.key = [False] * n, [0] * n
        self.hist, self.num_tight = [0] * self.bs, 0
        self.fins: list[tuple[int, int]] = []
        self.stale: list[int] = []
        self.chunker: int | None = None  # last running request, its prompt in chunks
        self.lag = c.async_scheduling

    # ---- the loop ----------------------------------------------------------------------------

    def loop(self, progress: Callable[[int], None] | None, late: LateCounter | None) -> bool:
        """Arrivals and steps until every request is done (``sim.loop``'s event order: an
        arrival at a step's end is seen by the next step; an idle instance starts a step at an
        arrival with that request alone), or until ``late`` is reached (returns True)."""
        arr, n = self.arrival, len(self.arrival)
        nxt, now, busy, reported = 0, 0.0, False, 0
        while True:
            if not busy:
                if nxt == n:
                    break
                now = arr[nxt]
                nxt += 1
                if not self.submit(nxt - 1):
                    continue
            else:
                nxt = seen(self, nxt, now)
            end, nxt = next_step(self, now, nxt)
            busy = end is not None
            if busy:
                now = end  # type: ignore[assignment]
                if late is not None and late.reached(now):
                    return True
            if progress is not None and self.done - reported >= 100:
                reported = self.done
                progress(self.done)
        if progress is not None:
            progress(self.done)
        return False

    @property
    def waiting_len(self) -> int:
        return len(self.heap) if self.priority else len(self.fifo)

    def submit(self, i: int) -> bool:
        """``Scheduler.add_request``: queue request ``i``, or reject it with the reason."""
        reason, reserve = self._verdict(i)
        self.seq += 1
        self.stamp[i] = self.seq
        if reason is not None:
            self.log.rejected[i] = reason
            self.done += 1
            return False
        self.reserve[i] = reserve
        self._push(i)
        if self.priority and self.heap[0][1] == i:  # a new head may fit: admission tries it
            self.blocked = False
        return True

    def _verdict(self, i: int) -> tuple[str | None, int]:
        """(never-fits reason, tokens reserved at admission) of request ``i``, from the real
        scheduler; both depend on its most tokens (prompt + outputs) only."""
        most = self.P[i] + self.maxnew[i]
        out = self._verdicts.get(most)
        if out is None:
            out = (self.sched.never_fits(most), self.sched.policy.reserve_tokens(most) or 0)
            self._verdicts[most] = out
        return out

    def _reserve(self, i: int, hit_tokens: int) -> int:
        """Tokens request ``i`` reserves when admitted beside a prefix hit of ``hit_tokens``
        (``Policy.reserve_tokens``: a static bucket copies the prefix into its own)."""
        return self.sched.policy.reserve_tokens(self.P[i] + self.maxnew[i], hit_tokens) or 0

    def advance(self, now: float, horizon: Horizon) -> float | None:
        """Run the next step, or a stretch up to ``horizon``; the time it ends (None: idle)."""
        run = self.running
        if self.grouped and len(run) <= self.limit:
            plain = self.sched.plain_decode_next(len(run), self.waiting_len, self.blocked)
            if plain and self.chunker is None and not self.last_prompt:
                return stretch(self, now, horizon)
            if self._group_need() <= self.free:
                return self.group_step(now)
        return self.general_step(now)

    def _chunk_tokens(self) -> int:
        """Tokens the chunker gets in the next group step: what the members leave of the
        budget, its chunk cap and what it owes (0 when nothing is left)."""
        c = self.chunker
        if c is None:
            return 0
        budget = self.limit - len(self.running) + 1
        owed = self.P[c] + self.nout[c] - self.comp[c]
        return max(0, scheduled_tokens(owed, self.cap, budget))

    def _group_need(self) -> int:
        """Blocks the next group step takes: the members' crossings and the chunker's chunk."""
        c, n = self.chunker, self._chunk_tokens()
        if c is None or n == 0:
            return self._crossings()
        need = -(-(self.comp[c] + n) // self.bs) - self.held[c]
        return self._crossings() + max(need, 0)

    def _crossings(self) -> int:
        """Blocks the group's members take in the next step."""
        return self.hist[self.D % self.bs] if self.num_tight else 0

    # ---- waiting queue and preemption (policies.py) -------------------------------------------

    def _urgency(self, i: int) -> tuple[int, float, int]:
        """Request ``i``'s (priority, arrival, admission stamp): the priority policy's order."""
        return self.prio[i], self.arrival[i], self.stamp[i]

    def _push(self, i: int, front: bool = False) -> None:
        if self.priority:
            heapq.heappush(self.heap, ((self.prio[i], self.arrival[i], self.stamp[i]), i))
        elif front:
            self.fifo.appendleft(i)
        else:
            self.fifo.append(i)

    def _peek(self) -> int:
        return self.heap[0][1] if self.priority else self.fifo[0]

    def _pop(self) -> None:
        if self.priority:
            heapq.heappop(self.heap)
        else:
            self.fifo.popleft()

    def _victim(self) -> int:
        return self.sched.policy.victim_of(self.running, self._urgency)

    def _preempt(self, v: int, at: int) -> None:
        """Recompute: free the victim's blocks, forget its KV, requeue it at the front."""
        self.running.remove(v)
        self.is_running[v] = False
        self.blocked = False
        self.num_preemptions += 1
        self.npre[v] += 1
        free_table(self, v, at, returning=True)
        self.comp[v] = 0
        self._push(v, front=True)

    def _finish(self, i: int, t: float, at: int) -> None:
        """``i`` produced its last token at ``t`` (its explicit values are current)."""
        self.running.remove(i)
        self.is_running[i] = False
        self.blocked = False
        free_table(self, i, at, returning=False)
        self.log.preempt[i] += self.npre[i]
        self.log.cached[i] = self.first_hit[i]
        self.log.finish[i] = t
        self.done += 1

    def _admit(self, budget: int, at: int) -> list[tuple[int, int]]:
        """Admit waiting requests in queue order while budget, slots and blocks last."""
        self.blocked = False
        P, nout, comp, bs = self.P, self.nout, self.comp, self.bs
        admitted: list[tuple[int, int]] = []
        while self.waiting_len and budget > 0 and len(self.running) < self.max_running:
            i = self._peek()
            hit = self.cache.find(i, P[i] + nout[i]) if self.cache is not None else []
            cached = len(hit) * bs
            owed = P[i] + nout[i] - comp[i] - cached
            n = admitted_tokens(owed, self.cap, budget, self.chunked)
            if n is None:
                break
            reserve = self._reserve(i, cached) if hit else self.reserve[i]
            need = -(-max(comp[i] + cached + n, reserve) // bs) - self.held[i] - len(hit)
            revived = sum(1 for b in hit if b.ref_cnt == 0)  # free cached blocks a hit takes
            if need + revived > self.free:
                self.blocked = True
                break
            self._pop()
            take_admitted(self, i, hit, need, at)
            if not self.admitted[i]:
                self.admitted[i] = True
                self.queried += P[i]
                self.first_hit[i] = cached
                self.hit_tokens += cached
            self.running.append(i)
            self.is_running[i] = True
            admitted.append((i, n))
            budget -= n
        return admitted

    # ---- the general step: explicit values, Scheduler.schedule / update ----------------------

    def general_step(self, now: float) -> float | None:
        """Schedule, price and apply one step over explicit values; its end (None when
        nothing could be scheduled)."""
        self._materialize(frozenset(() if self.chunker is None else (self.chunker,)))
        self.chunker = None
        at = len(self.steps.end)
        picked = self._schedule(at)
        self.num_steps += 1
        if not picked:
            return None
        comp, first = self.comp, self.log.first_sched
        new = list(picked.values())
        end = now + self.cost.step_time_s(new, [comp[i] for i in picked])
        for i in picked:
            if first[i] is None:
                first[i] = now
        self.steps.add(now, end, sum(new), 0, 0)
        self._update(picked, end, at)
        self.steps.running_after(at, len(self.running))
        P, nout, run = self.P, self.nout, self.running
        if no_returning(self) and all(P[i] + nout[i] - comp[i] == 1 for i in run[:-1]):
            last_owes_more = bool(run) and P[run[-1]] + nout[run[-1]] - comp[run[-1]] > 1
            self._lazify(end, run[-1] if last_owes_more else None)
        return end

    def _schedule(self, at: int) -> dict[int, int]:
        """Running requests first (preempting when blocks run out), then admissions."""
        limit, cap, run = self.limit, self.cap, self.running
        P, nout, comp = self.P, self.nout, self.comp
        picked: dict[int, int] = {}
        budget, preempted, idx = limit, False, 0
        while idx < len(run) and budget > 0:
            i = run[idx]
            n = scheduled_tokens(P[i] + nout[i] - comp[i], cap, budget)
            victims = self._grow(i, n, picked, at)
            preempted = preempted or victims > 0
            if not self.is_running[i]:
                continue  # i itself was preempted; run[idx] is now the next one
            picked[i] = n
            budget = limit - sum(picked.values()) if victims else budget - n
            idx = run.index(i) + 1 if victims else idx + 1
        if not preempted:
            picked.update(self._admit(budget, at))
        return picked

    def _grow(self, i: int, n: int, picked: dict[int, int], at: int) -> int:
        """Give ``i`` the blocks for ``n`` more tokens, preempting victims until they fit (or
        ``i`` is the victim). Returns how many requests were preempted."""
        count, bs = 0, self.bs
        while True:
            need = -(-(self.comp[i] + n) // bs) - self.held[i]
            if need <= self.free:
                break
            victim = self._victim()
            self._preempt(victim, at)
            picked.pop(victim, None)
            count += 1
            if victim == i:
                return count
        if need > 0:
            if self.cache is not None:
                self.cache.grow(i, need)
                self.free = self.cache.free
            else:
                self.free -= need
            self.held[i] += need
            self.steps.event(at, need)
        return count

    def _update(self, picked: dict[int, int], end: float, at: int) -> None:
        """Apply the step: computed tokens, sampled tokens, completions."""
        P, nout, comp, log, maxnew = self.P, self.nout, self.comp, self.log, self.maxnew
        decoded = 0
        for i, n in picked.items():
            comp[i] += n
            cache_prompt(self, i)
            if comp[i] < P[i] + nout[i]:
                continue  # a prefill chunk short of the prompt's end samples nothing
            log.tokens(i, end, 1)
            decoded += n == 1
            if nout[i] >= maxnew[i]:
                self._finish(i, end, at)
        log.decode_tokens += decoded
        log.decode_seq_steps += decoded

    # ---- the decode group ------------------------------------------------------------------------

    def _join(self, i: int) -> None:
        """Request ``i`` (explicit values, owes one token) joins the decode group."""
        D, bs = self.D, self.bs
        self.cbase[i] = self.comp[i] - D
        self.obase[i] = self.nout[i] - D
        self.gsum += self.cbase[i]
        heapq.heappush(self.fins, (D + self.maxnew[i] - self.nout[i], i))
        tight = self.held[i] * bs - self.comp[i] < bs  # paged: it grows a block at a time
        self.tight[i] = tight
        if tight:
            self.key[i] = -self.cbase[i] % bs
            self.hist[self.key[i]] += 1
            self.num_tight += 1
        if self.cache is not None and self.comp[i] < self.P[i]:
            self.last_prompt.append(i)  # its prompt's last block fills in the next step

    def _lazify(self, end: float, chunker: int | None) -> None:
        """Every running request but ``chunker`` (the last one, its prompt in chunks) owes one
        token: they become the decode group."""
        last_tok = self.log.last_tok
        for i in self.running:
            if i == chunker:
                continue
            self._join(i)
            if last_tok[i] != end:
                self.stale.append(i)  # it waited in an earlier step: its own gap next step
        self.grouped, self.last_end, self.chunker = True, end, chunker

    def _materialize(self, outside: frozenset[int] = frozenset()) -> None:
        """Back to explicit values for every member (the general step needs them); requests
        in ``outside`` are running but not members."""
        if not self.grouped:
            return
        D, bs, stale = self.D, self.bs, set(self.stale)
        last_tok = self.log.last_tok
        for i in self.running:
            if i in outside:
                continue
            c = self.cbase[i] + D
            self.comp[i] = c
            self.nout[i] = self.obase[i] + D
            if self.tight[i]:
                self.held[i] = -(-c // bs)
                if self.cache is not None:
                    self.cache.tie(i, self.held[i])
            if i not in stale:
                last_tok[i] = self.last_end
        self.hist, self.num_tight, self.gsum = [0] * bs, 0, 0
        self.fins, self.stale, self.grouped, self.chunker = [], [], False, None
        self.last_prompt = []  # explicit now: the general step caches their blocks

    def finish_members(self, end: float, at: int) -> None:
        """Members whose output is complete after the step ending at ``end``."""
        fins, done = self.fins, []
        while fins and fins[0][0] <= self.D:
            done.append(heapq.heappop(fins)[1])
        if self.cache is not None and len(done) > 1:
            # in the order stepping frees them (its batch's): the cache's LRU order
            done.sort(key=self.running.index)
        for i in done:
            self.finish_member(i, self.D, end, at)

    def finish_member(self, i: int, d: int, end: float, at: int) -> None:
        """Member ``i`` (out of ``fins``) took its last token in step ``at``, ending at ``end``,
        with the shared counter at ``d`` after it."""
        c = self.cbase[i] + d
        self.gsum -= self.cbase[i]
        self.comp[i] = c
        if self.tight[i]:
            self.held[i] = -(-c // self.bs)
            self.hist[self.key[i]] -= 1
            self.num_tight -= 1
            if self.cache is not None:
                self.cache.tie(i, self.held[i])
        self.nout[i] = self.obase[i] + d
        self.log.last_tok[i] = end
        self._finish(i, end, at)

    def stale_gaps(self, end: float) -> None:
        """Members that waited before joining get their own gap to the step ending at ``end``."""
        log = self.log
        for i in self.stale:
            prev = log.last_tok[i]
            if prev is None:
                log.first_tok[i] = end
            else:
                log.itl1.append(end - prev)
        self.stale = []

    def group_step(self, now: float) -> float | None:
        """One step: every member takes one token, the chunker its chunk, then admissions (the
        blocks of the first two are known to fit); its end (None when nothing ran)."""
        run, at, d, comp, c = self.running, len(self.steps.end), self.D, self.comp, self.chunker
        members = len(run) - (c is not None)
        cross = self._crossings()
        take_group(self, [cross])
        chunk = self._chunk_tokens()
        if chunk:
            self._grow(c, chunk, {}, at)  # type: ignore[arg-type]  # fits: _group_need
        admitted = self._admit(self.limit - members - chunk, at)
        self.num_steps += 1
        if not run:
            return None
        explicit = ([(c, chunk)] if c is not None and chunk else []) + admitted
        first = self.log.first_sched
        for i, _ in explicit:
            if first[i] is None:
                first[i] = now
        new, prior = [n for _, n in explicit], [comp[i] for i, _ in explicit]
        end = now + self._group_step_s(members, new, prior)
        self.steps.add(now, end, members + sum(new), cross, members - len(self.stale))
        self.stale_gaps(end)
        self.D, self.last_end = d + 1, end
        self.log.decode_tokens += members
        self.log.decode_seq_steps += members
        cache_last_prompts(self)
        self.finish_members(end, at)
        self.chunker = None
        chunking = [i for i, n in explicit if not self._admitted_step(i, n, end, at)]
        if c is not None and not chunk:
            chunking.insert(0, c)  # the members took the whole budget: it waits
        if len(chunking) == 1 and chunking[0] == run[-1]:
            self.chunker = chunking[0]  # a prompt in chunks, last in line: the group goes on
        elif chunking:
            self._materialize(frozenset(chunking))
        if not no_returning(self):  # the chunker is explicit already
            self._materialize(frozenset(() if self.chunker is None else (self.chunker,)))
        self.steps.running_after(at, len(run))
        return end

    def _group_step_s(self, members: int, new: list[int], prior: list[int]) -> float:
        """Time of a group step: the members' token each, and ``new`` tokens on ``prior``."""
        if self.closed_forms is not None:
            t = self.closed_forms.grouped_step_s(members, self.gsum + members * self.D, new, prior)
            if t is not None:
                return t
        d, cbase = self.D, self.cbase
        members_prior = [cbase[i] + d for i in self.running[:members]]
        return self.cost.step_time_s([1] * members + new, members_prior + prior)

    def _admitted_step(self, i: int, n: int, end: float, at: int) -> bool:
        """Apply a group step to request ``i`` admitted in it with ``n`` tokens; False when its
        prompt is not done yet (it owes more than one token)."""
        comp, nout, log = self.comp, self.nout, self.log
        comp[i] += n
        cache_prompt(self, i)
        if comp[i] < self.P[i] + nout[i]:
            return False
        log.tokens(i, end, 1)
        if n == 1:
            log.decode_tokens += 1
            log.decode_seq_steps += 1
        if nout[i] >= self.maxnew[i]:
            self._finish(i, end, at)
        else:
            self._join(i)
        return True

    def stats(self) -> RunStats:
        static = self.sched.policy.kind is PolicyKind.STATIC
        return RunStats(
            label=self.label,
            slo=self.slo,
            num_preemptions=self.num_preemptions,
            num_steps=self.num_steps,
            prompt_tokens_queried=self.queried,
            prefix_hit_tokens=self.hit_tokens,
            kv_blocks=self.num_blocks,
            block_size=self.bs,
            static_slots=self.max_running if static else None,
        )
