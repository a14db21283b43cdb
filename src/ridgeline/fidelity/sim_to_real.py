"""``ridgeline validate --serving``: the serving simulator against real vLLM runs.

The runs are the training/validation experiments of inference-sim's sim-to-real accuracy
benchmark (vLLM v0.15.1 on H100; package data ``data/sim_to_real/trainval.json``, sources in
its README): each names a model, a tensor-parallel deployment, the engine's limits and KV pool,
and an inference-perf profile (``sim.inference_perf``). Each is simulated with an engine
profile (``specs.engines``, vLLM by default) and scored as the benchmark scores a simulator:

    APE(metric) = |predicted − measured| / measured     for E2E mean/p90/p99,
                                                          TTFT mean/p90/p99, ITL mean
    ITL mean    = (E2E mean − TTFT mean) / (mean output tokens − 1)
    medians     over experiments of the APE of E2E mean, TTFT mean and ITL mean

Beside them stand the medians the benchmark published for the other simulators on its 38
evaluation experiments (which this module never reads) and their medians on these same
training/validation experiments.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from ridgeline.analytic import Deployment, Dtypes
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.sim.engines import EngineRun, ServingSetup, engine_sim_config
from ridgeline.sim.inference_perf import Profile, parse_profile, profile_requests
from ridgeline.sim.kinds import Questions
from ridgeline.sim.loop import simulate
from ridgeline.sim.metrics import SimResult
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.dtypes import DType
from ridgeline.specs.engines import EngineProfile, get_engine

METRICS = ("e2e_mean", "e2e_p90", "e2e_p99", "ttft_mean", "ttft_p90", "ttft_p99", "itl_mean")
HEADLINE = ("e2e_mean", "ttft_mean", "itl_mean")
WORKLOAD_SEED = 42  # the benchmark's workload seed

# Medians of APE (%) the benchmark published on its 38 evaluation experiments (E2E mean, TTFT
# mean, ITL mean), with how many experiments each simulator covered.
PUBLISHED_EVAL_MEDIANS: Mapping[str, tuple[float, float, float, int]] = {
    "BLIS trained-physics": (6.8, 18.4, 6.5, 38),
    "BLIS evolved": (9.4, 20.9, 9.4, 38),
    "LLMServingSim": (18.8, 72.5, 21.8, 38),
    "AIConfigurator": (21.5, 662.0, 13.2, 18),
    "BLIS roofline": (33.4, 650.0, 44.4, 38),
    "LLM-Optimizer": (51.7, 662.0, 60.6, 38),
    "vidur": (619.0, 29783.0, 259.0, 4),
}


@dataclass(frozen=True, slots=True)
class Metrics:
    """The benchmark's summary metrics of one run, in milliseconds (``METRICS``)."""

    e2e_mean: float
    e2e_p90: float
    e2e_p99: float
    ttft_mean: float
    ttft_p90: float
    ttft_p99: float
    itl_mean: float

    def get(self, name: str) -> float:
        return float(getattr(self, name))

    @staticmethod
    def of(result: SimResult) -> Metrics:
        """A simulation's summary, as the benchmark computes it from its measurements."""
        ms = 1e3
        outputs = float(np.mean([r.output_len for r in result.requests if not r.rejected]))
        e2e, ttft = result.e2e_s, result.ttft_s
        itl = (e2e.mean - ttft.mean) / max(outputs - 1.0, 1.0)
        return Metrics(
            e2e.mean * ms,
            e2e.p90 * ms,
            e2e.p99 * ms,
            ttft.mean * ms,
            ttft.p90 * ms,
            ttft.p99 * ms,
            itl * ms,
        )


@dataclass(frozen=True, slots=True)
class Experiment:
    """One measured vLLM run of the benchmark (package data, module docstring)."""

    exp_id: str
    model: str
    model_id: str
    hardware: str
    tp: int
    weight_dtype: DType
    max_num_seqs: int
    max_num_batched_tokens: int
    total_kv_blocks: int
    cpu_kv_blocks: int
    profile: Profile
    measured: Metrics
    measured_source: str
    others: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def dtypes(self) -> Dtypes:
        """Weights and matmuls in the checkpoint's format (FP8 checkpoints run W8A8), KV in
        16-bit (vLLM's ``kv_cache_dtype=auto`` keeps the model's activation type)."""
        kv = DType.FP16 if self.weight_dtype is DType.FP16 else DType.BF16
        return Dtypes(
            weight=self.weight_dtype,
            act=self.weight_dtype if self.weight_dtype is DType.FP8 else kv,
            kv=kv,
        )


