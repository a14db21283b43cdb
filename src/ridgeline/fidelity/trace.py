"""Re-timing a simulated run under any calibration, without simulating it again.

When every request is queued at t = 0 (offline throughput, a fixed batch), the scheduler's
decisions depend on token counts and KV blocks, never on time: the sequence of steps is the same
whatever each step costs. So one simulation, with every step priced at one second, records each
step's per-operator FLOP and byte seconds at the ideal rates, its GEMM padding and its link terms,
and each request's first and last token step. A calibration then re-times the run in a few numpy
operations (``Trace.metrics``): the fit (``fidelity.fit``) evaluates thousands of calibrations
this way. For such runs ``Trace.metrics(cal)`` equals ``predict`` in that calibration (a test
checks it); runs with arrivals over time must be simulated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ridgeline.analytic.calibrated import OpKind, compute_term, fixed_step_seconds, gemm_padding
from ridgeline.fidelity.dataset import Metric
from ridgeline.sim.replicas import DeploymentStepCost
from ridgeline.specs.calibration import Calibration, Term

TERMS = tuple(Term)  # an op's compute efficiency is recorded as its term's index here
_PAD_TERM = TERMS.index(Term.COMPUTE_EFFICIENCY)  # of rows that pad a shorter op list


def term_indices(kinds: Sequence[OpKind]) -> np.ndarray:
    """Each op's compute-efficiency term as an index into ``TERMS``."""
    return np.array([TERMS.index(compute_term(k)) for k in kinds], dtype=np.int8)


def efficiencies(cal: Calibration) -> np.ndarray:
    """Every term's value under ``cal``, indexed as ``TERMS`` (read with a trace's indices)."""
    return np.array([cal.value(t) for t in TERMS])


@dataclass(frozen=True, slots=True)
class Trace:
    """A recorded run: per step (columns) and per op (rows) the ideal compute seconds, the
    ideal memory seconds of KV and of everything else, the GEMM padding of the accelerator's
    matrix unit; per step the sequences and the link terms (hop_s, collectives, transfer_s,
    crossings); per request its first and last token step.

    ``scale`` multiplies system throughput (data-parallel instances recorded as one).
    """

    compute_s: np.ndarray  # (ops, steps), at each op's ideal peak
    memory_s: np.ndarray  # (ops, steps), weights and activations
    kv_s: np.ndarray  # (ops, steps), the KV cache
    pad: np.ndarray  # (ops, steps)
    terms: np.ndarray  # (ops, steps), each op's compute-efficiency term (``term_indices``)
    seqs: np.ndarray  # (steps,) sequences in the step
    links: np.ndarray  # (4, steps)
    layers: int
    first: np.ndarray  # (requests,) 0-based step index of the first token
    last: np.ndarray  # (requests,) 0-based step index of the last token
    outputs: np.ndarray  # (requests,) output tokens
    admitted: np.ndarray | None  # (requests,) steps before admission; None: TTFT from t = 0
    scale: float = 1.0
    runs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=int))  # (first, k)
    kernels: np.ndarray = field(default_factory=lambda: np.zeros(4))  # ``KernelCounts`` per step

    @property
    def num_steps(self) -> int:
        return int(self.compute_s.shape[1])

    def step_seconds(self, cal: Calibration) -> np.ndarray:
        """Every step's time under ``cal`` (``analytic.calibrated``'s formulas)."""
        pad = self.pad if cal.gemm_tile_rows > 1 else np.ones_like(self.pad)
        ops = _op_seconds((self.compute_s, self.memory_s, self.kv_s), pad, self.terms, cal)
        hop, coll, transfer, cross = self.links
        link = hop + coll * cal.collective_latency_s + transfer / cal.link_efficiency
        link = link + cross * cal.stage_latency_s
        fixed = fixed_step_seconds(self.layers, cal, self.seqs, self.kernels[:, None])
        return ops.sum(axis=0) + link + fixed

    def metrics(self, cal: Calibration) -> dict[Metric, float]:
        """Throughput, per-user speed, mean TTFT and mean TPOT of the run under ``cal``."""
        ends = np.cumsum(self.step_seconds(cal))
        first, last = ends[self.first], ends[self.last]
        ttft = first
        if self.admitted is not None:  # a client's clock starts at admission
            ttft = first - np.concatenate(([0.0], ends))[self.admitted]
        multi = self.outputs > 1
        tpot = (
            float(np.mean((last - first)[multi] / (self.outputs[multi] - 1)))
            if multi.any()
            else 0.0
        )
        makespan = float(last.max())
        return {
            Metric.OUTPUT_TOKENS_PER_S: self.scale * float(self.outputs.sum()) / makespan,
            Metric.PER_USER_TOKENS_PER_S: 1.0 / tpot if tpot > 0 else float("inf"),
            Metric.TTFT_S: float(np.mean(ttft)),
            Metric.TPOT_S: tpot,
        }


