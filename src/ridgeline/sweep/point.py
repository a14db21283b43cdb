"""One point of a sweep: a configuration, the requests of one probe, and what a simulation of
them says (latency percentiles, goodput, throughput).

The seam to the simulator is ``PointSimulator``: given a configuration, the requests of one
probe (arrival times and lengths) and a seed, it returns per-request latencies. Everything about
SLOs, percentiles and objectives happens here, so a simulator knows nothing of sweeps.

    Configuration ──┐
    Requests ───────┼──▶ PointSimulator.simulate ──▶ RequestLatencies ──▶ summarize ──▶ PointResult
    seed ───────────┘                                            Slo ──┘
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from ridgeline.analytic.workload import Dtypes
from ridgeline.errors import ConfigError
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.sweep.workload import Requests, WorkloadSpec


@dataclass(frozen=True, slots=True)
class ChipSplit:
    """How many chips serve one replica of the model and how it is split over them (the sweep's
    axis value; the simulator turns it into an ``analytic.Deployment`` on the accelerator).

    Attributes:
        chips: chips in the deployment (= tensor_parallel × pipeline_parallel).
        tensor_parallel: ways each layer is split (Megatron-style).
        pipeline_parallel: pipeline stages (layers split into groups).
    """

    chips: int
    tensor_parallel: int
    pipeline_parallel: int = 1

    def __post_init__(self) -> None:
        if min(self.chips, self.tensor_parallel, self.pipeline_parallel) < 1:
            raise ConfigError(f"deployment {self}: chips and parallel degrees must be >= 1")
        if self.tensor_parallel * self.pipeline_parallel != self.chips:
            raise ConfigError(
                f"deployment: chips = {self.chips} but tensor_parallel × pipeline_parallel = "
                f"{self.tensor_parallel} × {self.pipeline_parallel}"
            )

    @property
    def label(self) -> str:
        """``tp4pp2``."""
        return f"tp{self.tensor_parallel}pp{self.pipeline_parallel}"


@dataclass(frozen=True, slots=True)
class Policy:
    """A serving policy and its knobs, as the scheduler takes them (vLLM v1 names).

    Attributes:
        name: the user's label for this variant (``vllm-chunked[budget=2048]``).
        scheduler: queue order, ``fcfs`` or ``priority``.
        block_size: tokens per KV block.
        max_num_batched_tokens: token budget of one step.
        max_num_seqs: sequences per step at most.
        long_prefill_token_threshold: largest prefill chunk (chunk size); ``None`` = the budget.
        enable_prefix_caching: reuse KV blocks of shared prefixes.
        num_speculative_tokens: draft tokens per step (speculative k); 0 = off.
    """

    name: str
    scheduler: str = "fcfs"
    block_size: int = 16
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    long_prefill_token_threshold: int | None = None
    enable_prefix_caching: bool = False
    num_speculative_tokens: int = 0


@dataclass(frozen=True, slots=True)
class DataTypes:
    """The formats a configuration serves in (the sweep's ``[[dtypes]]`` axis): weights, the KV
    cache (default: fp8 beside fp8/fp4 weights, else bf16) and the activations matmuls run in
    (default: the weights' format for fp8/fp4/fp16, else bf16; ``analytic.Dtypes.serving``)."""

    weight: DType = DType.BF16
    kv: DType | None = None
    act: DType | None = None

    @property
    def dtypes(self) -> Dtypes:
        d = Dtypes.serving(self.weight, self.kv)
        return d if self.act is None else Dtypes(d.weight, self.act, d.kv)

    @property
    def label(self) -> str:
        return self.dtypes.label


@dataclass(frozen=True, slots=True)
class Configuration:
    """One point of the sweep's grid: everything a capacity search varies except the rate,
    and the pricing mode every probe is simulated in (``analytic.pricing``)."""

    model: str
    accelerator: str
    deployment: ChipSplit
    policy: Policy
    workload: WorkloadSpec
    dtypes: DataTypes = DataTypes()
    mode: CostMode = CostMode.CALIBRATED

    @property
    def chips(self) -> int:
        return self.deployment.chips

    @property
    def label(self) -> str:
        """A short human name: ``llama-3.1-8b/h100-sxm×2 tp2pp1/vllm/conv``, with the data
        types after it when they are not bf16 (``.../conv/w fp8, a fp8, kv fp8``)."""
        types = "" if self.dtypes == DataTypes() else f"/{self.dtypes.label}"
        return (
            f"{self.model}/{self.accelerator}×{self.chips} {self.deployment.label}/"
            f"{self.policy.name}/{self.workload.name}{types}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Slo:
    """Latency objectives: the ``percentile``-th TTFT and TPOT must stay within bounds.

    A rate *meets the SLOs* when both percentiles are within bounds; a request *meets them* when
    its own TTFT and TPOT are (goodput counts those).
    """

    ttft_s: float
    tpot_s: float
    percentile: float = 90.0

    def __post_init__(self) -> None:
        if not 0 < self.percentile <= 100:
            raise ConfigError(f"slo.percentile = {self.percentile}: must be in (0, 100]")
        if self.ttft_s <= 0 or self.tpot_s <= 0:
            raise ConfigError("slo.ttft_s and slo.tpot_s must be > 0")


def point_key(config: Configuration, slo: Slo, seed: int) -> str:
    """Stable id of a configuration under an SLO and seed (16 hex digits of SHA-256 over the
    canonical JSON, the pricing mode and data types included): the store's key, the same on
    every machine and every run."""
    payload = {"config": config.to_dict(), "slo": asdict(slo), "seed": seed}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RequestLatencies:
    """What a simulator reports for the requests of one probe, in arrival order.

    Attributes:
        ttft_s: time to first token per request (``inf`` if it never got one: rejected).
        tpot_s: time per output token after the first, per request (``nan`` for one-token
            outputs; ``inf`` for requests that never finished).
        output_tokens: tokens produced per request.
        makespan_s: first arrival to last completion.
        num_steps: scheduler steps the simulation ran (for cost accounting).
        decided_early: the simulation stopped once the TTFT objective was certainly missed
            (requests it did not finish have ``inf`` latencies).
    """

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    output_tokens: np.ndarray
    makespan_s: float
    num_steps: int = 0
    decided_early: bool = False


class PointSimulator(Protocol):
    """Simulates the requests of one probe on one configuration. Must be deterministic for a
    given seed and picklable (it travels to worker processes once, not per task)."""

    def simulate(self, config: Configuration, requests: Requests, seed: int) -> RequestLatencies:
        """Per-request latencies of ``requests`` served by ``config``."""
        ...

    def fits(self, config: Configuration) -> bool:
        """False when ``config`` cannot run at all (weights leave no room for KV, impossible
        split); such a configuration is never simulated."""
        ...


class DecidingSimulator(PointSimulator, Protocol):
    """A ``PointSimulator`` that may stop a probe once its TTFT objective is certainly missed
    (``RequestLatencies.decided_early``); the search then knows the answer it needs sooner."""

    def simulate_until_decided(
        self, config: Configuration, requests: Requests, seed: int, slo: Slo
    ) -> RequestLatencies:
        """``simulate``, stopped early when the ``slo.percentile``-th TTFT is certainly over
        ``slo.ttft_s``."""
        ...


@dataclass(frozen=True, slots=True)
class PointResult:
    """Summary of one probe: a configuration at one request rate.

    Percentile fields are at the SLO's percentile (``_p``) and at the median (``_p50``).
    ``goodput_rps`` counts only requests that met both SLOs; ``throughput_rps`` counts all.
    A probe ``decided_early`` missed the SLOs before its simulation ended: its figures cover
    the part simulated (requests not finished count as never served).
    """

    rate_rps: float
    num_requests: int
    ttft_p50_s: float
    ttft_p_s: float
    tpot_p50_s: float
    tpot_p_s: float
    e2e_p50_s: float
    slo_attainment: float
    goodput_rps: float
    throughput_rps: float
    output_tokens_per_s: float
    meets_slo: bool
    num_steps: int
    decided_early: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PointResult:
        return cls(**data)


def _pct(values: np.ndarray, q: float) -> float:
    """Percentile ignoring NaN (one-token outputs have no TPOT); 0 when nothing is left, and
    ``inf`` when it falls among requests that never got a token."""
    known = values[~np.isnan(values)]
    if known.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):  # inf - inf inside the interpolation: NaN, read as inf
        value = float(np.percentile(known, q))
    return math.inf if math.isnan(value) else value


def summarize(lat: RequestLatencies, requests: Requests, rate_rps: float, slo: Slo) -> PointResult:
    """Percentiles, SLO attainment, goodput and throughput of one probe."""
    ttft_ok = lat.ttft_s <= slo.ttft_s
    tpot_ok = np.isnan(lat.tpot_s) | (lat.tpot_s <= slo.tpot_s)
    good = ttft_ok & tpot_ok
    finished = np.isfinite(lat.ttft_s) & ~np.isposinf(lat.tpot_s)
    span = lat.makespan_s if lat.makespan_s > 0 else math.inf
    with np.errstate(over="ignore"):  # never-served requests: inf TTFT and TPOT
        e2e = lat.ttft_s + np.nan_to_num(lat.tpot_s) * np.maximum(lat.output_tokens - 1, 0)
    ttft_p, tpot_p = _pct(lat.ttft_s, slo.percentile), _pct(lat.tpot_s, slo.percentile)
    return PointResult(
        rate_rps=rate_rps,
        num_requests=requests.num_requests,
        ttft_p50_s=_pct(lat.ttft_s, 50),
        ttft_p_s=ttft_p,
        tpot_p50_s=_pct(lat.tpot_s, 50),
        tpot_p_s=tpot_p,
        e2e_p50_s=_pct(e2e, 50),
        slo_attainment=float(np.mean(good)) if good.size else 0.0,
        goodput_rps=float(np.sum(good)) / span,
        throughput_rps=float(np.sum(finished)) / span,
        output_tokens_per_s=float(np.sum(lat.output_tokens[finished])) / span,
        meets_slo=bool(ttft_p <= slo.ttft_s and tpot_p <= slo.tpot_s),
        num_steps=lat.num_steps,
        decided_early=lat.decided_early,
    )


def simulate_point(
    simulator: PointSimulator,
    config: Configuration,
    requests: Requests,
    slo: Slo,
    seed: int,
    decide_early: bool = True,
) -> PointResult:
    """Simulate one probe and summarize it against the SLOs; with ``decide_early`` a simulator
    that can (``DecidingSimulator``) stops once the TTFT objective is certainly missed."""
    until = getattr(simulator, "simulate_until_decided", None) if decide_early else None
    lat = (
        until(config, requests, seed, slo)
        if until is not None
        else simulator.simulate(config, requests, seed)
    )
    assert lat.ttft_s.shape == (requests.num_requests,), "one latency per request"
    return summarize(lat, requests, requests.rate_rps, slo)