def _metrics(raw: Mapping[str, Any]) -> Metrics:
    return Metrics(**{m: float(raw[m]) for m in METRICS})


def _experiment(raw: Mapping[str, Any]) -> Experiment:
    return Experiment(
        exp_id=str(raw["id"]),
        model=raw["model"],
        model_id=raw["model_id"],
        hardware=raw["hardware"],
        tp=int(raw["tp"]),
        weight_dtype=DType.parse(raw["weight_dtype"]),
        max_num_seqs=int(raw["max_num_seqs"]),
        max_num_batched_tokens=int(raw["max_num_batched_tokens"]),
        total_kv_blocks=int(raw["total_kv_blocks"]),
        cpu_kv_blocks=int(raw["cpu_kv_blocks"]),
        profile=parse_profile(raw["profile"]),
        measured=_metrics(raw["measured"]),
        measured_source=raw["measured_source"],
        others={k: {m: float(x) for m, x in v.items()} for k, v in raw.get("others", {}).items()},
    )


@cache
def trainval_experiments() -> tuple[Experiment, ...]:
    """The benchmark's training/validation experiments (package data)."""
    path = resources.files("ridgeline.data").joinpath("sim_to_real", "trainval.json")
    data = json.loads(path.read_text())
    return tuple(_experiment(e) for e in data["experiments"])


@dataclass(frozen=True, slots=True)
class ExperimentResult:
    """One experiment simulated: predicted metrics, their APE (%), and its CPU time."""

    experiment: Experiment
    predicted: Metrics
    cpu_s: float
    num_steps: int
    preemptions: int

    def ape(self, metric: str) -> float:
        measured = self.experiment.measured.get(metric)
        return abs(self.predicted.get(metric) - measured) / measured * 100.0

    def ratio(self, metric: str = "e2e_mean") -> float:
        return self.predicted.get(metric) / self.experiment.measured.get(metric)


@dataclass(frozen=True, slots=True)
class SimToRealSettings:
    """How the experiments are simulated: the engine, the reading of the profiles, and whether
    the runs' CPU KV blocks are a host tier (vLLM's CPU offloading; the fast mode does not
    cover tiers yet, so those runs go step by step)."""

    engine: str = "vllm"
    questions: Questions = Questions.UNIQUE
    cpu_offload: bool = False


def experiment_run(exp: Experiment, engine: EngineProfile, cpu_offload: bool = False) -> EngineRun:
    """The engine run of ``exp``: its limits and its measured KV pool (and with
    ``cpu_offload`` its CPU blocks) on the profile's engine."""
    setup = ServingSetup(
        max_num_batched_tokens=exp.max_num_batched_tokens,
        max_num_seqs=exp.max_num_seqs,
        num_blocks=exp.total_kv_blocks,
        cpu_kv_blocks=exp.cpu_kv_blocks if cpu_offload else 0,
    )
    return EngineRun(engine, setup)


def simulate_experiment(exp: Experiment, settings: SimToRealSettings) -> ExperimentResult:
    """Simulate one experiment with the settings' engine and score it."""
    return simulate_with(exp, get_engine(settings.engine), settings)


def simulate_with(
    exp: Experiment, engine: EngineProfile, settings: SimToRealSettings
) -> ExperimentResult:
    """Simulate one experiment on ``engine`` (a profile being fitted, say) and score it."""
    model, acc = get_model(exp.model), get_accelerator(exp.hardware)
    pricing = Pricing.expected(Deployment(acc, exp.tp, 1), exp.dtypes)
    cfg = engine_sim_config(model, pricing, experiment_run(exp, engine, settings.cpu_offload))
    requests = profile_requests(exp.profile, WORKLOAD_SEED, settings.questions)
    start = time.process_time()
    result = simulate(cfg, requests)
    cpu = time.process_time() - start
    if result.num_completed < result.num_requests:
        raise ConfigError(f"experiment {exp.exp_id}: {result.num_rejected} requests rejected")
    return ExperimentResult(exp, Metrics.of(result), cpu, result.num_steps, result.num_preemptions)