class Recorder(DeploymentStepCost):
    """A deployment's ideal cost model that prices every step at one second and records it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.tile = self.deployment.accelerator.calibration.gemm_tile_rows
        self._parts: list[tuple[np.ndarray, ...]] = []
        self._steps = 0
        self._runs: list[tuple[int, int]] = []  # (first step, steps) of each decode run
        self._link_cols: dict[tuple[int, float], np.ndarray] = {}
        self._term_cols: dict[bool, np.ndarray] = {}  # of a decode (or a mixed) step's ops

    def step_time_s(self, new: Sequence[int], prior: Sequence[int]) -> float:
        decode = all(n == 1 for n in new)
        x = np.asarray(self.aggregates(new, prior))[:, None]
        compute, memory, kv = self.ideal_op_seconds(x, decode)
        rows = self.gemm_rows(x, decode)
        self._add((compute, memory, kv), rows, len(new), float(sum(new)), decode)
        return 1.0

    def decode_run_s(self, prior: Sequence[int], k: int) -> np.ndarray:
        self._runs.append((self._steps, k))
        x = self.decode_run_aggregates(prior, k)
        rows = self.gemm_rows(x, True)
        seconds = self.ideal_op_seconds(x, decode=True)
        self._add(seconds, rows, len(prior), float(len(prior)), True)
        return np.ones(k)

    def _add(
        self,
        seconds: tuple[np.ndarray, ...],
        rows: np.ndarray,
        seqs: int,
        tokens: float,
        decode: bool,
    ) -> None:
        k = rows.shape[1]
        self._steps += k
        link_col = self._link_cols.get((seqs, tokens))
        if link_col is None:  # a run asks for the same few shapes step after step
            t = self.link_terms(seqs, tokens)
            link_col = np.array([[t.hop_s], [t.collectives], [t.transfer_s], [t.crossings]])
            self._link_cols[(seqs, tokens)] = link_col
        pad = np.asarray(gemm_padding(rows, self.tile)) * np.ones_like(rows)
        link = np.repeat(link_col, k, 1)
        index = self._term_cols.get(decode)
        if index is None:
            index = self._term_cols[decode] = term_indices(self.op_kinds(decode))[:, None]
        terms = np.repeat(index, k, 1)
        self._parts.append((*seconds, pad, terms, np.full(k, float(seqs)), link))

    def trace(
        self,
        first: np.ndarray,
        last: np.ndarray,
        outputs: np.ndarray,
        admitted: np.ndarray | None,
        scale: float,
    ) -> Trace:
        """The recorded steps and the requests' token steps, as a ``Trace``."""
        compute, memory, kv, pad, terms, seqs, links = (
            np.concatenate(parts, axis=-1) for parts in zip(*self._parts, strict=True)
        )
        return Trace(
            compute_s=compute,
            memory_s=memory,
            kv_s=kv,
            pad=pad,
            terms=terms,
            seqs=seqs,
            links=links,
            layers=self.model.num_layers,
            first=first,
            last=last,
            outputs=outputs,
            admitted=admitted,
            scale=scale,
            runs=np.array(self._runs, dtype=int).reshape(-1, 2),
            kernels=self.kernels.as_array(),
        )


