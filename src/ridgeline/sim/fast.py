"""The simulator's fast mode: one instance's scheduler state in lists, decode stretches in closed
form, and no per-token Python objects.

``sim.loop`` drives the shared ``serving.Scheduler`` one step at a time. For the configurations
most runs use — one mixed instance, the fcfs, priority, contiguous or static policy, preemption
by recompute, and no prefix caching, KV tiers, speculative decoding or disaggregation — this
module applies the same rules (``Scheduler.schedule`` and ``update``, vLLM v1) to per-request
lists, and every stretch in which the batch changes predictably is applied at once::

    arrivals     a0                    a1
    steps      |m|d d d d d d d d d d|m|d d d d d|d d d d ...
                 ^ a mixed step (admission, prefill chunk, preemption): one at a time
                   ^ a stretch: every running request owes one token and none can be admitted;
                     one ``decode_run_s`` prices each segment of the same requests; the stretch
                     ends at the step in flight when the next request arrives, and goes on past
                     completions while nothing waits

Blocks: without prefix caching no block's identity is ever observed, so the pool is a count and
a table is its number of blocks. A decoding request takes a block in the step whose token crosses
its last block's boundary (token ``held · block_size``), as stepping allocates it: during a
stretch of k steps request i allocates at steps ``held_i · bs − computed_i + j · bs`` (j ≥ 0);
a stretch stops before the first step the free blocks cannot fund, which then preempts as
stepping would.

KV samples (the use after every step) are kept as per-step token counts plus block and
computed-token events, and summed once at the end. Rejections reuse ``Scheduler.never_fits``.
``tests/test_sim_fast.py`` (Hypothesis) holds this module to the step-by-step loop: the same
finished and rejected requests, TTFT and TPOT to 1e-9, KV peak, steps and preemptions.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from itertools import accumulate
from operator import sub
from typing import TYPE_CHECKING, cast

import numpy as np

from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.request import Request
from ridgeline.sim.metrics import SimResult, StepSamples
from ridgeline.sim.summary import RunStats, summarize

if TYPE_CHECKING:
    from ridgeline.sim.loop import Simulation

_INF = float("inf")


def covers(sim: Simulation) -> bool:
    """Whether the fast mode reproduces ``sim``'s step-by-step run (see the module docstring)."""
    cfg = sim.cfg
    return (
        len(sim.instances) == 1
        and sim.instances[0].role == "mixed"
        and not cfg.prefix_caching
        and not cfg.tiers
        and cfg.scheduler.spec is None
        and cfg.disagg is None
    )


def run(sim: Simulation, progress: Callable[[int], None] | None = None) -> SimResult:
    """Run ``sim`` in the fast mode (``covers(sim)`` must hold)."""
    state = _FastInstance(sim)
    state.loop(progress)
    return summarize(sim.log, state.samples(), state.stats())


class _Lengths:
    """What ``Scheduler.never_fits`` and ``Policy.reserve_tokens`` read of a request."""

    __slots__ = ("num_prompt_tokens", "max_tokens")

    def __init__(self, num_prompt_tokens: int, max_tokens: int) -> None:
        self.num_prompt_tokens = num_prompt_tokens
        self.max_tokens = max_tokens


class _Steps:
    """Per-step records: start, end, tokens computed and requests running after the step, and
    sparse events (sample index, blocks added, computed tokens removed)."""

    __slots__ = ("start", "end", "tokens", "running", "one_block", "ev_at", "ev_blocks", "ev_comp")

    def __init__(self) -> None:
        self.start: list[float] = []
        self.end: list[float] = []
        self.tokens: list[int] = []
        self.running: list[int] = []
        self.one_block: list[int] = []  # samples at which one block was added (decode growth)
        self.ev_at: list[int] = []
        self.ev_blocks: list[int] = []
        self.ev_comp: list[int] = []

    def event(self, at: int, blocks: int, removed: int = 0) -> None:
        self.ev_at.append(at)
        self.ev_blocks.append(blocks)
        self.ev_comp.append(removed)

    def samples(self, num_blocks: int, block_size: int) -> StepSamples:
        """KV use after every step (as the step-by-step loop samples it)."""
        g = len(self.start)
        start, end = np.array(self.start), np.array(self.end)
        at = np.asarray(self.ev_at, dtype=np.int64)
        added = np.bincount(np.asarray(self.one_block, dtype=np.int64), minlength=g)
        added = added + np.bincount(at, weights=self.ev_blocks, minlength=g)
        used = np.cumsum(added)
        removed = np.bincount(at, weights=self.ev_comp, minlength=g)
        computed = np.cumsum(np.asarray(self.tokens, dtype=float) - removed)
        slots = num_blocks * block_size
        return StepSamples(
            start,
            end - start,
            used / num_blocks,
            (used * block_size - computed) / slots,
            np.asarray(self.running, dtype=float),
        )


