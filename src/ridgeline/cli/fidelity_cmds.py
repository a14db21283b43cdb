"""``ridgeline predict`` and ``ridgeline validate``: expected throughput and latency of a
deployment, and every prediction held against published measurements."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from ridgeline.cli.common import (
    HwOpt,
    IdealOpt,
    JsonOpt,
    MemoryUtilizationOpt,
    ModelOpt,
    PlotOpt,
    PpOpt,
    TpOpt,
    console,
    emit_json,
    err_console,
    mode_of,
    save_plot,
)
from ridgeline.cli.options import grouped
from ridgeline.defaults import (
    DEFAULT_ACCELERATOR,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_SEQS,
    DEFAULT_MODEL,
)
from ridgeline.sim.kinds import Questions
from ridgeline.specs import DType
from ridgeline.specs.cost_mode import CostMode
from ridgeline.specs.units import fmt_seconds

if TYPE_CHECKING:  # loaded when a command runs, not for its --help (start-up)
    import ridgeline.fidelity.prediction as pr


if TYPE_CHECKING:  # loaded when a command runs, not for its --help (start-up)
    from ridgeline.fidelity.residuals import Interval, NoInterval, PredictionIntervals
    from ridgeline.fidelity.sim_to_real import SimToRealSettings
    from ridgeline.fidelity.validate import Validation


KvDtypeOpt = Annotated[
    str | None, typer.Option(help="KV format (default: fp8 with fp8/fp4 weights, else bf16)")
]
RequestsOpt = Annotated[
    int | None, typer.Option(help="offline: requests queued at t = 0 (default 1000)")
]
FixedBatchOpt = Annotated[
    int | None, typer.Option("--batch", "-b", help="a fixed batch of concurrent requests instead")
]
RateOpt = Annotated[
    float | None, typer.Option(help="Poisson arrivals per second instead of a queue")
]
ServingOpt = Annotated[
    bool, typer.Option("--serving", help="the serving simulator against real vLLM runs instead")
]
EngineOpt = Annotated[str, typer.Option("--engine", help="engine profile: vllm, trtllm, generic")]
QuestionsOpt = Annotated[
    Questions,
    typer.Option(help="inference-perf prompts: cycled as the tool sends them, or unique"),
]
CpuOffloadOpt = Annotated[
    bool,
    typer.Option(
        "--cpu-offload/--no-cpu-offload",
        help="the runs' CPU KV blocks as a host tier (step by step: about 10x the CPU time)",
    ),
]
MAX_SEQS, MAX_BATCHED = DEFAULT_MAX_SEQS, DEFAULT_MAX_NUM_BATCHED_TOKENS
PredictEngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="engine profile: vllm, trtllm, generic (default: the throughput benchmark's limits)",
    ),
]
ConcurrencyOpt = Annotated[int | None, typer.Option(help="a closed loop of N clients instead")]
MaxSeqsOpt = Annotated[
    int | None,
    typer.Option(help=f"most requests running at once (default {MAX_SEQS}, or the engine's)"),
]
MaxBatchedTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-num-batched-tokens",
        "--max-tokens",  # the older name of this flag, kept for scripts that use it
        help=f"token budget per step (default {MAX_BATCHED}, or the engine's)",
    ),
]


@dataclass(frozen=True, slots=True)
class PredictLoadOptions:
    """How many requests arrive, and the engine's limits on running them; each field is the
    ``PredictRequest`` field of the same name."""

    requests: RequestsOpt = None
    batch: FixedBatchOpt = None
    concurrency: ConcurrencyOpt = None
    max_seqs: MaxSeqsOpt = None
    max_num_batched_tokens: MaxBatchedTokensOpt = None
    memory_utilization: MemoryUtilizationOpt = None


@grouped(PredictLoadOptions)
def predict_cmd(
    hw: HwOpt = DEFAULT_ACCELERATOR,
    model: ModelOpt = DEFAULT_MODEL,
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    dp: Annotated[int, typer.Option("--dp", help="data-parallel instances")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="expert-parallel chips (the TP group's)")] = 1,
    engine: PredictEngineOpt = None,
    weight_dtype: Annotated[str, typer.Option(help="bf16, fp16, fp8, int8, int4, fp4")] = "bf16",
    kv_dtype: KvDtypeOpt = None,
    isl: Annotated[int, typer.Option("--isl", help="prompt tokens per request")] = 1024,
    osl: Annotated[int, typer.Option("--osl", help="output tokens per request")] = 128,
    rate: RateOpt = None,
    ideal: IdealOpt = False,
    json_out: JsonOpt = False,
    *,
    load: PredictLoadOptions,
) -> None:
    """Expected throughput, TTFT and TPOT of a deployment, through the serving simulator.

    Throughput per system, chip and user; p50/p90/p99 of TTFT, TPOT, ITL and E2E; the KV pool
    (the one rule: --memory-utilization of each chip for weights, a named reserve and KV);
    calibrated (the catalog's terms, the engine's with --engine) unless --ideal.

    \b
    Example:
      ridgeline predict --hw h100-sxm --model llama-3.1-70b --tp 2 --isl 1024 --osl 128
    """
    import ridgeline.fidelity.prediction as pr

    req = pr.PredictRequest(
        hardware=hw,
        model=model,
        isl=isl,
        osl=osl,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        data_parallel=dp,
        expert_parallel=ep,
        weight_dtype=DType.parse(weight_dtype),
        kv_dtype=DType.parse(kv_dtype) if kv_dtype else None,
        rate_rps=rate,
        mode=mode_of(ideal),
        engine=engine,
        **dataclasses.asdict(load),
    )
    _show_prediction(req, ideal, json_out)


def _show_prediction(req: pr.PredictRequest, ideal: bool, json_out: bool) -> None:
    """Predict ``req``; beside a calibrated prediction, the ideal one and its intervals."""
    import ridgeline.fidelity.prediction as pr
    from ridgeline.fidelity.residuals import prediction_intervals

    main = pr.predict(req)
    sure = None if ideal else prediction_intervals(main, req.hardware)
    if json_out:
        emit_json({**main.to_dict(), "intervals": None if sure is None else sure.to_dict()})
        return
    other = None if ideal else pr.predict(pr.with_mode(req, CostMode.IDEAL))
    _print_prediction(main, other, sure, req.isl + req.osl)


def _print_prediction(
    main: pr.Prediction,
    other: pr.Prediction | None,
    sure: PredictionIntervals | None,
    request_tokens: int,
) -> None:
    """The predictions side by side, the KV pool, and why an interval is missing."""
    from ridgeline.fidelity.residuals import NoInterval

    console.print(prediction_table([p for p in (main, other) if p is not None], sure))
    console.print(
        f"KV pool per instance: {main.kv_blocks * main.block_tokens:,} tokens, the largest batch "
        f"of {request_tokens:,}-token requests that fits = {main.max_batch:,}; "
        f"{main.memory}",
        highlight=False,
        soft_wrap=True,
    )
    if sure is not None and isinstance(sure.tpot_s, NoInterval):
        console.print(f"no interval: {sure.tpot_s.reason}")


def _interval(iv: Interval | NoInterval | None, seconds: bool) -> str:
    from ridgeline.fidelity.residuals import Interval

    if not isinstance(iv, Interval):
        return "-"
    if seconds:
        return f"{fmt_seconds(iv.low)} - {fmt_seconds(iv.high)}"
    digits = 0 if iv.low >= 100 else 1
    return f"{iv.low:,.{digits}f} - {iv.high:,.{digits}f}"


def prediction_table(preds: list[pr.Prediction], sure: PredictionIntervals | None = None) -> Table:
    """Predictions side by side, one column per mode, and the calibrated figures' 80%
    intervals from the family's held-out validation rows (``fidelity.residuals``)."""
    first = preds[0]
    t = Table(
        title=f"{first.model} on {first.deployment}, {first.num_requests} requests — "
        f"{first.label}" + (f" (beside it the {preds[1].label})" if len(preds) > 1 else "")
    )
    t.add_column("")
    for p in preds:
        t.add_column(p.label, justify="right")
    if sure is not None:
        t.add_column("80% interval", justify="right")
    rows = _prediction_rows(first)
    for label, cell, field in rows:
        extra = []
        if sure is not None:
            iv = getattr(sure, field) if field else None
            extra = [_interval(iv, field.endswith("_s") and "tokens" not in field)]
        t.add_row(label, *(cell(p) for p in preds), *extra)
    return t


