"""Benchmark: ``ridgeline plan`` side by side with NVIDIA AIConfigurator's searches,
both tools run here, in one process, with their wall and CPU time.

AIConfigurator (``aiconfigurator cli default``, https://github.com/ai-dynamo/aiconfigurator)
searches aggregated and disaggregated TensorRT-LLM layouts on a fixed number of GPUs, pricing
each from operator latencies measured on that GPU, and answers the most tokens/s per GPU within
TTFT and TPOT targets. Its three searches here (ISL 4000, OSL 500, 8 GPUs):

    llama-3.1-70b bf16 on H200    TTFT <= 1 s,    TPOT <= 30 ms
    llama-3.1-70b fp8  on H200    TTFT <= 1 s,    TPOT <= 30 ms   (fp8 KV)
    llama-3.1-8b  bf16 on H100    TTFT <= 300 ms, TPOT <= 10 ms

Per search the benchmark prints:

- AIConfigurator's best aggregated and best disaggregated layouts (tokens/s per GPU, request
  rate) and which of the two it picks;
- ridgeline's tokens/s per GPU at AIConfigurator's own operating points, priced with the
  plan's step costs (``plan.steps``: the calibrated cost model of ``predict`` and the
  simulator): aggregated, b requests in flight on a TP instance, each step b decodes and the
  prompt tokens that keep b in flight, b·OSL / (TTFT + (OSL − 1)·TPOT); disaggregated,
  min(prefill workers x prompts/s, decode workers x b / (OSL·step(b))) x OSL / GPUs;
- ``ridgeline plan`` at AIConfigurator's request rate on at most 8 chips of that GPU, in the
  search's formats, with both targets at p90 (Poisson arrivals, queueing included: ridgeline's
  question) and at p50 (nearer AIConfigurator's static estimate, which has no queue): the
  layout it picks, and whether it is AIConfigurator's family (aggregated or disaggregated, and
  the tensor-parallel degrees).

    python benchmarks/plan_aiconfigurator.py [--aic /work/venvs/aic/bin/aiconfigurator]
        [--cases 70b-bf16,70b-fp8,8b-bf16] [--workers 1]

AIConfigurator needs its own environment (its console script is given by ``--aic``). With
``--workers 1`` the plan runs in this process, so its CPU time is this process's.
"""

from __future__ import annotations

import argparse
import csv
import math
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ridgeline.analytic.pricing import Pricing
from ridgeline.plan import Formats, PlanRequest, Split, Targets, run_plan
from ridgeline.plan.request import WorkloadChoice
from ridgeline.plan.steps import StepPrices
from ridgeline.specs import DType, get_accelerator, get_model
from ridgeline.sweep.backends import LocalBackend

ISL, OSL, GPUS = 4000, 500, 8
TARGET = 0.15  # tokens/s per GPU within 15% of AIConfigurator's at its operating points
AGG_BUDGET = 8192  # TensorRT-LLM's max_num_tokens, the budget of an aggregated step


@dataclass(frozen=True, slots=True)
class Search:
    name: str
    model: str  # ridgeline's
    aic_model: str  # AIConfigurator's model path (its bundled configs)
    hardware: str
    aic_system: str
    dtype: DType
    ttft_s: float
    tpot_s: float


_70B, _8B = "meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-8B"
_70B_FP8 = "nvidia/Llama-3.1-70B-Instruct-FP8"  # AIConfigurator infers fp8 weights and KV from it
SEARCHES = {
    "70b-bf16": Search("70b-bf16", "llama-3.1-70b", _70B, "h200", "h200_sxm", DType.BF16, 1, 0.03),
    "70b-fp8": Search("70b-fp8", "llama-3.1-70b", _70B_FP8, "h200", "h200_sxm", DType.FP8, 1, 0.03),
    "8b-bf16": Search(
        "8b-bf16", "llama-3.1-8b", _8B, "h100-sxm", "h100_sxm", DType.BF16, 0.3, 0.01
    ),
}


