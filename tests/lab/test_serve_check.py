"""The pieces of ``lab serve-check`` that need no server: the step-cost fit recovers known
efficiencies, a guidellm report is read into per-request timings, and a lone request's
simulated TTFT and TPOT are the cost model's prefill and decode step times."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from ridgeline.analytic import Efficiency
from ridgeline.analytic.pricing import Pricing
from ridgeline.lab.loadgen import ServedRequest, read_report, summarize
from ridgeline.lab.serve_check import FP32, fit_efficiency, simulate
from ridgeline.serving.executor import ScheduledBatch, ScheduledRequest
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim.executor import StepCostModel
from ridgeline.sim.loop import SimConfig
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.calibration import CostMode


def _batch(new: list[int], prior: list[int]) -> ScheduledBatch:
    reqs = tuple(
        ScheduledRequest(f"r{i}", tuple(range(n)), p, ())
        for i, (n, p) in enumerate(zip(new, prior, strict=True))
    )
    return ScheduledBatch(0, reqs, 16)


@pytest.mark.parametrize("overlap", [1.0, 0.25, 0.0])
def test_the_fit_recovers_the_efficiencies_and_overhead_it_was_made_with(overlap: float) -> None:
    spec, acc = get_model("distilgpt2"), get_accelerator("xeon-spr")
    truth = Efficiency(bandwidth=1.0, compute=0.3, step_overhead_s=2e-3, overlap=overlap)
    cost = StepCostModel(spec, Pricing.of(acc, CostMode.IDEAL, FP32, truth))
    shapes = [([1] * b, [p] * b) for b in (1, 4, 16) for p in (64, 300, 900)]
    shapes += [([128], [0]), ([128, 1, 1], [0, 200, 400]), ([512] * 4, [0] * 4), ([2048], [0])]
    batches = [_batch(n, p) for n, p in shapes]
    times = [cost.step_time_s(n, p) for n, p in shapes]
    eff, err = fit_efficiency(spec, acc, batches, times)
    assert err < 1e-3  # the grid holds 0.3 up to rounding
    assert eff.compute == pytest.approx(0.3, abs=1e-9)
    assert eff.step_overhead_s == pytest.approx(2e-3, rel=1e-3)
    assert eff.overlap == overlap


def _row(start: float, first: float, last: float, end: float, n_in: int, n_out: int) -> dict:
    timings = {
        "request_start": start,
        "first_token_iteration": first,
        "last_token_iteration": last,
        "request_end": end,
    }
    return {
        "info": {"timings": timings},
        "input_metrics": {"text_tokens": n_in},
        "output_metrics": {"text_tokens": n_out},
    }


def test_a_guidellm_report_becomes_request_timings(tmp_path: Path) -> None:
    rows = [
        _row(100.5, 100.7, 101.5, 101.5, 64, 9),
        _row(100.0, 100.1, 100.9, 101.0, 64, 5),
        _row(101.0, 101.4, 101.4, 101.4, 32, 1),
    ]
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"benchmarks": [{"requests": {"successful": rows}}]}))
    reqs = read_report(path)
    assert [r.start_s for r in reqs] == [0.0, 0.5, 1.0]  # sending order, from the first send
    assert reqs[0] == ServedRequest(0.0, 64, 5, pytest.approx(0.1), pytest.approx(0.2), 1.0)
    assert reqs[1].tpot_s == pytest.approx(0.1) and reqs[2].tpot_s is None
    lat = summarize(reqs)
    assert lat.ttft_p50_s == pytest.approx(0.2)
    assert lat.tpot_p50_s == pytest.approx(statistics.median([0.2, 0.1]))
    assert lat.output_tokens_per_s == pytest.approx(15 / 1.5)


def test_a_lone_request_is_one_prefill_then_decode_steps() -> None:
    spec, acc = get_model("distilgpt2"), get_accelerator("xeon-spr")
    eff = Efficiency(bandwidth=0.5, compute=0.5, step_overhead_s=1e-3)
    pricing = Pricing.of(acc, CostMode.IDEAL, FP32, eff)
    cfg = SimConfig(
        model=spec,
        pricing=pricing,
        scheduler=SchedulerConfig(max_num_batched_tokens=512),
        num_blocks=256,
    )
    lat = simulate(cfg, [ServedRequest(0.0, 100, 8, 0.0, None, 0.0)])
    cost = StepCostModel(spec, pricing)
    assert lat.ttft_p50_s == pytest.approx(cost.step_time_s([100], [0]), rel=1e-9)
    decode = [cost.step_time_s([1], [100 + j]) for j in range(7)]  # the first output is fed back
    assert lat.tpot_p50_s == pytest.approx(sum(decode) / 7, rel=1e-6)


@pytest.mark.slow
def test_guidellm_accepts_the_scenario_and_the_tokenizer_decodes_every_id(tmp_path: Path) -> None:
    entry = pytest.importorskip("guidellm.schemas.benchmark.entrypoints")
    pytest.importorskip("transformers")
    from ridgeline.lab.loadgen import CHAR_VOCAB, LoadPlan, char_tokenizer, scenario

    tok = char_tokenizer(tmp_path / "tok")
    spec = scenario(
        "http://127.0.0.1:1", "m", tok, LoadPlan(2.5, 10, 128, 64, 3), tmp_path / "o.json"
    )
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(spec))
    args = entry.BenchmarkScenario.create(str(path))
    assert args.spec.profile.rate == [2.5] and args.spec.seed.value == 3
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(str(tok), local_files_only=True)
    assert len(t) == CHAR_VOCAB and t.eos_token_id == CHAR_VOCAB - 1
    assert t.encode("Hi there!", add_special_tokens=False) == [ord(c) - 32 for c in "Hi there!"]
    assert all(len(t.decode([i])) >= 1 for i in range(CHAR_VOCAB))  # every id shows as text


def test_the_servers_means_are_the_histogram_deltas_of_one_rate() -> None:
    from ridgeline.lab.serve_check import _server_side

    ttft, tpot = "ridgeline_time_to_first_token_seconds", "ridgeline_time_per_output_token_seconds"
    before = {f"{ttft}_sum": 1.0, f"{ttft}_count": 4, f"{tpot}_sum": 0.2, f"{tpot}_count": 4}
    after = {f"{ttft}_sum": 4.0, f"{ttft}_count": 10, f"{tpot}_sum": 0.8, f"{tpot}_count": 10}
    side = _server_side(before, after)
    assert side.ttft_mean_s == pytest.approx(0.5) and side.tpot_mean_s == pytest.approx(0.1)


def test_guidellm_runs_one_worker_so_its_poisson_gaps_do_not_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: with guidellm's ten default workers, each seeded alike, every inter-arrival
    gap came ten times over (the 0.50/s run's starts 0, 4.3, 7.5, ... then 1.1 s apart)."""
    import subprocess

    from ridgeline.lab import loadgen

    seen: dict[str, object] = {}

    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        seen.update(kw, cmd=cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    pytest.importorskip("guidellm")
    monkeypatch.setattr(loadgen, "run_group", fake_run)
    loadgen.run_guidellm({"spec": {}}, tmp_path, tmp_path / "log.txt")
    env = seen["env"]
    assert isinstance(env, dict) and env["GUIDELLM__MAX_WORKER_PROCESSES"] == "1"
    assert seen["cmd"][1:3] == ["-m", "ridgeline.lab.guidellm_main"]  # type: ignore[index]


def test_the_poisson_clock_starts_before_the_workers_wake() -> None:
    """Regression: guidellm woke its workers before writing the arrival clock's start, so a
    worker could add its gaps to -1.0 s and send every request at once (2 of 3 rates)."""
    pytest.importorskip("guidellm")
    import multiprocessing

    from guidellm.scheduler.strategies import AsyncPoissonStrategy

    from ridgeline.lab.guidellm_main import close_start_race

    close_start_race()
    strategy = AsyncPoissonStrategy(rate=2.0, random_seed=1)
    ctx = multiprocessing.get_context("spawn")
    strategy.init_processes_timings(1, 1, ctx)
    seen_at_wake: list[float] = []
    event = strategy._processes_init_event
    assert event is not None
    real_set = event.set

    class Spy:
        def set(self) -> None:  # what a woken worker would read at that instant
            assert strategy._offset is not None
            seen_at_wake.append(strategy._offset.value)
            real_set()

        def __getattr__(self, name: str) -> object:
            return getattr(event, name)

    strategy._processes_init_event = Spy()  # type: ignore[assignment]
    strategy.init_processes_start(1000.0)
    assert seen_at_wake == [1000.0]