if TYPE_CHECKING:
    Row = tuple[str, Callable[[pr.Prediction], str], str]


def _prediction_rows(first: pr.Prediction) -> list[Row]:
    """(label, cell, the ``PredictionIntervals`` field with an interval or "") of each row."""
    return [
        (
            "output tokens/s (system)",
            lambda p: f"{p.output_tokens_per_s:,.0f}",
            "output_tokens_per_s",
        ),
        (
            "input / total tokens/s (system)",
            lambda p: f"{p.input_tokens_per_s:,.0f} / {p.total_tokens_per_s:,.0f}",
            "",
        ),
        (
            f"output tokens/s per chip ({first.chips})",
            lambda p: f"{p.per_chip(p.output_tokens_per_s):,.0f}",
            "",
        ),
        ("tokens/s per user", lambda p: f"{p.per_user_tokens_per_s:,.1f}", "per_user_tokens_per_s"),
        ("TTFT (mean)", lambda p: fmt_seconds(p.ttft_s), "ttft_s"),
        ("TPOT (mean)", lambda p: fmt_seconds(p.tpot_s), "tpot_s"),
        *((f"{n} p50 / p90 / p99", _latency(n), "") for n in ("TTFT", "TPOT", "ITL", "E2E")),
        ("mean running batch", lambda p: f"{p.batch:,.1f}", ""),
        ("bound by", lambda p: p.bound, ""),
    ]


