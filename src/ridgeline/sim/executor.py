"""The simulator's executor: a step's time from the analytic cost model, any catalog accelerator.

Every operator's FLOPs and bytes in ``analytic.ops.op_terms`` are affine in a few sums over the
batch (the step's linear model)::

    x = [1, seqs, new tokens, keys, attended_w..., cached_w...]      (one pair per window size)
    flops_op = F_op · x        bytes_op = M_op · x        rows_op = G_op · x   (GEMM rows)
    step_s   = Σ_op max(flops_op · pad(rows_op) / (peak·eff_c), bytes_op / (bw·eff_b))
               + layers · layer_latency + step_latency + transfers

so ``F`` and ``M`` are computed once per (model, accelerator) by evaluating ``op_terms`` on unit
aggregates, and a step costs two small matrix-vector products — the same numbers as
``analytic.step_cost`` (a test checks it), in microseconds. A MoE model is affine once two more
aggregates join x, both functions of the step's tokens T alone (``analytic.ops.routed_uniformly``):
the distinct experts hit, E·(1 − (1 − k/E)^T), which the experts' weight bytes scale with, and
the rows of each expert GEMM, T·k / distinct, which its tile padding reads; a decode run at a
fixed batch keeps both constant, so its closed forms hold for MoE as for dense models.

The executor also plays the machine's outputs: the token it "samples" for a request comes from
that request's plan (the workload decides the outputs, so multi-turn prompts can contain them),
and speculative drafts are accepted with the request's rate from a seeded generator.

The ``Pricing`` (``analytic.pricing``) says how steps are priced: in calibrated mode the rates, tile
padding ``pad`` and latencies are the accelerator's calibration terms (``analytic.calibrated``); in
ideal mode the roofline's. ``step_cost_model`` builds the one that prices a pricing's deployment
(one chip here, many in ``sim.deployment_cost``).

The serving engine adds its host work (``HostCost``, from ``specs.engines``): a fixed time per
step and per scheduled sequence, and a time per layer for a step that does not run under a full
CUDA graph (one with a prompt chunk, or a decode batch beyond the largest captured one)::

    step_s += host.step_s + seqs · host.sequence_s + [not graphed] · layers · host.eager_layer_s

(the engine's own kernel terms are in the pricing's calibration: ``sim.engines``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

import numpy as np

from ridgeline.analytic import op_terms
from ridgeline.analytic.calibrated import (
    OpKind,
    compute_term,
    fixed_step_seconds,
    gemm_stretch,
    kernel_counts,
    kind_of,
)
from ridgeline.analytic.ops import OpClass, routed_uniformly
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.serving.executor import ScheduledBatch, StepResult
from ridgeline.serving.spec_decode import draw_accepted
from ridgeline.sim.lines import (
    AffineMaxima,
    Horizon,
    Pieces,
    affine_maxima,
    decode_segment_ends,
    decode_segments_s,
    grouped_x,
    sum_of_maxima,
)
from ridgeline.sim.step_sums import StepSums, attended_decode, step_sums
from ridgeline.specs import ModelSpec
from ridgeline.specs.engines import HostWork


@dataclass(frozen=True, slots=True)
class HostCost:
    """The serving engine's host work (``specs.engines.HostWork``) and the largest decode batch
    its CUDA graphs cover (0: none; every step then pays ``eager_layer_s`` per layer)."""

    work: HostWork = HostWork()
    graph_max_batch: int = 0

    def graphed(self, decode: bool, seqs: float) -> bool:
        """Whether a step runs under a full CUDA graph: a decode batch of at most the largest
        captured size (vLLM ``cudagraph_mode`` FULL_AND_PIECEWISE)."""
        return decode and seqs <= self.graph_max_batch


@dataclass(frozen=True, slots=True)
class RequestPlan:
    """What the simulated machine knows of a request: prompt length, the outputs it will
    sample, and its draft acceptance rate (speculative decoding)."""

    prompt_len: int
    output: Sequence[int]
    spec_acceptance: float | None = None


class StepCostModel:
    """Step time of any mixed batch of one model on one chip, precomputed.

    Args:
        model: the model.
        pricing: mode, calibration terms, the chip (its device level holds weights and KV) and
            the data types (``analytic.pricing``).
        host: the serving engine's host work (module docstring; default: none).
    """

    def __init__(self, model: ModelSpec, pricing: Pricing, host: HostCost | None = None) -> None:
        self.model = model
        self.pricing = pricing
        self.dtypes = pricing.dtypes
        self.mode = pricing.mode
        self.calibration = pricing.calibration
        acc = pricing.accelerator
        cal = self.calibration
        self.acc = acc
        self.peak = acc.peak(self.dtypes.compute)  # the datasheet's; efficiencies scale below
        self.bw = acc.device_bandwidth_bytes_per_s
        self._kinds: dict[bool, tuple[OpKind, ...]] = {}
        self._last_kinds: tuple[OpKind, ...] = ()
        self.tile_rows = cal.gemm_tile_rows
        self.host = host or HostCost()
        work = self.host.work
        self.kernels = kernel_counts(model, self.dtypes)
        fixed = fixed_step_seconds(model.num_layers, cal, kernels=self.kernels)
        self.fixed_s = float(fixed) + work.step_s
        self.seq_s = cal.sequence_latency_s + work.sequence_s
        self.eager_s = model.num_layers * work.eager_layer_s
        self.windows: tuple[int | None, ...] = tuple(
            sorted({layer.window for layer in model.layers}, key=lambda w: -1 if w is None else w)
        )
        self.moe = model.moe if model.is_moe else None
        self._raw = {d: self._read_coefficients(d) for d in (True, False)}
        self._coef = {d: self._calibrated(r[0], r[1], r[2], r[3], d) for d, r in self._raw.items()}
        self._run = self._decode_run_coefficients() if self.windows == (None,) else None
        self._steps_coef = self._decode_steps_coefficients() if self._run is not None else None
        self._pieces: dict[int, Pieces] = {}
        self._grouped: bool | None = None  # offers_grouped_forms(), once known
        # without tile padding a step's Σ_op max(compute, memory) in a few multiply-adds
        self._sums: dict[bool, AffineMaxima] = (
            {d: affine_maxima(c[0], c[1]) for d, c in self._coef.items()}
            if self.tile_rows == 1
            else {}
        )

    def _shape(self, x: Sequence[float], decode: bool) -> StepSums:
        nw = len(self.windows)
        moe = x[4 + 2 * nw :] if self.moe is not None else (0.0, 0.0)
        return StepSums(
            num_seqs=x[1],
            num_tokens=x[2],
            decode=decode,
            attended_by_window=dict(zip(self.windows, x[4 : 4 + nw], strict=True)),
            cached_by_window=dict(zip(self.windows, x[4 + nw : 4 + 2 * nw], strict=True)),
            num_keys=x[3],
            experts_hit=moe[0],
            expert_rows=moe[1],
        )

    @property
    def num_columns(self) -> int:
        """Length of the linear model's x: 1, seqs, tokens, keys, a pair per window, and the
        MoE pair (experts hit, rows per expert GEMM)."""
        return 4 + 2 * len(self.windows) + (2 if self.moe is not None else 0)

    def moe_columns(self, tokens: float) -> tuple[float, ...]:
        """The MoE aggregates of a step of ``tokens`` tokens (none for a dense model)."""
        if self.moe is None:
            return ()
        distinct, rows = routed_uniformly(self.moe.num_experts, self.moe.top_k, tokens)
        return float(distinct), float(rows)

    def _terms(self, shape: object) -> tuple[np.ndarray, ...]:
        """Per-op ideal compute seconds (each op at its own format's peak), bytes other than KV,
        KV bytes and GEMM rows of ``shape``; ``op_kinds`` then holds the ops' kinds."""
        ops = op_terms(self.model, shape, self.dtypes)  # type: ignore[arg-type]
        kv = np.array([float(o.kv_read_bytes + o.kv_write_bytes) for o in ops])
        nbytes = np.array([float(o.bytes_read + o.bytes_written) for o in ops]) - kv
        rows = np.array([float(o.gemm_rows) for o in ops])
        kinds = tuple(kind_of(o) for o in ops)
        return self._ideal_compute_s([float(o.flops) for o in ops], kinds), nbytes, kv, rows

    def _ideal_compute_s(self, flops: Sequence[float], kinds: tuple[OpKind, ...]) -> np.ndarray:
        """FLOPs over each op's peak, remembering the kinds (the op lists of a decode and of a
        mixed step may differ: MLA's two forms)."""
        self._last_kinds = kinds
        peaks = np.array([self.acc.peak(k.compute_dtype) for k in kinds])
        return np.asarray(flops, dtype=float) / peaks

    def op_kinds(self, decode: bool) -> tuple[OpKind, ...]:
        """The kinds of the ops of a decode (or a mixed) step, in the order of ``_terms``."""
        kinds = self._kinds.get(decode)
        if kinds is None:
            self._terms(self._shape([1.0] * self.num_columns, decode))
            kinds = self._kinds[decode] = self._last_kinds
        return kinds

    def compute_efficiencies(self, decode: bool) -> np.ndarray:
        """Each op's compute efficiency under this model's calibration (``compute_term``)."""
        cal = self.calibration
        return np.array([cal.value(compute_term(k)) for k in self.op_kinds(decode)])

    def _read_coefficients(self, decode: bool) -> tuple[np.ndarray, ...]:
        """(ops × d) matrices, per unit of each aggregate (column 0 constant), of the ideal
        compute seconds, other-byte seconds, KV-byte seconds, and of GEMM rows."""
        d = self.num_columns
        base = [1.0] + [0.0] * (d - 1)
        zero = self._terms(self._shape(base, decode))
        cols: list[list[np.ndarray]] = [[t] for t in zero]
        for j in range(1, d):
            x = list(base)
            x[j] = 1.0
            for col, t, t0 in zip(cols, self._terms(self._shape(x, decode)), zero, strict=True):
                col.append(t - t0)
        f, m, k, g = (np.stack(c, axis=1) for c in cols)
        return f, m / self.bw, k / self.bw, g

    def _calibrated(
        self, f: np.ndarray, m: np.ndarray, k: np.ndarray, g: np.ndarray, decode: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Compute and memory seconds at the calibrated rates (``analytic.calibrated``: each op
        at its kind's compute efficiency, the MoE experts' weights at theirs; decode KV reads
        that do not hide under compute, ``kv_overlap`` < 1, add to it)."""
        cal = self.calibration
        kv = k / cal.kv_bandwidth_efficiency
        mem = m / self._bandwidth_efficiencies(decode)[:, None] + kv
        compute = f / self.compute_efficiencies(decode)[:, None] + (1.0 - cal.kv_overlap) * kv
        serial = 1.0 - cal.overlap
        if serial:
            # max(c + s·m, m + s·c) = max(c, m) + s·min(c, m) (``analytic.calibrated``), in a
            # form that stays linear in the aggregates, so every closed form below holds
            compute, mem = compute + serial * mem, mem + serial * compute
        return compute, mem, g

    def _bandwidth_efficiencies(self, decode: bool) -> np.ndarray:
        """Each op's weight-stream efficiency: the family's, but the MoE experts' weights
        stream at the lower of it and ``moe_bandwidth_efficiency`` (``specs.calibration``)."""
        cal = self.calibration
        moe = np.array([k.op_class is OpClass.EXPERTS for k in self.op_kinds(decode)])
        be = cal.bandwidth_efficiency
        return np.where(moe, min(be, cal.moe_bandwidth_efficiency), be)

    def _pad(self, rows: np.ndarray, decode: bool) -> np.ndarray | float:
        """What tile padding multiplies each op's calibrated FLOP seconds by (1 everywhere on an
        ideal machine): ``analytic.calibrated.gemm_stretch`` at each op's own efficiency."""
        if self.tile_rows == 1:
            return 1.0
        eff = self.compute_efficiencies(decode)
        return gemm_stretch(rows, self.tile_rows, eff[:, None] if np.ndim(rows) == 2 else eff)

    def aggregates(self, new: Sequence[int], prior: Sequence[int]) -> list[float]:
        """The linear model's x for sequences adding ``new`` tokens on ``prior`` cached ones
        (``sim.step_sums``), and the MoE pair."""
        x = step_sums(self.windows, new, prior)
        return [*x, *self.moe_columns(x[2])]

    def step_time_s(self, new: Sequence[int], prior: Sequence[int]) -> float:
        """Time of one step whose sequences add ``new`` tokens on ``prior`` cached ones."""
        decode = all(n == 1 for n in new)
        fixed = self.fixed(decode, len(new))
        fc, bc, gc = self._coef[decode]
        x = np.asarray(self.aggregates(new, prior))
        compute = (fc @ x) * self._pad(gc @ x, decode)
        return float(np.maximum(compute, bc @ x).sum()) + fixed

    def fixed(self, decode: bool, seqs: float) -> float:
        """A step's fixed time: per step, per sequence, and the eager layers of a step no full
        CUDA graph covers (``HostCost``)."""
        eager = 0.0 if self.host.graphed(decode, seqs) else self.eager_s
        return self.fixed_s + seqs * self.seq_s + eager

    def decode_run_s(self, prior: Sequence[int], k: int) -> np.ndarray:
        """Times of ``k`` consecutive decode steps of the same sequences (closed form: each
        step every sequence adds one token, so the sums grow by the batch size per step)."""
        if self._run is not None:
            return self._linear_run(float(len(prior)), float(sum(prior)), np.arange(k, dtype=float))
        fc, bc, _ = self._coef[True]
        x = self.decode_run_aggregates(prior, k)
        fixed = self.fixed(True, len(prior))
        return np.maximum((fc @ x) * self._pad_of(prior, k), bc @ x).sum(axis=0) + fixed

    def grouped_step_s(
        self, batch: int, total: int, new: Sequence[int], prior: Sequence[int]
    ) -> float | None:
        """``step_time_s`` of a step where ``batch`` decoding sequences holding ``total`` cached
        tokens take one token each, beside sequences adding ``new`` tokens on ``prior``: the
        decoders' aggregates are [0, B, B, S+B, S+B, S] without summing them one by one (the
        same integers, so the same time). None when there is no such closed form (sliding
        windows, or a subclass that prices steps its own way)."""
        if not self.offers_grouped_forms():
            return None
        # the aggregates of ``aggregates`` with one full-attention window (no sliding windows
        # here), summed in compiled code where ``sim.native`` built it
        x, decode = grouped_x(batch, total, new, prior)
        if self.moe is not None:
            x = (*x, *self.moe_columns(x[2]))  # type: ignore[assignment]
        sums = self._sums.get(decode)
        if sums is not None:
            return sums.at(x) + self.fixed(decode, x[1])
        fc, bc, gc = self._coef[decode]
        v = np.array(x)
        compute = (fc @ v) * self._pad(gc @ v, decode)
        return float(np.maximum(compute, bc @ v).sum()) + self.fixed(decode, x[1])

    def decode_steps_s(self, batch: Sequence[int], total: Sequence[int]) -> list[float] | None:
        """Times of consecutive decode steps, step j of ``batch[j]`` sequences holding
        ``total[j]`` cached tokens (``decode_segments_s`` with one step per segment)."""
        return self.decode_segments_s([(b, s, 1) for b, s in zip(batch, total, strict=True)])

    def decode_segments_s(self, segments: Sequence[tuple[int, int, int]]) -> list[float] | None:
        """Times of consecutive decode steps (a decode run whose members finish along the
        way), given as segments (B, S, k): k steps of B sequences holding S, S + B, ...,
        S + (k − 1)·B cached tokens; the columns x = [1, B, B, S+B, S+B, S] of
        ``step_time_s``. None when there is no such closed form (see ``grouped_step_s``)."""
        if not self.offers_grouped_forms():
            return None
        return decode_segments_s(
            segments, self._pieces, self._decode_pieces, self.fixed_s, self.seq_s
        )

    def decode_segment_ends(
        self, segments: Sequence[tuple[int, int, int]], t: float, horizon: Horizon
    ) -> tuple[list[float], float] | None:
        """The ends of ``decode_segments_s``'s steps from ``t`` (each added to the previous
        end, as stepping adds them) through the one where ``horizon`` stops, and the time of
        the last of them; None without the closed form. The fast mode's stretches."""
        if type(self).decode_segments_s is StepCostModel.decode_segments_s:
            if not self.offers_grouped_forms():
                return None
            return decode_segment_ends(
                segments, self._pieces, self._decode_pieces, self.fixed_s, self.seq_s, t, horizon
            )
        times = self.decode_segments_s(segments)  # a subclass's own (links added, say)
        if times is None:
            return None
        ends = list(accumulate(times, initial=t))[1:]
        m = min(len(ends), horizon.steps([t, *ends]))
        return ends[:m], times[m - 1]

    def _decode_pieces(self, batch: int) -> Pieces:
        """Σ_op max(compute, memory) of a decode step of ``batch`` sequences as a piecewise
        linear function of their cached tokens S (``sim.lines``), cached per batch size."""
        pieces = self._pieces.get(batch)
        if pieces is None:
            assert self._steps_coef is not None
            stacked, gc = self._steps_coef
            ops = len(gc)
            a = stacked[:, 0] + stacked[:, 1] * batch  # (2·ops,): at S = 0
            c = stacked[:, 2].copy()  # per cached token
            rows = gc[:, 0] + gc[:, 1] * batch
            if self.moe is not None:  # experts hit and rows per expert: constants of this B
                fc, bc, gm = self._coef[True]
                e, r = self.moe_columns(batch)
                ie = self.num_columns - 2
                a = a + e * np.concatenate([fc[:, ie], bc[:, ie]])
                rows = rows + r * gm[:, ie + 1]
            if self.tile_rows > 1:  # a decode GEMM's rows are fixed by B, whatever S is
                pad = self._pad(rows, True)
                a[:ops], c[:ops] = a[:ops] * pad, c[:ops] * pad
            pieces = sum_of_maxima(a[:ops], c[:ops], a[ops:], c[ops:])
            if not self.host.graphed(True, batch):  # the eager layers: a constant of this B
                pieces = _shifted(pieces, self.eager_s)
            self._pieces[batch] = pieces
        return pieces

    def _decode_steps_coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """The decode columns [1, B, B, S+B, S+B, S] as a map of y = [1, B, S]: the compute
        coefficients over the memory ones (2·ops, 3), and the GEMM rows' (ops, 3)."""
        fc, bc, gc = (c[:, :6] for c in self._coef[True])  # the MoE pair: ``_decode_pieces``
        to_x = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 1, 1], [0, 1, 1], [0, 0, 1]])
        return np.vstack([fc @ to_x, bc @ to_x]), gc @ to_x

    def offers_grouped_forms(self) -> bool:
        """Whether the grouped closed forms apply: an affine model without sliding windows,
        whose ``grouped_step_s`` and ``decode_segments_s`` were written with (or after) its
        ``step_time_s`` and ``decode_run_s`` (a subclass that reprices or records steps gets
        no closed form it did not write). Decided once: the class and coefficients are fixed."""
        if self._grouped is None:
            self._grouped = self._grouped_forms_apply()
        return self._grouped

    def _grouped_forms_apply(self) -> bool:
        mro = type(self).__mro__

        def owner(name: str) -> int:  # how far up the class hierarchy ``name`` is defined
            return next(k for k, c in enumerate(mro) if name in c.__dict__)

        pricing = min(owner("step_time_s"), owner("decode_run_s"))
        return (
            self._steps_coef is not None
            # a decode GEMM's rows must not grow with S: its padding is fixed per batch size
            and (self.tile_rows == 1 or not np.any(self._steps_coef[1][:, 2]))
            # (decode_steps_s goes through decode_segments_s)
            and max(owner("grouped_step_s"), owner("decode_segments_s")) <= pricing
        )

    def decode_run_aggregates(self, prior: Sequence[int], k: int) -> np.ndarray:
        """The linear model's x of ``k`` consecutive decode steps, one column each: (d, k)."""
        j = np.arange(k, dtype=float)
        p = np.asarray(prior, dtype=float)
        batch, total = float(len(p)), float(p.sum())
        rows = [np.ones(k), np.full(k, batch), np.full(k, batch), total + batch * (j + 1)]
        ctx = p[:, None] + j[None, :]  # (B, k) cached tokens per sequence per step
        att = [attended_decode(ctx, w) for w in self.windows]
        cac = [(ctx if w is None else np.minimum(ctx, w)).sum(axis=0) for w in self.windows]
        moe = [np.full(k, v) for v in self.moe_columns(batch)]
        return np.stack(rows + att + cac + moe)

    def ideal_op_seconds(self, x: np.ndarray, decode: bool) -> tuple[np.ndarray, ...]:
        """Per-op ideal compute seconds (before tile padding), other-byte seconds and KV-byte
        seconds of the steps whose aggregates are the columns of ``x`` (d, k): three (ops, k)
        arrays (affine models)."""
        f, m, k, _ = self._raw[decode]
        return f @ x, m @ x, k @ x

    def gemm_rows(self, x: np.ndarray, decode: bool) -> np.ndarray:
        """Per-op GEMM rows of the steps whose aggregates are the columns of ``x``: (ops, k)."""
        return self._coef[decode][2] @ x

    def _pad_of(self, prior: Sequence[int], k: int) -> np.ndarray | float:
        if self.tile_rows == 1:
            return 1.0
        x = self.decode_run_aggregates(prior, 1)
        return np.asarray(self._pad(self.gemm_rows(x, True), True))

    def _decode_run_coefficients(self) -> tuple[np.ndarray, ...]:
        """Without sliding windows a decode step j of B sequences holding S cached tokens has
        x = [1, B, B, S + B(j+1), S + B(j+1), S + Bj (, E_B, R_B)]: each operator's FLOP and
        byte times are c0 + B·cB + (S+B)·cK + S·cS + j·B·cJ (+ E_B·cE, a MoE model's experts
        hit at B tokens). Returns (c0, cB, cK, cS, cJ, cE), each (2, ops)."""
        fc, bc, _ = self._coef[True]
        both = np.stack([fc, bc])  # (2, ops, d): columns 1, seqs, tokens, keys, attended, cached
        c0, cb = both[..., 0], both[..., 1] + both[..., 2]
        ck, cs = both[..., 3] + both[..., 4], both[..., 5]
        ce = both[..., 6] if self.moe is not None else np.zeros_like(c0)
        return c0, cb, ck, cs, ck + cs, ce

    def _linear_run(self, batch: float, total: float, j: np.ndarray) -> np.ndarray:
        assert self._run is not None
        c0, cb, ck, cs, cj, ce = self._run
        moe = self.moe_columns(batch)
        base = c0 + batch * cb + (total + batch) * ck + total * cs  # (2, ops) at j = 0
        if moe:
            base = base + moe[0] * ce
        per_op = base[..., None] + (batch * cj)[..., None] * j  # (2, ops, k)
        if self.tile_rows > 1:
            # a decode run's GEMMs keep their rows (seqs = tokens = batch) at every step
            gc = self._coef[True][2]
            rows = gc[:, 0] + batch * (gc[:, 1] + gc[:, 2])
            if moe:
                rows = rows + moe[1] * gc[:, 7]
            per_op[0] *= np.asarray(self._pad(rows, True))[:, None]
        return per_op.max(axis=0).sum(axis=0) + self.fixed(True, batch)


