"""The event loop: arrivals, step completions and KV transfers over one or more instances.

One event key, ``(time_s, priority, seq)``, defined in ``_push`` (SimPy's ``heappush`` key): at
equal times arrivals and KV deliveries come before step completions, so a request arriving as a
step ends is seen by the next step; ``seq`` breaks remaining ties in insertion order. The run is
deterministic for a seed.

Each instance runs the same ``Scheduler`` the engine uses, with a ``CostModelExecutor``. When the
running set is plain decode (``Scheduler.decode_run_limit``), the loop prices the whole run of
steps up to the next event in closed form and applies it at once::

    step-by-step:  |d0|d1|d2|d3|d4|   (five schedule/execute/update rounds)
    closed form:   |d0 d1 d2 d3 d4|    (one vector of five step times; same tokens and blocks)

Step ends are accumulated from ``now`` one step at a time, as stepping does, and the KV use after
every step of a run is recorded, so both give the same times, samples and KV peak.

NOTE: with ``fast_forward`` on, a configuration the fast mode covers (``sim.fast_off``) runs in
``sim.fast``: the scheduler's state in arrays, held to this loop's results by a differential test.

Disaggregation: prefill instances run each prompt and its first token; the KV then crosses a
link (latency + bytes ÷ bandwidth) and a decode instance continues (DistServe, OSDI 2024;
Splitwise, ISCA 2024).
"""

from __future__ import annotations

import gc
import heapq
import operator
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING

import numpy as np

from ridgeline.analytic.kv import kv_bytes_per_token
from ridgeline.analytic.memory import MemoryRule
from ridgeline.analytic.memory import kv_pool_blocks as rule_blocks
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.workload import Dtypes
from ridgeline.errors import ConfigError
from ridgeline.serving.block_pool import BlockPool
from ridgeline.serving.disagg import Disagg, decode_request, prefill_request
from ridgeline.serving.eviction import EvictionKind, make_eviction
from ridgeline.serving.executor import ScheduledBatch, StepResult
from ridgeline.serving.kv_manager import KVCacheManager
from ridgeline.serving.lookahead import Lookahead
from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.request import Request, SamplingParams
from ridgeline.serving.scheduler import Scheduler, SchedulerConfig
from ridgeline.serving.tiers import KVTiers, TierSpec, TierTraffic
from ridgeline.sim import fast, fast_off
from ridgeline.sim.early import LateCounter, LateStop
from ridgeline.sim.executor import (
    CostModelExecutor,
    HostCost,
    RequestPlan,
    StepCost,
    one_chip,
    step_cost_model,
)
from ridgeline.sim.metrics import SLO, RequestLog, SimResult
from ridgeline.sim.step_log import StepRecorder
from ridgeline.sim.summary import RunStats, summarize
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_BLOCK_SIZE, MAX_SEED

if TYPE_CHECKING:  # compiled shapes load their dataflow compiler only when a run uses them
    from ridgeline.sim.compiled import CompiledShapes, CompiledStepCost

MAX_BLOCKS = 1 << 30  # KV blocks of one pool


