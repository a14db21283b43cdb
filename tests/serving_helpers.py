"""Small builders shared by the serving tests: a pool, a scheduler, an executor that samples a
fixed token, and a loop that runs a scheduler to completion."""

from __future__ import annotations

from ridgeline.serving.block_pool import BlockPool
from ridgeline.serving.executor import ScheduledBatch, StepResult
from ridgeline.serving.kv_manager import KVCacheManager
from ridgeline.serving.request import Request, SamplingParams
from ridgeline.serving.scheduler import Scheduler, SchedulerConfig


class FixedTokenExecutor:
    """Samples token 7 for every request that samples; each step takes 1 s."""

    def __init__(self) -> None:
        self.batches: list[ScheduledBatch] = []

    def execute(self, batch: ScheduledBatch) -> StepResult:
        self.batches.append(batch)
        sampled = {
            r.request_id: (7,) * (1 + r.num_draft_tokens) for r in batch.requests if r.sample
        }
        return StepResult(sampled=sampled, time_s=1.0)


def make_scheduler(
    num_blocks: int, block_size: int = 4, prefix_caching: bool = False, **cfg: object
) -> tuple[Scheduler, FixedTokenExecutor]:
    pool = BlockPool(num_blocks, block_size)
    kv = KVCacheManager(pool, prefix_caching)
    return Scheduler(SchedulerConfig(**cfg), kv), FixedTokenExecutor()  # type: ignore[arg-type]


def req(rid: str, prompt: list[int] | int, max_new: int = 2, priority: int = 0) -> Request:
    tokens = list(range(100, 100 + prompt)) if isinstance(prompt, int) else prompt
    return Request(rid, tokens, SamplingParams(max_new, priority=priority))


def step(s: Scheduler, ex: FixedTokenExecutor) -> tuple[ScheduledBatch, list[Request]]:
    batch = s.schedule()
    return batch, s.update(batch, ex.execute(batch))
