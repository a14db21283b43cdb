"""Does the simulator predict the server? ``ridgeline lab serve-check``, end to end.

1. Calibrate: this machine's one-thread read bandwidth and fp32 matmul peak (``lab calibrate``,
   the ``measured`` accelerator), then the engine's own step times on a mixed offline workload,
   fitted as the simulator's cost model: per-step overhead + Σ_op [max(C, M) + (1 − o)·min(C, M)]
   with C = FLOPs ÷ (peak·c), M = bytes ÷ BW (``analytic.calibrated``: o = 1 is the roofline,
   o = 0 one core that does not hide its loads under its FMAs). The compute efficiency c and
   the overlap o are chosen on grids to minimise the relative error of the best 90% of steps,
   averaged over prefill and decode steps alike; the overhead is the median residual.
2. Serve: ``ridgeline serve`` in its own process (one engine thread), driven by guidellm
   (``loadgen``) at three Poisson rates below saturation, each with its own prompts (a seed per
   rate: the server's prefix cache keeps the blocks of the rates before).
3. Simulate: the same arrivals, prompt and output lengths through ``sim.Simulation`` with the
   engine's scheduler limits, block pool and the calibrated cost model.
4. Compare TTFT and TPOT (p50, p90) and output throughput, simulated against measured.

The simulator prices steps only: what it leaves out is the HTTP layer, tokenization, the event
loop and the thread contention of the client, server and engine on one machine; the closing
table of docs/serve.md puts numbers on them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ridgeline.analytic import Dtypes, Efficiency, MixedShape, op_terms
from ridgeline.analytic.calibrated import overlapped
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.lab.loadgen import (
    CHAR_VOCAB,
    Latency,
    LoadPlan,
    ServedRequest,
    char_tokenizer,
    read_report,
    run_guidellm,
    scenario,
    summarize,
)
from ridgeline.processes import kill_group, start_group
from ridgeline.serving.executor import ScheduledBatch
from ridgeline.sim.loop import SimConfig, Simulation
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import Accelerator, DType, ModelSpec
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_CONTEXT, MAX_RATE_PER_S

FP32 = Dtypes(DType.FP32, DType.FP32, DType.FP32)
GRID = np.linspace(0.05, 1.0, 39)  # candidate compute efficiencies
OVERLAPS = (0.0, 0.25, 0.5, 0.75, 1.0)  # candidate overlaps: the two bounds' sum to their max
RATE_FRACTIONS = (0.25, 0.5, 0.75)  # of the capacity: three loads below saturation
MAX_CHECK_REQUESTS = 100_000  # requests per rate (40 take minutes)
MAX_CHECK_SEQS = 4096  # the server's running requests
Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """What to serve and how hard to drive it."""

    model_config: Path  # an HF config.json (its vocab the character tokenizer's)
    prompt_tokens: int = 128
    output_tokens: int = 64
    num_requests: int = 40
    rates: tuple[float, ...] = ()  # requests/s; () = RATE_FRACTIONS × the estimated capacity
    max_num_seqs: int = 16
    kv_gib: float = 0.5
    port: int = 8321
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("prompt_tokens", self.prompt_tokens, 1, MAX_CONTEXT)
        check_int("output_tokens", self.output_tokens, 2, MAX_CONTEXT)
        check_int("num_requests", self.num_requests, 2, MAX_CHECK_REQUESTS)
        check_int("max_num_seqs", self.max_num_seqs, 1, MAX_CHECK_SEQS)
        check_int("port", self.port, 1, 65535)
        check_real("kv_gib", self.kv_gib, 0, 1024, low_open=True)
        for rate in self.rates:
            check_real("rates", rate, 0, MAX_RATE_PER_S, low_open=True)

    def check_fits(self) -> None:
        """A request (prompt and output) fits the model's positions, before anything runs.

        Raises:
            ConfigError: naming both options and the model's limit.
        """
        from ridgeline.specs import get_model

        spec = get_model(str(self.model_config))
        need, most = self.prompt_tokens + self.output_tokens, spec.max_position_embeddings
        if need > most:
            raise ConfigError(
                f"field prompt_tokens: prompt_tokens + output_tokens = {need:,} tokens, more "
                f"than the served model's {most:,} positions"
            )


def model_config(out: Path, base: str = "distilgpt2") -> Path:
    """A catalog model's config.json with the character tokenizer's vocabulary."""
    from importlib import resources

    data = json.loads(
        (resources.files("ridgeline") / "data" / "models" / f"{base}.json").read_text()
    )
    data["vocab_size"] = CHAR_VOCAB
    path = out / "config.json"
    path.write_text(json.dumps(data, indent=2))
    return path


# ---- 1. calibration ---------------------------------------------------------------------------


def machine(say: Say) -> Accelerator:
    """This machine at one thread: read bandwidth of 512 MiB and the fp32 matmul peak."""
    from ridgeline.lab.calibrate import calibrate
    from ridgeline.lab.machine import CalibrationSpec, accelerator
    from ridgeline.specs.units import MiB

    say("calibrating the machine (read bandwidth, fp32 matmul peak; one thread)")
    spec = CalibrationSpec(
        sizes_bytes=(16 * MiB, 512 * MiB),
        threads=(1,),
        dtypes=("fp32",),
        repeats=3,
        gemm_batches=(1,),
    )
    return accelerator(calibrate(spec), "measured-t1", 1)


def _step_terms(spec: ModelSpec, batch: ScheduledBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per-operator FLOPs and bytes of one engine step (analytic, as the simulator counts)."""
    new = np.array([len(r.token_ids) for r in batch.requests], dtype=float)
    prior = np.array([r.start_position for r in batch.requests], dtype=float)
    ops = op_terms(spec, MixedShape(new, prior), FP32)
    flops = np.array([float(o.flops) for o in ops])
    nbytes = np.array([float(o.bytes_read + o.bytes_written) for o in ops])
    return flops, nbytes