def _latency(name: str) -> Callable[[pr.Prediction], str]:
    def cell(p: pr.Prediction) -> str:
        q = getattr(p, name.lower())
        return " / ".join(fmt_seconds(x) for x in (q.p50, q.p90, q.p99))

    return cell


def _validate_with_progress(loso: bool) -> Validation:
    """The dataset's validation, with a progress bar on stderr."""
    from ridgeline.fidelity.validate import validate

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=err_console
    ) as bar:
        task = bar.add_task("validating", total=None)

        def step(what: str, done: int, total: int) -> None:
            bar.update(task, description=what[:60], completed=done, total=total)

        return validate(loso=loso, progress=step)


def validate_cmd(
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
    loso: Annotated[
        bool, typer.Option("--loso/--no-loso", help="also leave each source out")
    ] = True,
    rows: Annotated[bool, typer.Option("--rows", help="also list every row")] = False,
    serving: ServingOpt = False,
    engine: EngineOpt = "vllm",
    questions: QuestionsOpt = Questions.UNIQUE,
    cpu_offload: CpuOffloadOpt = False,
) -> None:
    """Hold every prediction against the published measurements of the dataset.

    Each measurement predicted calibrated and ideal, and how far each is from what was
    measured: per accelerator, overall, and leave-one-source-out. With --serving: the
    sim-to-real benchmark's training/validation runs of vLLM, simulated and scored as the
    benchmark scores simulators.

    \b
    Example:
      ridgeline validate --rows --plot out/validation.png
    """
    if serving:
        from ridgeline.fidelity.sim_to_real import SimToRealSettings

        _validate_serving(SimToRealSettings(engine, questions, cpu_offload), json_out)
        return
    v = _validate_with_progress(loso)
    if plot:
        from ridgeline.report.fidelity_plots import validation_figure

        save_plot(validation_figure(v), plot)
    if json_out:
        emit_json(v)
        return
    if rows:
        console.print(rows_table(v))
    console.print(summary_table(v))
    if not loso:
        console.print("left out: not run (--no-loso skips the leave-one-source-out refits)")
    console.print(fits_table(v))


def _validate_serving(settings: SimToRealSettings, json_out: bool) -> None:
    from ridgeline.fidelity.sim_to_real import ROW_HEADERS, validate_serving
    from ridgeline.fidelity.sim_to_real import SUMMARY_HEADERS as SERVING_HEADERS

    with err_console.status("simulating the benchmark's runs...") as status:
        v = validate_serving(settings, progress=lambda exp: status.update(f"simulating {exp}"))
    if json_out:
        emit_json(v)
        return
    t = Table(*ROW_HEADERS, title="measured -> predicted (APE), the benchmark's summary metrics")
    for row in v.rows():
        t.add_row(*row)
    console.print(t)
    s = Table(*SERVING_HEADERS, title="median APE of E2E mean, TTFT mean, ITL mean")
    for row in v.summary_rows():
        s.add_row(*row)
    console.print(s)


def summary_table(v: Validation) -> Table:
    """Per accelerator and overall: median absolute error ideal, calibrated, left out."""
    from ridgeline.fidelity.validate import SUMMARY_HEADERS

    t = Table(*SUMMARY_HEADERS, title="median |predicted / published - 1|")
    for row in v.summary_rows():
        t.add_row(*row)
    return t


def fits_table(v: Validation) -> Table:
    """The fitted numbers of each family and how many rows they rest on."""
    from ridgeline.fidelity.validate import FIT_HEADERS

    t = Table(*FIT_HEADERS, title="fitted terms (one set per family: every model, dtype, workload)")
    for row in v.fit_rows():
        t.add_row(*row)
    return t


def rows_table(v: Validation) -> Table:
    t = Table(title="every row")
    for col in ("row", "metric", "published", "ideal", "calibrated", "left out"):
        t.add_column(col, justify="left" if col in ("row", "metric") else "right")
    for r in v.results:
        t.add_row(
            r.row.key,
            r.row.metric.value,
            f"{r.row.value:.4g}",
            f"{r.ratio('ideal'):.2f}x",
            f"{r.ratio():.2f}x",
            "not run" if r.loso_ratio is None else f"{r.loso_ratio:.2f}x",
        )
    return t
