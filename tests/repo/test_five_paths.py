"""One question, five paths, the same numbers.

The question: 24 requests of 256 prompt and 32 output tokens, all queued at t = 0 (an offline
throughput run), on a deployment, under the same scheduler limits (128 running requests, a
2,048-token step budget, 16-token blocks) and the default KV-pool rule, priced calibrated (every
face's default). It is asked through ``simulate --json``, ``predict --json``, a one-point sweep
(``sweep run``, read back from its store), the explorer's ``POST /api/simulate`` and the report's
serving section; each answers with the throughput and the TTFT and TPOT it reports (means or
medians), and every pair that reports the same figure agrees to 1e-9.

Five deployments: a GPU, a TPU, IBM Spyre, a Cerebras wafer and two GPUs in tensor parallel.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ridgeline.analytic import Deployment, Pricing
from ridgeline.cli import app
from ridgeline.report.build import ReportContext, ServingQuestion
from ridgeline.report.serving_section import serving_section
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import Arrival, LengthDist, Lengths, WorkloadSpec
from ridgeline.specs import get_accelerator, get_model
from ridgeline.sweep import read_store

pytest.importorskip("fastapi", reason="the explorer needs the 'web' extra")
pytest.importorskip("httpx", reason="TestClient needs httpx (the 'web-test' extra)")

from fastapi.testclient import TestClient  # noqa: E402

from ridgeline.web.app import create_app  # noqa: E402

pytestmark = pytest.mark.slow

MODEL = "llama-3.1-8b"
REQUESTS, ISL, OSL = 24, 256, 32
MAX_SEQS, BUDGET = 128, 2048  # the scheduler's defaults, which the explorer uses
DEPLOYMENTS = [
    ("h100-sxm", 1),  # a GPU
    ("tpu-v6e", 1),  # a TPU
    ("ibm-spyre", 1),  # Spyre (paged runtime, no compiled shapes)
    ("cerebras-wse3", 1),  # a wafer: a compiler places every byte (memory_utilization 1)
    ("h100-sxm", 2),  # two chips in tensor parallel
]
runner = CliRunner()

Answer = dict[str, float]


def _cli(args: list[str]) -> dict[str, Any]:
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _sim_answer(r: dict[str, Any]) -> Answer:
    """What a simulation result says (``SimResult.to_dict``)."""
    return {
        "tokens/s": r["output_tokens_per_s"],
        "ttft mean": r["ttft_s"]["mean"],
        "tpot mean": r["tpot_s"]["mean"],
        "ttft p50": r["ttft_s"]["p50"],
        "tpot p50": r["tpot_s"]["p50"],
    }


def via_simulate(hw: str, tp: int) -> Answer:
    d = _cli(
        f"simulate --hw {hw} -m {MODEL} --tp {tp} --workload offline -n {REQUESTS} "
        f"--prompt fixed:{ISL} --output fixed:{OSL} --max-seqs {MAX_SEQS} --chunk {BUDGET} "
        f"--max-model-len {ISL + OSL}".split()
    )
    assert d["mode"] == "calibrated"
    return _sim_answer(d["results"][0])


def _predict_args(hw: str, tp: int) -> list[str]:
    return (
        f"predict --hw {hw} -m {MODEL} --tp {tp} --isl {ISL} --osl {OSL} --requests {REQUESTS} "
        f"--max-seqs {MAX_SEQS} --max-num-batched-tokens {BUDGET}".split()
    )


def via_predict(hw: str, tp: int) -> Answer:
    d = _cli(_predict_args(hw, tp))
    assert d["mode"] == "calibrated"
    return {
        "tokens/s": d["output_tokens_per_s"],
        "ttft mean": d["ttft_s"],
        "tpot mean": d["tpot_s"],
    }


SPEC = """
[sweep]
name = "one-point"
models = ["{model}"]
accelerators = ["{hw}"]

[[deployments]]
chips = {tp}

