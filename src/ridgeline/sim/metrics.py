"""Serving metrics, defined as vLLM's benchmark defines them.

Per request: TTFT (arrival → first token), TPOT ((last token − first token) ÷ (outputs − 1)),
inter-token latencies (every gap between consecutive tokens of a request), end-to-end latency,
queueing delay (arrival → first scheduled), preemptions. Overall: requests/s and tokens/s over
the makespan, goodput (completed requests meeting both SLOs, per second), KV use over time,
allocated-but-unused slots (internal fragmentation for paged policies; reserved-but-unused for
contiguous and static), prefix-cache hit rate, tier traffic. Percentiles p50/p90/p99 (linear
interpolation, numpy's default; ITL percentiles weighted by how many tokens shared a gap).
"""

from __future__ import annotations

from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ridgeline.serving.tiers import TierTraffic
from ridgeline.specs.inputs import check_real
from ridgeline.specs.limits import MAX_SECONDS


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Mean and p50/p90/p99 of one latency (seconds)."""

    mean: float
    p50: float
    p90: float
    p99: float

    @staticmethod
    def of(values: Any, weights: Any = None) -> Percentiles:
        """Summary of ``values`` (each counted ``weights[i]`` times when weights are given)."""
        x = np.asarray(values, dtype=float)
        if x.size == 0:
            return Percentiles(float("nan"), float("nan"), float("nan"), float("nan"))
        if weights is None:
            p50, p90, p99 = np.percentile(x, (50, 90, 99))
            return Percentiles(float(x.mean()), float(p50), float(p90), float(p99))
        w = np.asarray(weights, dtype=float)
        order = np.argsort(x, kind="stable")
        x, w = x[order], w[order]
        cum = np.cumsum(w)
        q = [float(x[min(np.searchsorted(cum, f * cum[-1]), x.size - 1)]) for f in (0.5, 0.9, 0.99)]
        return Percentiles(float(np.dot(x, w) / cum[-1]), *q)


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """One request's latencies (seconds); NaN where it does not apply."""

    request_id: str
    arrival_s: float
    prompt_len: int
    output_len: int
    ttft_s: float
    tpot_s: float
    e2e_s: float
    queue_s: float
    num_preemptions: int
    cached_tokens: int
    rejected: str = ""


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency objectives for goodput."""

    ttft_s: float = 2.0
    tpot_s: float = 0.1

    def __post_init__(self) -> None:
        check_real("slo_ttft", self.ttft_s, 0, MAX_SECONDS, low_open=True)
        check_real("slo_tpot", self.tpot_s, 0, MAX_SECONDS, low_open=True)


@dataclass(frozen=True, slots=True)
class KVTimeline:
    """Device KV use sampled at step boundaries (fractions of the pool)."""

    time_s: tuple[float, ...]
    used_frac: tuple[float, ...]
    unused_allocated_frac: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class SimResult:
    """Everything one simulation measured."""

    label: str
    num_requests: int
    num_completed: int
    num_rejected: int
    reject_reasons: tuple[str, ...]
    makespan_s: float
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    goodput_per_s: float
    slo: SLO
    ttft_s: Percentiles
    tpot_s: Percentiles
    itl_s: Percentiles
    e2e_s: Percentiles
    queue_s: Percentiles
    num_preemptions: int
    num_steps: int
    prefix_hit_rate: float
    kv_peak_frac: float
    kv_mean_frac: float
    unused_allocated_frac: float
    max_running: int
    mean_running: float
    idle_slot_frac: float  # static policy: compiled batch slots left empty (time-weighted)
    tokens_per_step_per_seq: float
    tier_traffic: tuple[TierTraffic, ...]
    kv_blocks: int
    block_size: int
    timeline: KVTimeline
    requests: tuple[RequestMetrics, ...] = field(repr=False)

    def to_dict(self, with_requests: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = "ridgeline.simulate/1"
        if not with_requests:
            d.pop("requests")
            d.pop("timeline")
        return d


class Collector:
    """Accumulates per-request events and per-step samples during a run."""

    def __init__(self) -> None:
        self.arrival: dict[str, float] = {}
        self.prompt_len: dict[str, int] = {}
        self.first_sched: dict[str, float] = {}
        self.first_tok: dict[str, float] = {}
        self.last_tok: dict[str, float] = {}
        self.num_out: dict[str, int] = {}
        self.finish: dict[str, float] = {}
        self.preempt: dict[str, int] = {}
        self.cached: dict[str, int] = {}
        self.rejected: dict[str, str] = {}
        self.itl = array("d")
        self.itl_w = array("d")
        self.t = array("d")
        self.used = array("d")
        self.unused = array("d")
        self.dur = array("d")
        self.running = array("d")
        self.decode_tokens = 0
        self.decode_seq_steps = 0

    def arrive(self, rid: str, t: float, prompt_len: int) -> None:
        """``rid`` arrived at ``t``."""
        self.arrival[rid] = t
        self.prompt_len[rid] = prompt_len
        self.num_out[rid] = 0

    def scheduled(self, rid: str, t: float) -> None:
        self.first_sched.setdefault(rid, t)

    def tokens(self, rid: str, t: float, n: int) -> None:
        """``n`` tokens of ``rid`` became available at ``t``."""
        last = self.last_tok.get(rid)
        if last is None:
            self.first_tok[rid] = t
        else:
            self.itl.append(t - last)
            self.itl_w.append(1.0)
            for _ in range(n - 1):  # tokens accepted together arrive with no gap
                self.itl.append(0.0)
                self.itl_w.append(1.0)
        self.last_tok[rid] = t
        self.num_out[rid] += n

    def decode_run(self, rids: list[str], t0: float, step_s: np.ndarray) -> None:
        """``len(step_s)`` decode steps from ``t0``: every request in ``rids`` got one token per step."""
        ends = t0 + np.cumsum(step_s)
        k = len(step_s)
        for rid in rids:
            last = self.last_tok.get(rid)
            if last is None:  # a prefix hit left only the last prompt token: first token now
                self.first_tok[rid] = float(ends[0])
            else:
                self.itl.append(float(ends[0]) - last)
                self.itl_w.append(1.0)
            self.last_tok[rid] = float(ends[-1])
            self.num_out[rid] += k
        self.decode_tokens += k * len(rids)
        self.decode_seq_steps += k * len(rids)
        if k > 1:
            self.itl.extend(step_s[1:].tolist())
            self.itl_w.extend([float(len(rids))] * (k - 1))

    def step(self, t: float, dur: float, used: float, unused: float, running: int) -> None:
        """A KV sample for a step (or decode run) from ``t`` lasting ``dur``."""
        self.t.append(t)
        self.dur.append(dur)
        self.used.append(used)
        self.unused.append(unused)
        self.running.append(running)

    def finished(self, rid: str, t: float, preemptions: int, cached: int) -> None:
        """One instance is done with ``rid`` (a prefill instance hands it on; see ``completed``)."""
        self.preempt[rid] = self.preempt.get(rid, 0) + preemptions
        self.cached[rid] = max(self.cached.get(rid, 0), cached)

    def completed(self, rid: str, t: float) -> None:
        self.finish[rid] = t

    def reject(self, rid: str, reason: str) -> None:
        self.rejected[rid] = reason

    def request_metrics(self) -> list[RequestMetrics]:
        """Per-request latencies, in arrival order."""
        out = []
        nan = float("nan")
        for rid, t0 in self.arrival.items():
            n = self.num_out.get(rid, 0)
            first, last = self.first_tok.get(rid, nan), self.last_tok.get(rid, nan)
            out.append(
                RequestMetrics(
                    rid,
                    t0,
                    self.prompt_len[rid],
                    n,
                    first - t0,
                    (last - first) / (n - 1) if n > 1 else nan,
                    self.finish.get(rid, nan) - t0,
                    self.first_sched.get(rid, nan) - t0,
                    self.preempt.get(rid, 0),
                    self.cached.get(rid, 0),
                    self.rejected.get(rid, ""),
                )
            )
        return out
