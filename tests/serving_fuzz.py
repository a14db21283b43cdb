"""The whole serving layer driven by random operations, with its invariants checked after each.

``ServingHarness`` owns one scheduler (block pool, prefix cache, KV tiers, speculative decoding,
preemption by recompute or swap) and a machine that samples random tokens (EOS among them) and
accepts a random number of drafts. Its operations — add, step, abort, drain — are what the
Hypothesis state machine (``test_serving_fuzz``) and the long seeded run call; ``check`` asserts:

- no block is both free and used, and the pool's own invariants hold (``BlockPool.check``);
- every block's reference count equals the number of tables holding it;
- used + free = total;
- every running request's table covers its computed tokens (and this step's, once scheduled);
- 0 <= computed <= tokens for every request;
- every request added is in exactly one place (waiting, running, finished, rejected, aborted);
- at the end, nothing leaks: no block used, no table, no tier room reserved, nothing pinned.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from ridgeline.serving import (
    BlockPool,
    FinishReason,
    KVCacheManager,
    KVTiers,
    PreemptionMode,
    Request,
    RequestStatus,
    SamplingParams,
    ScheduledBatch,
    Scheduler,
    SchedulerConfig,
    SpecDecodeConfig,
    StepResult,
    TierSpec,
    make_eviction,
)

EOS = 5
VOCAB = 7  # tiny: sampled outputs repeat, so prompts built from them share prefixes
BLOCK_BYTES = 1.0


@dataclass(frozen=True, slots=True)
class FuzzConfig:
    """One serving configuration under test."""

    block_size: int = 4
    num_blocks: int = 16
    budget: int = 32
    max_seqs: int = 4
    policy: str = "fcfs"
    chunked: bool = True
    caching: bool = True
    tier_blocks: int = 0  # 0: no tier
    swap: bool = False
    spec_k: int = 0
    eviction: str = "lru"


class ServingHarness:
    """One scheduler and the bookkeeping the invariants are checked against."""

    def __init__(self, cfg: FuzzConfig, seed: int = 0) -> None:
        self.cfg = cfg
        self.rng = random.Random(seed)
        tiers = None
        if cfg.tier_blocks:
            tiers = KVTiers((TierSpec("host", cfg.tier_blocks * BLOCK_BYTES, 1e9),), BLOCK_BYTES)
        on_evict = tiers.offload if tiers is not None and cfg.caching else None
        pool = BlockPool(cfg.num_blocks, cfg.block_size, make_eviction(cfg.eviction), on_evict)
        sched_cfg = SchedulerConfig(
            max_num_batched_tokens=cfg.budget,
            max_num_seqs=cfg.max_seqs,
            max_model_len=cfg.num_blocks * cfg.block_size,
            enable_chunked_prefill=cfg.chunked,
            policy=cfg.policy,
            preemption=PreemptionMode.SWAP if cfg.swap else PreemptionMode.RECOMPUTE,
            static_buckets=(16, 32, 64),
            static_slots=3,
            spec=SpecDecodeConfig(cfg.spec_k, 0.5) if cfg.spec_k else None,
        )
        self.sched = Scheduler(sched_cfg, KVCacheManager(pool, cfg.caching, tiers))
        self.added: dict[str, Request] = {}
        self.finished: set[str] = set()
        self.rejected: set[str] = set()
        self.aborted: set[str] = set()
        self.steps = 0
        self.counts: Counter[str] = Counter()

    # ---- operations --------------------------------------------------------------------------

    def add(self, prefix: int, length: int, max_new: int, eos: bool, priority: int = 0) -> None:
        """A request whose prompt starts with one of a few shared prefixes."""
        rid = f"r{len(self.added)}"
        prompt = [prefix * 100 + i for i in range(min(length, 8))] + [
            self.rng.randrange(VOCAB) for _ in range(max(0, length - 8))
        ]
        params = SamplingParams(max_new, eos_token_id=EOS if eos else None, priority=priority)
        req = Request(rid, prompt, params)
        self.added[rid] = req
        if not self.sched.add_request(req):
            assert req.reject_reason and req.status is RequestStatus.REJECTED
            self.rejected.add(rid)

    def _execute(self, batch: ScheduledBatch) -> StepResult:
        sampled = {}
        for sr in batch.requests:
            if sr.sample:
                accepted = self.rng.randint(0, sr.num_draft_tokens)
                self.counts["rejected drafts"] += sr.num_draft_tokens - accepted
                sampled[sr.request_id] = tuple(
                    self.rng.randrange(VOCAB) for _ in range(accepted + 1)
                )
        return StepResult(sampled=sampled, time_s=1.0)

    def step(self) -> None:
        """One schedule → execute → update round, checked after the schedule and the update."""
        before = self.sched.stats.num_preemptions, self.sched.stats.num_swaps
        batch = self.sched.schedule()
        self.steps += 1
        self._check_batch(batch)
        for req in self.sched.update(batch, self._execute(batch)):
            assert req.request_id not in self.finished
            self.finished.add(req.request_id)
            self.counts[f"finish:{req.finish_reason}"] += 1
        self.counts["preemptions"] += self.sched.stats.num_preemptions - before[0]
        self.counts["swaps"] += self.sched.stats.num_swaps - before[1]
        self.check()

    def abort(self, index: int) -> None:
        """Abort the ``index``-th unfinished request (if any)."""
        live = sorted(self.sched.requests)
        if not live:
            return
        rid = live[index % len(live)]
        req = self.sched.abort(rid)
        assert req is not None and req.finish_reason is FinishReason.ABORTED
        self.aborted.add(rid)
        self.check()

    def drain(self, max_steps: int = 10_000) -> None:
        """Run until every request is done; then nothing may be left behind."""
        for _ in range(max_steps):
            if not self.sched.has_unfinished:
                break
            self.step()
        assert not self.sched.has_unfinished, "requests still unfinished after draining"
        self.check_empty()

    # ---- invariants --------------------------------------------------------------------------

    def _check_batch(self, batch: ScheduledBatch) -> None:
        """A scheduled request's table covers the tokens it computes this step."""
        bs = self.sched.kv.block_size
        for sr in batch.requests:
            assert len(sr.block_ids) * bs >= sr.start_position + len(sr.token_ids), sr
        self.check()

    def check(self) -> None:
        kv, sched = self.sched.kv, self.sched
        pool = kv.pool
        pool.check()
        holders = Counter(b.block_id for table in kv.tables.values() for b in table)
        for block in pool.blocks:
            assert block.ref_cnt == holders[block.block_id], (block, holders[block.block_id])
        used = sum(1 for b in pool.blocks if b.ref_cnt > 0)
        assert used == pool.num_used and pool.num_used + pool.num_free == pool.num_blocks
        running = {r.request_id for r in sched.running}
        assert set(kv.tables) == running, "a table without a running request, or the reverse"
        for req in sched.running:
            assert kv.num_slots(req.request_id) >= req.num_computed_tokens, req
        for req in self.added.values():
            assert 0 <= req.num_computed_tokens <= req.num_tokens, req
        self._check_accounting()
        if kv.tiers is not None:
            assert all(t.room >= 0 for t in kv.tiers.tiers)
            assert all(not t.pinned for t in kv.tiers.tiers), "a tier block stayed pinned"

    def _check_accounting(self) -> None:
        """Every request added is in exactly one place."""
        waiting = [r.request_id for r in self.sched.waiting]
        running = [r.request_id for r in self.sched.running]
        places = [waiting, running, self.finished, self.rejected, self.aborted]
        counts = Counter(rid for place in places for rid in place)
        assert set(counts) == set(self.added), "a request was lost"
        assert max(counts.values(), default=1) == 1, "a request is in two places"
        assert set(self.sched.requests) == set(waiting) | set(running)

    def check_empty(self) -> None:
        kv = self.sched.kv
        assert kv.pool.num_used == 0 and not kv.tables
        assert not self.sched.running and len(self.sched.waiting) == 0
        if kv.tiers is not None:
            assert all(t.reserved == 0 for t in kv.tiers.tiers), "swap room leaked"


