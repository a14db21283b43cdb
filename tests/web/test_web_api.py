"""The explorer's JSON API through FastAPI's TestClient: every endpoint, real values, and bad
inputs answered with a 422 that names the field (never a 500)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the explorer needs the 'web' extra")
pytest.importorskip("httpx", reason="TestClient needs httpx (the 'web-test' extra)")

from fastapi.testclient import TestClient  # noqa: E402

from ridgeline import analytic as an  # noqa: E402
from ridgeline.analytic import dataflow  # noqa: E402
from ridgeline.specs import DType, get_accelerator, get_model  # noqa: E402
from ridgeline.web.app import create_app  # noqa: E402

LLAMA_8B_PARAMS = 8_030_261_248
GPT2_PARAMS = 124_439_808


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


def gpt2_config() -> dict[str, Any]:
    text = resources.files("ridgeline.data").joinpath("models", "gpt2.json").read_text()
    return json.loads(text)


def field_of(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail[0]["msg"]
    return detail[0]["loc"]


def test_accelerators_list_and_show(client: TestClient) -> None:
    accs = client.get("/api/accelerators").json()["accelerators"]
    assert len(accs) == 14 and "ibm-spyre" in [a["name"] for a in accs]
    h100 = client.get("/api/accelerators/h100-sxm").json()
    assert h100["device_level"] == "hbm"
    assert h100["ridge_point_flops_per_byte"] == pytest.approx(989.4e12 / 3.35e12)
    assert field_of(client.get("/api/accelerators/h1000")) == ["path", "name"]


def test_models_list_show_and_parse(client: TestClient) -> None:
    names = [m["name"] for m in client.get("/api/models").json()["models"]]
    assert "llama-3.1-8b" in names
    llama = client.get("/api/models/llama-3.1-8b").json()
    assert (llama["params"], llama["kv_bytes_per_token"]) == (LLAMA_8B_PARAMS, 131_072)
    parsed = client.post(
        "/api/models/parse", json={"config": gpt2_config(), "config_name": "mine"}
    ).json()
    assert (parsed["name"], parsed["params"], parsed["layers"]) == ("mine", GPT2_PARAMS, 12)
    assert field_of(client.get("/api/models/llama-9")) == ["path", "name"]


def test_a_path_is_not_a_model_name(client: TestClient) -> None:
    """The server reads no file a client names: catalog names only."""
    r = client.post("/api/roofline", json={"model": "/etc/passwd"})
    assert field_of(r) == ["body", "model"] and "unknown model" in r.json()["detail"][0]["msg"]
    r = client.post("/api/roofline", json={"accelerator": "../../x.toml"})
    assert field_of(r) == ["body", "accelerator"]


def test_roofline_equals_the_library(client: TestClient) -> None:
    body = {"batch": 8, "context": 2048, "prompt": 512, "kv_dtype": "fp8"}
    r = client.post("/api/roofline", json=body).json()
    m, acc = get_model("llama-3.1-8b"), get_accelerator("h100-sxm")
    dt = an.Dtypes(kv=DType.FP8)
    expected = an.Pricing.expected(acc, dt)  # the explorer's default mode
    decode = an.step_cost(m, expected, an.Workload(an.Phase.DECODE, 8, 2048, dtypes=dt))
    prefill = an.step_cost(m, expected, an.Workload(an.Phase.PREFILL, 8, 512, dtypes=dt))
    assert r["decode"]["flops"] == decode.flops and r["decode"]["bytes"] == decode.bytes
    assert r["prefill"]["step_time_s"] == prefill.step_time_s
    assert r["mode"] == r["decode"]["mode"] == "calibrated"
    ideal = client.post("/api/roofline", json={**body, "mode": "ideal"}).json()
    roofline = an.step_cost(m, acc, an.Workload(an.Phase.PREFILL, 8, 512, dtypes=dt))
    assert ideal["mode"] == "ideal" and ideal["prefill"]["step_time_s"] == roofline.step_time_s
    assert (r["decode"]["bound"], r["prefill"]["bound"]) == ("memory", "compute")
    assert r["decode"]["dtypes"]["kv"] == "fp8"


def test_batch_moves_the_decode_point(client: TestClient) -> None:
    """What the page shows when the batch slider moves: intensity up, then the bound flips."""
    one = client.post("/api/roofline", json={"batch": 1, "context": 128}).json()["decode"]
    big = client.post("/api/roofline", json={"batch": 4096, "context": 128}).json()["decode"]
    assert big["arithmetic_intensity"] > 100 * one["arithmetic_intensity"]
    assert (one["bound"], big["bound"]) == ("memory", "compute")


def test_kv_sizing_and_curve(client: TestClient) -> None:
    k = client.post("/api/kv", json={"batch": 1, "context": 4096}).json()
    assert k["kv_bytes"] == 2 * 32 * 4096 * 8 * 128 * 2  # 2·layers·T·kv_heads·head_dim·bf16
    assert k["crossover_context_tokens"] == an.crossover_context(get_model("llama-3.1-8b"))
    assert k["capacity"]["max_context"] > 4096 and k["capacity_error"] is None
    curve = k["curve"]
    assert len(curve["context"]) == len(curve["kv_bytes"]) > 10
    assert curve["kv_bytes"] == sorted(curve["kv_bytes"])


def test_kv_when_the_weights_do_not_fit_is_a_result(client: TestClient) -> None:
    """One Groq chip cannot hold llama-3.1-70b: the answer is the smallest deployment that
    can, or, on a split given that cannot, why (never a 422 for a model that does not fit)."""
    body = {"model": "llama-3.1-70b", "accelerator": "groq-lpu"}
    k = client.post("/api/kv", json=body).json()
    assert k["capacity"]["chosen_deployment"] and k["capacity"]["deployment"]["chips"] == 616
    one = client.post("/api/kv", json={**body, "tensor_parallel": 1})
    assert one.status_code == 200
    assert one.json()["capacity"] is None and "leaves no room" in one.json()["capacity_error"]


def test_questions(client: TestClient) -> None:
    q = client.post("/api/questions", json={"batch": 1, "context": 4096}).json()
    assert (q["scarce"], q["bound"]) == ("bandwidth", "memory")
    assert q["levels"][0]["name"] == "registers" and "hbm" in [lvl["name"] for lvl in q["levels"]]
    assert q["decode_reads"]["kv_bytes"] > q["decode_reads"]["activation_bytes"]


def test_compare_five_architectures(client: TestClient) -> None:
    c = client.post("/api/compare", json={"batch": 1}).json()
    assert [r["accelerator"] for r in c["rows"]] == list(an.DEFAULT_ACCELERATORS)
    ref = an.compare(get_model("llama-3.1-8b"), an.DEFAULT_ACCELERATORS).to_dict()["rows"]
    # the fields the page draws: chips, step time and what binds
    for got, want in zip(c["rows"], ref, strict=True):
        assert got["deployment"] == want["deployment"] and got["binds"] == want["binds"]
        assert got["decode"]["binding"] == want["decode"]["binding"]
        assert got["decode"]["step_time_s"] == want["decode"]["step_time_s"]
    two = client.post("/api/compare", json={"accelerators": ["h100-sxm", "h200"]}).json()
    assert len(two["rows"]) == 2
    assert field_of(client.post("/api/compare", json={"accelerators": []})) == [
        "body",
        "accelerators",
    ]
    assert field_of(client.post("/api/compare", json={"accelerators": ["x"]})) == [
        "body",
        "accelerators",
    ]
    # every catalog chip has a peak at every dtype (specs.peaks): fp32 on Groq is priced, not
    # refused (test_fp32_activations_price_every_view_on_every_accelerator)
    r = client.post("/api/compare", json={"act_dtype": "fp32", "accelerators": ["groq-lpu"]})
    assert r.status_code == 200 and [row["accelerator"] for row in r.json()["rows"]] == ["groq-lpu"]


def test_fp32_activations_price_every_view_on_every_accelerator(client: TestClient) -> None:
    # regression: fp32 was a 422 on chips whose files list no fp32 peak (TPUs, Groq, Cerebras,
    # Spyre) and the page's five-architecture view went empty; the peak now falls back to a
    # sixth of the 16-bit peak (specs.peaks)
    body = {"act_dtype": "fp32", "batch": 1}
    c = client.post("/api/compare", json=body)
    assert c.status_code == 200, c.text
    assert [r["accelerator"] for r in c.json()["rows"]] == list(an.DEFAULT_ACCELERATORS)
    for name in ("tpu-v5e", "groq-lpu", "cerebras-wse3", "ibm-spyre"):
        for path in ("/api/roofline", "/api/questions", "/api/kv"):
            r = client.post(path, json=body | {"accelerator": name})
            assert r.status_code == 200, (name, path, r.text)
    roof = client.post("/api/roofline", json=body | {"accelerator": "tpu-v5e"}).json()
    assert roof["decode"]["peak_flops_per_s"] == pytest.approx(197e12 / 6)


def test_uploaded_config_drives_every_view(client: TestClient) -> None:
    body = {"config": gpt2_config(), "config_name": "up", "accelerator": "a100-80gb"}
    for path in ("/api/roofline", "/api/kv", "/api/questions", "/api/compare"):
        r = client.post(path, json=body)
        assert r.status_code == 200, (path, r.text)
        assert "up" in r.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"batch": 0}, "batch"),
        ({"batch": "many"}, "batch"),
        ({"batch": 10**9}, "batch"),
        ({"context": -1}, "context"),
        ({"prompt": 0}, "prompt"),
        ({"kv_dtype": "fp12"}, "kv_dtype"),
        ({"accelerator": "tpu-v9"}, "accelerator"),
        ({"model": "gpt-5"}, "model"),
        ({"config": {"model_type": "llama"}}, "config"),
        ({"config": {"model_type": "bert"}}, "config"),
        ({"config": [1, 2]}, "config"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_inputs_are_422_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    assert field_of(client.post("/api/roofline", json=body))[:2] == ["body", field]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/simulate", {"seed": True}),
        ("/api/kv-manage", {"output_len": True}),
        ("/api/roofline", {"batch": False}),
        ("/api/kv", {"memory_utilization": True}),
        ("/api/simulate", {"num_requests": "12"}),
    ],
)
def test_true_false_or_a_string_for_a_number_is_a_422(
    client: TestClient, path: str, body: dict[str, Any]
) -> None:
    """Regression (found by schemathesis): pydantic's lax mode read JSON true as 1 (and "12"
    as 12), so a body the schema rejects was accepted."""
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert next(iter(body)) in r.text


def test_kv_at_zero_context_is_a_422_not_a_500(client: TestClient) -> None:
    """Regression: analytic.techniques divides by the KV at the context, 0 at context 0."""
    assert field_of(client.post("/api/kv", json={"context": 0})) == ["body", "context"]


def test_malformed_json_and_wrong_memory_utilization(client: TestClient) -> None:
    r = client.post("/api/kv", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = client.post("/api/kv", content=b"\xff\xfe", headers={"content-type": "application/json"})
    assert field_of(r)[0] == "body"  # not UTF-8: never a 400 or a 500
    assert field_of(client.post("/api/kv", json={"memory_utilization": 1.5})) == [
        "body",
        "memory_utilization",
    ]


def test_config_error_message_names_the_inner_field(client: TestClient) -> None:
    cfg = gpt2_config() | {"n_head": 7}
    r = client.post("/api/models/parse", json={"config": cfg})
    assert field_of(r) == ["body", "config"]
    assert "'n_embd' (768) is not divisible by 'n_head' (7)" in r.json()["detail"][0]["msg"]


@pytest.mark.slow
def test_page_openapi_and_plotly_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and 'id="batch-range"' in page.text
    assert "https://" not in page.text  # no CDN
    js = client.get("/vendor/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000
    assert client.get("/static/explorer.js").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/roofline", "/api/kv", "/api/questions", "/api/compare"} <= set(paths)
    assert {"/api/schedule", "/api/flash", "/api/simulate", "/api/simulate/{job_id}"} <= set(paths)


@pytest.mark.slow
def test_explore_command_is_registered_and_the_cli_starts_without_fastapi() -> None:
    import subprocess
    import sys

    from typer.testing import CliRunner

    from ridgeline.cli import app

    result = CliRunner().invoke(app, ["explore", "--help"])
    assert result.exit_code == 0 and "--port" in result.stdout and "--open" in result.stdout
    bad = CliRunner().invoke(app, ["explore", "--port", "70000"])
    assert bad.exit_code == 2 and "port" in bad.stderr
    code = "import sys, ridgeline.cli; print(sorted({'fastapi', 'uvicorn', 'plotly'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_explore_runs_the_server_or_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from ridgeline.cli import app, web_cmds
    from ridgeline.web import server

    calls: list[tuple[str, int, bool]] = []
    monkeypatch.setattr(
        server, "serve", lambda host, port, open_: calls.append((host, port, open_))
    )
    result = CliRunner().invoke(app, ["explore", "--port", "9123", "--open"])
    assert result.exit_code == 0 and calls == [("127.0.0.1", 9123, True)]
    assert "http://127.0.0.1:9123/" in result.stderr

    monkeypatch.setattr(web_cmds, "WEB_PACKAGES", ("fastapi", "no_such_package_here"))
    result = CliRunner().invoke(app, ["explore"])
    assert result.exit_code == 2
    assert "no_such_package_here" in result.stderr and "ridgeline[web]" in result.stderr


def test_schedule_equals_the_library_and_refuses_what_it_cannot_compile(client: TestClient) -> None:
    s = client.post("/api/schedule", json={"batch": 4, "context": 1024}).json()
    w = an.Workload(an.Phase.DECODE, 4, 1024)
    spyre = get_accelerator("ibm-spyre")  # calibrated: device memory at its bandwidth efficiency
    opts = dataflow.ScheduleOptions(bandwidth_efficiency=spyre.calibration.bandwidth_efficiency)
    ref = dataflow.compile_schedule(get_model("llama-3.1-8b"), spyre, w, options=opts)
    assert (s["accelerator"], s["time_s"], s["mode"]) == ("ibm-spyre", ref.time_s, "calibrated")
    assert s["time_s"] >= s["roofline_time_s"] > 0 and len(s["ops"]) == len(ref.ops)
    r = client.post("/api/schedule", json={"accelerator": "groq-lpu"})
    assert field_of(r) == ["body", "accelerator"] and "no load/store schedule" in r.text
    big = client.post("/api/schedule", json={"phase": "prefill", "batch": 8, "context": 4096})
    assert field_of(big) == ["body"] and "ridgeline schedule" in big.json()["detail"][0]["msg"]
    assert field_of(client.post("/api/schedule", json={"batch": 5000})) == ["body", "batch"]


def test_flash_traffic_table(client: TestClient) -> None:
    f = client.post("/api/flash", json={"context": 4096}).json()
    assert [m["name"] for m in f["memories"]] == ["h100-sxm:smem", "tpu-v5e:vmem", "ibm-spyre:lx"]
    assert sorted({r["n"] for r in f["rows"]}) == [512, 1024, 2048, 4096]
    assert all(
        r["prefill_flash_bytes_per_layer"] < r["prefill_standard_bytes_per_layer"]
        for r in f["rows"]
        if r["n"] == 4096
    )
    assert field_of(client.post("/api/flash", json={"accelerators": ["nope"]})) == [
        "body",
        "accelerators",
    ]


def wait_for(client: TestClient, job_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get(f"/api/simulate/{job_id}").json()
        if job["status"] in ("done", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


@pytest.mark.slow
def test_simulation_runs_with_progress_and_returns_its_curves(client: TestClient) -> None:
    body = {"num_requests": 60, "rate_per_s": 20, "prompt_len": 256, "output_len": 32}
    started = client.post("/api/simulate", json=body)
    assert started.status_code == 202 and started.json()["total"] == 60
    job = wait_for(client, started.json()["id"])
    assert (job["status"], job["done"], job["error"]) == ("done", 60, None)
    r = job["result"]
    assert r["num_completed"] == 60 and r["schema"] == "ridgeline.simulate/2"
    assert r["cdf"]["e2e_s"]["p"][-1] == 1.0 and r["cdf"]["e2e_s"]["x"] == sorted(
        r["cdf"]["e2e_s"]["x"]
    )
    assert len(r["kv_timeline"]["time_s"]) == len(r["kv_timeline"]["used_frac"]) > 0


def test_oversized_simulations_are_refused_with_a_clear_message(client: TestClient) -> None:
    r = client.post("/api/simulate", json={"num_requests": 50_000})
    assert field_of(r) == ["body", "num_requests"]
    assert "50,000 requests is more than the explorer runs (1,000)" in r.text
    assert "ridgeline simulate -n 50000" in r.text
    r = client.post("/api/simulate", json={"num_requests": 1000, "prompt_len": 30_000})
    assert field_of(r) == ["body"] and "30,128,000 tokens" in r.text
    r = client.post("/api/simulate", json={"model": "llama-3.1-70b", "accelerator": "groq-lpu"})
    assert field_of(r) == ["body", "accelerator"] and "no room for KV" in r.text
    missing = client.get("/api/simulate/feedface")
    assert missing.status_code == 404 and missing.json()["detail"][0]["loc"] == ["path", "job_id"]


@pytest.mark.slow
def test_a_simulation_past_the_time_limit_is_stopped() -> None:
    quick = TestClient(create_app(sim_time_limit_s=0.02))
    # sparse arrivals of long outputs, the explorer's most tokens (10^6): the fast mode takes
    # them in about 0.5 s of CPU (220,790 steps), 25 times the limit
    body = {"num_requests": 1000, "rate_per_s": 1, "prompt_len": 1, "output_len": 999}
    started = quick.post("/api/simulate", json=body).json()
    job = wait_for(quick, started["id"])
    assert job["status"] == "failed" and "stopped after 0.02 s" in job["error"]
    assert job["done"] < 1000 and job["result"] is None


@pytest.mark.slow
def test_shutdown_stops_a_running_simulation() -> None:
    import time

    from ridgeline.web.jobs import Jobs
    from ridgeline.web.schemas import SimulateBody

    body = SimulateBody(num_requests=1000, rate_per_s=200, prompt_len=512)
    jobs = Jobs()
    job = jobs.submit(body)
    while job.status == "queued":
        time.sleep(0.01)
    jobs.shutdown()
    deadline = time.monotonic() + 30
    while job.status == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.status == "failed" and job.error == "the explorer is shutting down"


def test_refusals_read_as_the_library_wrote_them(client: TestClient) -> None:
    body = {"model": "gpt2", "accelerator": "a100-80gb", "num_requests": 5000}
    r = client.post("/api/simulate", json=body)
    assert r.status_code == 422
    (d,) = r.json()["detail"]
    assert d["loc"] == ["body", "num_requests"]
    assert d["msg"].startswith("5,000 requests is more than the explorer runs")
    assert "Value error" not in r.text


def test_explore_on_a_busy_port_is_one_line_and_exit_2() -> None:
    import socket

    from typer.testing import CliRunner

    from ridgeline.cli import app

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(app, ["explore", "--port", str(port)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: port {port} on 127.0.0.1 is in use: stop what holds it or pass --port"
    )


def test_kv_manage_view_equals_the_library(client: TestClient) -> None:
    body = {
        "model": "gpt2",
        "accelerators": ["h100-sxm"],
        "num_requests": 4,
        "prefixes": 1,
        "prefix_len": 128,
        "prompt_len": 100,
        "output_len": 16,
        "max_model_len": 1024,
    }
    r = client.post("/api/kv-manage", json=body)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["schema"] == "ridgeline.kv-manage/3" and d["rows"][0]["allocator"] == "runtime"
    assert d["mode"] == "calibrated"
    assert len(d["rows"][0]["techniques"]) == 7
    too_many = client.post("/api/kv-manage", json={**body, "num_requests": 500})
    assert field_of(too_many) == ["body", "num_requests"]


def test_the_kv_manage_view_shows_each_orchestrator_as_the_catalog_does(client: TestClient) -> None:
    """Regression: the explorer's "KV cache under five orchestrators" showed who allocates but
    no orchestrator. The API carries the catalog's label and the page has a column for it."""
    body = {"model": "gpt2", "accelerators": ["h100-sxm", "ibm-spyre"], "num_requests": 2}
    small = {"prompt_len": 64, "output_len": 4, "prefix_len": 64, "max_model_len": 512}
    r = client.post("/api/kv-manage", json={**body, **small})
    assert r.status_code == 200, r.text
    shown = {row["accelerator"]: row["orchestrator"] for row in r.json()["rows"]}
    assert shown == {n: get_accelerator(n).orchestrator for n in body["accelerators"]}
    static = resources.files("ridgeline.web") / "static"
    page = (static / "index.html").read_text()
    head = page[page.index('<table id="kvm-arch-table">') :].split("</thead>")[0]
    assert '<th scope="col">orchestrator</th>' in head
    assert "escapeHtml(a.orchestrator)" in (static / "explorer.js").read_text()


