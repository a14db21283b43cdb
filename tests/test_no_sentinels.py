"""Absent values are None, not sentinels: a request's prefix hit before admission, a request that
fits, a load average the system does not report, an old record's -1.0."""

from __future__ import annotations

import os

import pytest

from ridgeline.lab import env
from ridgeline.lab.gap import _load_average
from serving_helpers import make_scheduler, req


def test_num_cached_tokens_is_none_until_admitted_then_the_hit() -> None:
    sched, ex = make_scheduler(16, prefix_caching=True)
    a, b = req("a", list(range(9))), req("b", list(range(9)))
    assert a.num_cached_tokens is None
    sched.add_request(a)
    batch = sched.schedule()
    sched.update(batch, ex.execute(batch))
    assert a.num_cached_tokens == 0  # admitted, nothing cached yet
    sched.add_request(b)
    sched.schedule()
    assert b.num_cached_tokens == 8  # two full blocks of 4 shared with a


def test_never_fits_is_none_for_a_request_that_fits() -> None:
    sched, _ = make_scheduler(4, max_model_len=64)
    assert sched.never_fits(req("ok", 4).max_total_tokens) is None
    assert (
        sched.never_fits(req("big", 40).max_total_tokens)
        == "larger than the KV pool: 42 tokens > 16 slots"
    )


def test_an_unknown_load_average_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert env.load_average() is None
    assert _load_average(-1.0) is None and _load_average(0.5) == 0.5