_Three = tuple[np.ndarray, np.ndarray, np.ndarray]
_Four = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True, slots=True)
class _Steps:
    """Traces asked for per-request metrics, stacked step by step (``Trace.metrics`` at once)."""

    compute_s: np.ndarray  # (ops, steps), before tile padding
    pad: np.ndarray | None  # (ops, steps), tile padding (None: no GEMM padded)
    memory_s: np.ndarray  # (ops, steps)
    kv_s: np.ndarray  # (ops, steps)
    terms: np.ndarray  # (ops, steps)
    seqs: np.ndarray  # (steps,)
    links: np.ndarray  # (4, steps)
    layers: np.ndarray  # (steps,)
    kernels: np.ndarray  # (4, steps) ``KernelCounts`` of each step
    starts: np.ndarray  # (traces,) first global step of each trace
    req_trace: np.ndarray  # (requests,)
    first: np.ndarray  # (requests,) global step of the first token
    last: np.ndarray  # (requests,) global step of the last token
    admit: np.ndarray  # (requests,) global step of admission (where ``queued``)
    queued: np.ndarray  # (requests,) bool: TTFT counts from admission, not the trace's start
    outputs: np.ndarray  # (requests,)
    scale: np.ndarray  # (traces,)
    metrics: tuple[Metric, ...]

    @staticmethod
    def of(traces: Sequence[Trace], metrics: Sequence[Metric]) -> _Steps:
        ops = max(t.compute_s.shape[0] for t in traces)
        steps = np.cumsum([0] + [t.num_steps for t in traces])

        def stack(get: Callable[[Trace], np.ndarray]) -> np.ndarray:
            return np.concatenate([_rows(get(t), ops) for t in traces], axis=1)

        def requests(get: Callable[[Trace], np.ndarray], offset: bool) -> np.ndarray:
            return np.concatenate(
                [get(t) + (steps[i] if offset else 0) for i, t in enumerate(traces)]
            )

        def admitted(t: Trace) -> np.ndarray:
            return np.zeros(len(t.first), dtype=int) if t.admitted is None else t.admitted

        return _Steps(
            compute_s=stack(lambda t: t.compute_s),
            pad=_padding(stack(lambda t: t.pad)),
            memory_s=stack(lambda t: t.memory_s),
            kv_s=stack(lambda t: t.kv_s),
            terms=np.concatenate([_term_rows(t.terms, ops) for t in traces], axis=1),
            seqs=np.concatenate([t.seqs for t in traces]),
            links=np.concatenate([t.links for t in traces], axis=1),
            layers=np.concatenate([np.full(t.num_steps, t.layers) for t in traces]),
            kernels=np.concatenate(
                [np.repeat(t.kernels[:, None], t.num_steps, 1) for t in traces], axis=1
            ),
            starts=steps[:-1],
            req_trace=np.concatenate([np.full(len(t.first), i) for i, t in enumerate(traces)]),
            first=requests(lambda t: t.first, True),
            last=requests(lambda t: t.last, True),
            admit=requests(admitted, True),
            queued=np.concatenate([np.full(len(t.first), t.admitted is not None) for t in traces]),
            outputs=requests(lambda t: t.outputs, False),
            scale=np.array([t.scale for t in traces]),
            metrics=tuple(metrics),
        )

    def values(self, cal: Calibration) -> np.ndarray:
        parts = (self.compute_s, self.memory_s, self.kv_s)
        step = _op_seconds(parts, self.pad, self.terms, cal).sum(axis=0)
        step += _link_and_fixed((self.links, self.layers, self.seqs, self.kernels), cal)
        ends = np.concatenate(([0.0], np.cumsum(step)))
        base = ends[self.starts][self.req_trace]
        first, last = ends[self.first + 1] - base, ends[self.last + 1] - base
        admitted = ends[self.admit] - base
        ttft = first - np.where(self.queued, admitted, 0.0)
        n = len(self.scale)
        multi = self.outputs > 1
        tpot_each = np.where(multi, (last - first) / np.maximum(self.outputs - 1, 1), 0.0)
        tpot = np.bincount(self.req_trace, tpot_each, n) / np.maximum(
            np.bincount(self.req_trace, multi, n), 1
        )
        makespan = np.zeros(n)
        np.maximum.at(makespan, self.req_trace, last)
        table = {
            Metric.OUTPUT_TOKENS_PER_S: self.scale
            * np.bincount(self.req_trace, self.outputs, n)
            / makespan,
            Metric.PER_USER_TOKENS_PER_S: np.where(
                tpot > 0, 1.0 / np.maximum(tpot, 1e-300), np.inf
            ),
            Metric.TTFT_S: np.bincount(self.req_trace, ttft, n) / np.bincount(self.req_trace),
            Metric.TPOT_S: tpot,
        }
        return np.array([table[m][i] for i, m in enumerate(self.metrics)])


