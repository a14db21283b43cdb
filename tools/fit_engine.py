"""Fit an engine profile's fitted terms on the sim-to-real benchmark's training/validation runs
(package data ``data/sim_to_real/trainval.json``; never its evaluation runs) and, with --write,
store them in ``src/ridgeline/data/engines/<engine>.toml`` with the runs they rest on.

    python tools/fit_engine.py                      # fit the vllm profile, print it
    python tools/fit_engine.py --write --jobs 2     # and store it

Each evaluation simulates every run (``fidelity.sim_to_real``), its stages cut to their first
``--window`` seconds while fitting (the same rates, a quarter of the work); the residuals are
ln(predicted / measured) of E2E mean and TTFT mean, under a soft-L1 loss (a run whose queue
blows up weighs like a few, not like all), minimised by trust-region least squares over the
terms in log (latencies) or logit (efficiencies) space, from the profile's current values.
The fitted values are then scored on the whole runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from ridgeline.fidelity.sim_to_real import (
    Experiment,
    ExperimentResult,
    SimToRealSettings,
    simulate_with,
    trainval_experiments,
)
from ridgeline.sim.inference_perf import Stage
from ridgeline.specs.calibration import Term
from ridgeline.specs.engines import EngineProfile, get_engine

FOLDER = Path(__file__).parents[1] / "src" / "ridgeline" / "data" / "engines"
FITTED = (
    "kernels.bandwidth_efficiency",
    "kernels.kv_bandwidth_efficiency",
    "kernels.compute_efficiency",
    "kernels.moe_bandwidth_efficiency",
    "kernels.moe_compute_efficiency",
    "host.step_s",
    "host.request_s",
)
METRICS = ("e2e_mean", "ttft_mean")
# Physical bounds: no kernel streams faster than 98% of HBM bandwidth, and dense BF16/FP8 GEMMs
# on Hopper reach about 80% of the datasheet peak at best (cuBLAS, large square shapes); host
# times between 10 us and 50 ms.
BOUNDS = {"efficiency": (0.2, 0.98), "compute_efficiency": (0.2, 0.8), "s": (1e-5, 0.05)}
SCALE = 0.1  # soft-L1: quadratic within 10% of the measurement, linear beyond


def with_values(engine: EngineProfile, values: dict[str, float]) -> EngineProfile:
    """``engine`` with the named terms set."""
    host = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("host.")}
    kernels = dict(engine.kernels)
    for k, v in values.items():
        if k.startswith("kernels."):
            kernels[Term(k.split(".", 1)[1])] = v
    return dataclasses.replace(
        engine, host=dataclasses.replace(engine.host, **host), kernels=kernels
    )


def current(engine: EngineProfile, name: str) -> float:
    group, term = name.split(".", 1)
    return float(getattr(engine.host, term)) if group == "host" else engine.kernels[Term(term)]


def _bounds(name: str) -> tuple[float, float]:
    term = name.split(".", 1)[1]
    key = term if term in BOUNDS else ("efficiency" if "efficiency" in term else "s")
    lo, hi = BOUNDS[key]
    return _to_x(name, lo), _to_x(name, hi)


def _to_x(name: str, v: float) -> float:
    return math.log(v / (1 - v)) if "efficiency" in name else math.log(v)


def _from_x(name: str, x: float) -> float:
    return 1 / (1 + math.exp(-x)) if "efficiency" in name else math.exp(x)


def _run(args: tuple[Experiment, EngineProfile]) -> ExperimentResult:
    return simulate_with(args[0], args[1], SimToRealSettings())


def windowed(exp: Experiment, seconds: float) -> Experiment:
    """``exp`` with each stage cut to its first ``seconds`` (same rates)."""
    stages = tuple(Stage(s.rate_per_s, min(s.duration_s, seconds)) for s in exp.profile.stages)
    return dataclasses.replace(exp, profile=dataclasses.replace(exp.profile, stages=stages))


def evaluate(
    engine: EngineProfile, runs: Sequence[Experiment], jobs: int
) -> list[ExperimentResult]:
    work = [(e, engine) for e in runs]
    if jobs == 1:
        return [_run(w) for w in work]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_run, work))


def residuals(results: Sequence[ExperimentResult]) -> np.ndarray:
    return np.array([math.log(x.ratio(m)) for x in results for m in METRICS])


def report(results: Sequence[ExperimentResult], values: dict[str, float]) -> None:
    print(", ".join(f"{k} = {v:.4g}" for k, v in values.items()))
    for x in results:
        ratios = " ".join(f"{m} {x.ratio(m):.3f}" for m in ("e2e_mean", "ttft_mean", "itl_mean"))
        print(f"  {x.experiment.exp_id:16s} {x.experiment.model:16s} {ratios}")
    for m in ("e2e_mean", "ttft_mean", "itl_mean"):
        print(f"  median APE {m}: {np.median([x.ape(m) for x in results]):.1f}%")
    print(f"  mean APE e2e_mean: {np.mean([x.ape('e2e_mean') for x in results]):.1f}%")


def rewrite(path: Path, values: dict[str, float], source: str) -> None:
    """Replace each fitted term's line (in its [host] or [kernels] table)."""
    text = path.read_text()
    for name, value in values.items():
        term = name.split(".", 1)[1]
        line = f'{term} = {{ value = {value:.4g}, source = "{source}" }}'
        pattern = re.compile(rf"^{term} = .*$", re.MULTILINE)
        text = pattern.sub(line, text, count=1)
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--maxfev", type=int, default=40)
    parser.add_argument("--window", type=float, default=300.0)
    args = parser.parse_args()
    base = get_engine(args.engine)
    runs = trainval_experiments()
    short = [windowed(e, args.window) for e in runs]
    names = [n for n in FITTED if n.startswith("host.") or Term(n.split(".", 1)[1]) in base.kernels]
    lo, hi = zip(*(_bounds(n) for n in names), strict=True)
    x0 = np.clip([_to_x(n, current(base, n)) for n in names], lo, hi)

    def fun(x: np.ndarray) -> np.ndarray:
        values = {n: _from_x(n, v) for n, v in zip(names, x, strict=True)}
        r = residuals(evaluate(with_values(base, values), short, args.jobs))
        cost = float(np.sum(np.sqrt(1 + (r / SCALE) ** 2) - 1))
        terms = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
        print(f"soft-L1 {cost:.3f} at {terms}", flush=True)
        return r

    opts = {"loss": "soft_l1", "f_scale": SCALE, "diff_step": 0.05, "max_nfev": args.maxfev}
    res = least_squares(fun, x0, bounds=(lo, hi), **opts)
    values = {n: _from_x(n, v) for n, v in zip(names, res.x, strict=True)}
    report(evaluate(with_values(base, values), runs, args.jobs), values)
    if args.write:
        ids = ", ".join(e.exp_id for e in runs)
        source = f"fitted on the sim-to-real benchmark's training/validation runs: {ids}"
        rewrite(FOLDER / f"{args.engine}.toml", values, source)


if __name__ == "__main__":
    main()