def _shifted(pieces: Pieces, extra: float) -> Pieces:
    """``pieces`` plus a constant."""
    return Pieces(pieces.kinks, tuple(i + extra for i in pieces.intercepts), pieces.slopes)


def step_cost_model(
    model: ModelSpec, pricing: Pricing, host: HostCost | None = None
) -> StepCostModel:
    """The cost model of ``pricing``'s deployment: one chip's, or a deployment's of many
    (``sim.deployment_cost``: the tensor-parallel split and its links), with the engine's
    ``host`` work."""
    if pricing.deployment.chips == 1:
        return StepCostModel(model, pricing, host)
    from ridgeline.sim.deployment_cost import DeploymentStepCost  # only multi-chip runs load it

    return DeploymentStepCost(model, pricing, host)


def one_chip(pricing: Pricing, what: str) -> None:
    """Raise ``ConfigError`` unless ``pricing`` is one chip (``what`` prices only one)."""
    if pricing.deployment.chips != 1:
        raise ConfigError(
            f"field deployment: {what} runs on one chip, not {pricing.deployment.label}"
        )


class StepCost(Protocol):
    """What the simulator asks of a cost model: ``StepCostModel``, or a compiled-shape one
    (``sim.compiled``)."""

    def step_time_s(self, new: Sequence[int], prior: Sequence[int]) -> float: ...

    def decode_run_s(self, prior: Sequence[int], k: int) -> np.ndarray: ...