def _trimmed_mean(x: np.ndarray, keep: float = 0.9) -> float:
    """Mean of the smallest ``keep`` share of ``x``: a noisy step (the machine is shared) does
    not steer the fit."""
    n = max(1, int(np.ceil(keep * x.size)))
    return float(np.sort(x)[:n].mean())


def _balanced_error(rel: np.ndarray, prefill: np.ndarray) -> float:
    """Mean over the two regimes (steps with a prefill chunk, pure decode steps) of each one's
    trimmed mean relative error: the few prefill steps of a workload weigh as much as its many
    decode steps, as TTFT rests on the former and TPOT on the latter."""
    parts = [_trimmed_mean(rel[mask]) for mask in (prefill, ~prefill) if mask.any()]
    return float(np.mean(parts))


def fit_efficiency(
    spec: ModelSpec, acc: Accelerator, batches: Sequence[ScheduledBatch], times: Sequence[float]
) -> tuple[Efficiency, float]:
    """(efficiency, its balanced relative error) of the step model on measured steps (the
    module docstring): the compute efficiency and the overlap on grids, the overhead the
    median residual. Bytes move at the read bandwidth the probe measured (efficiency 1): every
    step reads all the weights, so a fitted bandwidth would only trade against the overhead."""
    terms = [_step_terms(spec, b) for b in batches]
    flops = np.stack([f for f, _ in terms]) / acc.peak(DType.FP32)  # (steps, ops) seconds at c=1
    mem = np.stack([b for _, b in terms]) / acc.device_bandwidth_bytes_per_s
    prefill = np.array([any(len(r.token_ids) > 1 for r in b.requests) for b in batches])
    t = np.asarray(times)
    best: tuple[float, float, float, float] = (np.inf, 1.0, 0.0, 1.0)
    for overlap in OVERLAPS:
        for c in GRID:
            comp, mem_o = overlapped(flops / c, mem, overlap)
            model = np.maximum(comp, mem_o).sum(axis=1)
            overhead = max(float(np.median(t - model)), 0.0)
            err = _balanced_error(np.abs(model + overhead - t) / t, prefill)
            if err < best[0]:
                best = (err, float(c), overhead, float(overlap))
    err, c, overhead, overlap = best
    return Efficiency(bandwidth=1.0, compute=c, step_overhead_s=overhead, overlap=overlap), err


