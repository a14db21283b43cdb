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

Disaggregation: prefill instances run each prompt and its first token; the KV then crosses a
link (latency + bytes ÷ bandwidth) and a decode instance continues (DistServe, OSDI 2024;
Splitwise, ISCA 2024).
"""

from __future__ import annotations

import heapq
import operator
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum

import numpy as np

from ridgeline.analytic import Dtypes, Efficiency, kv_bytes_per_token, weights_bytes
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.serving.block_pool import BlockPool
from ridgeline.serving.disagg import Disagg, decode_request, prefill_request
from ridgeline.serving.eviction import make_eviction
from ridgeline.serving.executor import ScheduledBatch, StepResult
from ridgeline.serving.kv_manager import KVCacheManager
from ridgeline.serving.request import Request, SamplingParams
from ridgeline.serving.scheduler import Scheduler, SchedulerConfig
from ridgeline.serving.tiers import KVTiers, TierSpec
from ridgeline.sim.executor import CostModelExecutor, RequestPlan, StepCostModel
from ridgeline.sim.metrics import SLO, Collector, SimResult
from ridgeline.sim.summary import summarize
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_BLOCK_SIZE, MAX_SEED

MAX_BLOCKS = 1 << 30  # KV blocks of one pool


@dataclass(frozen=True, slots=True)
class SimConfig:
    """One serving configuration on one accelerator.

    Attributes:
        model: the served model.
        hw: the accelerator (one per instance).
        scheduler: scheduling limits and policy.
        block_size: tokens per KV block.
        prefix_caching: reuse cached prefix blocks.
        eviction: lru or lfu.
        memory_utilization: fraction of device memory for weights + KV (vLLM's 0.9).
        num_blocks: override the KV pool size in blocks.
        tiers: KV tiers below the device (host, disk).
        efficiency: fractions of peak and per-step overhead.
        dtypes: storage formats.
        draft_model: speculative decoding's draft model (None: drafts are free).
        disagg: prefill/decode disaggregation (None: one mixed instance).
        slo: latency objectives for goodput.
        seed: seeds draft acceptance.
        fast_forward: advance plain decode runs in closed form.
        label: a name for tables.
    """

    model: ModelSpec
    hw: Accelerator
    scheduler: SchedulerConfig = SchedulerConfig()
    block_size: int = 16
    prefix_caching: bool = False
    eviction: str = "lru"
    memory_utilization: float = 0.9
    num_blocks: int | None = None
    tiers: tuple[TierSpec, ...] = ()
    efficiency: Efficiency = Efficiency()
    dtypes: Dtypes = Dtypes()
    draft_model: ModelSpec | None = None
    disagg: Disagg | None = None
    slo: SLO = SLO()
    seed: int = 0
    fast_forward: bool = True
    label: str = ""

    def __post_init__(self) -> None:
        check_real("memory_utilization", self.memory_utilization, 0, 1, low_open=True)
        check_int("block_size", self.block_size, 1, MAX_BLOCK_SIZE)
        if self.num_blocks is not None:
            check_int("num_blocks", self.num_blocks, 1, MAX_BLOCKS)
        check_int("seed", self.seed, 0, MAX_SEED)

    @property
    def block_bytes(self) -> float:
        return self.block_size * kv_bytes_per_token(self.model, self.dtypes.kv)


def kv_pool_blocks(cfg: SimConfig) -> int:
    """Blocks that fit the device after the weights (vLLM's ``gpu_memory_utilization`` rule)."""
    if cfg.num_blocks is not None:
        return cfg.num_blocks
    budget = cfg.hw.device_capacity_bytes * cfg.memory_utilization - weights_bytes(
        cfg.model, cfg.dtypes.weight
    )
    blocks = int(budget // cfg.block_bytes)
    if blocks < 1:
        raise CapacityError(
            f"{cfg.model.name} leaves no room for KV on {cfg.hw.name} "
            f"(short by {-budget / 1e9:.2f} GB at memory_utilization {cfg.memory_utilization})"
        )
    return blocks


_COMPUTED = operator.attrgetter("num_computed_tokens")


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
    batch_start_s: float = 0.0


# An event is a tuple (time_s, priority, seq, kind, payload): the key is its first three fields,
# and seq is unique, so the heap never compares kinds or payloads.
_Event = tuple[float, int, int, _Kind, object]


class Simulation:
    """One run of a workload under a ``SimConfig``."""

    def __init__(self, cfg: SimConfig, workload: Sequence[RequestSpec]) -> None:
        self.cfg = cfg
        self.workload = workload
        self.specs = {r.request_id: r for r in workload}
        if len(self.specs) != len(workload):
            raise ConfigError("workload: request ids must be unique")
        self.plans: dict[str, RequestPlan] = {}
        self.metrics = Collector()
        self.now = 0.0
        self._heap: list[_Event] = []
        self._seq = 0
        self.num_blocks = kv_pool_blocks(cfg)
        self.cost = StepCostModel(cfg.model, cfg.hw, cfg.dtypes, cfg.efficiency)
        self.draft = (
            StepCostModel(cfg.draft_model, cfg.hw, cfg.dtypes, cfg.efficiency)
            if cfg.draft_model
            else None
        )
        self.rng = random.Random(cfg.seed)
        self.instances = self._make_instances()
        self.tiers = [
            i.scheduler.kv.tiers for i in self.instances if i.scheduler.kv.tiers is not None
        ]
        self.done = 0
        self.originals: dict[str, Request] = {}  # disaggregation: requests in their prefill

    def _make_instances(self) -> list[_Instance]:
        d = self.cfg.disagg
        roles = (
            [Role.MIXED]
            if d is None
            else [Role.PREFILL] * d.num_prefill + [Role.DECODE] * d.num_decode
        )
        return [self._instance(i, role) for i, role in enumerate(roles)]

    def _instance(self, index: int, role: Role) -> _Instance:
        cfg = self.cfg
        tiers = KVTiers(cfg.tiers, cfg.block_bytes) if cfg.tiers else None
        pool = BlockPool(
            self.num_blocks,
            cfg.block_size,
            make_eviction(cfg.eviction),
            tiers.offload if tiers else None,
        )
        kv = KVCacheManager(pool, cfg.prefix_caching, tiers)
        spec = cfg.scheduler.spec
        executor = CostModelExecutor(
            self.cost, self.plans, self.rng, spec.acceptance_rate if spec else 0.0, self.draft
        )
        return _Instance(index, role, Scheduler(cfg.scheduler, kv), executor)

    def _push(self, time_s: float, kind: _Kind, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time_s, int(kind), self._seq, kind, payload))

    # ---- the loop ----------------------------------------------------------------------------

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Run to completion; ``progress`` is called with the number of requests done."""
        for spec in self.workload:
            self._push(spec.arrival_s, _Kind.ARRIVAL, spec)
        handlers = {
            _Kind.ARRIVAL: self._on_arrival,
            _Kind.KV_READY: self._on_kv_ready,
            _Kind.STEP_DONE: self._on_step_done,
        }
        last_report = 0
        while self._heap:
            self.now, _, _, kind, payload = heapq.heappop(self._heap)
            handlers[kind](payload)
            if progress is not None and self.done - last_report >= 100:
                last_report = self.done
                progress(self.done)
        if progress is not None:
            progress(self.done)
        return summarize(self, self.cfg.label)

    def _on_arrival(self, payload: object) -> None:
        assert isinstance(payload, RequestSpec)
        spec = payload
        self.plans[spec.request_id] = RequestPlan(
            spec.prompt_len, spec.output, spec.spec_acceptance
        )
        self.metrics.arrive(spec.request_id, self.now, spec.prompt_len)
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
        reason = self._least_loaded(Role.DECODE).scheduler.never_fits(req)
        if reason is not None:  # reject before prefilling a request the decode side can never hold
            self.metrics.reject(req.request_id, reason)
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
            pool, key=lambda i: (len(i.scheduler.running) + len(i.scheduler.waiting), i.index)
        )

    def _submit(self, inst: _Instance, req: Request) -> None:
        if not inst.scheduler.add_request(req):
            self.metrics.reject(req.request_id, req.reject_reason)
            self.done += 1
            return
        if not inst.busy:
            self._start_step(inst)

    def _start_step(self, inst: _Instance) -> None:
        """Start ``inst``'s next step (or a closed-form decode run), if it has work."""
        sched = inst.scheduler
        if not sched.has_unfinished:
            return
        k = sched.decode_run_limit(1 << 30) if self.cfg.fast_forward else 0
        if k > 1:
            self._decode_run(inst, k)
            return
        batch = sched.schedule()
        if not batch.requests:
            return
        result = inst.executor.execute(batch)
        for sr in batch.requests:
            self.metrics.scheduled(sr.request_id, self.now)
        inst.busy, inst.batch, inst.result, inst.batch_start_s = True, batch, result, self.now
        self._push(self.now + result.time_s, _Kind.STEP_DONE, inst)

    def _on_step_done(self, payload: object) -> None:
        assert isinstance(payload, _Instance)
        inst = payload
        inst.busy = False
        batch, result = inst.batch, inst.result
        if batch is not None and result is not None:
            inst.batch = inst.result = None
            finished = inst.scheduler.update(batch, result)
            for sr in batch.requests:
                toks = result.sampled.get(sr.request_id, ())
                if sr.sample and toks:
                    self.metrics.tokens(sr.request_id, self.now, len(toks))
                    if sr.num_new_tokens == 1 + sr.num_draft_tokens:
                        self.metrics.decode_tokens += len(toks)
                        self.metrics.decode_seq_steps += 1
            self._sample_kv(inst, inst.batch_start_s, self.now - inst.batch_start_s)
            for req in finished:
                self._finished(inst, req, self.now)
        self._start_step(inst)

    def _decode_run(self, inst: _Instance, k: int) -> None:
        """Apply the decode steps up to the next event at once (see the module docstring)."""
        sched = inst.scheduler
        running = list(sched.running)
        times = self.cost.decode_run_s([r.num_computed_tokens for r in running], k)
        cum = np.cumsum(times)
        horizon = self._heap[0][0] - self.now if self._heap else float("inf")
        m = min(k, int(np.searchsorted(cum, horizon, side="left")) + 1)
        t0, end = self.now, self.now + float(cum[m - 1])
        self._sample_kv(inst, t0, end - t0)
        ex = inst.executor
        finished = sched.advance_decode(
            m, lambda r, n: ex.sample_run(r.request_id, r.num_tokens, n)
        )
        self.metrics.decode_run([r.request_id for r in running], t0, times[:m])
        for req in finished:
            self._finished(inst, req, end)
        inst.busy = True
        self._push(end, _Kind.STEP_DONE, inst)

    def _sample_kv(self, inst: _Instance, t: float, dur: float) -> None:
        kv = inst.scheduler.kv
        pool, bs = kv.pool, kv.block_size
        running = inst.scheduler.running
        held = sum(map(len, kv.tables.values())) * bs  # only running requests hold tables
        unused = held - sum(map(_COMPUTED, running))
        slots = pool.num_blocks * bs
        self.metrics.step(t, dur, pool.num_used / pool.num_blocks, unused / slots, len(running))

    def _finished(self, inst: _Instance, req: Request, t: float) -> None:
        spec = self.specs[req.request_id]
        self.metrics.finished(req.request_id, t, req.num_preemptions, req.num_cached_tokens or 0)
        if inst.role is Role.PREFILL and spec.output_len > 1:
            d = self.cfg.disagg
            assert d is not None
            delay = d.transfer_s(
                spec.prompt_len, kv_bytes_per_token(self.cfg.model, self.cfg.dtypes.kv)
            )
            self._push(t + delay, _Kind.KV_READY, req)
            return
        self.metrics.completed(req.request_id, t)
        self.done += 1


def simulate(
    cfg: SimConfig, workload: Sequence[RequestSpec], progress: Callable[[int], None] | None = None
) -> SimResult:
    """Run ``workload`` under ``cfg`` and summarise it."""
    return Simulation(cfg, workload).run(progress)
