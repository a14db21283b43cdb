"""What lets each KV-management technique show its lesson in ``kv-manage``: the workload chunked
prefill is judged on, and why an effect reads zero.

Chunked prefill exists for one situation: a long prompt arrives while other sequences decode,
and prefilling it whole stalls every one of them for the length of that prefill; chunks of a
fixed token budget bound the stall to one chunk's step (Agrawal et al., "Taming
Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024, §3). On a shared
trace of short prompts the stalls are a fraction of a percent of the gaps, below what p99 sees,
and the chunks' extra steps are all that shows. So chunked prefill runs on ``stall_trace``:
``STALL_DECODERS`` short requests decoding, with ``STALL_PROMPTS`` long prompts queued behind
them; and it is judged by the stall a decode sees (``sim.metrics.ItlTail``: the longest gap,
p99.9, the share of gaps over the TPOT objective).

An effect of zero says why (``why_no_change``): nothing evicted to host memory at this load,
requests that never overlap, no prefix hit, prefills beside decodes too rare for p99 to see —
with the option that would change it.

Disaggregation is judged by ITL p99, so it shows only once more than 1% of the gaps wait on a
prefill. An arrival's prefill delays one gap of each request then in flight, about λ·W of them
by Little's law (L = λW: Little, "A Proof for the Queuing Formula: L = λW", Operations Research
9(3), 1961; arrivals see the time average, PASTA), out of the ``mean output − 1`` gaps a request
contributes: p99 sees the stalls once λ·W > 1% of ``mean output − 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ridgeline.sim.metrics import SimResult
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs.kv_practice import Technique

STALL_DECODERS = 16  # sequences decoding while the long prompts arrive
STALL_PROMPTS = 4  # long prompts, each prefilled beside the running decodes
DECODER_PROMPT = 64  # tokens: short chat turns
DECODER_OUTPUT = 128  # tokens: each decoder sees 127 gaps, a few of them stalls
LONG_PROMPT_SHARE = 0.75  # of max_model_len: a long document, with room for its output
LONG_OUTPUT = 16
NO_CHANGE = 0.005  # |with ÷ without − 1| below this reads as no change
P99_SHARE = 0.01  # ITL p99 sees a stall only in more than this share of the gaps
STALL_WORKLOAD = (
    f"{STALL_DECODERS} short requests decoding ({DECODER_PROMPT}-token prompts, "
    f"{DECODER_OUTPUT} tokens out) with {STALL_PROMPTS} prompts of {LONG_PROMPT_SHARE:.0%} of "
    f"max_model_len queued behind them"
)


def stall_trace(max_model_len: int) -> list[RequestSpec]:
    """``STALL_DECODERS`` short requests at t = 0, then ``STALL_PROMPTS`` long prompts of
    ``LONG_PROMPT_SHARE`` × ``max_model_len`` tokens queued right behind them (first come,
    first served: they are prefilled while the short ones decode). Distinct token ids, so no
    prefix is shared. Deterministic: the lesson does not depend on a seed."""
    long_len = max(DECODER_PROMPT + 1, int(LONG_PROMPT_SHARE * max_model_len) - LONG_OUTPUT)
    out: list[RequestSpec] = []
    start = 0
    shapes = [(DECODER_PROMPT, DECODER_OUTPUT)] * STALL_DECODERS
    shapes += [(long_len, LONG_OUTPUT)] * STALL_PROMPTS
    for i, (prompt, output) in enumerate(shapes):
        ids = list(range(start, start + prompt + output))
        start += prompt + output
        # the long prompts a hair later, so the short ones are admitted first at any rate
        arrival = 0.0 if i < STALL_DECODERS else 1e-9 * (i - STALL_DECODERS + 1)
        out.append(RequestSpec(f"stall-{i}", arrival, ids[:prompt], ids[prompt:]))
    return out


def stall_detail(without: SimResult, with_: SimResult) -> str:
    """The rest of the stall statistics, named: p99.9 ITL and the share of gaps over the TPOT
    objective, without → with."""
    a, b = without.itl_tail, with_.itl_tail
    return (
        f"p99.9 ITL {1e3 * a.p999_s:,.4g} → {1e3 * b.p999_s:,.4g} ms; gaps over the "
        f"{1e3 * a.stall_s:,.4g} ms TPOT objective {a.stall_share:.1%} → {b.stall_share:.1%}"
    )


def trace_rate_per_s(wl: Sequence[RequestSpec]) -> float | None:
    """The mean arrival rate of a trace (None for fewer than two distinct arrival times)."""
    times = sorted(r.arrival_s for r in wl)
    span = times[-1] - times[0] if times else 0.0
    return (len(times) - 1) / span if span > 0 else None


def _faster(rate: float | None, factor: float) -> str:
    if rate is None or factor <= 1.0:
        return "a higher --rate"
    r = rate * factor
    return f"--rate {r:,.0f} or more" if r >= 10 else f"--rate {r:.2g} or more"


def why_no_change(t: Technique, without: SimResult, with_: SimResult, rate: float | None) -> str:
    """Why a technique changed nothing on this run, with the option that would change it ("" when
    no reason is known)."""
    if t is Technique.TIERING:
        offloaded = sum(tt.bytes_in for tt in with_.tier_traffic)
        if offloaded == 0:
            peak = max(with_.kv_peak_frac, 1e-3)
            return (
                f"no prefix block was evicted to host memory at this load (KV peak "
                f"{with_.kv_peak_frac:.0%} of the pool); try more distinct --prefixes, or "
                f"{_faster(rate, 1.0 / peak)} where the running requests grow with the rate"
            )
    if t is Technique.CONTINUOUS_BATCHING:
        # one at a time, a request holds the machine for about its end-to-end latency
        service_s = without.e2e_s.mean
        factor = 1.0 / (rate * service_s) if rate and service_s > 0 else 0.0
        return (
            f"one request at a time keeps up with arrivals at this rate (each takes "
            f"{1e3 * service_s:,.3g} ms alone); try {_faster(rate, factor)}, where they would queue"
        )
    if t is Technique.DISAGGREGATION:
        return _why_disagg(without, rate)
    if t is Technique.PREFIX_CACHING and with_.prefix_hit_rate == 0:
        return "no request found a cached prefix; try --prefixes 4"
    if t is Technique.CHUNKED_PREFILL and with_.itl_tail.max_s >= without.itl_tail.max_s:
        return "the decode step already covers a whole prompt's prefill on this deployment"
    return ""


def _why_disagg(without: SimResult, rate: float | None) -> str:
    """Why separating prefill from decode left ITL p99 where it was: the co-located prefills
    delay too few gaps for p99 to see (module docstring: Little's law), or none at all."""
    tail, p99 = without.itl_tail, without.itl_s.p99
    done = max(without.num_completed, 1)
    gaps = max(without.output_tokens_per_s * without.makespan_s / done - 1.0, 1.0)
    in_flight = (rate or 0.0) * without.e2e_s.mean  # Little's law: L = λW
    factor = P99_SHARE * gaps / in_flight if in_flight > 0 else 0.0
    seen = (
        f"the prefills beside running decodes delay under {P99_SHARE:.0%} of the gaps, which "
        f"p99 does not see (longest gap {1e3 * tail.max_s:,.4g} ms against p99 "
        f"{1e3 * p99:,.4g} ms)"
        if tail.max_s > (1.0 + NO_CHANGE) * p99
        else "no decode waited on a prefill"
    )
    return (
        f"{seen}: requests seldom overlap at this rate (about {in_flight:.2g} in flight, each "
        f"{1e3 * without.e2e_s.mean:,.3g} ms); try {_faster(rate, factor)}"
    )