@dataclass(frozen=True, slots=True)
class SimConfig:
    """One serving configuration: a model on the deployment of its pricing (one per instance).

    Attributes:
        model: the served model.
        pricing: how steps are priced: mode (calibrated or ideal), calibration terms, the
            deployment each instance runs on, data types (``analytic.pricing``).
        scheduler: scheduling limits and policy.
        block_size: tokens per KV block.
        prefix_caching: reuse cached prefix blocks.
        eviction: lru or lfu.
        memory_utilization: fraction of each chip's device memory the engine may use for
            weights, reserve and KV (vLLM's ``gpu_memory_utilization``; None: the runtime's
            default; ``analytic.memory``).
        num_blocks: override the KV pool size in blocks.
        tiers: KV tiers below the device (host, disk).
        draft_model: speculative decoding's draft model (None: drafts are free).
        disagg: prefill/decode disaggregation (None: one mixed instance).
        compiled: compiled shapes: steps are priced at them (``sim.compiled``; None: the
            roofline of the tokens scheduled).
        slo: latency objectives for goodput.
        host: the engine's host work per step and per request (``HostCost``): a request reaches
            the scheduler ``host.work.request_s`` after it arrives; latencies count from arrival.
        seed: seeds draft acceptance.
        fast_forward: advance plain decode runs in closed form.
        label: a name for tables.
    """

    model: ModelSpec
    pricing: Pricing
    scheduler: SchedulerConfig = SchedulerConfig()
    block_size: int = 16
    prefix_caching: bool = False
    eviction: EvictionKind = EvictionKind.LRU
    memory_utilization: float | None = None
    num_blocks: int | None = None
    tiers: tuple[TierSpec, ...] = ()
    draft_model: ModelSpec | None = None
    disagg: Disagg | None = None
    compiled: CompiledShapes | None = None
    slo: SLO = SLO()
    host: HostCost = HostCost()
    seed: int = 0
    fast_forward: bool = True
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "eviction", EvictionKind.parse(self.eviction))  # names accepted
        if not isinstance(self.pricing, Pricing):
            raise ConfigError(
                f"field pricing: a Pricing (analytic.pricing), got {type(self.pricing).__name__}"
            )
        if self.memory_utilization is not None:
            check_real("memory_utilization", self.memory_utilization, 0, 1, low_open=True)
        check_int("block_size", self.block_size, 1, MAX_BLOCK_SIZE)
        if self.num_blocks is not None:
            check_int("num_blocks", self.num_blocks, 1, MAX_BLOCKS)
        check_int("seed", self.seed, 0, MAX_SEED)

    @property
    def hw(self) -> Accelerator:
        """The accelerator every chip of the deployment is."""
        return self.pricing.accelerator

    @property
    def dtypes(self) -> Dtypes:
        return self.pricing.dtypes

    @property
    def block_bytes(self) -> float:
        return self.block_size * kv_bytes_per_token(self.model, self.dtypes.kv)

    @property
    def memory_rule(self) -> MemoryRule:
        """The KV-pool rule of this configuration: its ``memory_utilization``, and the profile
        step its scheduler allows (``analytic.memory``)."""
        s = self.scheduler
        return MemoryRule(self.memory_utilization, s.max_num_batched_tokens, s.max_num_seqs)


def kv_pool_blocks(cfg: SimConfig) -> int:
    """Blocks of one instance: ``num_blocks`` when given, else the one KV-pool rule
    (``analytic.memory``) on the pricing's deployment.

    Raises:
        CapacityError: the weights and the reserve leave no room for one block.
    """
    if cfg.num_blocks is not None:
        return cfg.num_blocks
    deployment = cfg.pricing.deployment
    return rule_blocks(cfg.model, deployment, cfg.dtypes, cfg.block_bytes, cfg.memory_rule)


_COMPUTED = operator.attrgetter("num_computed_tokens")


def _compiled_cost(cfg: SimConfig) -> CompiledStepCost | None:
    """The compiled-shape step cost of ``cfg`` (None without compiled shapes)."""
    if cfg.compiled is None:
        return None
    from ridgeline.sim.compiled import CompiledStepCost

    one_chip(cfg.pricing, "a compiled-shape simulation")
    return CompiledStepCost(cfg.model, cfg.pricing, cfg.compiled)


class Role(StrEnum):
    """What an instance runs: everything, or one side of disaggregation."""

    MIXED = "mixed"
    PREFILL = "prefill"
    DECODE = "decode"


class _Kind(IntEnum):
    """Event priorities at equal times (smaller first)."""

    ARRIVAL = 0
    KV_READY = 1
    STEP_DONE = 2


@dataclass(slots=True)
class _Instance:
    index: int
    role: Role
    scheduler: Scheduler
    executor: CostModelExecutor
    busy: bool = False
    batch: ScheduledBatch | None = None
    result: StepResult | None = None
    batch_start_s: float = 0.0  # the start of the step in flight
    finishing: int = 0  # requests a decode run finished at its end, still running until then
    held: Lookahead[Request] | None = None  # async scheduling (``serving.lookahead``)


