"""Workloads that show each KV technique's lesson (``sim.kv_lessons``): chunked prefill judged on
long prompts among running decodes by the stall a decode sees, and an effect of zero that says
why."""

from __future__ import annotations

import re
from functools import cache

import pytest

from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import WorkloadSpec, generate, parse_lengths
from ridgeline.sim.kv_lessons import (
    DECODER_OUTPUT,
    DECODER_PROMPT,
    LONG_PROMPT_SHARE,
    NO_CHANGE,
    STALL_DECODERS,
    STALL_PROMPTS,
    stall_trace,
    trace_rate_per_s,
)
from ridgeline.sim.kv_manage import KVManageOptions, TechniqueCost, kv_manage
from ridgeline.sim.metrics import ItlTail
from ridgeline.specs import get_model
from ridgeline.specs.kv_practice import Technique

SCHED = SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=256, max_model_len=2048)


@cache
def _h100() -> dict[Technique, TechniqueCost]:
    spec = WorkloadSpec(
        num_requests=8,
        rate_per_s=2.0,
        prompt=parse_lengths("lognormal:300", 300),
        output=parse_lengths("lognormal:40", 40),
        num_prefixes=2,
        prefix_len=256,
    )
    report = kv_manage(
        get_model("llama-3.1-8b"), generate(spec), KVManageOptions(SCHED), ("h100-sxm",)
    )
    return {t.technique: t for t in report.rows[0].techniques}


def test_the_stall_trace_is_long_prompts_behind_running_decodes() -> None:
    wl = stall_trace(2048)
    short, long = wl[:STALL_DECODERS], wl[STALL_DECODERS:]
    assert len(long) == STALL_PROMPTS
    assert {(len(r.prompt), len(r.output)) for r in short} == {(DECODER_PROMPT, DECODER_OUTPUT)}
    assert all(len(r.prompt) + len(r.output) <= LONG_PROMPT_SHARE * 2048 for r in long)
    assert all(len(r.prompt) > 10 * DECODER_PROMPT for r in long)
    assert max(r.arrival_s for r in short) < min(r.arrival_s for r in long)  # decodes first
    ids = [t for r in wl for t in (*r.prompt, *r.output)]
    assert len(ids) == len(set(ids))  # no shared prefix to confuse the lesson
    assert trace_rate_per_s(stall_trace(2048)[:1]) is None


def test_itl_tail_by_hand() -> None:
    # 999 gaps of 10 ms and one of 200 ms, each seen by one request; the objective is 100 ms
    tail = ItlTail.of([0.01] * 999 + [0.2], [1.0] * 1000, 0.1)
    assert (tail.max_s, tail.p999_s, tail.stall_s) == (0.2, 0.01, 0.1)
    assert tail.stall_share == pytest.approx(1e-3)
    # a gap seen by 9 requests weighs 9
    tail = ItlTail.of([0.01, 0.2], [1.0, 9.0], 0.1)
    assert (tail.p999_s, tail.stall_share) == (0.2, pytest.approx(0.9))
    assert ItlTail.of([], [], 0.1) == ItlTail(0.0, 0.0, 0.1, 0.0)


def test_chunked_prefill_is_judged_by_the_longest_stall_and_helps() -> None:
    chunked = _h100()[Technique.CHUNKED_PREFILL]
    assert chunked.metric == "longest decode stall (max ITL)"
    assert chunked.with_ is not None and chunked.without is not None
    assert chunked.with_ < 0.5 * chunked.without  # a chunk's step, not a whole prompt's prefill
    assert "p99.9 ITL" in chunked.detail and "TPOT objective" in chunked.detail
    d = chunked.to_dict()
    assert d["metric"] == chunked.metric and d["detail"] == chunked.detail


def test_an_effect_of_zero_says_why_and_what_to_try() -> None:
    tiering = _h100()[Technique.TIERING]
    assert tiering.change == pytest.approx(0.0)
    assert tiering.why.startswith("no prefix block was evicted to host memory at this load")
    assert "--rate" in tiering.why and "--prefixes" in tiering.why
    assert tiering.to_dict()["why_no_change"] == tiering.why
    # an effect that is not zero carries no excuse
    assert all(t.why == "" for t in _h100().values() if abs(t.change or 0.0) > 0.01)


def _disagg_on_cerebras(rate_per_s: float) -> TechniqueCost:
    """kv-manage's own workload shape (20 requests) on the wafer, which prices a step in well
    under a millisecond: at 2 requests/s a request is alone most of the time."""
    spec = WorkloadSpec(
        num_requests=20,
        rate_per_s=rate_per_s,
        prompt=parse_lengths("lognormal:512", 512),
        output=parse_lengths("lognormal:128", 128),
        num_prefixes=4,
        prefix_len=1024,
    )
    sched = SchedulerConfig(max_num_batched_tokens=512, max_model_len=4096)
    model = get_model("llama-3.1-8b")
    report = kv_manage(model, generate(spec), KVManageOptions(sched), ("cerebras-wse3",))
    return next(t for t in report.rows[0].techniques if t.technique is Technique.DISAGGREGATION)


def test_disaggregation_of_zero_says_p99_misses_the_stalls_and_the_rate_that_shows_them() -> None:
    """Regression: Cerebras and Groq read ITL p99 "+0%" under disaggregation with no reason."""
    calm = _disagg_on_cerebras(2.0)
    assert calm.change is not None and abs(calm.change) < NO_CHANGE
    assert "under 1% of the gaps, which p99 does not see" in calm.why
    assert "in flight" in calm.why
    suggested = re.search(r"--rate ([\d,.]+) or more", calm.why)
    assert suggested is not None, calm.why
    busy = _disagg_on_cerebras(float(suggested.group(1).replace(",", "")))
    assert busy.change is not None and busy.change < -0.1  # p99 now sees the prefills
    assert busy.why == ""