def random_config(rng: random.Random) -> FuzzConfig:
    """A random configuration (the long run's analogue of the Hypothesis strategy)."""
    swap = rng.random() < 0.3
    return FuzzConfig(
        block_size=rng.choice((2, 4, 8)),
        num_blocks=rng.randint(4, 32),
        budget=rng.randint(8, 64),
        max_seqs=rng.randint(1, 8),
        policy=rng.choice(("fcfs", "fcfs", "priority", "contiguous", "static")),
        chunked=rng.random() < 0.8,
        caching=rng.random() < 0.7,
        tier_blocks=rng.randint(1, 12) if swap or rng.random() < 0.5 else 0,
        swap=swap,
        spec_k=rng.choice((0, 0, 1, 3)),
        eviction=rng.choice(("lru", "lfu")),
    )


def random_session(seed: int, num_steps: int) -> ServingHarness:
    """A seeded random session: random adds, steps and aborts, then a drain."""
    rng = random.Random(seed)
    h = ServingHarness(random_config(rng), seed)
    while h.steps < num_steps:
        op = rng.random()
        if op < 0.3:
            h.add(
                rng.randrange(3),
                rng.randint(1, 40),
                rng.randint(1, 12),
                rng.random() < 0.5,
                rng.randrange(3),
            )
        elif op < 0.33:
            h.abort(rng.randrange(1 << 16))
        else:
            h.step()
    h.drain()
    return h
