"""Workloads: who arrives when, with which prompt and how many output tokens.

Synthetic: Poisson or gamma arrivals at a rate; prompt and output lengths fixed, uniform,
lognormal or zipf; optionally N shared system prompts, or multi-turn conversations whose next
prompt is the previous prompt + answer + a new user turn. Traces: JSONL (``arrival_s``,
``prompt_tokens`` or ``prompt_len``, ``output_len``, optional ``prefix_id`` / ``prefix_len``,
``priority``, ``spec_acceptance``) or
CSV (``arrived_at,num_prefill_tokens,num_decode_tokens``, the Splitwise trace format).

Token ids are labels for prefix hashing, not vocabulary entries. They are kept as ``range``
segments (``Tokens``) so ten thousand 1,000-token prompts cost no memory:

    prefix p      : range(P + p·2^24, ...)     shared by every request with prefix_id p
    request r     : range(R + r·2^24, ...)     unique to the request
    output of r   : range(O + r·2^24, ...)     what the simulated machine samples for r
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import overload

import numpy as np

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.sim.trace_rows import TraceRow, csv_rows, jsonl_rows, parse_row
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

    POISSON = "poisson"
    GAMMA = "gamma"


class LengthDist(StrEnum):
    """Length distributions."""

    FIXED = "fixed"
    UNIFORM = "uniform"
    LOGNORMAL = "lognormal"
    ZIPF = "zipf"


@dataclass(frozen=True, slots=True)
class Lengths:
    """A length distribution with the given mean (clipped to [lo, hi]).

    ``uniform`` spans [lo, 2·mean − lo]; ``lognormal`` has shape ``sigma``; ``zipf`` draws
    ranks with exponent ``zipf_a`` and scales them so the mean is about ``mean``.
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

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` integer lengths drawn with ``rng``."""
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
    """A synthetic workload.

    Attributes:
        num_requests: requests (conversations × turns for multi-turn).
        rate_per_s: mean arrival rate.
        arrival: poisson, or gamma with coefficient of variation ``cv`` (burstier when > 1).
        prompt: prompt lengths (the unique part when prefixes are shared).
        output: output lengths.
        num_prefixes: distinct shared system prompts (0: none).
        prefix_len: tokens of each shared system prompt.
        turns: turns per conversation (1: independent requests).
        think_s: mean user think time between a turn's arrival and the next turn's.
        seed: the generator's seed.
    """

    num_requests: int = 100
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

    def __post_init__(self) -> None:
        check_int("requests", self.num_requests, 1, MAX_REQUESTS)
        check_real("rate", self.rate_per_s, 0, MAX_RATE_PER_S, low_open=True)
        check_real("cv", self.cv, 0, MAX_CV, low_open=True)
        check_int("prefixes", self.num_prefixes, 0, MAX_REQUESTS)
        check_int("prefix_len", self.prefix_len, 0, MAX_CONTEXT)
        check_int("turns", self.turns, 1, MAX_REQUESTS)
        check_real("think_s", self.think_s, 0, MAX_SECONDS)
        check_int("seed", self.seed, 0, MAX_SEED)


def _gaps(spec: WorkloadSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    """Inter-arrival gaps: exponential (Poisson) or gamma with shape 1/cv² (same mean)."""
    if spec.arrival is Arrival.POISSON:
        return rng.exponential(1.0 / spec.rate_per_s, n)
    shape = 1.0 / spec.cv**2
    return rng.gamma(shape, 1.0 / (spec.rate_per_s * shape), n)


def _prompt(i: int, n: int, prefix: int | None, prefix_len: int) -> Tokens:
    parts = []
    if prefix is not None and prefix_len:
        parts.append(
            range(_PREFIX_BASE + prefix * _SPAN, _PREFIX_BASE + prefix * _SPAN + prefix_len)
        )
    parts.append(range(_PROMPT_BASE + i * _SPAN, _PROMPT_BASE + i * _SPAN + n))
    return Tokens(parts)


def _output(i: int, n: int) -> range:
    return range(_OUTPUT_BASE + i * _SPAN, _OUTPUT_BASE + i * _SPAN + n)


def generate(spec: WorkloadSpec) -> list[RequestSpec]:
    """The requests of ``spec``, sorted by arrival (deterministic for ``spec.seed``)."""
    if spec.turns > 1:
        return _multi_turn(spec)
    rng = np.random.default_rng(spec.seed)
    n = spec.num_requests
    arrivals = np.cumsum(_gaps(spec, rng, n))
    prompts, outputs = spec.prompt.sample(rng, n), spec.output.sample(rng, n)
    prefixes = rng.integers(0, spec.num_prefixes, n) if spec.num_prefixes else None
    return [
        RequestSpec(
            f"r{i}",
            float(arrivals[i]),
            _prompt(
                i, int(prompts[i]), None if prefixes is None else int(prefixes[i]), spec.prefix_len
            ),
            _output(i, int(outputs[i])),
        )
        for i in range(n)
    ]


def _multi_turn(spec: WorkloadSpec) -> list[RequestSpec]:
    """Conversations: turn t+1's prompt = turn t's prompt + its output + a new user message."""
    rng = np.random.default_rng(spec.seed)
    convs = -(-spec.num_requests // spec.turns)
    starts = np.cumsum(_gaps(spec, rng, convs))
    out: list[RequestSpec] = []
    for c in range(convs):
        t_s = float(starts[c])
        prompt = Tokens([])
        prefix = int(rng.integers(0, spec.num_prefixes)) if spec.num_prefixes else None
        for t in range(spec.turns):
            i = c * spec.turns + t
            if i >= spec.num_requests:
                break
            user = _prompt(
                i, int(spec.prompt.sample(rng, 1)[0]), prefix if t == 0 else None, spec.prefix_len
            )
            prompt = prompt + user
            output = _output(i, int(spec.output.sample(rng, 1)[0]))
            out.append(RequestSpec(f"c{c}t{t}", t_s, prompt, output))
            prompt = prompt + Tokens([output])
            t_s += float(rng.exponential(spec.think_s))
    return sorted(out, key=lambda r: (r.arrival_s, r.request_id))


# ---- traces ----------------------------------------------------------------------------------


def _trace_request(row: TraceRow, i: int, prefixes: dict[str, int]) -> RequestSpec:
    n = int(row.prompt_len)
    prompt: Sequence[int]
    if row.prompt_ids is not None:
        prompt = tuple(row.prompt_ids)
    elif row.prefix_id is None:
        prompt = _prompt(i, n, None, 0)
    else:
        plen = n if row.prefix_len is None else int(row.prefix_len)
        pid = prefixes.setdefault(str(row.prefix_id), len(prefixes))  # first-seen order
        prompt = _prompt(i, n - plen, pid, plen)
    output = _output(i, int(row.output_len))
    return RequestSpec(f"t{i}", row.arrival_s, prompt, output, row.priority, row.spec_acceptance)


def load_trace(path: str | Path, limit: int | None = None) -> list[RequestSpec]:
    """Requests of a JSONL or CSV trace (``sim.trace_rows``); errors name the file, line and
    field."""
    p = Path(path)
    rows = csv_rows(p) if p.suffix.lower() == ".csv" else jsonl_rows(p)
    out: list[RequestSpec] = []
    prefixes: dict[str, int] = {}
    for i, (line, row) in enumerate(rows):
        if limit is not None and i >= limit:
            break
        out.append(_trace_request(parse_row(row, f"{p}:{line}"), i, prefixes))
    if not out:
        raise ConfigError(f"trace {p}: no requests")
    t0 = min(r.arrival_s for r in out)
    return sorted(
        (replace(r, arrival_s=r.arrival_s - t0) for r in out),
        key=lambda r: r.arrival_s,
    )


def parse_lengths(text: str, default_mean: float) -> Lengths:
    """``fixed:512``, ``uniform:512``, ``lognormal:1000[:sigma]`` or ``zipf:200[:a]``."""
    parts = text.split(":")
    try:
        dist = LengthDist(parts[0])
    except ValueError:
        raise UnknownNameError(
            "length distribution", parts[0], [d.value for d in LengthDist]
        ) from None
    if len(parts) > 3 or (len(parts) == 3 and dist in (LengthDist.FIXED, LengthDist.UNIFORM)):
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
