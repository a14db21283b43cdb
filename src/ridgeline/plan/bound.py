"""The analytic bound: how many requests per second one copy of a layout can carry within the
targets, at best, priced with the same step costs as the simulator (``plan.steps``).

Aggregated (one instance kind, chunked prefill). In a steady state at λ requests/s with step
time s, an instance runs b = λ·(O − 1)·s decoding sequences (Little's law: each decodes for
O − 1 steps) and, per step, p = λ·I·s = b·I/(O − 1) prompt tokens, so (the fluid limit of the
queue; Sarathi-Serve, Agrawal et al., OSDI 2024, mixes them in one step)::

    s(b) = mixed_s(b decoding at I + O/2 cached tokens, one chunk of b·I/(O − 1) tokens)
    λ(b) = b / ((O − 1) · s(b))

b grows until one of: s(b) > TPOT target; the KV of b sequences (I + O/2 tokens each) passes
the pool; b + p passes the token budget; or a prompt of the tail length, taking the budget
left by the decoders each step, ceil(I_tail / (budget − b)) full steps, passes the TTFT target.
Each condition only tightens as b grows, so a bisection finds the largest b.

Disaggregated (DistServe, Zhong et al., OSDI 2024, §3: each phase sized on its own, then the
instance counts matched to the rate). A prefill instance serves prompts back to back in steps
of its budget: μ_p = k / prefill_s(k prompts) with k = budget // I (one prompt in chunks when
the budget is smaller). A decode instance runs the largest batch b whose step stays within the
TPOT target and whose KV fits: μ_d = b / ((O − 1) · decode_s(b)). A unit of x prefill and y
decode instances carries min(x·μ_p, y·μ_d).

Why a bound: queueing (requests arrive in bursts, not as a fluid), the percentile (p90 ≥ the
mean) and prefill chunks that stall a step only add to the latencies the simulator sees, so the
simulated capacity of a copy is at most this one; ``plan.search`` starts its simulations at it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.plan.space import BLOCK_SIZE, Formats, Knobs, Layout, Split, kv_tokens
from ridgeline.plan.steps import StepPrices
from ridgeline.specs.inputs import check_real
from ridgeline.specs.limits import MAX_SECONDS
from ridgeline.specs.units import fmt_seconds

MAX_BATCH = 4096  # sequences of one instance at most (max_num_seqs)
MAX_UNIT_INSTANCES = 8  # prefill or decode instances of one disaggregated unit


@dataclass(frozen=True, slots=True)
class Traffic:
    """What the bound needs of a workload: mean lengths, the tail prompt, the longest request."""

    mean_prompt_tokens: float
    mean_output_tokens: float
    tail_prompt_tokens: int  # the prompt length at the TTFT target's percentile
    longest_tokens: int  # prompt + output of the longest request

    @property
    def decode_steps(self) -> float:
        """Steps a request decodes after its first token (at least one)."""
        return max(self.mean_output_tokens - 1.0, 1.0)

    @property
    def decode_context(self) -> float:
        """Mean tokens a decoding sequence holds: its prompt and half its output."""
        return self.mean_prompt_tokens + self.mean_output_tokens / 2.0


@dataclass(frozen=True, slots=True)
class Targets:
    """Latency targets at one percentile: positive, finite seconds; percentile in (0, 100]."""

    ttft_s: float
    tpot_s: float
    percentile: float = 90.0

    def __post_init__(self) -> None:
        check_real("ttft", self.ttft_s, 0, MAX_SECONDS, low_open=True)
        check_real("tpot", self.tpot_s, 0, MAX_SECONDS, low_open=True)
        check_real("percentile", self.percentile, 0, 100, low_open=True)


class Limit(StrEnum):
    """What stops a copy of a layout from carrying more (or from meeting the targets at all)."""

    WEIGHTS = "memory"  # weights + one longest request do not fit
    TTFT = "TTFT"
    TPOT = "TPOT"
    KV = "KV memory"
    BUDGET = "token budget"
    PREFILL = "prefill throughput"  # a disaggregated unit's prefill pool
    CHIPS = "max chips"


@dataclass(frozen=True, slots=True)
class Bound:
    """A layout that can meet the targets, and the most one copy can carry (req/s).

    Attributes:
        layout: the layout.
        capacity_rps: one copy's capacity, at best (module docstring).
        batch: sequences decoding on one (decode) instance at that capacity.
        ttft_floor_s: TTFT of a tail-length prompt alone.
        tpot_floor_s: TPOT of one sequence alone.
        limit: what stops one copy carrying more.
    """

    layout: Layout
    capacity_rps: float
    batch: int
    ttft_floor_s: float
    tpot_floor_s: float
    limit: Limit

    def copies_for(self, rate_rps: float) -> int:
        """Fewest copies that the bound allows to carry ``rate_rps``."""
        return max(1, math.ceil(rate_rps / self.capacity_rps * (1 - 1e-12)))

    def chips_for(self, rate_rps: float) -> int:
        return self.copies_for(rate_rps) * self.layout.chips


@dataclass(frozen=True, slots=True)
class Miss:
    """A layout (or a family of them) that cannot meet the targets at any rate, and why;
    ``excess`` says how far it is from them (the floor over the target, the chips needed
    over those allowed; infinite when there is no such number), so the closest can be shown."""

    accelerator: str
    what: str  # ``fp8, KV fp8 aggregated TP1``
    limit: Limit
    reason: str
    excess: float = math.inf


def _largest(ok: Callable[[int], bool], high: int) -> int:
    """The largest b in [1, high] with ok(b), given ok(1) and that ok only turns false as b
    grows: doubling, then bisection."""
    lo = 1
    hi = 2
    while hi <= high and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, high + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _kv_batch(prices: StepPrices, split: Split, formats: Formats, traffic: Traffic) -> int:
    """Sequences whose KV (I + O/2 tokens each, in whole blocks) fits one instance's pool."""
    tokens = kv_tokens(prices.model, prices.acc, split, formats)
    per_seq = math.ceil(traffic.decode_context / BLOCK_SIZE) * BLOCK_SIZE
    return int(tokens // per_seq)


def _batch_for(bound_batch: int) -> int:
    """max_num_seqs for an instance whose bound runs ``bound_batch`` sequences: the power of
    two at or above it (room for bursts, within a factor of two)."""
    return min(MAX_BATCH, 1 << max(3, math.ceil(math.log2(max(bound_batch, 1)))))


@dataclass(frozen=True, slots=True)
class Instance:
    """An instance kind on the accelerator: its split and formats."""

    split: Split
    formats: Formats

    def what(self, serving: str) -> str:
        return f"{self.formats.label} {serving} {self.split.label}"


def aggregated(
    prices: StepPrices, inst: Instance, budget: int, traffic: Traffic, targets: Targets
) -> Bound | Miss:
    """The bound of an aggregated instance with token budget ``budget`` (module docstring)."""
    split, formats = inst.split, inst.formats
    acc = prices.acc.name
    what = inst.what("aggregated") + f" budget {budget}"
    i, steps, ctx = traffic.mean_prompt_tokens, traffic.decode_steps, traffic.decode_context
    tail = traffic.tail_prompt_tokens
    ttft0 = prices.prompt_alone_s(split, formats, tail, budget)
    tpot0 = prices.decode_s(split, formats, 1, ctx)
    if ttft0 > targets.ttft_s:
        reason = f"a {tail}-token prompt alone takes {fmt_seconds(ttft0)} to its first token"
        return Miss(acc, what, Limit.TTFT, reason, ttft0 / targets.ttft_s)
    if tpot0 > targets.tpot_s:
        reason = f"one sequence alone decodes at {fmt_seconds(tpot0)} per token"
        return Miss(acc, what, Limit.TPOT, reason, tpot0 / targets.tpot_s)
    b_kv = _kv_batch(prices, split, formats, traffic)

    def step_s(b: int) -> float:
        return prices.mixed_s(split, formats, (b, ctx), (round(b * i / steps), i / 2))

    def first_token_s(b: int) -> float:
        room = max(budget - b, 1)
        full = prices.mixed_s(split, formats, (b, ctx), (min(tail, room), 0.0))
        return math.ceil(tail / room) * full

    checks: tuple[tuple[Limit, Callable[[int], bool]], ...] = (
        (Limit.KV, lambda b: b <= b_kv),
        (Limit.BUDGET, lambda b: b + b * i / steps <= budget),
        (Limit.TPOT, lambda b: step_s(b) <= targets.tpot_s),
        (Limit.TTFT, lambda b: first_token_s(b) <= targets.ttft_s),
    )
    for limit, ok in checks:
        if not ok(1):
            return Miss(acc, what, limit, f"even one sequence at a time misses the {limit.value}")
    b = _largest(lambda n: all(ok(n) for _, ok in checks), min(MAX_BATCH, budget))
    limit = next((lim for lim, ok in checks if not ok(b + 1)), Limit.BUDGET)
    layout = Layout(acc, formats, split, Knobs(_batch_for(b), budget))
    capacity = b / (steps * step_s(b))
    return Bound(layout, capacity, b, ttft0, tpot0, limit)


@dataclass(frozen=True, slots=True)
class PrefillRate:
    """A prefill instance: prompts per second back to back, and a tail prompt's time alone."""

    prompts_per_s: float
    ttft_floor_s: float


def prefill_rate(prices: StepPrices, inst: Instance, budget: int, traffic: Traffic) -> PrefillRate:
    """Prompts per second of a prefill instance with token budget ``budget``."""
    tokens = max(1, round(traffic.mean_prompt_tokens))
    if budget >= tokens:
        k = budget // tokens
        rate = k / prices.prefill_s(inst.split, inst.formats, k, tokens)
    else:
        rate = 1.0 / prices.prompt_alone_s(inst.split, inst.formats, tokens, budget)
    tail = prices.prompt_alone_s(inst.split, inst.formats, traffic.tail_prompt_tokens, budget)
    return PrefillRate(rate, tail)


@dataclass(frozen=True, slots=True)
class DecodeRate:
    """A decode instance: requests per second at its largest batch within the TPOT target."""

    requests_per_s: float
    batch: int
    tpot_floor_s: float
    limit: Limit


def decode_rate(
    prices: StepPrices, inst: Instance, traffic: Traffic, targets: Targets
) -> DecodeRate | Limit:
    """The decode side of a disaggregated unit, or the limit that rules it out."""
    ctx = traffic.decode_context
    tpot0 = prices.decode_s(inst.split, inst.formats, 1, ctx)
    b_kv = _kv_batch(prices, inst.split, inst.formats, traffic)
    if tpot0 > targets.tpot_s:
        return Limit.TPOT
    if b_kv < 1:
        return Limit.KV

    def fast_enough(b: int) -> bool:
        return prices.decode_s(inst.split, inst.formats, b, ctx) <= targets.tpot_s

    b = _largest(fast_enough, min(MAX_BATCH, b_kv))
    limit = Limit.KV if b >= b_kv else Limit.TPOT
    step = prices.decode_s(inst.split, inst.formats, b, ctx)
    return DecodeRate(b / (traffic.decode_steps * step), b, tpot0, limit)


@dataclass(frozen=True, slots=True)
class UnitChoice:
    """Instances of each kind in a disaggregated unit, picked for a rate."""

    num_prefill: int
    num_decode: int
    capacity_rps: float


def best_unit(
    prefill: tuple[PrefillRate, int],
    decode: tuple[DecodeRate, int],
    rate_rps: float,
    max_chips: int,
) -> UnitChoice | None:
    """The x prefill + y decode instances (each at most ``MAX_UNIT_INSTANCES``) that carry
    ``rate_rps`` on the fewest chips, then with the most capacity per chip; ``None`` when no
    unit fits ``max_chips``. ``prefill`` and ``decode`` pair each rate with its chips."""
    (p, chips_p), (d, chips_d) = prefill, decode
    best: tuple[float, float, int, UnitChoice] | None = None
    for x in range(1, MAX_UNIT_INSTANCES + 1):
        for y in range(1, MAX_UNIT_INSTANCES + 1):
            chips = x * chips_p + y * chips_d
            if chips > max_chips:
                continue
            cap = min(x * p.prompts_per_s, y * d.requests_per_s)
            total = math.ceil(rate_rps / cap * (1 - 1e-12)) * chips
            key = (total, -cap / chips, chips, UnitChoice(x, y, cap))
            if best is None or key[:3] < best[:3]:
                best = key
    return None if best is None else best[3]


def disaggregated(
    accelerator: str,
    prefill: tuple[Instance, int, PrefillRate],
    decode: tuple[Instance, DecodeRate],
    unit: UnitChoice,
) -> Bound:
    """The bound of a disaggregated unit (``best_unit``'s choice) on ``accelerator``."""
    (p_inst, budget, p_rate), (d_inst, d_rate) = prefill, decode
    layout = Layout(
        accelerator,
        d_inst.formats,
        d_inst.split,
        Knobs(_batch_for(d_rate.batch), budget),
        prefill=p_inst.split,
        num_prefill=unit.num_prefill,
        num_decode=unit.num_decode,
    )
    prefill_side = unit.num_prefill * p_rate.prompts_per_s
    decode_side = unit.num_decode * d_rate.requests_per_s
    limit = Limit.PREFILL if prefill_side <= decode_side else d_rate.limit
    return Bound(
        layout, unit.capacity_rps, d_rate.batch, p_rate.ttft_floor_s, d_rate.tpot_floor_s, limit
    )
