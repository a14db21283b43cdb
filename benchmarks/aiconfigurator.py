"""Benchmark: ridgeline's calibrated predictions side by side with NVIDIA AIConfigurator 0.12.

AIConfigurator (https://github.com/ai-dynamo/aiconfigurator) prices a step operator by operator
from latencies measured on the GPU (its ``systems/data`` tables, shipped in the
``aiconfigurator-core`` wheel: GEMMs, context and generation attention, MoE, all-reduce, per
framework version). Its ``static`` mode runs one fixed batch: every prompt prefilled together,
then the batch decoded to the end. ridgeline runs the same case through ``predict`` with a fixed
batch whose token budget holds every prompt (one prefill step, then decode steps), calibrated.

Cases: llama-3.1-8b and -70b on h100-sxm and h200, bf16 and fp8 (fp8 KV), TP 1/2/4/8, ISL/OSL
4000/500, 1024/128, 128/2048, batches 1, 16, 64; Mixtral-8x7B and Qwen3-30B-A3B likewise
(experts split by tensor parallelism, as ridgeline deploys them). A case is left out when
either tool cannot hold the whole batch at once (AIConfigurator's memory estimate above the GPU's,
or ridgeline's KV pool, whose reserve covers the whole batch's prefill step, short of the batch):
it is then no static batch, and the count of each is printed. Prints, per group and overall, the median and worst ratio
ridgeline / AIConfigurator of tokens/s per GPU and of TPOT, and how many cases lie within the
target (15% dense, 25% MoE).

    python benchmarks/aiconfigurator.py [--aic-python /path/to/venv/bin/python]
        [--cache FILE.json] [--models llama-3.1-8b,...] [--rows]

AIConfigurator needs its own environment (``pip install 'ridgeline[aiconfigurator]'``, or a
separate venv given by ``--aic-python``); ``--cache`` stores its answers so later runs re-run
only ridgeline.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DENSE = ("llama-3.1-8b", "llama-3.1-70b")
MOE = ("mixtral-8x7b", "qwen3-30b-a3b")
HARDWARE = ("h100-sxm", "h200")
DTYPES = ("bf16", "fp8")
TENSOR_PARALLEL = (1, 2, 4, 8)
SHAPES = ((4000, 500), (1024, 128), (128, 2048))
BATCHES = (1, 16, 64)
TARGET = {"dense": 0.15, "moe": 0.25}

# ridgeline catalog name -> AIConfigurator's model path and system name
AIC_MODEL = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
}
AIC_SYSTEM = {"h100-sxm": "h100_sxm", "h200": "h200_sxm"}
# AIConfigurator's quant modes; attention (FMHA) in bf16 and all-reduce in half precision,
# TensorRT-LLM's defaults for these checkpoints
AIC_QUANT = {
    "bf16": {"gemm_quant_mode": "bfloat16", "kvcache_quant_mode": "bfloat16"},
    "fp8": {"gemm_quant_mode": "fp8", "kvcache_quant_mode": "fp8"},
}


@dataclass(frozen=True, slots=True)
class Case:
    model: str
    hardware: str
    dtype: str
    tp: int
    isl: int
    osl: int
    batch: int

    @property
    def key(self) -> str:
        return f"{self.model}/{self.hardware}/{self.dtype}/tp{self.tp}/{self.isl}-{self.osl}/b{self.batch}"

    @property
    def group(self) -> str:
        return "moe" if self.model in MOE else "dense"


@dataclass(frozen=True, slots=True)
class Figures:
    """Tokens/s per GPU and TPOT (seconds) of one case by one tool."""

    tokens_per_s_per_gpu: float
    tpot_s: float


def cases(models: tuple[str, ...]) -> list[Case]:
    out = []
    for m, hw, dt, tp, (isl, osl), b in itertools.product(
        models, HARDWARE, DTYPES, TENSOR_PARALLEL, SHAPES, BATCHES
    ):
        out.append(Case(m, hw, dt, tp, isl, osl, b))
    return out


# ---- AIConfigurator side (runs where aiconfigurator is importable) ----


def aic_figures(case: dict[str, Any]) -> dict[str, float] | None:
    """AIConfigurator's static estimate of one case (None when it does not fit or fails)."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from aiconfigurator.cli.api import cli_estimate

    extra = {}
    if case["model"] in MOE:
        extra = {"moe_tp_size": case["tp"], "moe_ep_size": 1, "moe_quant_mode": "bfloat16"}
        if case["dtype"] == "fp8":
            extra["moe_quant_mode"] = "fp8"
    try:
        r = cli_estimate(
            _local_model(AIC_MODEL[case["model"]]),
            AIC_SYSTEM[case["hardware"]],
            mode="static",
            isl=case["isl"],
            osl=case["osl"],
            batch_size=case["batch"],
            tp_size=case["tp"],
            fmha_quant_mode="bfloat16",
            **AIC_QUANT[case["dtype"]],
            **extra,
        )
    except Exception as e:  # noqa: BLE001 - an unsupported case is reported, not fatal
        return {"error": f"{type(e).__name__}: {e}"[:300]}  # type: ignore[dict-item]
    raw = r.raw
    return {
        "tokens_per_s_per_gpu": float(raw["tokens/s/gpu"]),
        "tpot_s": float(raw["tpot"]) / 1e3,
        "ttft_s": float(raw["ttft"]) / 1e3,
        "memory_gb": float(raw.get("memory", 0.0)),
    }