@dataclass(frozen=True, slots=True)
class _Totals:
    """Traces asked for throughput only: the steps outside decode runs as they are, and each
    decode run as its first step and its per-step slope, summed in closed form.

    Within a decode run every op's compute and memory seconds are affine in the step j
    (``sim.executor``'s linear model), so Σ_j max(f(j), g(j)) = Σ g + Σ max(f - g, 0), the
    second an arithmetic series over the steps where f > g.
    """

    trace: np.ndarray  # (steps,) trace of each explicit step
    weight: np.ndarray  # (steps,) how many identical explicit steps each column stands for
    parts: _Three  # compute (before tile padding), memory, KV seconds (ops, steps)
    pad: np.ndarray | None  # (ops, steps) tile padding (None: no GEMM padded)
    terms: np.ndarray  # (ops, steps) compute-efficiency terms (``term_indices``)
    step_extra: _Four  # links (4, steps), layers, seqs, kernels (4, steps)
    run_trace: np.ndarray  # (runs,)
    run_first: _Three  # compute, memory, KV seconds at j = 0 (ops, runs)
    run_slope: _Three  # their change per step (ops, runs)
    run_terms: np.ndarray  # (ops, runs)
    run_pad: np.ndarray | None  # (ops, runs) tile padding, the same at every step of a run
    run_len: np.ndarray  # (runs,)
    run_extra: _Four  # links (4, runs), layers, seqs, kernels (4, runs)
    outputs: np.ndarray  # (traces,)
    scale: np.ndarray  # (traces,)

    @staticmethod
    def of(traces: Sequence[Trace]) -> _Totals:
        ops = max(t.compute_s.shape[0] for t in traces)
        pieces = [_compress(t, i, ops) for i, t in enumerate(traces)]

        def cat(j: int, axis: int = -1) -> np.ndarray:
            return np.concatenate([p[j] for p in pieces], axis=axis)

        trace, weight, (c, m, k, pad, terms, links, layers, seqs, kernels) = _distinct_steps(
            cat(0), (cat(1), cat(2), cat(3), cat(4), cat(20), cat(5), cat(6), cat(7), cat(22))
        )
        return _Totals(
            trace=trace,
            weight=weight,
            parts=(c, m, k),
            pad=_padding(pad),
            terms=terms,
            step_extra=(links, layers, seqs, kernels),
            run_trace=cat(8),
            run_first=(cat(9), cat(10), cat(11)),
            run_slope=(cat(12), cat(13), cat(14)),
            run_terms=cat(21),
            run_pad=_padding(cat(15)),
            run_len=cat(16),
            run_extra=(cat(17), cat(18), cat(19), cat(23)),
            outputs=np.array([float(t.outputs.sum()) for t in traces]),
            scale=np.array([t.scale for t in traces]),
        )

    def values(self, cal: Calibration) -> np.ndarray:
        n = len(self.scale)
        step = _op_seconds(self.parts, self.pad, self.terms, cal).sum(axis=0)
        step += _link_and_fixed(self.step_extra, cal)
        total = np.bincount(self.trace, step * self.weight, n)
        k = self.run_len
        eff = efficiencies(cal)[self.run_terms]
        f0 = _scaled(self.run_first, self.run_pad, eff, cal)
        f1 = _scaled(self.run_slope, self.run_pad, eff, cal)
        runs = _sum_max(f0[0], f1[0], f0[1], f1[1], k).sum(axis=0)
        runs += k * _link_and_fixed(self.run_extra, cal)
        total += np.bincount(self.run_trace, runs, n)
        return self.scale * self.outputs / total