[[policies]]
name = "p"
max_num_batched_tokens = {budget}
max_num_seqs = {seqs}

[[workloads]]
name = "offline"
num_requests = {n}
arrival = "offline"
prompt_tokens = {isl}
output_tokens = {osl}

[slo]
ttft_s = 1e6
tpot_s = 1e6
percentile = 50

[search]
max_probes = 1
decide_early = false
"""


def via_sweep(hw: str, tp: int, tmp: Path) -> Answer:
    spec = tmp / f"{hw}-{tp}.toml"
    sizes = {"budget": BUDGET, "seqs": MAX_SEQS, "n": REQUESTS, "isl": ISL, "osl": OSL}
    spec.write_text(SPEC.format(model=MODEL, hw=hw, tp=tp, **sizes))
    db = tmp / f"{hw}-{tp}.db"
    d = _cli(["sweep", "run", str(spec), "--db", str(db), "--workers", "1", "--no-progress"])
    assert d["mode"] == "calibrated"
    (probe,) = read_store(db).probes
    p = probe.result
    return {"tokens/s": p.output_tokens_per_s, "ttft p50": p.ttft_p50_s, "tpot p50": p.tpot_p50_s}


def via_explorer(hw: str, tp: int, client: TestClient) -> Answer:
    body = {
        "model": MODEL,
        "accelerator": hw,
        "tensor_parallel": tp,
        "arrival": "offline",
        "num_requests": REQUESTS,
        "prompt_len": ISL,
        "output_len": OSL,
    }
    started = client.post("/api/simulate", json=body)
    assert started.status_code == 202, started.text
    deadline = time.monotonic() + 60
    while (job := client.get(f"/api/simulate/{started.json()['id']}").json())["status"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    assert job["status"] == "done", job["error"]
    assert job["result"]["mode"] == "calibrated"
    return _sim_answer(job["result"])


def via_report(hw: str, tp: int, tmp: Path) -> Answer:
    workload = WorkloadSpec(
        num_requests=REQUESTS,
        arrival=Arrival.OFFLINE,
        prompt=Lengths(LengthDist.FIXED, ISL),
        output=Lengths(LengthDist.FIXED, OSL),
    )
    question = ServingQuestion(workload, SchedulerConfig(max_model_len=ISL + OSL))
    pricing = Pricing.of(Deployment(get_accelerator(hw), tp))  # the report's default: calibrated
    section = serving_section(ReportContext(get_model(MODEL), pricing, tmp, serving=question))
    assert section.data["mode"] == "calibrated"
    paged = section.data["results"][0]  # the base configuration; the others vary it
    assert paged["label"] == "paged"
    return _sim_answer(paged)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.mark.parametrize(("hw", "tp"), DEPLOYMENTS)
def test_five_paths_give_the_same_numbers(
    hw: str, tp: int, client: TestClient, tmp_path: Path
) -> None:
    answers = {
        "simulate": via_simulate(hw, tp),
        "predict": via_predict(hw, tp),
        "sweep": via_sweep(hw, tp, tmp_path),
        "explorer": via_explorer(hw, tp, client),
        "report": via_report(hw, tp, tmp_path),
    }
    base = answers["simulate"]
    assert base["tokens/s"] > 0 and base["tpot mean"] > 0
    for path, answer in answers.items():
        for figure, value in answer.items():
            assert value == pytest.approx(base[figure], rel=1e-9), (path, figure)
    # each path answered with the figures it reports: all five with the throughput
    assert all("tokens/s" in a for a in answers.values())


def test_the_question_is_priced_calibrated_and_ideal_apart() -> None:
    """The same question on the ideal roofline (--ideal) is faster, so the agreement above is
    not an agreement on nothing."""
    cal = via_predict("h100-sxm", 1)
    ideal = _cli([*_predict_args("h100-sxm", 1), "--ideal"])
    assert ideal["mode"] == "ideal"
    assert ideal["output_tokens_per_s"] > 1.2 * cal["tokens/s"]
