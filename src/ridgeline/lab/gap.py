"""Predicted against measured: ratio, effective bandwidth, a fitted model and the gap explained.

Torch-free: it reads stored points (``store``), so the report can run it without torch.

Prediction: ``analytic.step_cost`` for the point's model, batch and mean KV length on the
calibrated machine (or any ``--hw``), with every dtype at the dtype the lab ran (fp32 on CPU),
priced in one mode (``analytic.pricing``): calibrated by default (a catalog ``--hw``'s family
terms; the machine the lab measured has no family, so there it equals the ideal roofline) or
ideal; the comparison names it.

Fitted model, one per backend (``lab.fit``: physical terms, each rate bounded by what a probe
measured)::

    t̂ = t_fixed + t_gemm(B) + kv_bytes ÷ BW_kv + other FLOPs ÷ F + minor_faults × t_fault

t_gemm(B) is measured: the step's linear layers timed alone at the point's batch
(``gemm_probe``). BW_kv ≤ the read bandwidth and F ≤ the calibrated peak are fitted within
those bounds, t_fixed and t_fault ≥ 0. The KV term has its own rate because growing a
DynamicCache costs far more per byte than streaming (it re-copies the cache every step). The
fault term counts the minor page faults measured per step (getrusage, same timed steps):
glibc serves an allocation above its mmap threshold (dynamic, up to 32 MiB on 64-bit) with fresh
pages that fault on first touch, so a cache re-allocated every step costs kernel time that is
not proportional to its bytes. Which allocations cross the threshold depends on glibc's
history, not on the model, so the count is measured rather than predicted; the run with
``MALLOC_MMAP_THRESHOLD_`` pinned high has no faults and needs no such term.

Gap decomposition: the profiled steps give each operator group's share of the step; scaled to
the timed step, each group's time minus its roofline time is its excess. Time outside any
operator is framework overhead; kernel (sys) time per step, measured with getrusage during the
timed steps, is taken out of the cache-update group first as allocator page faults.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ridgeline.analytic import Dtypes, Phase, kv_bytes, step_cost
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.roofline import StepCost
from ridgeline.errors import ConfigError
from ridgeline.lab.configs import model_spec, raw_config
from ridgeline.lab.fit import Bounds, FittedModel, StepTerms, fit_step_model
from ridgeline.lab.machine import KIND as CALIBRATE_KIND
from ridgeline.lab.machine import Calibration, accelerator
from ridgeline.lab.points import PointConfig
from ridgeline.lab.store import Record
from ridgeline.specs import Accelerator, DType, get_accelerator
from ridgeline.specs.calibration import CostMode

DECODE_KIND = "decode"

# analytic op name prefix → profiler group (lab/profile.py categories)
_OP_GROUP = (
    ("lm_head", "lm_head"),
    ("attn.core", "attention"),
    ("attn.", "linear GEMMs"),
    ("mlp.up", "linear GEMMs"),
    ("mlp.down", "linear GEMMs"),
    ("mlp.gate", "linear GEMMs"),
)
GEMM_GROUPS = ("linear GEMMs", "lm_head")  # the weight GEMMs: the probe times them
CAUSES = (
    "framework overhead",
    "cache concat & realloc",
    "allocator page faults",
    "small-batch GEMM",
    "attention",
    "lm_head",
    "other ops",
)


def op_group(analytic_op: str) -> str:
    for prefix, group in _OP_GROUP:
        if analytic_op.startswith(prefix):
            return group
    return "other ops"


@dataclass(frozen=True, slots=True)
class Cause:
    """One named part of the gap (seconds per step; negative = faster than its roofline)."""

    name: str
    seconds: float
    evidence: str


@dataclass(frozen=True, slots=True)
class ComparedPoint:
    label: str
    model: str
    batch: int
    context: int
    kv_len: float
    threads: int
    measured_s: float
    p10_s: float
    p90_s: float
    cpu_s: float
    prefill_s: float
    predicted_s: float
    bytes: float
    weight_bytes: float
    kv_bytes: float
    flops: float
    bandwidth_bytes_per_s: float
    kv_tensor_bytes: int
    kv_formula_bytes: float
    peak_above_start_bytes: int | None
    load_avg_1m: float | None
    causes: tuple[Cause, ...]
    weight_gemm_s: float | None = None  # weights ÷ calibrated decode-GEMM rate at this batch
    minor_faults: float = 0.0  # per timed step (getrusage)
    gemm_probe_s: float | None = None  # the step's linear layers timed alone (gemm_probe)
    other_flops: float = 0.0  # analytic FLOPs outside the weight GEMMs (attention)
    fitted_s: float | None = None

    @property
    def ratio(self) -> float:
        return self.measured_s / self.predicted_s

    @property
    def effective_bandwidth(self) -> float:
        """Analytic bytes of the step ÷ measured time."""
        return self.bytes / self.measured_s

    @property
    def bandwidth_fraction(self) -> float:
        return self.effective_bandwidth / self.bandwidth_bytes_per_s

    @property
    def fit_error(self) -> float | None:
        return (
            None if self.fitted_s is None else (self.fitted_s - self.measured_s) / self.measured_s
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            ratio=self.ratio,
            effective_bandwidth=self.effective_bandwidth,
            bandwidth_fraction=self.bandwidth_fraction,
            fit_error=self.fit_error,
        )
        return d


@dataclass(frozen=True, slots=True)
class LabComparison:
    accelerator: str
    points: tuple[ComparedPoint, ...]
    fits: tuple[FittedModel, ...]
    timer: str = "wall"
    mode: CostMode = CostMode.CALIBRATED
    label: str = "expected (calibrated)"  # the prediction's (``Pricing.label``)

    def labels(self) -> list[str]:
        return list(dict.fromkeys(p.label for p in self.points))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.lab-compare/2",
            "mode": self.mode.value,
            "label": self.label,
            "accelerator": self.accelerator,
            "timer": self.timer,
            "points": [p.to_dict() for p in self.points],
            "fits": [f.to_dict() for f in self.fits],
        }


def latest_calibration(records: Sequence[Record], host: str | None = None) -> Calibration | None:
    """The newest stored calibration (of ``host`` when given)."""
    cals = [r for r in records if r.kind == CALIBRATE_KIND]
    if host is not None:
        cals = [r for r in cals if r.env.get("host") == host] or cals
    return Calibration.from_dict(cals[-1].result) if cals else None


def _hardware(
    records: Sequence[Record], hw: str | None, threads: int, host: str
) -> tuple[Accelerator, Calibration | None]:
    cal = latest_calibration(records, host)
    if hw is not None:
        return get_accelerator(hw), cal
    if cal is None:
        raise ConfigError(
            "field --hw: no calibration in the database; run `ridgeline lab calibrate --db ...` "
            "or pass --hw measured"
        )
    if threads not in {p.threads for p in cal.bandwidth}:
        threads = max(p.threads for p in cal.bandwidth)
    return accelerator(cal, f"measured-t{threads}", threads), cal


def _predict(cfg: PointConfig, pricing: Pricing) -> StepCost:
    spec = model_spec(raw_config(cfg.model), cfg.model)
    dt = DType.parse(cfg.dtype)
    priced = pricing.with_dtypes(Dtypes(dt, dt, dt))
    return step_cost(spec, priced, priced.workload(Phase.DECODE, cfg.batch, round(cfg.kv_len_mean)))


def _ideal_by_group(cost: StepCost) -> dict[str, float]:
    out: dict[str, float] = {}
    for op in cost.ops:
        group = op_group(op.name)
        out[group] = out.get(group, 0.0) + op.time_s
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _take_sys(
    sys_s: float, buckets: dict[str, float], order: tuple[str, ...]
) -> tuple[float, dict[str, float]]:
    """Take kernel time out of the buckets it hides in, in ``order``; (taken, what is left).

    Fresh mmap'd tensors fault in page by page inside the op that first writes them (the
    concatenation); freeing them (munmap) happens when Python drops the old tensor, outside any
    operator."""
    left = dict(buckets)
    remaining = sys_s
    for name in order:
        take = min(remaining, max(left[name], 0.0))
        left[name] -= take
        remaining -= take
    return sys_s - remaining, left


def decompose(
    measured_s: float,
    cost: StepCost,
    timing: dict[str, Any],
    profile: dict[str, Any] | None,
    other_cache_s: float | None = None,
) -> tuple[Cause, ...]:
    """The gap ``measured − predicted`` of one point split into named causes, each with its
    evidence (profiler shares scaled to the timed step, sys time, the other cache kind).

    By construction predicted + Σ causes = measured."""
    if not profile:
        return (Cause("unexplained", measured_s - cost.step_time_s, "no profiled steps stored"),)
    wall, op_s = profile["wall_s_per_step"], profile["op_s_per_step"]
    cats = {k: v * measured_s / wall for k, v in profile["categories"].items()}
    ideal = _ideal_by_group(cost)
    buckets = {
        "update": cats.get("cache concat", 0.0) + cats.get("kv write", 0.0),
        "overhead": (wall - op_s) * measured_s / wall,
        "other": cats.get("other ops", 0.0),
    }
    faults, left = _take_sys(timing["sys_s_per_step"], buckets, ("update", "overhead", "other"))
    cache_evidence = f"profiler: cat/index_copy {_pct(buckets['update'] / measured_s)} of the step"
    if other_cache_s is not None:
        cache_evidence += f"; the other cache kind takes {_ms(other_cache_s)} here"

    def excess(group: str, what: str) -> Cause:
        got, roof = cats.get(group, 0.0), ideal.get(group, 0.0)
        return Cause(
            what, got - roof, f"profiler: {group} {_ms(got)} vs {_ms(roof)} at the roofline"
        )

    outside = f"profiler: {_pct(1 - op_s / wall)} of the step outside operators (Python, dispatch)"
    sys_time = (
        f"getrusage: {_ms(timing['sys_s_per_step'])} sys time and "
        f"{timing['minor_faults_per_step']:.0f} minor faults per step"
    )
    others = (
        "profiler: norms, activations, embedding, copies "
        f"{_pct(cats.get('other ops', 0.0) / measured_s)} of the step"
    )
    return (
        Cause("framework overhead", left["overhead"], outside),
        Cause("cache concat & realloc", left["update"], cache_evidence),
        Cause("allocator page faults", faults, sys_time),
        excess("linear GEMMs", "small-batch GEMM"),
        excess("attention", "attention"),
        excess("lm_head", "lm_head"),
        Cause("other ops", left["other"] - ideal.get("other ops", 0.0), others),
    )


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


TIMERS = ("wall", "cpu")


def step_times(timing: dict[str, Any], timer: str) -> tuple[float, float, float]:
    """(median, p10, p90) of the timed steps by wall clock or by process CPU time.

    NOTE: with one thread, a step's CPU time is what it costs when it is not descheduled; on a
    shared machine (load above the cores) wall time adds the waits, CPU time does not.
    """
    if timer not in TIMERS:
        raise ConfigError(f"field --timer: '{timer}' is not one of {', '.join(TIMERS)}")
    series = sorted(timing["step_s"] if timer == "wall" else timing["cpu_step_s"])

    def q(x: float) -> float:
        pos = x * (len(series) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(series) - 1)
        return series[lo] + (series[hi] - series[lo]) * (pos - lo)

    return statistics.median(series), q(0.1), q(0.9)


def _load_average(value: Any) -> float | None:
    """A stored load average; older records wrote -1.0 where none was known."""
    return None if value is None or value < 0 else float(value)


def _point(
    rec: Record, pricing: Pricing, other_cache_s: float | None, timer: str = "wall"
) -> ComparedPoint:
    cfg = PointConfig.from_dict(rec.config)
    timing, memory = rec.result["timing"], rec.result["memory"]
    cost = _predict(cfg, pricing)
    measured, p10, p90 = step_times(timing, timer)
    spec = model_spec(raw_config(cfg.model), cfg.model)
    return ComparedPoint(
        label=cfg.label,
        model=cfg.model,
        batch=cfg.batch,
        context=cfg.context,
        kv_len=cfg.kv_len_mean,
        threads=cfg.threads,
        measured_s=measured,
        p10_s=p10,
        p90_s=p90,
        cpu_s=timing["cpu_median_s"],
        prefill_s=timing["prefill_s"],
        predicted_s=cost.step_time_s,
        bytes=cost.bytes,
        weight_bytes=cost.weight_bytes,
        kv_bytes=cost.kv_read_bytes + cost.kv_write_bytes,
        flops=cost.flops,
        bandwidth_bytes_per_s=cost.bandwidth_bytes_per_s,
        kv_tensor_bytes=memory["kv_bytes"],
        kv_formula_bytes=float(
            kv_bytes(spec, cfg.batch, memory["kv_tokens"], DType.parse(cfg.dtype))
        ),
        peak_above_start_bytes=memory.get("cuda_peak_above_start_bytes")
        or memory.get("rss_peak_above_start_bytes"),
        load_avg_1m=_load_average(rec.env.get("load_avg_1m")),
        minor_faults=float(timing.get("minor_faults_per_step", 0.0)),
        gemm_probe_s=(rec.result.get("gemm") or {}).get("median_s"),
        other_flops=sum(op.flops for op in cost.ops if op_group(op.name) not in GEMM_GROUPS),
        causes=decompose(measured, cost, timing, rec.result.get("profile"), other_cache_s),
    )


GEMM_SOURCES = ("probe", "calibrated F.linear curve", "read bandwidth")  # best first


def _gemm_s(p: ComparedPoint, source: str, read_bytes_per_s: float) -> float:
    """The step's weight GEMMs: probed at this point, else the calibrated ``F.linear`` rate at
    this batch, else the weights at the read bandwidth."""
    if source == "probe" and p.gemm_probe_s is not None:
        return p.gemm_probe_s
    if source != "read bandwidth" and p.weight_gemm_s is not None:
        return p.weight_gemm_s
    return p.weight_bytes / read_bytes_per_s


def _terms(p: ComparedPoint, source: str, bounds: Bounds) -> StepTerms:
    return StepTerms(
        measured_s=p.measured_s,
        gemm_s=_gemm_s(p, source, bounds.read_bytes_per_s),
        kv_bytes=p.kv_bytes,
        other_flops=p.other_flops,
        minor_faults=p.minor_faults,
    )


def gemm_source(points: Sequence[ComparedPoint]) -> str:
    """The best weight-GEMM source that every point has (one source per fit)."""
    if all(p.gemm_probe_s is not None for p in points):
        return GEMM_SOURCES[0]
    if all(p.weight_gemm_s is not None for p in points):
        return GEMM_SOURCES[1]
    return GEMM_SOURCES[2]


def fit(label: str, points: Sequence[ComparedPoint], bounds: Bounds) -> FittedModel:
    """Fit the physical step model (``lab.fit``) to one backend's points within ``bounds``."""
    source = gemm_source(points)
    return fit_step_model(label, [_terms(p, source, bounds) for p in points], bounds, source)


