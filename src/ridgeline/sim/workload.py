"""Workloads: who arrives when, with which prompt and how many output tokens.

One ``WorkloadSpec`` describes the traffic for ``ridgeline simulate`` and for a sweep's capacity
search: Poisson, gamma or evenly spaced arrivals at a rate, or a trace (``sim.traces``); prompt
and output lengths fixed, uniform, lognormal, zipf or uniform over a range of integers;
optionally N shared system prompts, or multi-turn conversations whose next prompt is the
previous prompt + answer + a new user turn; a fixed number of requests or ``duration_s`` seconds
of arrivals. ``generate`` lays it out for one simulation; a sweep draws the lengths once
(``sweep.workload.load_table``) and re-times them to every probe's rate.

Token ids are labels for prefix hashing, not vocabulary entries. They are kept as ``range``
segments (``Tokens``) so ten thousand 1,000-token prompts cost no memory:

    prefix p      : range(P + p·2^24, ...)     shared by every request with prefix_id p
    request r     : range(R + r·2^24, ...)     unique to the request
    output of r   : range(O + r·2^24, ...)     what the simulated machine samples for r
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import overload

import numpy as np

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import (
    MAX_CONTEXT,
    MAX_RATE_PER_S,
    MAX_REQUESTS,
    MAX_SECONDS,
    MAX_SEED,
)

_SPAN = 1 << 24
_PREFIX_BASE = 1 << 50
_PROMPT_BASE = 2 << 50
_OUTPUT_BASE = 3 << 50
MAX_SIGMA = 10.0  # lognormal shape: past this the lengths are all clipped to lo or hi
MAX_ZIPF_A = 100.0
MAX_CV = 100.0  # gamma arrivals' coefficient of variation


class Tokens(Sequence[int]):
    """A token sequence made of ``range`` segments (cheap to build, slice and concatenate)."""

    __slots__ = ("_parts", "_len")

    def __init__(self, parts: Sequence[range]) -> None:
        self._parts = tuple(p for p in parts if len(p))
        self._len = sum(len(p) for p in self._parts)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[int, ...]: ...

    def __getitem__(self, i: int | slice) -> int | tuple[int, ...]:
        if isinstance(i, slice):
            start, stop, _ = i.indices(self._len)
            return self._slice(start, stop)
        if i < 0:
            i += self._len
        for p in self._parts:
            if i < len(p):
                return p[i]
            i -= len(p)
        raise IndexError(i)

    def _slice(self, start: int, stop: int) -> tuple[int, ...]:
        out: tuple[int, ...] = ()
        for p in self._parts:
            n = len(p)
            if start < n and stop > 0:
                out += tuple(p[max(start, 0) : min(stop, n)])
            start -= n
            stop -= n
        return out

    def __iter__(self) -> Iterator[int]:
        for p in self._parts:
            yield from p

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self._parts + other._parts)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of a workload: when, what prompt, what output (and, optionally, its
    priority and its own draft acceptance rate for speculative decoding)."""

    request_id: str
    arrival_s: float
    prompt: Sequence[int]
    output: Sequence[int]
    priority: int = 0
    spec_acceptance: float | None = None

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def output_len(self) -> int:
        return len(self.output)


class Arrival(StrEnum):
    """Arrival processes."""

    POISSON = "poisson"  # exponential gaps
    GAMMA = "gamma"  # gamma gaps with coefficient of variation ``cv``
    UNIFORM = "uniform"  # one request every 1/rate seconds exactly
    OFFLINE = "offline"  # every request queued at t = 0 (a throughput benchmark; no rate)
    TRACE = "trace"  # the trace's own gaps (scaled to a sweep probe's rate)


class LengthDist(StrEnum):
    """Length distributions."""

    FIXED = "fixed"
    UNIFORM = "uniform"
    LOGNORMAL = "lognormal"
    ZIPF = "zipf"
    INTEGERS = "integers"  # every integer of [lo, hi] equally likely


