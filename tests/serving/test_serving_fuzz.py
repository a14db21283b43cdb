"""Hypothesis drives the whole serving layer: admit, schedule, append, preempt by recompute and by
swap, speculative accept and reject (EOS among the drafts), prefix hits, tier offload and load,
abort and finish, with the invariants of ``serving_fuzz.ServingHarness.check`` after every
operation and nothing leaked at the end.

The default run makes about 10,000 scheduler steps; the ``bench`` run makes 1,000,000 (seeded
random sessions over the same harness, no shrinking): ``pytest -m bench tests/serving/test_serving_fuzz.py
-s`` prints its figure.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from serving_fuzz import FuzzConfig, ServingHarness, random_session

STEPS = Counter[str]()  # scheduler steps made by the default run (reported, and checked below)

configs = st.builds(
    FuzzConfig,
    block_size=st.sampled_from([2, 4, 8]),
    num_blocks=st.integers(4, 32),
    budget=st.integers(8, 64),
    max_seqs=st.integers(1, 8),
    policy=st.sampled_from(["fcfs", "priority", "contiguous", "static"]),
    chunked=st.booleans(),
    caching=st.booleans(),
    tier_blocks=st.sampled_from([0, 1, 3, 12]),
    swap=st.booleans(),
    spec_k=st.sampled_from([0, 1, 3]),
    eviction=st.sampled_from(["lru", "lfu"]),
).filter(lambda c: c.tier_blocks > 0 or not c.swap)


class ServingMachine(RuleBasedStateMachine):
    harness: ServingHarness

    @initialize(cfg=configs, seed=st.integers(0, 2**16))
    def start(self, cfg: FuzzConfig, seed: int) -> None:
        self.harness = ServingHarness(cfg, seed)

    @rule(
        prefix=st.integers(0, 2),
        length=st.integers(1, 40),
        max_new=st.integers(1, 12),
        eos=st.booleans(),
        priority=st.integers(0, 2),
    )
    def add(self, prefix: int, length: int, max_new: int, eos: bool, priority: int) -> None:
        self.harness.add(prefix, length, max_new, eos, priority)

    @rule(n=st.integers(1, 16))
    def step(self, n: int) -> None:
        for _ in range(n):
            self.harness.step()
        STEPS["steps"] += n

    @rule(index=st.integers(0, 64))
    def abort(self, index: int) -> None:
        self.harness.abort(index)

    @invariant()
    def consistent(self) -> None:
        if hasattr(self, "harness"):
            self.harness.check()

    def teardown(self) -> None:
        if hasattr(self, "harness"):
            before = self.harness.steps
            self.harness.drain()
            STEPS["steps"] += self.harness.steps - before


ServingMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestServingLayer = pytest.mark.slow(ServingMachine.TestCase)


def test_the_default_run_made_thousands_of_steps() -> None:
    """Runs after the state machine in file order: it made on the order of 10,000 steps."""
    if STEPS["steps"] == 0:
        pytest.skip("the state machine did not run in this session")
    print(f"\n{STEPS['steps']:,} scheduler steps")
    assert STEPS["steps"] >= 5_000, STEPS


@pytest.mark.slow
def test_a_seeded_session_exercises_every_path() -> None:
    """The operations the fuzz is for do happen: preemptions, swaps, tier hits, rejected drafts,
    EOS finishes and aborts (summed over a few seeded sessions)."""
    counts: Counter[str] = Counter()
    for seed in range(40):
        h = random_session(seed, 250)
        counts += h.counts
        counts["aborts"] += len(h.aborted)
        counts["tier hits"] += h.sched.stats.tier_hit_tokens
        counts["prefix hits"] += h.sched.stats.prefix_hit_tokens
    for key in (
        "preemptions",
        "swaps",
        "rejected drafts",
        "finish:stop",
        "finish:length",
        "aborts",
        "tier hits",
        "prefix hits",
    ):
        assert counts[key] > 0, (key, counts)


@pytest.mark.bench
def test_a_million_scheduler_steps_without_a_violation() -> None:
    target, steps, sessions, t0 = 1_000_000, 0, 0, time.perf_counter()
    totals: Counter[str] = Counter()
    while steps < target:
        h = random_session(sessions, 2_000)
        steps += h.steps
        totals += h.counts
        sessions += 1
    elapsed = time.perf_counter() - t0
    print(f"\n{steps:,} scheduler steps in {sessions} sessions, {elapsed:.0f} s, 0 violations")
    print(", ".join(f"{k} {v:,}" for k, v in sorted(totals.items())))
    assert steps >= target
