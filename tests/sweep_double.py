"""A test double for ``ridgeline.sweep.PointSimulator`` — NOT a simulator of anything real.

A single first-come-first-served server with no batching: request i starts when it has arrived
and request i − 1 has finished, spends ``prompt × prefill_s_per_token / speed`` on its prompt
(its first token comes out at the end of that) and ``decode_s / speed`` per further token, where
``speed`` = chips × a made-up factor per accelerator name. Its latencies are computable by hand,
which is what the capacity-search tests need.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ridgeline.sweep import Configuration, RequestLatencies, Requests, weights_fit

SPEED = {"h100-sxm": 1.0, "h200": 1.5, "mi300x": 1.2, "tpu-v5p": 0.8}


@dataclass(frozen=True, slots=True)
class FifoDouble:
    """Hand-computable stand-in; ``sleep_s`` slows each probe (for kill-and-resume tests)."""

    prefill_s_per_token: float = 1e-4
    decode_s: float = 0.01
    sleep_s: float = 0.0
    speeds: dict[str, float] = field(default_factory=lambda: dict(SPEED))

    def fits(self, config: Configuration) -> bool:
        return weights_fit(config)

    def simulate(self, config: Configuration, requests: Requests, seed: int) -> RequestLatencies:
        speed = config.chips * self.speeds.get(config.accelerator, 1.0)
        prefill = requests.prompt_tokens * self.prefill_s_per_token / speed
        tpot = self.decode_s / speed
        n = requests.num_requests
        ttft, free_at = np.empty(n), -math.inf
        for i in range(n):
            start = max(float(requests.arrival_s[i]), free_at)
            ttft[i] = start + prefill[i] - requests.arrival_s[i]
            free_at = start + prefill[i] + tpot * (requests.output_tokens[i] - 1)
        tpots = np.where(requests.output_tokens > 1, tpot, np.nan)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return RequestLatencies(
            ttft, tpots, requests.output_tokens.copy(), free_at - float(requests.arrival_s[0]), n
        )


def make() -> FifoDouble:
    """Factory for ``ridgeline sweep run --simulator sweep_double:make``."""
    return FifoDouble()


def make_slow() -> FifoDouble:
    """Factory for the kill-and-resume test: each probe takes a little wall time."""
    return FifoDouble(sleep_s=0.15)
