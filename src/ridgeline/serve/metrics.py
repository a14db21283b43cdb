"""The server's Prometheus metrics (``/metrics``), in a registry of its own (no process globals).

Names follow Prometheus' conventions (base units, ``_total`` counters) and vLLM's choice of
what to show: requests running and waiting, KV blocks in use, the prefix cache's hit rate, and
TTFT and TPOT histograms (wall clock, from the request's arrival at the HTTP layer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from ridgeline.engine.llm import LLM

# Bucket edges in seconds: a CPU engine's TTFT runs from milliseconds to tens of seconds under
# load; its TPOT from a few to a few hundred milliseconds.
TTFT_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60)
TPOT_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServeMetrics:
    """Gauges the engine thread refreshes after each step, histograms it observes."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.running = Gauge(
            "ridgeline_requests_running", "requests in the running set", registry=r
        )
        self.waiting = Gauge(
            "ridgeline_requests_waiting", "requests queued for admission", registry=r
        )
        self.kv_used = Gauge("ridgeline_kv_blocks_used", "KV blocks held by requests", registry=r)
        self.kv_total = Gauge("ridgeline_kv_blocks_total", "KV blocks in the pool", registry=r)
        self.prefix_hit_rate = Gauge(
            "ridgeline_prefix_cache_hit_rate",
            "prompt tokens served from the prefix cache / prompt tokens looked up",
            registry=r,
        )
        self.ttft = Histogram(
            "ridgeline_time_to_first_token_seconds",
            "arrival to first token (wall)",
            buckets=TTFT_BUCKETS_S,
            registry=r,
        )
        self.tpot = Histogram(
            "ridgeline_time_per_output_token_seconds",
            "mean gap between a request's tokens",
            buckets=TPOT_BUCKETS_S,
            registry=r,
        )
        self.finished = Counter(
            "ridgeline_requests_finished", "requests ended, by reason", ["reason"], registry=r
        )
        self.refused = Counter(
            "ridgeline_requests_refused", "requests refused: queue full or draining", registry=r
        )

    def refresh(self, llm: LLM, waiting: int) -> None:
        """Set the gauges from the engine's state (called on the engine thread)."""
        sched = llm.scheduler
        pool = sched.kv.pool
        self.running.set(len(sched.running))
        self.waiting.set(waiting)
        self.kv_used.set(pool.num_blocks - pool.num_free)
        self.kv_total.set(pool.num_blocks)
        st = sched.stats
        queried = st.prompt_tokens_queried
        self.prefix_hit_rate.set(st.prefix_hit_tokens / queried if queried else 0.0)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
