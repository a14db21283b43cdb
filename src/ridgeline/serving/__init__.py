"""serving: the KV-cache runtime shared by the simulator and the real engine — requests, the
block pool with prefix caching, the phase-less scheduler and its policies, KV tiers,
speculative decoding, disaggregation, and the ``Executor`` seam.

Layer rule: imports ``specs``, ``analytic`` and ``errors`` only; never torch, never ``sim`` or
``engine`` (they implement ``Executor``; serving never knows which one runs).
"""

from ridgeline.serving.executor import Executor, ScheduledBatch, ScheduledRequest, StepResult

__all__ = ["Executor", "ScheduledBatch", "ScheduledRequest", "StepResult"]