# --- plan ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_plan_answers_with_winners_front_and_intervals(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b", "accelerators": ["h100-sxm"], "isl": 512, "osl": 64}
    r = client.post("/api/plan", json={**body, "rate_rps": 5, "ttft_s": 0.5, "tpot_s": 0.05})
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["model"] == "llama-3.1-8b" and p["mode"] == "calibrated"
    w = p["winner"]
    assert w["chips"] == 1 and w["tokens_per_s_per_chip"] == pytest.approx(5 * 64)
    iv = w["intervals"]["tpot_s"]
    assert iv["low"] < w["met"]["tpot_p_s"] < iv["high"] and iv["family"] == "nvidia-gpu"
    assert p["front"] and p["commands"][0]["engine"] == "vllm"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rate_rps": 0}, "rate_rps"),
        ({"rate_rps": -1}, "rate_rps"),
        ({"ttft_s": 0}, "ttft_s"),
        ({"percentile": 101}, "percentile"),
        ({"accelerators": ["h100"]}, "accelerators"),
        ({"accelerators": ["h100-sxm", "h200", "b200", "mi300x", "tpu-v5e"]}, "accelerators"),
        ({"rate_rps": True}, "rate_rps"),
        ({"weight_dtypes": ["fp4"], "accelerators": ["h100-sxm"]}, "weight_dtypes"),
        ({"seconds": 3600}, "seconds"),
    ],
)
def test_plan_bad_bodies_are_422_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    assert field_of(client.post("/api/plan", json=body))[:2] == ["body", field]


def test_a_plan_too_big_for_the_explorer_is_refused_at_once(client: TestClient) -> None:
    body = {"accelerators": ["h100-sxm", "h200", "b200", "mi300x"], "rate_rps": 1000}
    r = client.post("/api/plan", json={**body, "isl": 32768, "osl": 8192, "seconds": 30})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "unsatisfiable"
    assert "the CLI runs it" in r.json()["detail"][0]["msg"]