@dataclass(frozen=True, slots=True)
class Times:
    wall_s: float
    cpu_s: float


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def run_aic(aic: str, s: Search, out: Path) -> tuple[dict[str, dict[str, str]], Times]:
    """AIConfigurator's default search; its best aggregated and disaggregated rows."""
    cmd = [aic, "cli", "default", "--model-path", s.aic_model, "--total-gpus", str(GPUS)]
    cmd += ["--system", s.aic_system, "--isl", str(ISL), "--osl", str(OSL)]
    cmd += ["--ttft", f"{s.ttft_s * 1000:g}", "--tpot", f"{s.tpot_s * 1000:g}"]
    cmd += ["--save-dir", str(out), "--no-color", "--top-n", "3"]
    wall, cpu = time.perf_counter(), _cpu(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    times = Times(time.perf_counter() - wall, _cpu(resource.RUSAGE_CHILDREN) - cpu)
    rows = {}
    for kind in ("agg", "disagg"):
        path = next(out.glob(f"**/{kind}/best_config_topn.csv"))
        with path.open() as f:
            rows[kind] = next(csv.DictReader(f))
    return rows, times


def _formats(s: Search) -> Formats:
    return Formats(s.dtype, s.dtype)


def ours_agg(prices: StepPrices, s: Search, row: dict[str, str]) -> float:
    """ridgeline's tokens/s per GPU at AIConfigurator's aggregated point (module docstring)."""
    tp, b = int(row["tp"]), int(row["bs"])
    split, f = Split(tp), _formats(s)
    ctx = ISL + OSL / 2
    step = prices.mixed_s(split, f, (b, ctx), (round(b * ISL / (OSL - 1)), ISL / 2))
    room = AGG_BUDGET - b
    ttft = math.ceil(ISL / room) * prices.mixed_s(split, f, (b, ctx), (min(ISL, room), 0.0))
    return b * OSL / (ttft + (OSL - 1) * step) / tp


def ours_disagg(prices: StepPrices, s: Search, row: dict[str, str]) -> float:
    """ridgeline's tokens/s per GPU at AIConfigurator's disaggregated point."""
    f = _formats(s)
    p_tp, p_n, p_b = int(row["(p)tp"]), int(row["(p)workers"]), int(row["(p)bs"])
    d_tp, d_n, d_b = int(row["(d)tp"]), int(row["(d)workers"]), int(row["(d)bs"])
    prompts = p_b / prices.prefill_s(Split(p_tp), f, p_b, ISL)
    decodes = d_b / (OSL * prices.decode_s(Split(d_tp), f, d_b, ISL + OSL / 2))
    gpus = p_n * p_tp + d_n * d_tp
    return min(p_n * prompts, d_n * decodes) * OSL / gpus


def aic_family(row: dict[str, str], kind: str) -> str:
    if kind == "agg":
        return f"aggregated TP{row['tp']}"
    return f"disaggregated TP{row['(p)tp']} + TP{row['(d)tp']}"


@dataclass(frozen=True, slots=True)
class Ours:
    """What ``ridgeline plan`` picked (``family`` empty when nothing met the targets)."""

    family: str
    layout: str
    chips: int | None
    tokens_per_s_per_gpu: float | None
    times: Times


def run_ours(s: Search, rate: float, percentile: float, workers: int) -> Ours:
    """``ridgeline plan`` at ``rate`` on at most 8 chips, both targets at ``percentile``."""
    wl = WorkloadChoice(isl=ISL, osl=OSL).spec()
    targets = Targets(s.ttft_s, s.tpot_s, percentile)
    only = (s.dtype,)
    req = PlanRequest(
        s.model, wl, rate, targets, (s.hardware,), GPUS, weight_dtypes=only, kv_dtypes=only
    )
    wall, cpu = time.perf_counter(), _cpu(resource.RUSAGE_SELF)
    plan = run_plan(req, LocalBackend(workers))
    times = Times(time.perf_counter() - wall, _cpu(resource.RUSAGE_SELF) - cpu)
    w = plan.winner
    if w is None:
        return Ours("", plan.verdict, None, None, times)
    lay = w.bound.layout
    if lay.prefill is None:
        family = f"aggregated TP{lay.decode.tensor}"
    else:
        family = f"disaggregated TP{lay.prefill.tensor} + TP{lay.decode.tensor}"
    return Ours(family, lay.parallel_label, w.chips, w.tokens_per_s_per_chip, times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic", default="/work/venvs/aic/bin/aiconfigurator")
    parser.add_argument("--cases", default=",".join(SEARCHES))
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"load average {' '.join(load)}; plan on {args.workers} worker(s)")
    for name in args.cases.split(","):
        report(SEARCHES[name], args.aic, args.workers)


def report(s: Search, aic: str, workers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows, aic_t = run_aic(aic, s, Path(tmp))
    pick = max(rows, key=lambda k: float(rows[k]["tokens/s/gpu"]))
    acc = get_accelerator(s.hardware)
    prices = StepPrices(get_model(s.model), acc, Pricing.expected(acc))
    ours = {
        "agg": ours_agg(prices, s, rows["agg"]),
        "disagg": ours_disagg(prices, s, rows["disagg"]),
    }
    print(
        f"\n{s.name}: {s.model} {s.dtype.value} on {GPUS} x {s.hardware}, ISL {ISL} / OSL {OSL}, "
        f"TTFT <= {s.ttft_s:g} s, TPOT <= {s.tpot_s * 1000:g} ms"
    )
    for kind in ("agg", "disagg"):
        theirs = float(rows[kind]["tokens/s/gpu"])
        ratio = ours[kind] / theirs
        ok = "within" if abs(ratio - 1) <= TARGET else "outside"
        mark = " <- AIConfigurator's pick" if kind == pick else ""
        print(
            f"  AIConfigurator {aic_family(rows[kind], kind):28s} {theirs:7.1f} tok/s/GPU; "
            f"ridgeline at that point {ours[kind]:7.1f} ({ratio:.2f}x, {ok} 15%){mark}"
        )
    # the whole deployment's rate: tokens/s per GPU x GPUs / OSL (the CSV's request_rate is
    # per replica for aggregated layouts)
    rate = float(rows[pick]["tokens/s/gpu"]) * GPUS / OSL
    theirs = aic_family(rows[pick], pick)
    cpu = 0.0
    for percentile in (90.0, 50.0):
        o = run_ours(s, rate, percentile, workers)
        cpu += o.times.cpu_s
        if o.chips is None:
            what = f"nothing within {GPUS} chips ({o.layout})"
        else:
            what = (
                f"{o.family} ({o.layout}, {o.chips} chips, {o.tokens_per_s_per_gpu:.1f} tok/s/GPU)"
            )
        same = "yes" if o.family == theirs else "no"
        print(
            f"  ridgeline plan at {rate:.2f} req/s, targets at p{percentile:g}: {what}; "
            f"AIConfigurator's family ({theirs}): {same}; {o.times.wall_s:.1f} s wall, "
            f"{o.times.cpu_s:.1f} s CPU"
        )
    print(
        f"  time: AIConfigurator {aic_t.wall_s:.1f} s wall, {aic_t.cpu_s:.1f} s CPU; both plans "
        f"{cpu:.1f} s CPU (AIConfigurator / ridgeline: {aic_t.cpu_s / max(cpu, 1e-9):.1f}x)"
    )


if __name__ == "__main__":
    sys.exit(main())
