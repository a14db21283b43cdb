"""Serving metrics, defined as vLLM's benchmark defines them.

Per request: TTFT (arrival → first token), TPOT ((last token − first token) ÷ (outputs − 1)),
inter-token latencies (every gap between consecutive tokens of a request), end-to-end latency,
queueing delay (arrival → first scheduled), preemptions. Overall: requests/s and tokens/s over
the makespan, goodput (completed requests meeting both SLOs, per second), KV use over time,
allocated-but-unused slots (internal fragmentation for paged policies; reserved-but-unused for
contiguous and static), prefix-cache hit rate, tier traffic. Percentiles p50/p90/p99 (linear
interpolation, numpy's default; ITL percentiles weighted by how many tokens shared a gap).

The ITL tail (``ItlTail``) is what a running decode sees when a long prompt is prefilled beside
it: the longest gap, the 99.9th percentile, and the share of gaps longer than the TPOT
objective (``SLO.tpot_s``: the gap a user notices). A stall that hits under 1% of the gaps (four long prompts among 500 decode steps)
never reaches p99, so chunked prefill is judged by these (Agrawal et al., "Taming
Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024, judge it by the
tail of the time between tokens), not by p99.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from ridgeline.serving.tiers import TierTraffic
from ridgeline.sim.fast_off import FastModeOff
from ridgeline.specs.html import html_table
from ridgeline.specs.inputs import check_real
from ridgeline.specs.limits import MAX_SECONDS

if TYPE_CHECKING:  # compiled shapes load their dataflow compiler only when used
    from ridgeline.sim.compiled import CompiledStats


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
        order = np.argsort(x)  # equal values are interchangeable: any order gives the same q
        x, w = x[order], w[order]
        cum = np.cumsum(w)
        q = [float(x[min(np.searchsorted(cum, f * cum[-1]), x.size - 1)]) for f in (0.5, 0.9, 0.99)]
        return Percentiles(float(np.add.reduce(x * w)) / float(cum[-1]), *q)  # not BLAS: slower


@dataclass(frozen=True, slots=True)
class ItlTail:
    """The stalls running decodes see: the longest inter-token gap, the 99.9th percentile, the
    threshold a gap must pass to count as a stall (the TPOT objective; all three seconds) and the
    share of gaps over it, each gap weighted by the requests that saw it."""

    max_s: float
    p999_s: float
    stall_s: float
    stall_share: float

    @staticmethod
    def of(values: Any, weights: Any, stall_s: float) -> ItlTail:
        x, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
        if x.size == 0 or float(w.sum()) == 0.0:
            return ItlTail(0.0, 0.0, stall_s, 0.0)
        order = np.argsort(x)
        x, w = x[order], w[order]
        cum = np.cumsum(w)
        p999 = float(x[min(np.searchsorted(cum, 0.999 * cum[-1]), x.size - 1)])
        return ItlTail(float(x[-1]), p999, stall_s, float(w[x > stall_s].sum() / cum[-1]))


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


class RequestTable(Sequence[RequestMetrics]):
    """Every request's ``RequestMetrics``, kept as columns (one per field, in its order) and
    made into objects the first time any is read: a run of 10,000 requests whose caller reads
    only the percentiles builds no 10,000 frozen objects. Compares, hashes and pickles as the
    tuple of its rows."""

    __slots__ = ("_columns", "_rows")

    def __init__(self, columns: Sequence[Sequence[Any]]) -> None:
        self._columns = tuple(tuple(c) for c in columns)
        self._rows: tuple[RequestMetrics, ...] | None = None

    def rows(self) -> tuple[RequestMetrics, ...]:
        if self._rows is None:
            self._rows = tuple(map(RequestMetrics, *self._columns))
        return self._rows

    def __len__(self) -> int:
        return len(self._columns[0]) if self._columns else 0

    @overload
    def __getitem__(self, i: int) -> RequestMetrics: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[RequestMetrics, ...]: ...
    def __getitem__(self, i: int | slice) -> RequestMetrics | tuple[RequestMetrics, ...]:
        return self.rows()[i]

    def __iter__(self) -> Iterator[RequestMetrics]:
        return iter(self.rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestTable):
            return self._columns == other._columns
        return isinstance(other, tuple) and self.rows() == other

    def __hash__(self) -> int:
        return hash(self._columns)

    def __reduce__(self) -> tuple[type[RequestTable], tuple[tuple[tuple[Any, ...], ...]]]:
        return (RequestTable, (self._columns,))

    def __repr__(self) -> str:
        return f"RequestTable({len(self)} requests)"


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
    itl_tail: ItlTail
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
    requests: Sequence[RequestMetrics] = field(repr=False)  # a RequestTable from the simulator
    compiled: CompiledStats | None = None  # compiled shapes: what padding cost
    fast_mode_off: FastModeOff | None = None  # why the step loop ran it (None: the fast mode)

    def to_dict(self, with_requests: bool = False) -> dict[str, Any]:
        d = asdict(replace(self, requests=()))  # the rows below, without copying the table
        d["requests"] = [asdict(r) for r in self.requests] if with_requests else []
        d["schema"] = "ridgeline.simulate/2"
        off = d.pop("fast_mode_off")
        d["fast_mode"] = {"ran": off is None, "off": off, "why": off.why if off else None}
        if self.compiled is None:
            d.pop("compiled")  # only compiled-shape runs carry it
        else:
            d["compiled"] = self.compiled.to_dict()
        if not with_requests:
            d.pop("requests")
            d.pop("timeline")
        return d

    def _repr_html_(self) -> str:
        rows = [
            ("completed / rejected", f"{self.num_completed} / {self.num_rejected}"),
            (
                "requests/s, output tokens/s",
                f"{self.requests_per_s:.3g}, {self.output_tokens_per_s:,.0f}",
            ),
            ("TTFT p50 / p99 (s)", f"{self.ttft_s.p50:.4g} / {self.ttft_s.p99:.4g}"),
            ("TPOT p50 / p99 (s)", f"{self.tpot_s.p50:.4g} / {self.tpot_s.p99:.4g}"),
            (
                "KV peak, unused allocated",
                f"{self.kv_peak_frac:.0%}, {self.unused_allocated_frac:.1%}",
            ),
            ("preemptions, prefix hit rate", f"{self.num_preemptions}, {self.prefix_hit_rate:.0%}"),
        ]
        return html_table(("simulation", self.label or "run"), rows)


@dataclass(frozen=True, slots=True)
class StepSamples:
    """Device KV use after every step, as arrays (one entry per step, in time order).

    Attributes:
        start_s: when each step started.
        dur_s: how long it ran (end − start).
        used_frac: blocks in use after the step, as a fraction of the pool.
        unused_frac: allocated-but-unused slots of running requests, as a fraction of all slots.
        running: requests running after the step.
    """

    start_s: np.ndarray
    dur_s: np.ndarray
    used_frac: np.ndarray
    unused_frac: np.ndarray
    running: np.ndarray


class RequestLog:
    """Per-request events of a run, in lists indexed by arrival order (``None`` until known).

    Both simulation modes write here: the step-by-step loop through request ids (``index``),
    the fast mode through indices directly. ITL gaps seen by one request go to ``itl1``; a gap
    shared by every request of a decode run is stored once in ``itl`` with the number of
    requests that saw it in ``itl_w`` (or in ``itl_chunks``, arrays of gaps and weights).

    Args:
        request_ids: ids in arrival order.
        arrival_s: arrival times, in the same order.
        prompt_len: prompt lengths, in the same order.
    """

    __slots__ = (
        "ids",
        "index",
        "arrival",
        "prompt_len",
        "first_sched",
        "first_tok",
        "last_tok",
        "num_out",
        "finish",
        "preempt",
        "cached",
        "rejected",
        "itl1",
        "itl",
        "itl_w",
        "itl_chunks",
        "decode_tokens",
        "decode_seq_steps",
    )

    def __init__(
        self, request_ids: Sequence[str], arrival_s: Sequence[float], prompt_len: Sequence[int]
    ) -> None:
        n = len(request_ids)
        self.ids = list(request_ids)
        self.index = {rid: i for i, rid in enumerate(self.ids)}
        self.arrival = list(arrival_s)
        self.prompt_len = list(prompt_len)
        self.first_sched: list[float | None] = [None] * n
        self.first_tok: list[float | None] = [None] * n
        self.last_tok: list[float | None] = [None] * n
        self.num_out = [0] * n
        self.finish: list[float | None] = [None] * n
        self.preempt = [0] * n
        self.cached = [0] * n
        self.rejected: dict[int, str] = {}
        self.itl1: list[float] = []
        self.itl: list[float] = []
        self.itl_w: list[float] = []
        self.itl_chunks: list[tuple[np.ndarray, np.ndarray]] = []
        self.decode_tokens = 0
        self.decode_seq_steps = 0

    def tokens(self, i: int, t: float, n: int) -> None:
        """``n`` tokens of request ``i`` became available at ``t``."""
        last = self.last_tok[i]
        if last is None:
            self.first_tok[i] = t
        else:
            self.itl1.append(t - last)
            if n > 1:  # tokens accepted together arrive with no gap
                self.itl1 += [0.0] * (n - 1)
        self.last_tok[i] = t
        self.num_out[i] += n

    def decode_run(self, idx: Sequence[int], ends: Sequence[float]) -> None:
        """Decode steps ending at ``ends`` in which every request of ``idx`` got one token.

        Every request sees the same gaps between consecutive ends (stored once, weighted);
        its first gap is from its own last token to ``ends[0]``.
        """
        first, last, k = ends[0], ends[-1], len(ends)
        last_tok, itl1, num_out = self.last_tok, self.itl1, self.num_out
        for i in idx:
            prev = last_tok[i]
            if prev is None:  # a prefix hit left only the last prompt token: first token now
                self.first_tok[i] = first
            else:
                itl1.append(first - prev)
            last_tok[i] = last
            num_out[i] += k
        self.shared_gaps(ends, len(idx))
        self.decode_tokens += k * len(idx)
        self.decode_seq_steps += k * len(idx)

    def shared_gaps(self, ends: Sequence[float], count: int) -> None:
        """The gaps between consecutive ``ends``, each seen by ``count`` requests."""
        if len(ends) > 1:
            self.itl += [b - a for a, b in zip(ends, ends[1:], strict=False)]
            self.itl_w += [float(count)] * (len(ends) - 1)

    def _gaps(self) -> tuple[np.ndarray, np.ndarray]:
        """Every ITL gap and how many requests saw it."""
        xs = [np.asarray(self.itl1), np.asarray(self.itl)] + [x for x, _ in self.itl_chunks]
        ws = [np.ones(len(self.itl1)), np.asarray(self.itl_w)] + [w for _, w in self.itl_chunks]
        return np.concatenate(xs), np.concatenate(ws)

    def itl_percentiles(self) -> Percentiles:
        """ITL over every gap (weighted by how many requests saw it)."""
        x, w = self._gaps()
        return Percentiles.of(x, w) if x.size else Percentiles.of([])

    def itl_tail(self, stall_s: float) -> ItlTail:
        """The longest gap, p99.9 and the share of gaps over ``stall_s`` (``ItlTail``)."""
        return ItlTail.of(*self._gaps(), stall_s)

    def finished(self, i: int, preemptions: int, cached: int) -> None:
        """One instance is done with request ``i`` (a prefill instance hands it on)."""
        self.preempt[i] += preemptions
        self.cached[i] = max(self.cached[i], cached)

    def request_metrics(self) -> RequestTable:
        """Per-request latencies, in arrival order."""
        a = np.asarray(self.arrival, dtype=float)
        cols = self.columns()
        reasons = [""] * len(self.ids)
        for i, reason in self.rejected.items():
            reasons[i] = reason
        return RequestTable(
            (
                self.ids,
                self.arrival,
                self.prompt_len,
                self.num_out,
                (cols["first"] - a).tolist(),
                cols["tpot"].tolist(),
                (cols["finish"] - a).tolist(),
                (cols["sched"] - a).tolist(),
                self.preempt,
                self.cached,
                reasons,
            )
        )

    def columns(self) -> dict[str, np.ndarray]:
        """First scheduled, first token, finish (absolute seconds, NaN if never) and TPOT."""
        first = np.array(self.first_tok, dtype=float)
        last = np.array(self.last_tok, dtype=float)
        n = np.asarray(self.num_out, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(n > 1, (last - first) / (n - 1), np.nan)
        return {
            "first": first,
            "tpot": tpot,
            "finish": np.array(self.finish, dtype=float),
            "sched": np.array(self.first_sched, dtype=float),
        }
