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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ridgeline.analytic.calibrated import fixed_step_seconds, gemm_padding
from ridgeline.analytic.ops import MixedShape
from ridgeline.fidelity.dataset import Metric
from ridgeline.sim.replicas import DeploymentStepCost
from ridgeline.specs.calibration import Calibration


@dataclass(frozen=True, slots=True)
class Trace:
    """A recorded run: per step (columns) and per op (rows) the ideal compute seconds, the
    ideal memory seconds of KV and of everything else, the GEMM padding of the accelerator's
    matrix unit; per step the sequences and the link terms (hop_s, collectives, transfer_s,
    crossings); per request its first and last token step.

    ``scale`` multiplies system throughput (data-parallel instances recorded as one).
    """

    compute_s: np.ndarray  # (ops, steps)
    memory_s: np.ndarray  # (ops, steps), weights and activations
    kv_s: np.ndarray  # (ops, steps), the KV cache
    pad: np.ndarray  # (ops, steps)
    seqs: np.ndarray  # (steps,) sequences in the step
    links: np.ndarray  # (4, steps)
    layers: int
    first: np.ndarray  # (requests,) 0-based step index of the first token
    last: np.ndarray  # (requests,) 0-based step index of the last token
    outputs: np.ndarray  # (requests,) output tokens
    admitted: np.ndarray  # (requests,) steps before admission; -1: TTFT counts from t = 0
    scale: float = 1.0

    @property
    def num_steps(self) -> int:
        return int(self.compute_s.shape[1])

    def step_seconds(self, cal: Calibration) -> np.ndarray:
        """Every step's time under ``cal`` (``analytic.calibrated``'s formulas)."""
        compute = self.compute_s * self.pad if cal.gemm_tile_rows > 1 else self.compute_s
        memory = self.memory_s / cal.bandwidth_efficiency + self.kv_s / cal.kv_bandwidth_efficiency
        ops = np.maximum(compute / cal.compute_efficiency, memory)
        hop, coll, transfer, cross = self.links
        link = hop + coll * cal.collective_latency_s + transfer / cal.link_efficiency
        link = link + cross * cal.stage_latency_s
        fixed = fixed_step_seconds(self.layers, cal, self.seqs)
        return ops.sum(axis=0) + link + fixed

    def metrics(self, cal: Calibration) -> dict[Metric, float]:
        """Throughput, per-user speed, mean TTFT and mean TPOT of the run under ``cal``."""
        ends = np.cumsum(self.step_seconds(cal))
        first, last = ends[self.first], ends[self.last]
        starts = np.concatenate(([0.0], ends))[np.maximum(self.admitted, 0)]
        ttft = first - np.where(self.admitted >= 0, starts, 0.0)
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

    def step_time_s(self, new: Sequence[int], prior: Sequence[int]) -> float:
        decode = all(n == 1 for n in new)
        if self.affine:
            x = np.asarray(self.aggregates(new, prior))[:, None]
            compute, memory, kv = self.ideal_op_seconds(x, decode)
            rows = self.gemm_rows(x, decode)
        else:
            shape = MixedShape(np.asarray(new, dtype=float), np.asarray(prior, dtype=float))
            f, m, k, r = self._terms(shape)
            compute, memory, kv = f[:, None] / self.peak, m[:, None] / self.bw, k[:, None] / self.bw
            rows = r[:, None]
        self._add((compute, memory, kv), rows, len(new), float(sum(new)))
        return 1.0

    def decode_run_s(self, prior: Sequence[int], k: int) -> np.ndarray:
        if not self.affine:
            for j in range(k):
                self.step_time_s([1] * len(prior), [p + j for p in prior])
            return np.ones(k)
        x = self.decode_run_aggregates(prior, k)
        rows = self.gemm_rows(x, True)
        self._add(self.ideal_op_seconds(x, decode=True), rows, len(prior), float(len(prior)))
        return np.ones(k)

    def _add(
        self, seconds: tuple[np.ndarray, ...], rows: np.ndarray, seqs: int, tokens: float
    ) -> None:
        k = rows.shape[1]
        t = self.link_terms(seqs, tokens)
        pad = np.asarray(gemm_padding(rows, self.tile)) * np.ones_like(rows)
        link = np.repeat(
            np.array([[t.hop_s], [t.collectives], [t.transfer_s], [t.crossings]]), k, 1
        )
        self._parts.append((*seconds, pad, np.full(k, float(seqs)), link))

    def trace(
        self,
        first: np.ndarray,
        last: np.ndarray,
        outputs: np.ndarray,
        admitted: np.ndarray,
        scale: float,
    ) -> Trace:
        """The recorded steps and the requests' token steps, as a ``Trace``."""
        compute, memory, kv, pad, seqs, links = (
            np.concatenate(parts, axis=-1) for parts in zip(*self._parts, strict=True)
        )
        return Trace(
            compute_s=compute,
            memory_s=memory,
            kv_s=kv,
            pad=pad,
            seqs=seqs,
            links=links,
            layers=self.model.num_layers,
            first=first,
            last=last,
            outputs=outputs,
            admitted=admitted,
            scale=scale,
        )