class CostModelExecutor:
    """An ``Executor`` that prices each step with a ``StepCostModel`` and plays planned outputs.

    Args:
        cost: the target model's step cost.
        plans: request id → plan (prompt length, outputs, acceptance rate); shared with the
            simulator, which adds a plan before submitting each request.
        rng: draws draft acceptances (speculative decoding).
        spec_acceptance: default acceptance rate α.
        draft: the draft model's step cost (None: drafts cost nothing).
    """

    def __init__(
        self,
        cost: StepCost,
        plans: Mapping[str, RequestPlan],
        rng: random.Random | None = None,
        spec_acceptance: float = 0.7,
        draft: StepCostModel | None = None,
    ) -> None:
        self.cost = cost
        self.plans = plans
        self.rng = rng or random.Random(0)
        self.spec_acceptance = spec_acceptance
        self.draft = draft

    def execute(self, batch: ScheduledBatch) -> StepResult:
        """Price the step (plus drafts and tier transfers) and play each sampler's outputs."""
        time_s = self.step_time_s(batch) if batch.requests else 0.0
        sampled = {}
        drafted = [r for r in batch.requests if r.num_draft_tokens]
        for r in batch.requests:
            if r.sample:
                sampled[r.request_id] = self._sample(
                    r.request_id, r.context_len - r.num_draft_tokens, r.num_draft_tokens
                )
        if drafted and self.draft is not None:
            k = max(r.num_draft_tokens for r in drafted)
            ctx = [r.start_position for r in drafted]
            time_s += float(self.draft.decode_run_s(ctx, k).sum())
        return StepResult(sampled=sampled, time_s=time_s + batch.transfer_s)

    def step_time_s(self, batch: ScheduledBatch) -> float:
        """The target model's time for the batch (a hook: compiled shapes price it otherwise)."""
        new = [len(r.token_ids) for r in batch.requests]
        prior = [r.start_position for r in batch.requests]
        return self.cost.step_time_s(new, prior)

    def _sample(self, request_id: str, num_tokens: int, num_drafts: int) -> tuple[int, ...]:
        plan = self.plans[request_id]
        start = num_tokens - plan.prompt_len
        n = 1
        if num_drafts:
            alpha = self.spec_acceptance if plan.spec_acceptance is None else plan.spec_acceptance
            n += draw_accepted(self.rng, alpha, num_drafts)
        return tuple(plan.output[start : start + n])

    def sample_run(self, request_id: str, num_tokens: int, k: int) -> Sequence[int]:
        """The next ``k`` outputs of a request holding ``num_tokens`` tokens (decode runs)."""
        plan = self.plans[request_id]
        start = num_tokens - plan.prompt_len
        return plan.output[start : start + k]
