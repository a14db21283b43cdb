"""serving: the KV-cache runtime shared by the simulator and the real engine — requests, the
block pool with prefix caching, the phase-less scheduler and its policies, KV tiers,
speculative decoding, disaggregation, and the ``Executor`` seam.

Layer rule: imports ``specs``, ``analytic`` and ``errors`` only; never torch, never ``sim`` or
``engine`` (they implement ``Executor``; serving never knows which one runs).
"""

from ridgeline.serving.block_pool import BlockPool, KVBlock
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.driver import ServingLoop, StepOutcome
from ridgeline.serving.eviction import EvictionKind, LFUEviction, LRUEviction, make_eviction
from ridgeline.serving.executor import Executor, ScheduledBatch, ScheduledRequest, StepResult
from ridgeline.serving.kv_manager import KVCacheManager, PrefixHit
from ridgeline.serving.policies import PolicyKind, make_policy
from ridgeline.serving.request import FinishReason, Request, RequestStatus, SamplingParams
from ridgeline.serving.scheduler import PreemptionMode, Scheduler, SchedulerConfig, SchedulerStats
from ridgeline.serving.spec_decode import SpecDecodeConfig, expected_tokens_per_step
from ridgeline.serving.tiers import KVTiers, TierSpec, TierTraffic

__all__ = [
    "BlockPool",
    "Disagg",
    "EvictionKind",
    "Executor",
    "FinishReason",
    "KVBlock",
    "KVCacheManager",
    "KVTiers",
    "LFUEviction",
    "LRUEviction",
    "PolicyKind",
    "PreemptionMode",
    "PrefixHit",
    "Request",
    "RequestStatus",
    "SamplingParams",
    "ScheduledBatch",
    "ScheduledRequest",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerStats",
    "ServingLoop",
    "SpecDecodeConfig",
    "StepOutcome",
    "StepResult",
    "TierSpec",
    "TierTraffic",
    "expected_tokens_per_step",
    "make_eviction",
    "make_policy",
]
