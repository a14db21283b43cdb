"""Turn a finished simulation's events into a ``SimResult`` (percentiles, rates, memory)."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.tiers import TierTraffic
from ridgeline.sim.compiled import CompiledStepCost
from ridgeline.sim.metrics import KVTimeline, Percentiles, RequestMetrics, SimResult

if TYPE_CHECKING:
    from ridgeline.sim.engine import Simulation

_TIMELINE_POINTS = 400


def _finite(values: list[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _timeline(t: np.ndarray, used: np.ndarray, unused: np.ndarray) -> KVTimeline:
    """At most ``_TIMELINE_POINTS`` samples, evenly picked, for plots and JSON."""
    n = min(len(t), _TIMELINE_POINTS)
    idx = np.unique(np.linspace(0, len(t) - 1, n).astype(int)) if n else np.zeros(0, dtype=int)
    return KVTimeline(
        tuple(float(x) for x in t[idx]),
        tuple(float(x) for x in used[idx]),
        tuple(float(x) for x in unused[idx]),
    )


def _goodput(reqs: list[RequestMetrics], sim: Simulation, makespan: float) -> float:
    slo = sim.cfg.slo
    ok = sum(
        1
        for r in reqs
        if not r.rejected
        and r.ttft_s <= slo.ttft_s
        and (r.output_len < 2 or r.tpot_s <= slo.tpot_s)
    )
    return ok / makespan if makespan > 0 else 0.0


def _tier_traffic(sim: Simulation) -> tuple[TierTraffic, ...]:
    totals: dict[str, list[float]] = {}
    for tiers in sim.tiers:
        for t in tiers.traffic():
            acc = totals.setdefault(t.name, [0.0, 0.0, 0.0])
            acc[0] += t.bytes_in
            acc[1] += t.bytes_out
            acc[2] += t.hit_blocks
    return tuple(TierTraffic(n, v[0], v[1], int(v[2])) for n, v in totals.items())


def summarize(sim: Simulation, label: str) -> SimResult:
    """Percentiles, throughput, goodput, KV use and prefix-cache hits of a finished run."""
    m = sim.metrics
    reqs = m.request_metrics()
    done = [r for r in reqs if not r.rejected and not math.isnan(r.e2e_s)]
    t0 = min((r.arrival_s for r in reqs), default=0.0)
    end = max((r.arrival_s + r.e2e_s for r in done), default=t0)
    makespan = end - t0
    out_tokens = sum(r.output_len for r in done)
    in_tokens = sum(r.prompt_len for r in done)
    dur = np.frombuffer(m.dur, dtype=float) if len(m.dur) else np.zeros(0)
    used = np.frombuffer(m.used, dtype=float) if len(m.used) else np.zeros(0)
    unused = np.frombuffer(m.unused, dtype=float) if len(m.unused) else np.zeros(0)
    running = np.frombuffer(m.running, dtype=float) if len(m.running) else np.zeros(0)
    wsum = float(dur.sum()) or 1.0
    stats = [i.scheduler.stats for i in sim.instances]
    queried = sum(s.prompt_tokens_queried for s in stats)
    steps = sum(s.num_steps for s in stats)
    seq_steps = float(np.dot(running, dur) / wsum) if len(dur) else 0.0
    return SimResult(
        label=label,
        num_requests=len(reqs),
        num_completed=len(done),
        num_rejected=len(m.rejected),
        reject_reasons=tuple(
            f"{n}× {reason}"
            for reason, n in Counter(r.split(":")[0] for r in m.rejected.values()).most_common()
        ),
        makespan_s=makespan,
        requests_per_s=len(done) / makespan if makespan > 0 else 0.0,
        output_tokens_per_s=out_tokens / makespan if makespan > 0 else 0.0,
        total_tokens_per_s=(in_tokens + out_tokens) / makespan if makespan > 0 else 0.0,
        goodput_per_s=_goodput(done, sim, makespan),
        slo=sim.cfg.slo,
        ttft_s=Percentiles.of(_finite([r.ttft_s for r in done])),
        tpot_s=Percentiles.of(_finite([r.tpot_s for r in done])),
        itl_s=Percentiles.of(np.frombuffer(m.itl, dtype=float), np.frombuffer(m.itl_w, dtype=float))
        if len(m.itl)
        else Percentiles.of([]),
        e2e_s=Percentiles.of([r.e2e_s for r in done]),
        queue_s=Percentiles.of(_finite([r.queue_s for r in done])),
        num_preemptions=sum(s.num_preemptions for s in stats),
        num_steps=steps,
        prefix_hit_rate=sum(s.prefix_hit_tokens for s in stats) / queried if queried else 0.0,
        kv_peak_frac=float(used.max()) if len(used) else 0.0,
        kv_mean_frac=float(np.dot(used, dur) / wsum) if len(used) else 0.0,
        unused_allocated_frac=float(np.dot(unused, dur) / max(float(np.dot(used, dur)), 1e-30))
        if len(used)
        else 0.0,
        max_running=int(running.max()) if len(running) else 0,
        mean_running=seq_steps,
        idle_slot_frac=_idle_slots(sim, seq_steps),
        tokens_per_step_per_seq=_tokens_per_seq_step(sim),
        tier_traffic=_tier_traffic(sim),
        kv_blocks=sim.num_blocks,
        block_size=sim.cfg.block_size,
        timeline=_timeline(
            np.frombuffer(m.t, dtype=float) if len(m.t) else np.zeros(0), used, unused
        ),
        requests=tuple(reqs),
        compiled=sim.cost.stats() if isinstance(sim.cost, CompiledStepCost) else None,
    )


def _tokens_per_seq_step(sim: Simulation) -> float:
    """Output tokens per decode step per sequence (1 without speculative decoding)."""
    m = sim.metrics
    return m.decode_tokens / m.decode_seq_steps if m.decode_seq_steps else 1.0


def _idle_slots(sim: Simulation, mean_running: float) -> float:
    """Static policy: the fraction of its compiled batch slots that ran empty (padding a
    compiled schedule computes anyway); 0 for the other policies."""
    sched = sim.instances[0].scheduler
    if sched.policy.kind is not PolicyKind.STATIC:
        return 0.0
    return 1.0 - mean_running / sched.max_running