class _FastInstance:
    """One mixed instance's scheduler, block pool and executor, over per-request lists."""

    def __init__(self, sim: Simulation) -> None:
        cfg, sched = sim.cfg, sim.instances[0].scheduler
        self.sched, self.cost, self.log = sched, sim.cost, sim.log
        order = sorted(sim.workload, key=lambda r: r.arrival_s)  # the log's order
        self.specs = order
        self.arrival = self.log.arrival
        self.P = [r.prompt_len for r in order]
        self.maxnew = [r.output_len for r in order]
        self.prio = [r.priority for r in order]
        n = len(order)
        self.comp, self.held, self.stamp, self.npre = [0] * n, [0] * n, [0] * n, [0] * n
        self.nout = self.log.num_out  # outputs so far: the log counts them
        self.is_running, self.admitted = [False] * n, [False] * n
        self.reserve = [0] * n
        self.bs, self.num_blocks = cfg.block_size, sim.num_blocks
        self.free = sim.num_blocks
        c = cfg.scheduler
        self.limit, self.cap = c.max_num_batched_tokens, c.long_prefill_token_threshold
        self.max_running = sched.max_running
        self.chunked = sched.policy.chunked and c.enable_chunked_prefill
        self.priority = sched.policy.kind is PolicyKind.PRIORITY
        self.fifo: deque[int] = deque()
        self.heap: list[tuple[tuple[int, float, int], int]] = []
        self.running: list[int] = []
        self.blocked = self.all_decode = False
        self.num_steps = self.num_preemptions = self.queried = self.seq = self.done = 0
        self.steps = _Steps()
        self._verdicts: dict[tuple[int, int], tuple[str, int]] = {}
        self.label, self.slo = cfg.label, cfg.slo

    # ---- the loop ----------------------------------------------------------------------------

    def loop(self, progress: Callable[[int], None] | None) -> None:
        """Arrivals and steps until every request is done (``sim.loop``'s event order: an
        arrival at a step's end is seen by the next step; an idle instance starts a step at an
        arrival with that request alone)."""
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
                while nxt < n and arr[nxt] <= now:
                    self.submit(nxt)
                    nxt += 1
            end = self.advance(now, arr[nxt] if nxt < n else _INF) if self.has_work else None
            busy = end is not None
            now = now if end is None else end
            if progress is not None and self.done - reported >= 100:
                reported = self.done
                progress(self.done)
        if progress is not None:
            progress(self.done)

    @property
    def has_work(self) -> bool:
        return bool(self.running) or bool(self.fifo) or bool(self.heap)

    def submit(self, i: int) -> bool:
        """``Scheduler.add_request``: queue request ``i``, or reject it with the reason."""
        reason, reserve = self._verdict(i)
        self.seq += 1
        self.stamp[i] = self.seq
        if reason:
            self.log.rejected[i] = reason
            self.done += 1
            return False
        self.reserve[i] = reserve
        self._push(i)
        return True

    def _verdict(self, i: int) -> tuple[str, int]:
        """(never-fits reason, tokens reserved at admission) of request ``i``; both depend on
        its lengths only, so they are asked of the real scheduler once per distinct length."""
        key = (self.P[i], self.maxnew[i])
        out = self._verdicts.get(key)
        if out is None:
            # NOTE: both read only the two lengths; a stand-in saves building a Request
            req = cast(Request, _Lengths(key[0], key[0] + key[1]))
            out = (self.sched.never_fits(req), self.sched.policy.reserve_tokens(req) or 0)
            self._verdicts[key] = out
        return out

    def advance(self, now: float, horizon: float) -> float | None:
        """Run the next step, or a stretch up to ``horizon``; the time it ends (None: idle)."""
        run = self.running
        if (
            run
            and self.all_decode
            and len(run) <= self.limit
            and not (self.waiting_len and len(run) < self.max_running and not self.blocked)
        ):
            return self.stretch(now, horizon)
        return self.mixed_step(now)

    @property
    def waiting_len(self) -> int:
        return len(self.heap) if self.priority else len(self.fifo)

    # ---- waiting queue and preemption (policies.py) -------------------------------------------

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
        if self.priority:
            prio, arr, stamp = self.prio, self.arrival, self.stamp
            return max(self.running, key=lambda i: (prio[i], arr[i], stamp[i]))
        return self.running[-1]

    def _preempt(self, v: int, at: int) -> None:
        """Recompute: free the victim's blocks, forget its KV, requeue it at the front."""
        self.running.remove(v)
        self.is_running[v] = False
        self.blocked = False
        self.num_preemptions += 1
        self.npre[v] += 1
        self.steps.event(at, -self.held[v], self.comp[v])
        self.free += self.held[v]
        self.held[v] = self.comp[v] = 0
        self._push(v, front=True)

    def _finish(self, i: int, t: float, at: int) -> None:
        self.running.remove(i)
        self.is_running[i] = False
        self.blocked = False
        self.steps.event(at, -self.held[i], self.comp[i])
        self.free += self.held[i]
        self.held[i] = 0
        self.log.preempt[i] += self.npre[i]
        self.log.finish[i] = t
        self.done += 1

    # ---- one step at a time (Scheduler.schedule / update) --------------------------------------

    def mixed_step(self, now: float) -> float | None:
        """Schedule, price and apply one step; its end (None when nothing could be scheduled)."""
        at = len(self.steps.start)
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
        self.steps.start.append(now)
        self.steps.end.append(end)
        self.steps.tokens.append(sum(new))
        self._update(picked, end, at)
        self.steps.running.append(len(self.running))
        P, nout = self.P, self.nout
        self.all_decode = all(P[i] + nout[i] - comp[i] == 1 for i in self.running)
        return end

    def _schedule(self, at: int) -> dict[int, int]:
        """Running requests first (preempting when blocks run out), then admissions."""
        if self.all_decode and len(self.running) <= self.limit:
            picked = self._schedule_decoders(at)
            if picked is not None:
                self._admit(self.limit - len(picked), picked, at)
                return picked
        limit, cap, run = self.limit, self.cap, self.running
        P, nout, comp = self.P, self.nout, self.comp
        picked: dict[int, int] = {}
        budget, preempted, idx = limit, False, 0
        while idx < len(run) and budget > 0:
            i = run[idx]
            owed = P[i] + nout[i] - comp[i]
            n = min(owed, cap or owed, budget)
            victims = self._grow(i, n, picked, at)
            preempted = preempted or victims > 0
            if not self.is_running[i]:
                continue  # i itself was preempted; run[idx] is now the next one
            picked[i] = n
            budget = limit - sum(picked.values()) if victims else budget - n
            idx = run.index(i) + 1 if victims else idx + 1
        if not preempted:
            self._admit(budget, picked, at)
        return picked

    def _schedule_decoders(self, at: int) -> dict[int, int] | None:
        """Every running request owes one token: one each, when the free blocks fund the step
        (None otherwise: the general rule preempts)."""
        bs, held, comp = self.bs, self.held, self.comp
        crossing = [i for i in self.running if held[i] * bs == comp[i]]
        if len(crossing) > self.free:
            return None
        for i in crossing:
            held[i] += 1
        if crossing:
            self.free -= len(crossing)
            self.steps.event(at, len(crossing))
        return dict.fromkeys(self.running, 1)

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
            self.held[i] += need
            self.free -= need
            self.steps.event(at, need)
        return count

    def _admit(self, budget: int, picked: dict[int, int], at: int) -> None:
        """Admit waiting requests in queue order while budget, slots and blocks last."""
        self.blocked = False
        P, nout, comp, bs = self.P, self.nout, self.comp, self.bs
        while self.waiting_len and budget > 0 and len(self.running) < self.max_running:
            i = self._peek()
            owed = P[i] + nout[i] - comp[i]
            if not self.chunked and owed > budget:
                break
            n = min(owed, self.cap or owed, budget)
            need = -(-max(comp[i] + n, self.reserve[i]) // bs) - self.held[i]
            if need > self.free:
                self.blocked = True
                break
            self._pop()
            self.held[i] += need
            self.free -= need
            self.steps.event(at, need)
            if not self.admitted[i]:
                self.admitted[i] = True
                self.queried += P[i]
            self.running.append(i)
            self.is_running[i] = True
            picked[i] = n
            budget -= n

    def _update(self, picked: dict[int, int], end: float, at: int) -> None:
        """Apply the step: computed tokens, sampled tokens, completions."""
        P, nout, comp, log, maxnew = self.P, self.nout, self.comp, self.log, self.maxnew
        last_tok, itl1, decoded = log.last_tok, log.itl1, 0
        for i, n in picked.items():
            comp[i] += n
            if comp[i] < P[i] + nout[i]:
                continue  # a prefill chunk short of the prompt's end samples nothing
            prev = last_tok[i]  # NOTE: RequestLog.tokens(i, end, 1), inlined (hot loop)
            if prev is None:
                log.first_tok[i] = end
            else:
                itl1.append(end - prev)
            last_tok[i] = end
            nout[i] += 1
            decoded += n == 1
            if nout[i] >= maxnew[i]:
                self._finish(i, end, at)
        log.decode_tokens += decoded
        log.decode_seq_steps += decoded

    # ---- decode stretches in closed form --------------------------------------------------------

    def stretch(self, now: float, horizon: float) -> float:
        """Plain decode steps from ``now`` until the step in flight at ``horizon``, through
        completions while nothing can be admitted; returns the end of the last step."""
        t, maxnew, nout, comp = now, self.maxnew, self.nout, self.comp
        while True:
            run = self.running
            k_done = min(map(sub, map(maxnew.__getitem__, run), map(nout.__getitem__, run)))
            k = self._fundable(k_done)
            if k == 0:  # the next step needs a block the pool does not have: preempt
                end = self.mixed_step(t)
                assert end is not None
                return end
            times = self.cost.decode_run_s([comp[i] for i in run], k).tolist()
            # step ends added one at a time from t, as stepping adds them: acc[j + 1] ends step j
            acc = list(accumulate(times, initial=t))
            m = min(k, bisect_left(acc, horizon, 1))
            t = self._apply_decode(run, acc[: m + 1], m == k_done)
            if t >= horizon or m < k_done or not self.running:
                return t
            if self.waiting_len and len(self.running) < self.max_running:
                return t  # a completion made room: the next step admits

    def _fundable(self, k: int) -> int:
        """How many of the next ``k`` decode steps the free blocks fund entirely."""
        bs, held, comp, run = self.bs, self.held, self.comp, self.running
        if self.free >= len(run) * ((k - 1) // bs + 1):  # at most one block per bs steps each
            return k
        firsts = [held[i] * bs - comp[i] for i in run]
        if sum((k - 1 - f) // bs + 1 for f in firsts if f < k) <= self.free:
            return k
        steps = sorted(j for f in firsts for j in range(f, k, bs))
        return steps[self.free]  # the first step whose allocation finds the pool empty

    def _apply_decode(self, run: list[int], acc: list[float], completes: bool) -> float:
        """Apply ``len(acc) − 1`` decode steps of ``run`` (step j from acc[j] to acc[j + 1]);
        requests reaching their output length finish at the last one when ``completes``."""
        m, steps, bs = len(acc) - 1, self.steps, self.bs
        at, r = len(steps.start), len(run)
        ends = acc[1:]
        steps.start += acc[:-1]
        steps.end += ends
        steps.tokens += [r] * m
        steps.running += [r] * m
        held, comp = self.held, self.comp
        log, nout = self.log, self.nout
        last_tok, itl1, first_end, end = log.last_tok, log.itl1, acc[1], acc[-1]
        for i in run:  # NOTE: RequestLog.decode_run's per-request part, inlined (hot loop)
            first = held[i] * bs - comp[i]
            if first < m:
                grown = (m - 1 - first) // bs + 1
                held[i] += grown
                self.free -= grown
                steps.one_block += range(at + first, at + m, bs)
            comp[i] += m
            nout[i] += m
            prev = last_tok[i]
            if prev is None:
                log.first_tok[i] = first_end
            else:
                itl1.append(first_end - prev)
            last_tok[i] = end
        log.shared_gaps(ends, r)
        log.decode_tokens += m * r
        log.decode_seq_steps += m * r
        self.num_steps += m
        if completes:
            end, maxnew, nout = ends[-1], self.maxnew, self.nout
            for i in [i for i in run if nout[i] >= maxnew[i]]:
                self._finish(i, end, at + m - 1)
            steps.running[-1] = len(self.running)
        return end

    # ---- results ---------------------------------------------------------------------------------

    def samples(self) -> StepSamples:
        return self.steps.samples(self.num_blocks, self.bs)

    def stats(self) -> RunStats:
        static = self.sched.policy.kind is PolicyKind.STATIC
        return RunStats(
            label=self.label,
            slo=self.slo,
            num_preemptions=self.num_preemptions,
            num_steps=self.num_steps,
            prompt_tokens_queried=self.queried,
            prefix_hit_tokens=0,
            tier_traffic=(),
            kv_blocks=self.num_blocks,
            block_size=self.bs,
            static_slots=self.max_running if static else None,
        )