def _distinct_steps(
    trace: np.ndarray, arrays: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Explicit steps merged where a trace repeats one exactly (an offline run repeats its
    mixed steps many times): each distinct step once, with how many it stands for."""
    if trace.size == 0:
        return trace, np.zeros(0), arrays
    table = np.vstack(
        [trace[None].astype(float)] + [np.atleast_2d(a).astype(float) for a in arrays]
    )
    _, first, inverse = np.unique(table.T, axis=0, return_index=True, return_inverse=True)
    weight = np.bincount(inverse.ravel(), minlength=first.size).astype(float)
    return trace[first], weight, tuple(a[..., first] for a in arrays)


def _rows(a: np.ndarray, ops: int) -> np.ndarray:
    return np.pad(a, ((0, ops - a.shape[0]), (0, 0)))


def _term_rows(a: np.ndarray, ops: int) -> np.ndarray:
    return np.pad(a, ((0, ops - a.shape[0]), (0, 0)), constant_values=_PAD_TERM)


def _padding(pad: np.ndarray) -> np.ndarray | None:
    """``pad``, or None where no GEMM is padded (every factor at most 1, so max(pad, 1 / eff)
    is 1 / eff whatever the efficiency: the re-timing skips it)."""
    return None if pad.size == 0 or float(pad.max()) <= 1.0 else pad


def _op_seconds(
    parts: _Three, pad: np.ndarray | None, terms: np.ndarray, cal: Calibration
) -> np.ndarray:
    compute, memory = _scaled(parts, pad, efficiencies(cal)[terms], cal)
    return np.maximum(compute, memory)


def _scaled(
    parts: _Three, pad: np.ndarray | None, eff: np.ndarray, cal: Calibration
) -> tuple[np.ndarray, np.ndarray]:
    """(compute, memory) at the calibrated rates (``eff``: each op's compute efficiency): a
    padded GEMM takes the longer of its padded FLOPs at the peak and its FLOPs at the sustained
    rate, and its KV seconds stay out from under compute by ``kv_overlap``
    (``analytic.calibrated``)."""
    c, m, k = parts
    kv = k / cal.kv_bandwidth_efficiency
    compute = c / eff if pad is None else c * np.maximum(pad, 1.0 / eff)
    if cal.kv_overlap != 1.0:
        compute = compute + (1.0 - cal.kv_overlap) * kv
    return compute, m / cal.bandwidth_efficiency + kv


def _link_and_fixed(extra: _Four, cal: Calibration) -> np.ndarray:
    """Link and fixed seconds of steps: ``extra`` = links (4, steps), layers, seqs, kernels."""
    links, layers, seqs, kernels = extra
    hop, coll, transfer, cross = links
    out = hop + coll * cal.collective_latency_s + transfer / cal.link_efficiency
    return out + cross * cal.stage_latency_s + fixed_step_seconds(layers, cal, seqs, kernels)


def _sum_max(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """Σ_{j=0..k-1} max(a + b·j, c + d·j), elementwise (closed form)."""
    sum_g = k * c + d * k * (k - 1) / 2
    p, q = a - c, b - d  # h(j) = p + q·j; add Σ max(h, 0)
    with np.errstate(all="ignore"):
        root = np.where(q != 0, -p / np.where(q != 0, q, 1.0), 0.0)
    lo = np.where(q > 0, np.floor(root) + 1, 0.0)
    hi = np.where(q < 0, np.ceil(root) - 1, k - 1.0)
    flat = q == 0
    lo = np.where(flat, np.where(p > 0, 0.0, k), np.clip(lo, 0, k))
    hi = np.where(flat, k - 1.0, np.clip(hi, -1, k - 1))
    count = np.maximum(hi - lo + 1, 0)
    return sum_g + count * p + q * count * (lo + hi) / 2


def _compress(t: Trace, index: int, ops: int) -> tuple[np.ndarray, ...]:
    """One trace's explicit steps and affine decode runs (a run that is not affine, e.g. with
    a sliding window, stays explicit)."""
    c, m, kv = t.compute_s, t.memory_s, t.kv_s
    affine = [(s, k) for s, k in t.runs if k >= 3 and _is_affine(t, c, s, k)]
    explicit = np.ones(t.num_steps, dtype=bool)
    for s, k in affine:
        explicit[s : s + k] = False
    first = np.array([s for s, _ in affine], dtype=int)
    length = np.array([k for _, k in affine], dtype=float)
    slope = [
        (a[:, first + length.astype(int) - 1] - a[:, first]) / np.maximum(length - 1, 1)
        for a in (c, m, kv)
    ]
    layers = np.full(t.num_steps, float(t.layers))
    return (
        np.full(int(explicit.sum()), index),
        *(_rows(a[:, explicit], ops) for a in (c, m, kv)),
        _rows(t.pad[:, explicit], ops),
        t.links[:, explicit],
        layers[explicit],
        t.seqs[explicit],
        np.full(len(first), index),
        *(_rows(a[:, first], ops) for a in (c, m, kv)),
        *(_rows(s_, ops) for s_ in slope),
        _rows(t.pad[:, first], ops),
        length,
        t.links[:, first],
        layers[first],
        t.seqs[first],
        _term_rows(t.terms[:, explicit], ops),
        _term_rows(t.terms[:, first], ops),
        np.repeat(t.kernels[:, None], int(explicit.sum()), 1),
        np.repeat(t.kernels[:, None], len(first), 1),
    )


def _is_affine(t: Trace, c: np.ndarray, s: int, k: int) -> bool:
    mid = s + k // 2
    for a in (c, t.memory_s, t.kv_s):
        guess = a[:, s] + (a[:, s + k - 1] - a[:, s]) * (k // 2) / (k - 1)
        if not np.allclose(a[:, mid], guess, rtol=1e-9, atol=1e-15):
            return False
    same_pad = np.all(t.pad[:, s : s + k] == t.pad[:, s : s + 1])
    return bool(np.all(t.seqs[s : s + k] == t.seqs[s]) and same_pad)


@dataclass(frozen=True, slots=True)
class TraceSet:
    """Many traces re-timed together under one calibration (the fit's inner loop): those asked
    for throughput in closed form per decode run (``_Totals``), the others step by step."""

    order: np.ndarray  # (traces,) position of each trace's value in the concatenated results
    totals: _Totals | None
    steps: _Steps | None

    @staticmethod
    def of(traces: Sequence[Trace], metrics: Sequence[Metric]) -> TraceSet:
        total = [i for i, m in enumerate(metrics) if m is Metric.OUTPUT_TOKENS_PER_S]
        step = [i for i, m in enumerate(metrics) if m is not Metric.OUTPUT_TOKENS_PER_S]
        order = np.argsort(np.array(total + step))
        return TraceSet(
            order=order,
            totals=_Totals.of([traces[i] for i in total]) if total else None,
            steps=_Steps.of([traces[i] for i in step], [metrics[i] for i in step])
            if step
            else None,
        )

    def values(self, cal: Calibration) -> np.ndarray:
        """Each trace's asked-for metric under ``cal`` (equal to ``Trace.metrics``)."""
        parts = [p.values(cal) for p in (self.totals, self.steps) if p is not None]
        return np.concatenate(parts)[self.order]