@dataclass(frozen=True, slots=True)
class Lengths:
    """A length distribution with the given mean (clipped to [lo, hi]).

    ``uniform`` spans [lo, 2·mean − lo]; ``lognormal`` has shape ``sigma``; ``zipf`` draws
    ranks with exponent ``zipf_a`` and scales them so the mean is about ``mean``; ``integers``
    draws the integers of [lo, hi] with equal chances (``Lengths.between``).
    """

    dist: LengthDist = LengthDist.FIXED
    mean: float = 512
    sigma: float = 0.8
    zipf_a: float = 2.0
    lo: int = 1
    hi: int = 32768

    def __post_init__(self) -> None:
        check_real("lengths.mean", self.mean, 1, MAX_CONTEXT)
        check_real("lengths.sigma", self.sigma, 0, MAX_SIGMA, low_open=True)
        # numpy's zipf needs a > 1 (its mean is finite only for a > 2)
        check_real("lengths.zipf_a", self.zipf_a, 1, MAX_ZIPF_A, low_open=True)
        check_int("lengths.lo", self.lo, 1, MAX_CONTEXT)
        check_int("lengths.hi", self.hi, self.lo, MAX_CONTEXT)

    @staticmethod
    def between(lo: int, hi: int) -> Lengths:
        """``lo`` tokens (when ``hi == lo``), or any integer of [lo, hi] with equal chances."""
        if not 1 <= lo <= hi <= MAX_CONTEXT:
            raise ConfigError(f"lengths [{lo}, {hi}]: need 1 <= low <= high <= {MAX_CONTEXT:,}")
        dist = LengthDist.FIXED if lo == hi else LengthDist.INTEGERS
        return Lengths(dist, (lo + hi) / 2, lo=lo, hi=hi)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` integer lengths drawn with ``rng``."""
        if self.dist is LengthDist.INTEGERS:
            return rng.integers(self.lo, self.hi + 1, n, dtype=np.int64)
        if self.dist is LengthDist.FIXED:
            x = np.full(n, self.mean)
        elif self.dist is LengthDist.UNIFORM:
            x = rng.uniform(self.lo, max(2 * self.mean - self.lo, self.lo), n)
        elif self.dist is LengthDist.LOGNORMAL:
            mu = math.log(self.mean) - self.sigma**2 / 2  # E[X] = exp(mu + sigma²/2)
            x = rng.lognormal(mu, self.sigma, n)
        else:
            ranks = rng.zipf(self.zipf_a, n).astype(float)
            x = ranks * self.mean / max(float(np.mean(ranks)), 1.0)
        return np.clip(np.rint(x), self.lo, self.hi).astype(int)


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Traffic: arrivals, lengths, shared prefixes and conversations, or a trace.

    Attributes:
        num_requests: requests (conversations × turns for multi-turn), or None when
            ``duration_s`` sets them.
        rate_per_s: mean arrival rate (a sweep's probe sets its own).
        arrival: poisson, gamma with coefficient of variation ``cv`` (burstier when > 1),
            uniform (evenly spaced), or trace.
        prompt: prompt lengths (the unique part when prefixes are shared).
        output: output lengths.
        num_prefixes: distinct shared system prompts (0: none).
        prefix_len: tokens of each shared system prompt.
        turns: turns per conversation (1: independent requests).
        think_s: mean user think time between a turn's arrival and the next turn's.
        seed: the generator's seed (a sweep uses its own).
        name: a label for reports.
        trace_path: the trace of a ``trace`` workload (``sim.traces``).
        skip: trace rows skipped first.
        duration_s: seconds of arrivals instead of a count: ceil(rate × duration_s) requests,
            at most ``max_requests`` (an overload then leaves a backlog a TTFT SLO sees, where
            a fixed count would drain).
        max_requests: most requests in ``duration_s`` mode.
    """

    num_requests: int | None = 100
    rate_per_s: float = 1.0
    arrival: Arrival = Arrival.POISSON
    cv: float = 1.0
    prompt: Lengths = Lengths(LengthDist.FIXED, 512)
    output: Lengths = Lengths(LengthDist.FIXED, 128)
    num_prefixes: int = 0
    prefix_len: int = 0
    turns: int = 1
    think_s: float = 5.0
    seed: int = 0
    name: str = "workload"
    trace_path: str | None = None
    skip: int = 0
    duration_s: float | None = None
    max_requests: int = 20_000

    def __post_init__(self) -> None:
        if (self.num_requests is None) == (self.duration_s is None):
            raise ConfigError(f"workload '{self.name}': give num_requests or duration_s, one")
        if self.num_requests is not None:
            check_int("requests", self.num_requests, 1, MAX_REQUESTS)
        if self.duration_s is not None:
            check_real("duration_s", self.duration_s, 0, MAX_SECONDS, low_open=True)
        check_int("max_requests", self.max_requests, 1, MAX_REQUESTS)
        check_real("rate", self.rate_per_s, 0, MAX_RATE_PER_S, low_open=True)
        check_real("cv", self.cv, 0, MAX_CV, low_open=True)
        check_int("prefixes", self.num_prefixes, 0, MAX_REQUESTS)
        check_int("prefix_len", self.prefix_len, 0, MAX_CONTEXT)
        check_int("turns", self.turns, 1, MAX_REQUESTS)
        check_real("think_s", self.think_s, 0, MAX_SECONDS)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_int("skip", self.skip, 0, MAX_REQUESTS)
        if (self.arrival is Arrival.TRACE) != (self.trace_path is not None):
            raise ConfigError(f"workload '{self.name}': a trace workload needs `trace`, only it")

    @property
    def table_size(self) -> int:
        """Requests a sweep materialises once: the fixed count, or the most a probe may take."""
        return self.num_requests if self.num_requests is not None else self.max_requests

    def requests_at(self, rate_rps: float, available: int) -> int:
        """How many requests a run at ``rate_rps`` takes, of ``available``."""
        if self.duration_s is None:
            return available
        return max(2, min(available, math.ceil(rate_rps * self.duration_s)))


def _gaps(spec: WorkloadSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    """Inter-arrival gaps: exponential (Poisson), even, none (offline), or gamma with shape
    1/cv² (same mean)."""
    if spec.arrival is Arrival.OFFLINE:
        return np.zeros(n)
    if spec.arrival is Arrival.POISSON:
        return rng.exponential(1.0 / spec.rate_per_s, n)
    if spec.arrival is Arrival.UNIFORM:
        return np.full(n, 1.0 / spec.rate_per_s)
    shape = 1.0 / spec.cv**2
    return rng.gamma(shape, 1.0 / (spec.rate_per_s * shape), n)


def prompt_tokens(i: int, n: int, prefix: int | None = None, prefix_len: int = 0) -> Tokens:
    """Request ``i``'s prompt of ``n`` unique tokens after ``prefix_len`` tokens of shared
    prefix ``prefix`` (see the module docstring)."""
    parts = []
    if prefix is not None and prefix_len:
        parts.append(
            range(_PREFIX_BASE + prefix * _SPAN, _PREFIX_BASE + prefix * _SPAN + prefix_len)
        )
    parts.append(range(_PROMPT_BASE + i * _SPAN, _PROMPT_BASE + i * _SPAN + n))
    return Tokens(parts)


def output_tokens(i: int, n: int) -> range:
    """Request ``i``'s ``n`` output tokens (what the simulated machine samples for it)."""
    return range(_OUTPUT_BASE + i * _SPAN, _OUTPUT_BASE + i * _SPAN + n)


def generate(spec: WorkloadSpec) -> list[RequestSpec]:
    """The requests of ``spec``, sorted by arrival (deterministic for ``spec.seed``); a trace
    keeps its own arrival times."""
    n = spec.requests_at(spec.rate_per_s, spec.table_size)
    if spec.arrival is Arrival.TRACE:
        from ridgeline.sim.traces import load_trace  # the trace reader builds on this module

        assert spec.trace_path is not None
        return load_trace(spec.trace_path, limit=n, skip=spec.skip)
    if spec.turns > 1:
        return _multi_turn(spec, n)
    rng = np.random.default_rng(spec.seed)
    arrivals = np.cumsum(_gaps(spec, rng, n))
    prompts, outputs = spec.prompt.sample(rng, n), spec.output.sample(rng, n)
    prefixes = rng.integers(0, spec.num_prefixes, n) if spec.num_prefixes else None
    return [
        RequestSpec(
            f"r{i}",
            float(arrivals[i]),
            prompt_tokens(
                i, int(prompts[i]), None if prefixes is None else int(prefixes[i]), spec.prefix_len
            ),
            output_tokens(i, int(outputs[i])),
        )
        for i in range(n)
    ]


def _multi_turn(spec: WorkloadSpec, n: int) -> list[RequestSpec]:
    """Conversations: turn t+1's prompt = turn t's prompt + its output + a new user message."""
    rng = np.random.default_rng(spec.seed)
    convs = -(-n // spec.turns)
    starts = np.cumsum(_gaps(spec, rng, convs))
    out: list[RequestSpec] = []
    for c in range(convs):
        t_s = float(starts[c])
        prompt = Tokens([])
        prefix = int(rng.integers(0, spec.num_prefixes)) if spec.num_prefixes else None
        for t in range(spec.turns):
            i = c * spec.turns + t
            if i >= n:
                break
            user = prompt_tokens(
                i, int(spec.prompt.sample(rng, 1)[0]), prefix if t == 0 else None, spec.prefix_len
            )
            prompt = prompt + user
            output = output_tokens(i, int(spec.output.sample(rng, 1)[0]))
            out.append(RequestSpec(f"c{c}t{t}", t_s, prompt, output))
            prompt = prompt + Tokens([output])
            t_s += float(rng.exponential(spec.think_s))
    return sorted(out, key=lambda r: (r.arrival_s, r.request_id))


def parse_lengths(text: str, default_mean: float) -> Lengths:
    """``fixed:512``, ``uniform:512``, ``lognormal:1000[:sigma]`` or ``zipf:200[:a]``."""
    parts = text.split(":")
    try:
        dist = LengthDist(parts[0])
    except ValueError:
        raise UnknownNameError(
            "length distribution", parts[0], [d.value for d in LengthDist]
        ) from None
    if len(parts) > 3 or (len(parts) == 3 and dist not in (LengthDist.LOGNORMAL, LengthDist.ZIPF)):
        raise ConfigError(
            f"lengths {text!r}: expected DIST:MEAN, or DIST:MEAN:PARAM for lognormal (sigma) "
            "and zipf (a)"
        )
    try:
        mean = float(parts[1]) if len(parts) > 1 else default_mean
        extra = float(parts[2]) if len(parts) > 2 else None
    except ValueError:
        raise ConfigError(f"lengths {text!r}: expected DIST:MEAN[:PARAM]") from None
    try:
        if dist is LengthDist.LOGNORMAL and extra is not None:
            return Lengths(dist, mean, sigma=extra)
        if dist is LengthDist.ZIPF and extra is not None:
            return Lengths(dist, mean, zipf_a=extra)
        return Lengths(dist, mean)
    except ConfigError as e:
        raise ConfigError(f"lengths {text!r}: {e}") from None