def _local_model(path: str) -> str:
    """A folder holding the model's config.json as AIConfigurator ships it (its model_configs),
    so that no case needs the network; the Hub path when it ships none."""
    import tempfile
    from importlib import resources

    shipped = resources.files("aiconfigurator_core").joinpath(
        "model_configs", path.replace("/", "--") + "_config.json"
    )
    if not shipped.is_file():
        return path
    folder = Path(tempfile.gettempdir()) / "ridgeline-aic" / path.replace("/", "--")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(shipped.read_text())
    return str(folder)


def _worker() -> None:
    """Read cases (JSON list) on stdin; print their AIConfigurator figures as one JSON map."""
    # this file's folder first on the path would shadow the aiconfigurator package
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    todo = json.load(sys.stdin)
    out = {}
    for i, c in enumerate(todo):
        out[c["key"]] = aic_figures(c)
        print(f"aic {i + 1}/{len(todo)} {c['key']}", file=sys.stderr, flush=True)
    json.dump(out, sys.stdout)


def aic_all(todo: list[Case], python: str | None) -> dict[str, Any]:
    payload = json.dumps([{**asdict(c), "key": c.key} for c in todo])
    cmd = [python or sys.executable, __file__, "--worker"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(cmd, input=payload, capture_output=True, text=True, check=True, env=env)
    return dict(json.loads(done.stdout))


# ---- ridgeline side ----


def ridgeline_figures(case: Case) -> Figures | None:
    """ridgeline's calibrated prediction of one case (None when its KV pool, sized by
    ``analytic.memory``'s rule with the reserve for the whole batch's prefill step, does not
    hold every sequence at once: then it is no static batch)."""
    from ridgeline.errors import CapacityError, ConfigError
    from ridgeline.fidelity.prediction import PredictRequest, predict
    from ridgeline.specs.dtypes import DType

    req = PredictRequest(
        hardware=case.hardware,
        model=case.model,
        isl=case.isl,
        osl=case.osl,
        tensor_parallel=case.tp,
        weight_dtype=DType.parse(case.dtype),
        batch=case.batch,
        max_num_batched_tokens=case.batch
        * case.isl,  # one prefill step for the whole batch, as static
    )
    try:
        p = predict(req)
    except (CapacityError, ConfigError):
        return None
    if p.max_batch < case.batch:
        return None
    return Figures(p.output_tokens_per_s / case.tp, p.tpot_s)


# ---- comparison ----


@dataclass(frozen=True, slots=True)
class Pair:
    case: Case
    ours: Figures
    theirs: Figures

    @property
    def throughput_ratio(self) -> float:
        return self.ours.tokens_per_s_per_gpu / self.theirs.tokens_per_s_per_gpu

    @property
    def tpot_ratio(self) -> float:
        return self.ours.tpot_s / self.theirs.tpot_s


def _fits(case: Case, theirs: dict[str, Any]) -> bool:
    """Whether AIConfigurator's memory estimate (weights, KV, activations per GPU) fits the
    GPU: its static mode answers either way, and ridgeline's queues what does not fit."""
    from ridgeline.specs import get_accelerator

    capacity_gb = get_accelerator(case.hardware).device_capacity_bytes / 1e9
    return float(theirs.get("memory_gb", 0.0)) <= capacity_gb


def _within(r: float, tol: float) -> bool:
    return abs(r - 1.0) <= tol


def summary_rows(pairs: list[Pair]) -> list[tuple[str, ...]]:
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        c = p.case
        for name in (f"{c.model} {c.hardware} {c.dtype}", f"all {c.group}"):
            groups.setdefault(name, []).append(p)
    rows = []
    for name, ps in sorted(groups.items(), key=lambda kv: (kv[0].startswith("all"), kv[0])):
        tol = TARGET[ps[0].case.group]
        thr = [p.throughput_ratio for p in ps]
        tpot = [p.tpot_ratio for p in ps]
        both = sum(_within(a, tol) and _within(b, tol) for a, b in zip(thr, tpot, strict=True))
        rows.append(
            (
                name,
                str(len(ps)),
                f"{statistics.median(thr):.2f}",
                f"{min(thr):.2f}-{max(thr):.2f}",
                f"{statistics.median(tpot):.2f}",
                f"{min(tpot):.2f}-{max(tpot):.2f}",
                f"{both}/{len(ps)}",
            )
        )
    return rows


HEADERS = (
    "group",
    "cases",
    "tok/s/GPU ratio (median)",
    "range",
    "TPOT ratio (median)",
    "range",
    "within target",
)


def _table(rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    if "--worker" in sys.argv:
        _worker()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--aic-python", default=None, help="python of a venv with aiconfigurator")
    parser.add_argument("--cache", default=None, help="JSON file of AIConfigurator's answers")
    parser.add_argument("--models", default=",".join(DENSE + MOE))
    parser.add_argument("--rows", action="store_true", help="print every case")
    args = parser.parse_args()
    todo = cases(tuple(args.models.split(",")))
    cache: dict[str, Any] = {}
    if args.cache and Path(args.cache).exists():
        cache = json.loads(Path(args.cache).read_text())
    missing = [c for c in todo if c.key not in cache]
    if missing:
        cache.update(aic_all(missing, args.aic_python))
        if args.cache:
            Path(args.cache).write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    pairs, theirs_out, ours_out = [], 0, 0
    for c in todo:
        theirs = cache.get(c.key)
        if not theirs or "error" in theirs or not _fits(c, theirs):
            theirs_out += 1
            continue
        ours = ridgeline_figures(c)
        if ours is None:
            ours_out += 1
            continue
        pairs.append(Pair(c, ours, Figures(theirs["tokens_per_s_per_gpu"], theirs["tpot_s"])))
        if args.rows:
            p = pairs[-1]
            print(f"{c.key:48s} tok/s/GPU {p.throughput_ratio:5.2f}  TPOT {p.tpot_ratio:5.2f}")
    print(_table(summary_rows(pairs)))
    print(
        f"left out: {theirs_out} cases AIConfigurator does not fit (or fails), {ours_out} more "
        "whose whole batch ridgeline's KV pool does not hold at once"
    )


if __name__ == "__main__":
    main()