@dataclass(frozen=True, slots=True)
class ServingValidation:
    """Every experiment's result, and the summary figures of the benchmark."""

    settings: SimToRealSettings
    results: tuple[ExperimentResult, ...]

    def median_ape(self, metric: str) -> float:
        return statistics.median(r.ape(metric) for r in self.results)

    def mean_ape(self, metric: str) -> float:
        return statistics.fmean(r.ape(metric) for r in self.results)

    def worst(self, metric: str = "e2e_mean") -> ExperimentResult:
        """The experiment whose prediction is furthest from its measurement (by ratio)."""
        return max(self.results, key=lambda r: abs(np.log(r.ratio(metric))))

    def others_medians(self) -> dict[str, tuple[float, float, float, int]]:
        """The other simulators' medians on these experiments (those they covered)."""
        out = {}
        names = sorted({n for r in self.results for n in r.experiment.others})
        for name in names:
            done = [r.experiment for r in self.results if name in r.experiment.others]
            meds = [_median_ape(name, done, m) for m in HEADLINE]
            out[name] = (meds[0], meds[1], meds[2], len(done))
        return out

    def rows(self) -> list[tuple[str, ...]]:
        """One row per experiment: measured -> predicted and APE of each metric (``ROW_HEADERS``)."""
        out = []
        for r in self.results:
            e = r.experiment
            cells = [f"{e.exp_id}", e.model, str(e.tp)]
            for m in METRICS:
                cells.append(
                    f"{e.measured.get(m):,.1f} -> {r.predicted.get(m):,.1f} ({r.ape(m):.0f}%)"
                )
            cells.append(f"{r.cpu_s:.1f}")
            out.append(tuple(cells))
        return out

    def summary_rows(self) -> list[tuple[str, ...]]:
        """ridgeline's medians beside the other simulators' (``SUMMARY_HEADERS``)."""
        n = len(self.results)
        worst = self.worst()
        rows = [
            (
                f"ridgeline ({self.settings.engine} profile)",
                "these experiments",
                str(n),
                *(f"{self.median_ape(m):.1f}" for m in HEADLINE),
                f"{self.mean_ape('e2e_mean'):.1f}",
                f"{worst.ratio():.2f}x ({worst.experiment.exp_id})",
            )
        ]
        for name, (e2e, ttft, itl, k) in self.others_medians().items():
            rows.append(
                (
                    name,
                    "these experiments",
                    str(k),
                    f"{e2e:.1f}",
                    f"{ttft:.1f}",
                    f"{itl:.1f}",
                    "",
                    "",
                )
            )
        for name, (e2e, ttft, itl, k) in PUBLISHED_EVAL_MEDIANS.items():
            rows.append(
                (
                    name,
                    "38 evaluation experiments (published)",
                    str(k),
                    f"{e2e:.1f}",
                    f"{ttft:,.1f}",
                    f"{itl:.1f}",
                    "",
                    "",
                )
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.validate_serving/1",
            "engine": self.settings.engine,
            "questions": self.settings.questions.value,
            "median_ape": {m: self.median_ape(m) for m in HEADLINE},
            "mean_ape": {m: self.mean_ape(m) for m in HEADLINE},
            "worst_e2e_ratio": self.worst().ratio(),
            "experiments": [
                {
                    "id": r.experiment.exp_id,
                    "model": r.experiment.model,
                    "tp": r.experiment.tp,
                    "measured_ms": {m: r.experiment.measured.get(m) for m in METRICS},
                    "predicted_ms": {m: r.predicted.get(m) for m in METRICS},
                    "ape": {m: r.ape(m) for m in METRICS},
                    "cpu_s": r.cpu_s,
                    "steps": r.num_steps,
                    "preemptions": r.preemptions,
                }
                for r in self.results
            ],
            "published_eval_medians": {
                k: {"e2e_mean": v[0], "ttft_mean": v[1], "itl_mean": v[2], "experiments": v[3]}
                for k, v in PUBLISHED_EVAL_MEDIANS.items()
            },
        }


ROW_HEADERS = ("experiment", "model", "TP", *(f"{m} ms (APE)" for m in METRICS), "CPU s")
SUMMARY_HEADERS = (
    "simulator",
    "on",
    "runs",
    "median APE E2E %",
    "TTFT %",
    "ITL %",
    "mean APE E2E %",
    "worst E2E ratio",
)


def _median_ape(name: str, done: Sequence[Experiment], metric: str) -> float:
    """Median APE (%) of simulator ``name`` on ``metric`` over the experiments it predicted."""
    apes = [
        abs(e.others[name][metric] - e.measured.get(metric)) / e.measured.get(metric) * 100.0
        for e in done
        if metric in e.others[name]
    ]
    return statistics.median(apes) if apes else float("nan")


def validate_serving(
    settings: SimToRealSettings | None = None,
    experiments: Sequence[Experiment] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ServingValidation:
    """Simulate the training/validation experiments (or ``experiments``) and score them."""
    settings = settings or SimToRealSettings()
    results = []
    for exp in experiments if experiments is not None else trainval_experiments():
        if progress is not None:
            progress(exp.exp_id)
        results.append(simulate_experiment(exp, settings))
    return ServingValidation(settings, tuple(results))