def engine_steps(llm: Any, check: CheckSpec) -> tuple[list[ScheduledBatch], list[float]]:
    """Run a mixed offline workload (1 to max_num_seqs requests at once) and keep its steps."""
    from ridgeline.engine.sampling import SamplingParams

    rng = np.random.default_rng(check.seed)
    params = SamplingParams(max_output_tokens=check.output_tokens // 2, eos_token_id=None)
    start = llm.stats.steps
    for n in sorted({1, 4, check.max_num_seqs // 2, check.max_num_seqs}):
        prompts = rng.integers(0, CHAR_VOCAB - 2, (n, check.prompt_tokens)).tolist()
        llm.generate(prompts, params)
    return llm.stats.recent(start)


def engine_options(check: CheckSpec) -> dict[str, Any]:
    """The EngineConfig of the served engine (the calibration builds the same one)."""
    return {
        "max_num_seqs": check.max_num_seqs,
        "kv_budget_bytes": check.kv_gib * 2**30,
        "seed": check.seed,
    }


def capacity_per_s(cfg: SimConfig, check: CheckSpec) -> float:
    """Requests per second the engine sustains: each request costs its prefill (one step of
    its prompt alone) and its share of ``output_tokens`` decode steps of a full batch, so the
    saturation rate is 1 ÷ (prefill + output · step ÷ batch)."""
    from ridgeline.sim.executor import StepCostModel

    cost = StepCostModel(cfg.model, cfg.pricing)
    s = check.max_num_seqs
    mid = check.prompt_tokens + check.output_tokens // 2
    step_s = cost.step_time_s([1] * s, [mid] * s)
    prefill_s = cost.step_time_s([check.prompt_tokens], [0])
    return 1.0 / (prefill_s + check.output_tokens * step_s / s)


# ---- 2. serving under guidellm ----------------------------------------------------------------


def _serve_cmd(check: CheckSpec, tokenizer: Path) -> list[str]:
    exe = str(Path(sys.executable).with_name("ridgeline"))
    return [
        exe,
        "serve",
        "--model",
        str(check.model_config),
        "--tokenizer",
        str(tokenizer),
        "--port",
        str(check.port),
        "--threads",
        "1",
        "--max-num-seqs",
        str(check.max_num_seqs),
        "--kv-gib",
        str(check.kv_gib),
        "--seed",
        str(check.seed),
        "--max-waiting",
        "100000",
    ]


def _wait_up(url: str, proc: subprocess.Popen[str], timeout_s: float = 300) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ConfigError(f"ridgeline serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise ConfigError(f"ridgeline serve did not answer on {url} within {timeout_s:.0f} s")


@dataclass(frozen=True, slots=True)
class ServerSide:
    """The server's own means over one rate's requests (its /metrics histograms): TTFT from the
    request's arrival at the HTTP layer, TPOT between the engine thread's token events."""

    ttft_mean_s: float
    tpot_mean_s: float


def _histogram_sums(url: str) -> dict[str, float]:
    """``_sum`` and ``_count`` of the server's TTFT and TPOT histograms."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.endswith(("_seconds_sum", "_seconds_count")):
            out[name] = float(value)
    return out


def _server_side(before: dict[str, float], after: dict[str, float]) -> ServerSide:
    def mean(stem: str) -> float:
        n = after[f"{stem}_count"] - before.get(f"{stem}_count", 0.0)
        return (after[f"{stem}_sum"] - before.get(f"{stem}_sum", 0.0)) / n if n else float("nan")

    return ServerSide(
        mean("ridgeline_time_to_first_token_seconds"),
        mean("ridgeline_time_per_output_token_seconds"),
    )


def serve_and_load(
    check: CheckSpec, tokenizer: Path, rates: Sequence[float], out: Path, before: Say
) -> list[tuple[tuple[ServedRequest, ...], ServerSide]]:
    """Start the server, run guidellm at each rate (reports under ``out``; ``before(rate)`` is
    called first, with the server idle), stop the server. Each rate: the requests as guidellm
    saw them, and the server's own means."""
    url = f"http://127.0.0.1:{check.port}"
    with (out / "server.log").open("w") as log:  # a session of its own: it dies with this one
        proc = start_group(_serve_cmd(check, tokenizer), output=log)
    try:
        _wait_up(url, proc)
        runs = []
        for i, rate in enumerate(rates):
            before(f"{rate:.2f}")
            # a seed per rate: the same prompts again would hit the server's prefix cache
            plan = LoadPlan(
                rate, check.num_requests, check.prompt_tokens, check.output_tokens, check.seed + i
            )
            report = out / f"guidellm-{rate:.2f}.json"
            spec = scenario(url, _served_name(check), tokenizer, plan, report)
            sums = _histogram_sums(url)
            run_guidellm(spec, out, out / f"guidellm-{rate:.2f}.txt")
            runs.append((read_report(report), _server_side(sums, _histogram_sums(url))))
        return runs
    finally:
        kill_group(proc)


def _served_name(check: CheckSpec) -> str:
    from ridgeline.specs import get_model

    return get_model(str(check.model_config)).name


# ---- 3. simulation, 4. comparison -------------------------------------------------------------


def simulate(cfg: SimConfig, reqs: Sequence[ServedRequest]) -> Latency:
    """The same arrivals and lengths through the simulator (distinct prompts: no prefix hits)."""
    trace = [
        RequestSpec(
            f"r{i}",
            r.start_s,
            range(i * 1_000_000, i * 1_000_000 + r.prompt_tokens),
            range(r.output_tokens),
        )
        for i, r in enumerate(reqs)
    ]
    res = Simulation(cfg, trace).run()
    return Latency(
        res.ttft_s.p50, res.ttft_s.p90, res.tpot_s.p50, res.tpot_s.p90, res.output_tokens_per_s
    )


@dataclass(frozen=True, slots=True)
class RateRow:
    """One rate: what the server measured through guidellm, what the simulator predicted."""

    rate_per_s: float
    measured: Latency
    simulated: Latency
    efficiency: Efficiency  # calibrated just before this rate's run
    fit_error: float
    server: ServerSide  # the server's own TTFT and TPOT means
    client_ttft_mean_s: float  # guidellm's, beside them: the gap is HTTP, tokenising, the client
    client_tpot_mean_s: float

    def ratios(self) -> dict[str, float]:
        m, s = asdict(self.measured), asdict(self.simulated)
        return {k: s[k] / m[k] for k in m if m[k]}


@dataclass(frozen=True, slots=True)
class ServeCheck:
    """The calibration and the rows of the comparison."""

    efficiency: Efficiency
    fit_error: float
    bandwidth_bytes_per_s: float
    peak_flops_per_s: float
    capacity_per_s: float
    rows: tuple[RateRow, ...]

    def to_dict(self) -> dict[str, Any]:
        rows = [asdict(r) | {"simulated_over_measured": r.ratios()} for r in self.rows]
        return {
            "schema": "ridgeline.serve-check/1",
            "efficiency": asdict(self.efficiency),
            "fit_median_rel_error": self.fit_error,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "peak_flops_per_s": self.peak_flops_per_s,
            "capacity_per_s": self.capacity_per_s,
            "rows": rows,
        }


def sim_config(llm: Any, acc: Accelerator, eff: Efficiency) -> SimConfig:
    """The simulator configured as the engine is: its scheduler, pool and block size, its
    steps priced on the ideal roofline scaled by the efficiencies fitted on its own steps."""
    pricing = Pricing.of(acc, CostMode.IDEAL, FP32, eff)
    return SimConfig(
        model=llm.spec,
        pricing=pricing,
        scheduler=llm.scheduler.config,
        block_size=llm.config.block_size,
        prefix_caching=llm.config.prefix_caching,
        num_blocks=llm.num_blocks,
    )


def _row(
    rate: float, reqs: tuple[ServedRequest, ...], server: ServerSide, cal: Calibrator
) -> RateRow:
    label = f"{rate:.2f}"
    tpots = [r.tpot_s for r in reqs if r.tpot_s is not None]
    return RateRow(
        rate,
        summarize(reqs),
        simulate(cal.config(label), reqs),
        *cal.fits[label],
        server,
        sum(r.ttft_s for r in reqs) / len(reqs),
        sum(tpots) / len(tpots),
    )


class Calibrator:
    """The engine's step cost, refitted before each rate: the machine is shared, and its speed
    drifts from minute to minute (a fit is 30-60 s of offline steps, the server idle)."""

    def __init__(self, check: CheckSpec, acc: Accelerator, say: Say) -> None:
        from ridgeline.engine.llm import LLM, set_threads

        set_threads(1)
        self.check, self.acc, self.say = check, acc, say
        self.llm = LLM(str(check.model_config), **engine_options(check))
        self.fits: dict[str, tuple[Efficiency, float]] = {}

    def fit(self, label: str) -> tuple[Efficiency, float]:
        self.say(f"calibrating the engine's step times ({label})")
        self.fits[label] = fit_efficiency(
            self.llm.spec, self.acc, *engine_steps(self.llm, self.check)
        )
        return self.fits[label]

    def config(self, label: str) -> SimConfig:
        return sim_config(self.llm, self.acc, self.fits[label][0])


def run_check(check: CheckSpec, out: Path, say: Say) -> ServeCheck:
    """Calibrate, serve under guidellm, simulate, compare (the module docstring's four steps)."""
    out = out.resolve()  # guidellm runs in ``out``: every path it gets is absolute
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = char_tokenizer(out / "tokenizer")
    acc = machine(say)
    cal = Calibrator(check, acc, say)
    eff, err = cal.fit("first")
    cap = capacity_per_s(cal.config("first"), check)
    rates = check.rates or tuple(round(f * cap, 2) for f in RATE_FRACTIONS)

    def before(rate: str) -> None:
        cal.fit(rate)
        say(f"guidellm: {check.num_requests} requests at {rate}/s")

    runs = serve_and_load(check, tokenizer, rates, out, before)
    rows = tuple(_row(r, reqs, server, cal) for r, (reqs, server) in zip(rates, runs, strict=True))
    result = ServeCheck(eff, err, acc.device_bandwidth_bytes_per_s, acc.peak(DType.FP32), cap, rows)
    (out / "serve-check.json").write_text(json.dumps(result.to_dict(), indent=2))
    return result