# An event is a tuple (time_s, priority, seq, kind, payload): the key is its first three fields,
# and seq is unique, so the heap never compares kinds or payloads.
_Event = tuple[float, int, int, _Kind, object]


class Simulation:
    """One run of a workload under a ``SimConfig``.

    With ``clients`` (a closed loop), that many clients each send their next request the
    moment their last one finishes (or is rejected): the workload's first ``clients``
    requests start at their arrival times, request j + clients when request j is done, and
    each one's latencies count from that moment (the step loop runs it, not the fast mode).
    """

    def __init__(
        self, cfg: SimConfig, workload: Sequence[RequestSpec], clients: int | None = None
    ) -> None:
        if clients is not None:
            check_int("clients", clients, 1, max(1, len(workload)))
        self.cfg = cfg
        self.clients = clients
        self._waiting_clients: list[RequestSpec] = list(workload[clients or len(workload) :])
        self._waiting_clients.reverse()  # the next request is popped from the end
        self.workload = workload
        self.specs = {r.request_id: r for r in workload}
        if len(self.specs) != len(workload):
            raise ConfigError("workload: request ids must be unique")
        self.plans: dict[str, RequestPlan] = {}
        order = sorted(workload, key=lambda r: r.arrival_s)  # the order arrivals are handled
        self.log = RequestLog(
            [r.request_id for r in order],
            [r.arrival_s for r in order],
            [r.prompt_len for r in order],
        )
        self.steps = StepRecorder()
        self.now = 0.0
        self._heap: list[_Event] = []
        self._seq = 0
        self.num_blocks = kv_pool_blocks(cfg)
        self.compiled_cost = _compiled_cost(cfg)
        self.cost: StepCost = self._make_cost()
        # NOTE: the draft model is small: it runs on one chip of the deployment
        one = cfg.pricing.on(cfg.hw)
        self.draft = step_cost_model(cfg.draft_model, one) if cfg.draft_model else None
        self.rng = random.Random(cfg.seed)
        self.instances = self._make_instances()
        self.tiers = [
            i.scheduler.kv.tiers for i in self.instances if i.scheduler.kv.tiers is not None
        ]
        self.done = 0
        self.stopped = False  # run() ended early: the TTFT objective was certainly missed
        self.originals: dict[str, Request] = {}  # disaggregation: requests in their prefill

    def _make_cost(self) -> StepCost:
        """The cost model that prices steps (a subclass prices them its own way)."""
        cfg = self.cfg
        return self.compiled_cost or step_cost_model(cfg.model, cfg.pricing, cfg.host)

    def _make_instances(self) -> list[_Instance]:
        d = self.cfg.disagg
        roles = (
            [Role.MIXED]
            if d is None
            else [Role.PREFILL] * d.num_prefill + [Role.DECODE] * d.num_decode
        )
        return [self._instance(i, role) for i, role in enumerate(roles)]

    def _role_cost(self, role: Role) -> StepCost:
        """The cost model of an instance of ``role`` (a hook: every instance shares ``cost``
        here; ``sim.pools`` gives prefill and decode instances deployments of their own)."""
        return self.cost

    def _role_blocks(self, role: Role) -> int:
        """KV blocks of an instance of ``role`` (a hook, as ``_role_cost``)."""
        return self.num_blocks

    def _instance(self, index: int, role: Role) -> _Instance:
        cfg = self.cfg
        tiers = KVTiers(cfg.tiers, cfg.block_bytes) if cfg.tiers else None
        pool = BlockPool(
            self._role_blocks(role),
            cfg.block_size,
            make_eviction(cfg.eviction),
            tiers.offload if tiers else None,
        )
        kv = KVCacheManager(pool, cfg.prefix_caching, tiers)
        spec = cfg.scheduler.spec
        args = {
            "plans": self.plans,
            "rng": self.rng,
            "spec_acceptance": spec.acceptance_rate if spec else 0.0,
            "draft": self.draft,
        }
        executor = CostModelExecutor(self._role_cost(role), **args)  # type: ignore[arg-type]
        if self.compiled_cost is not None and cfg.compiled is not None:
            from ridgeline.sim.compiled import CompiledExecutor, PrefixCopies

            copies = PrefixCopies(cfg.compiled.prefix_copy and role is not Role.DECODE)
            executor = CompiledExecutor(self.compiled_cost, copies, **args)
        held = Lookahead[Request]() if cfg.scheduler.async_scheduling else None
        return _Instance(index, role, Scheduler(cfg.scheduler, kv), executor, held=held)

    def _push(self, time_s: float, kind: _Kind, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time_s, int(kind), self._seq, kind, payload))

    # ---- the loop ----------------------------------------------------------------------------

    def run(
        self, progress: Callable[[int], None] | None = None, stop: LateStop | None = None
    ) -> SimResult:
        """Run to completion, or until ``stop`` says the TTFT objective is missed (then
        ``stopped`` is True and the requests not finished have no latencies); ``progress`` is
        called with the number of requests done."""
        late = LateCounter(stop, self.log) if stop is not None else None
        with gc_paused():
            if (off := fast_off.fast_mode_off(self)) is None:
                result, self.stopped = fast.run(self, progress, late)
                return result
            self._loop(progress, late)
            samples = self.steps.samples(len(self.instances) > 1)  # the result says why (off)
            return summarize(self.log, samples, replace(self.stats(), fast_mode_off=off))

    def stats(self) -> RunStats:
        """The run's counters (after ``run``)."""
        sched = [i.scheduler for i in self.instances]
        tiers: dict[str, list[float]] = {}
        for kv_tiers in self.tiers:
            for t in kv_tiers.traffic():
                acc = tiers.setdefault(t.name, [0.0, 0.0, 0.0])
                acc[0] += t.bytes_in
                acc[1] += t.bytes_out
                acc[2] += t.hit_blocks
        first = sched[0]
        return RunStats(
            label=self.cfg.label,
            slo=self.cfg.slo,
            num_preemptions=sum(s.stats.num_preemptions for s in sched),
            num_steps=sum(s.stats.num_steps for s in sched),
            prompt_tokens_queried=sum(s.stats.prompt_tokens_queried for s in sched),
            prefix_hit_tokens=sum(s.stats.prefix_hit_tokens for s in sched),
            tier_traffic=tuple(TierTraffic(n, v[0], v[1], int(v[2])) for n, v in tiers.items()),
            kv_blocks=self.num_blocks,
            block_size=self.cfg.block_size,
            static_slots=first.max_running if first.policy.kind is PolicyKind.STATIC else None,
            compiled=self.compiled_cost.stats() if self.compiled_cost is not None else None,
        )

    def _loop(self, progress: Callable[[int], None] | None, late: LateCounter | None) -> None:
        delay = self.cfg.host.work.request_s  # the API server's share, before the scheduler
        for spec in self.workload[: self.clients or len(self.workload)]:
            self._push(spec.arrival_s + delay, _Kind.ARRIVAL, spec)
        handlers = {
            _Kind.ARRIVAL: self._on_arrival,
            _Kind.KV_READY: self._on_kv_ready,
            _Kind.STEP_DONE: self._on_step_done,
        }
        last_report = 0
        while self._heap:
            self.now, _, _, kind, payload = heapq.heappop(self._heap)
            handlers[kind](payload)
            if late is not None and late.reached(self.now):
                self.stopped = True
                break
            if progress is not None and self.done - last_report >= 100:
                last_report = self.done
                progress(self.done)
        if progress is not None:
            progress(self.done)

    def _on_arrival(self, payload: object) -> None:
        assert isinstance(payload, RequestSpec)
        spec = payload
        self.plans[spec.request_id] = RequestPlan(
            spec.prompt_len, spec.output, spec.spec_acceptance
        )
        req = Request(
            spec.request_id,
            spec.prompt,
            SamplingParams(
                spec.output_len, priority=spec.priority, spec_acceptance=spec.spec_acceptance
            ),
            self.now,
        )
        if self.cfg.disagg is None:
            self._submit(self._least_loaded(Role.MIXED), req)
            return
        reason = self._least_loaded(Role.DECODE).scheduler.never_fits(req.max_total_tokens)
        if reason is not None:  # reject before prefilling a request the decode side can never hold
            self.log.rejected[self.log.index[req.request_id]] = reason
            self.done += 1
        else:
            self.originals[spec.request_id] = req
            self._submit(self._least_loaded(Role.PREFILL), prefill_request(req))

    def _on_kv_ready(self, payload: object) -> None:
        assert isinstance(payload, Request)
        original = self.originals.pop(payload.request_id)
        self._submit(self._least_loaded(Role.DECODE), decode_request(original, payload))

    def _least_loaded(self, role: Role) -> _Instance:
        pool = [i for i in self.instances if i.role is role]
        return min(
            pool,
            key=lambda i: (
                len(i.scheduler.running)
                + len(i.scheduler.waiting)
                + i.finishing
                + len(i.held or ()),
                i.index,
            ),
        )

    def _submit(self, inst: _Instance, req: Request) -> None:
        if inst.held is not None and inst.busy:
            inst.held.hold(req, self.now == inst.batch_start_s)
        elif self._enqueue(inst, req) and not inst.busy:
            self._start_step(inst)

    def _enqueue(self, inst: _Instance, req: Request) -> bool:
        """Hand ``req`` to ``inst``'s scheduler; False when it rejects it."""
        if inst.scheduler.add_request(req):
            return True
        self.log.rejected[self.log.index[req.request_id]] = req.reject_reason
        self.done += 1
        self._next_of_client(self.now)
        return False

    def _start_step(self, inst: _Instance) -> None:
        """Start ``inst``'s next step (or a closed-form decode run), if it has work."""
        sched = inst.scheduler
        if not sched.has_unfinished:
            return
        run = self.cfg.fast_forward and not (inst.held and inst.held.pending)
        k = sched.decode_run_limit(1 << 30) if run else 0
        if k > 1:
            self._decode_run(inst, k)
            return
        batch = sched.schedule()
        if not batch.requests:
            if inst.held is not None and inst.held.pending:  # idle: it takes every held request
                for req in inst.held.flush():
                    self._enqueue(inst, req)
                self._start_step(inst)
            return
        result = inst.executor.execute(batch)
        index, first_sched = self.log.index, self.log.first_sched
        for sr in batch.requests:
            i = index[sr.request_id]
            if first_sched[i] is None:
                first_sched[i] = self.now
        inst.busy, inst.batch, inst.result, inst.batch_start_s = True, batch, result, self.now
        self._push(self.now + result.time_s, _Kind.STEP_DONE, inst)

    def _on_step_done(self, payload: object) -> None:
        assert isinstance(payload, _Instance)
        inst = payload
        inst.busy = False
        inst.finishing = 0
        batch, result = inst.batch, inst.result
        if batch is not None and result is not None:
            inst.batch = inst.result = None
            finished = inst.scheduler.update(batch, result)
            log = self.log
            for sr in batch.requests:
                toks = result.sampled.get(sr.request_id, ())
                if sr.sample and toks:
                    log.tokens(log.index[sr.request_id], self.now, len(toks))
                    if sr.num_new_tokens == 1 + sr.num_draft_tokens:
                        log.decode_tokens += len(toks)
                        log.decode_seq_steps += 1
            self._sample_kv(inst, inst.batch_start_s, self.now - inst.batch_start_s)
            for req in finished:
                self._finished(inst, req, self.now)
        if inst.held is not None:  # async scheduling: the requests the next schedule sees
            for req in inst.held.at_boundary(lambda: not inst.scheduler.has_unfinished):
                self._enqueue(inst, req)
        self._start_step(inst)

    def _decode_run(self, inst: _Instance, k: int) -> None:
        """Apply the decode steps up to the next event at once (see the module docstring)."""
        sched = inst.scheduler
        running = list(sched.running)
        times = inst.executor.cost.decode_run_s([r.num_computed_tokens for r in running], k)
        acc = np.cumsum(np.concatenate(([self.now], times)))  # acc[j + 1]: end of step j
        horizon = self._heap[0][0] if self._heap else float("inf")
        m = min(k, int(np.searchsorted(acc[1:], horizon, side="left")) + 1)
        if self.compiled_cost is not None:
            self.compiled_cost.keep_run(m)  # tally only the steps that run
        self._sample_run(inst, acc[: m + 1])
        ex = inst.executor
        finished = sched.advance_decode(
            m, lambda r, n: ex.sample_run(r.request_id, r.num_tokens, n)
        )
        ends = acc[1 : m + 1].tolist()
        self.log.decode_run([self.log.index[r.request_id] for r in running], ends)
        self._sample_kv(inst, float(acc[m - 1]), ends[-1] - float(acc[m - 1]))
        for req in finished:
            self._finished(inst, req, ends[-1])
        inst.finishing = len(finished)  # the router sees them running until the run ends
        inst.busy, inst.batch_start_s = True, float(acc[m - 1])
        self._push(ends[-1], _Kind.STEP_DONE, inst)

    def _sample_run(self, inst: _Instance, acc: np.ndarray) -> None:
        """KV samples after each step of a decode run but the last (taken after it is applied):
        step j adds one token per running request and the blocks of those crossing a block
        boundary, as stepping would."""
        m = len(acc) - 1
        if m < 2:
            return
        kv = inst.scheduler.kv
        bs, running = kv.block_size, inst.scheduler.running
        crossings: list[int] = []
        for r in running:
            first = len(kv.tables[r.request_id]) * bs - r.num_computed_tokens
            crossings += range(max(first, 0), m - 1, bs)
        grown = np.cumsum(np.bincount(crossings, minlength=m - 1))  # blocks added by step j
        used = (kv.pool.num_used + grown) / kv.pool.num_blocks
        held = sum(map(len, kv.tables.values())) * bs + bs * grown
        computed = sum(map(_COMPUTED, running)) + len(running) * np.arange(1, m)
        slots = kv.pool.num_blocks * bs
        starts, ends = acc[: m - 1], acc[1:m]
        self.steps.extend(starts, ends - starts, used, (held - computed) / slots, len(running))

    def _sample_kv(self, inst: _Instance, t: float, dur: float) -> None:
        kv = inst.scheduler.kv
        pool, bs = kv.pool, kv.block_size
        running = inst.scheduler.running
        held = sum(map(len, kv.tables.values())) * bs  # only running requests hold tables
        unused = held - sum(map(_COMPUTED, running))
        slots = pool.num_blocks * bs
        self.steps.add(t, dur, pool.num_used / pool.num_blocks, unused / slots, len(running))

    def _finished(self, inst: _Instance, req: Request, t: float) -> None:
        spec = self.specs[req.request_id]
        i = self.log.index[req.request_id]
        self.log.finished(i, req.num_preemptions, req.num_cached_tokens or 0)
        if inst.role is Role.PREFILL and spec.output_len > 1:
            d = self.cfg.disagg
            assert d is not None
            delay = d.transfer_s(
                spec.prompt_len, kv_bytes_per_token(self.cfg.model, self.cfg.dtypes.kv)
            )
            self._push(t + delay, _Kind.KV_READY, req)
            return
        self.log.finish[i] = t
        self.done += 1
        self._next_of_client(t)

    def _next_of_client(self, t: float) -> None:
        """A closed loop's client whose request is done sends its next one at ``t``."""
        if self.clients is None or not self._waiting_clients:
            return
        spec = self._waiting_clients.pop()
        self.log.arrival[self.log.index[spec.request_id]] = t
        self._push(t + self.cfg.host.work.request_s, _Kind.ARRIVAL, spec)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block, then as it was. A run allocates
    hundreds of thousands of small lists and tuples and keeps most of them: every collection
    walks them all again and frees nothing (about a tenth of a fast run's time), while the
    run makes no reference cycles for it to find."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def simulate(
    cfg: SimConfig,
    workload: Sequence[RequestSpec],
    progress: Callable[[int], None] | None = None,
    clients: int | None = None,
) -> SimResult:
    """Run ``workload`` under ``cfg`` (as a closed loop of ``clients``: ``Simulation``) and
    summarise it."""
    return Simulation(cfg, workload, clients).run(progress)