def bounds_of(acc: Accelerator, dtype: DType = DType.FP32) -> Bounds:
    """The probes' rates as ``acc`` holds them: device read bandwidth, calibrated peak."""
    return Bounds(acc.device_bandwidth_bytes_per_s, acc.peak(dtype))


def compare_records(
    records: Sequence[Record],
    hw: str | None = None,
    timer: str = "wall",
    mode: CostMode = CostMode.CALIBRATED,
) -> LabComparison:
    """Compare every stored decode point with its prediction (priced in ``mode``), fit each
    backend, explain the gap."""
    decode = [r for r in records if r.kind == DECODE_KIND]
    if not decode:
        raise ConfigError("field --db: no decode points stored; run `ridgeline lab sweep` first")
    first = decode[0]
    acc, cal = _hardware(records, hw, first.config["threads"], first.env.get("host", ""))
    pricing = Pricing.of(acc, mode)
    by_key = {_other_key(r.config): step_times(r.result["timing"], timer)[0] for r in decode}
    pts = []
    for rec in decode:
        other = dict(rec.config, cache="static" if rec.config["cache"] == "dynamic" else "dynamic")
        pts.append(_with_gemm(_point(rec, pricing, by_key.get(_other_key(other)), timer), cal))
    fits = []
    out = []
    bounds = bounds_of(acc)
    for label in dict.fromkeys(p.label for p in pts):
        group = [p for p in pts if p.label == label]
        model = fit(label, group, bounds)
        fits.append(model)
        out += [_with_fit(p, model) for p in group]
    return LabComparison(acc.name, tuple(out), tuple(fits), timer, mode, pricing.label)


def _other_key(config: dict[str, Any]) -> str:
    keep = (
        "model",
        "backend",
        "cache",
        "attn",
        "batch",
        "context",
        "threads",
        "dtype",
        "device",
        "allocator",
    )
    return "|".join(str(config.get(k)) for k in keep)


def _with_gemm(p: ComparedPoint, cal: Calibration | None) -> ComparedPoint:
    rate = cal.gemm_bandwidth(p.threads, p.batch) if cal is not None else None
    return p if rate is None else replace(p, weight_gemm_s=p.weight_bytes / rate)


def _with_fit(p: ComparedPoint, model: FittedModel) -> ComparedPoint:
    return replace(p, fitted_s=model.predict(_terms(p, model.gemm_source, model.bounds)))
