"""Turn a finished simulation's events into a ``SimResult`` (percentiles, rates, memory).

Both simulation modes hand over the same three things: the ``RequestLog`` (per-request arrays),
the ``StepSamples`` (KV use after every step) and the run's counters (``RunStats``); everything
here is vectorised over them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ridgeline.serving.tiers import TierTraffic
from ridgeline.sim.fast_off import FastModeOff
from ridgeline.sim.metrics import (
    SLO,
    KVTimeline,
    Percentiles,
    RequestLog,
    SimResult,
    StepSamples,
)

_TIMELINE_POINTS = 400


if TYPE_CHECKING:  # compiled shapes load their dataflow compiler only when used
    from ridgeline.sim.compiled import CompiledStats


@dataclass(frozen=True, slots=True)
class RunStats:
    """Counters of a finished run that are not per request or per step.

    Attributes:
        label: the configuration's name in tables.
        slo: latency objectives for goodput.
        num_preemptions: preemptions over all instances.
        num_steps: scheduler steps over all instances.
        prompt_tokens_queried: prompt tokens looked up in the prefix cache.
        kv_blocks: blocks of one instance's KV pool.
        block_size: tokens per block.
        static_slots: compiled batch slots of the static policy (None for the others).
        prefix_hit_tokens: of the prompt tokens looked up, those found.
        tier_traffic: bytes moved per KV tier.
        compiled: compiled shapes: what padding cost (None without them).
        fast_mode_off: why the step loop ran it (None: the fast mode did).
    """

    label: str
    slo: SLO
    num_preemptions: int
    num_steps: int
    prompt_tokens_queried: int
    kv_blocks: int
    block_size: int
    static_slots: int | None
    prefix_hit_tokens: int = 0
    tier_traffic: tuple[TierTraffic, ...] = ()
    compiled: CompiledStats | None = None
    fast_mode_off: FastModeOff | None = None


def _finite(x: np.ndarray) -> np.ndarray:
    return x[~np.isnan(x)]


def _timeline(steps: StepSamples) -> KVTimeline:
    """At most ``_TIMELINE_POINTS`` samples, evenly picked, for plots and JSON."""
    t = steps.start_s
    n = min(len(t), _TIMELINE_POINTS)
    idx = np.unique(np.linspace(0, len(t) - 1, n).astype(int)) if n else np.zeros(0, dtype=int)
    return KVTimeline(
        tuple(t[idx].tolist()),
        tuple(steps.used_frac[idx].tolist()),
        tuple(steps.unused_frac[idx].tolist()),
    )


def _weighted(x: np.ndarray, w: np.ndarray) -> float:
    """Σ x·w (elementwise then numpy's pairwise sum: the BLAS dot product of this machine's
    numpy takes ten times longer on a few hundred thousand steps)."""
    return float(np.add.reduce(x * w))


def _memory(steps: StepSamples, static_slots: int | None) -> dict[str, float]:
    """KV peak and time-weighted means of use, unused allocation and running requests."""
    dur, used, unused, running = steps.dur_s, steps.used_frac, steps.unused_frac, steps.running
    out: dict[str, float] = {
        "kv_peak_frac": 0.0,
        "kv_mean_frac": 0.0,
        "unused_allocated_frac": 0.0,
        "max_running": 0,
        "mean_running": 0.0,
    }
    if len(dur):
        wsum = float(dur.sum()) or 1.0
        used_time = _weighted(used, dur)
        out["kv_peak_frac"] = float(used.max())
        out["kv_mean_frac"] = used_time / wsum
        out["unused_allocated_frac"] = _weighted(unused, dur) / max(used_time, 1e-30)
        out["max_running"] = int(running.max())
        out["mean_running"] = _weighted(running, dur) / wsum
    # static policy: the fraction of its compiled batch slots that ran empty (padding a
    # compiled schedule computes anyway)
    slots = static_slots
    out["idle_slot_frac"] = 0.0 if slots is None else 1.0 - out["mean_running"] / slots
    return out


def _reasons(log: RequestLog) -> tuple[str, ...]:
    counts = Counter(r.split(":")[0] for r in log.rejected.values())
    return tuple(f"{n}× {reason}" for reason, n in counts.most_common())


def _makespan(arrival: np.ndarray, e2e: np.ndarray, done: np.ndarray) -> float:
    """First arrival to the last completion (0 when nothing completed)."""
    t0 = float(arrival.min()) if len(arrival) else 0.0
    return (float((arrival + e2e)[done].max()) if done.any() else t0) - t0


def summarize(log: RequestLog, steps: StepSamples, stats: RunStats) -> SimResult:
    """Percentiles, throughput, goodput, KV use and prefix-cache hits of a finished run."""
    reqs = log.request_metrics()
    arrival = np.asarray(log.arrival, dtype=float)
    cols = log.columns()
    ttft, tpot = cols["first"] - arrival, cols["tpot"]
    e2e, queue = cols["finish"] - arrival, cols["sched"] - arrival
    rejected = np.zeros(len(reqs), dtype=bool)
    rejected[list(log.rejected)] = True
    done = ~rejected & ~np.isnan(e2e)
    n_out, n_in = np.asarray(log.num_out), np.asarray(log.prompt_len)
    makespan = _makespan(arrival, e2e, done)
    num_done = int(done.sum())
    out_tokens, in_tokens = int(n_out[done].sum()), int(n_in[done].sum())
    slo = stats.slo
    good = (ttft <= slo.ttft_s) & ((n_out < 2) | (tpot <= slo.tpot_s)) & done
    queried = stats.prompt_tokens_queried
    return SimResult(
        label=stats.label,
        num_requests=len(reqs),
        num_completed=num_done,
        num_rejected=len(log.rejected),
        reject_reasons=_reasons(log),
        makespan_s=makespan,
        requests_per_s=num_done / makespan if makespan > 0 else 0.0,
        output_tokens_per_s=out_tokens / makespan if makespan > 0 else 0.0,
        total_tokens_per_s=(in_tokens + out_tokens) / makespan if makespan > 0 else 0.0,
        goodput_per_s=int(good.sum()) / makespan if makespan > 0 else 0.0,
        slo=slo,
        ttft_s=Percentiles.of(_finite(ttft[done])),
        tpot_s=Percentiles.of(_finite(tpot[done])),
        itl_s=log.itl_percentiles(),
        itl_tail=log.itl_tail(slo.tpot_s),
        e2e_s=Percentiles.of(e2e[done]),
        queue_s=Percentiles.of(_finite(queue[done])),
        num_preemptions=stats.num_preemptions,
        num_steps=stats.num_steps,
        prefix_hit_rate=stats.prefix_hit_tokens / queried if queried else 0.0,
        **_memory(steps, stats.static_slots),  # type: ignore[arg-type]
        tokens_per_step_per_seq=log.decode_tokens / log.decode_seq_steps
        if log.decode_seq_steps
        else 1.0,
        tier_traffic=stats.tier_traffic,
        kv_blocks=stats.kv_blocks,
        block_size=stats.block_size,
        timeline=_timeline(steps),
        requests=reqs,
        compiled=stats.compiled,
        fast_mode_off=stats.fast_mode_off,
    )
