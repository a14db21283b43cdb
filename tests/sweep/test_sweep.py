"""Sweeps: spec parsing, workloads and traces, the capacity search (against a hand-computed
answer), early stopping, the Pareto front, stores, resume, and local vs Ray backends.

The simulator here is ``sweep_double.FifoDouble``, a test double whose latencies are computable
by hand (see its docstring); the real serving simulator has its own test in test_sweep_sim.py.
"""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

import ridgeline as rl
from ridgeline.errors import ConfigError
from ridgeline.sweep import (
    Arrival,
    Bracket,
    FrontPoint,
    Lengths,
    LocalBackend,
    PointResult,
    ProbeTask,
    SearchSettings,
    SharedContext,
    SqliteStore,
    Status,
    SweepSpec,
    WorkloadSpec,
    at_rate,
    load_spec,
    load_table,
    next_rate,
    pareto_front,
    read_store,
    read_trace,
    run_sweep,
    spec_from_dict,
    sweep_report,
)
from srctree import REPO, TESTS
from sweep_double import FifoDouble

SPEC = """
[sweep]
name = "small"
models = ["llama-3.1-8b"]
accelerators = ["h100-sxm", "h200"]
chips = [1, 2]
objective = "goodput_per_chip"

[[policies]]
name = "p"
max_num_batched_tokens = [512, 2048]

[[workloads]]
name = "fixed"
arrival = "uniform"
prompt_tokens = 1000
output_tokens = 20
num_requests = 30

[slo]
ttft_s = 0.5
tpot_s = 0.05
percentile = 90

[search]
rate_start_rps = 2.0
rel_tolerance = 0.05
early_stop = false

[prices.h100-sxm]
usd_per_chip_hour = 2.0
watts_per_chip = 700
"""


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(text)
    return path


# --- spec ------------------------------------------------------------------------------------


def test_spec_expands_axes_and_policy_knobs(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path))
    configs = spec.configurations()
    assert len(configs) == 1 * 2 * 2 * 2 * 1
    assert [p.name for p in spec.policies] == [
        "p[max_num_batched_tokens=512]",
        "p[max_num_batched_tokens=2048]",
    ]
    assert configs[0].label == "llama-3.1-8b/h100-sxm×1 tp1pp1/p[max_num_batched_tokens=512]/fixed"
    assert spec.objective_factor(configs[-1]) == 0.5  # per chip, 2 chips


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("block_size", "max_num_batched_tokens = [512, 2048]\nblock_size = 0"),
            "policies.0.block_size: ",
        ),
        (('"goodput_per_chip"', '"goodput_per_dollar"'), "prices.h200.usd_per_chip_hour"),
        (("[slo]", "[slo\n"), "line"),
        (("chips = [1, 2]", "chips = [1, 1]"), "deployments"),
        (("percentile = 90", "percentile = 120"), "slo.percentile"),
    ],
)
def test_spec_errors_name_the_field(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    old, new = edit
    text = SPEC.replace(old, new) if old in SPEC else SPEC.replace("[sweep]", f"[sweep]\n{new}")
    if old == "block_size":
        text = SPEC.replace("max_num_batched_tokens = [512, 2048]", new)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_spec(_spec(tmp_path, text))


# --- workloads --------------------------------------------------------------------------------


def test_trace_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,2\n0.5,x,3\n")
    with pytest.raises(ConfigError, match=r"t\.csv:3: field num_prefill_tokens: not a number"):
        read_trace(bad)
    with pytest.raises(ConfigError, match="no such file|No such file"):
        read_trace(tmp_path / "missing.csv")


def test_trace_is_retimed_to_the_asked_rate(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    rows = "\n".join(f"{t},{10 + int(t)},2" for t in (0.0, 1.0, 5.0, 6.0, 8.0))
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows + "\n")
    table = read_trace(trace, skip=1, limit=3)  # rows at 1, 5, 6: native rate 2 / 5 s
    assert table.prompt_tokens.tolist() == [11, 15, 16]
    req = at_rate(table, Arrival.TRACE, rate_rps=0.8, seed=0)  # twice as fast as native 0.4
    assert req.arrival_s.tolist() == [0.0, 2.0, 2.5]  # burstiness kept, scaled by 1/2


def test_poisson_arrivals_depend_only_on_the_seed() -> None:
    w = WorkloadSpec(
        name="w", num_requests=1000, prompt=Lengths.between(5, 5), output=Lengths.between(1, 9)
    )
    table = load_table(w, seed=3)
    assert table.prompt_tokens.tolist() == [5] * 1000 and set(table.output_tokens) <= set(
        range(1, 10)
    )
    a, b = at_rate(table, Arrival.POISSON, 4.0, 7), at_rate(table, Arrival.POISSON, 4.0, 7)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert a.arrival_s[0] == 0.0
    assert abs(999 / a.arrival_s[-1] - 4.0) < 0.4  # the mean rate is the asked one


def _toml_dict(text: str) -> dict[str, object]:
    import tomllib

    return tomllib.loads(text)


@pytest.mark.slow
def test_duration_mode_takes_rate_times_duration_requests(tmp_path: Path) -> None:
    w = WorkloadSpec(
        name="w",
        arrival=Arrival.UNIFORM,
        num_requests=None,
        prompt=Lengths.between(10, 10),
        output=Lengths.between(2, 2),
        duration_s=5.0,
        max_requests=40,
    )
    assert [w.requests_at(r, 40) for r in (0.1, 2.0, 7.9, 100.0)] == [2, 10, 40, 40]
    text = SPEC.replace("num_requests = 30", "duration_s = 5.0\nmax_requests = 40")
    out = run_sweep(
        load_spec(_spec(tmp_path, text)),
        SqliteStore(tmp_path / "d.db"),
        LocalBackend(1),
        FifoDouble(),
    )
    assert all(r.capacity_rps is not None and r.capacity_rps <= 8.0 for r in out.results)
    assert "capped" in {r.status for r in out.results}  # the double outruns 40 requests / 5 s


# --- search -----------------------------------------------------------------------------------


def test_bracket_doubles_then_bisects_geometrically() -> None:
    s = SearchSettings(rate_start_rps=1.0, rel_tolerance=0.1)
    capacity, b, rates = 5.0, Bracket(), []
    while not isinstance(rate := next_rate(b, s), Status):
        rates.append(rate)
        b = b.observe(rate, rate <= capacity)
    assert rates[:4] == [1.0, 2.0, 4.0, 8.0]
    assert rates[4] == pytest.approx(math.sqrt(32))
    assert rate is Status.CONVERGED
    assert b.lo_rps is not None and b.hi_rps is not None
    assert b.lo_rps <= capacity < b.hi_rps <= b.lo_rps * 1.1


def test_bracket_ends_infeasible_below_the_minimum_rate() -> None:
    s = SearchSettings(rate_start_rps=1.0, rate_min_rps=0.25)
    b = Bracket()
    for _ in range(5):
        rate = next_rate(b, s)
        if isinstance(rate, Status):
            break
        b = b.observe(rate, False)
    assert rate is Status.INFEASIBLE and b.num_probes == 3  # 1, 0.5, 0.25


def test_pareto_front_keeps_only_undominated_points() -> None:
    pts = [
        FrontPoint("a", 1, 100.0, 0.010),
        FrontPoint("b", 1, 200.0, 0.020),
        FrontPoint("c", 1, 150.0, 0.030),  # dominated by b (less throughput, more latency)
        FrontPoint("d", 1, 200.0, 0.025),  # dominated by b (same throughput, more latency)
        FrontPoint("e", 1, 50.0, 0.010),  # dominated by a
    ]
    assert [p.label for p in pareto_front(pts)] == ["a", "b"]


# --- capacity search against a hand-computed answer --------------------------------------------


def _hand_spec(n: int, ttft_slo_s: float) -> SweepSpec:
    data = _toml_dict(
        f"""
[sweep]
models = ["llama-3.1-8b"]
accelerators = ["h100-sxm"]
[[workloads]]
name = "fixed"
arrival = "uniform"
prompt_tokens = 1000
output_tokens = 1
num_requests = {n}
[slo]
ttft_s = {ttft_slo_s}
tpot_s = 1.0
percentile = 100
[search]
rate_start_rps = 1.0
rel_tolerance = 0.001
max_probes = 40
"""
    )
    return spec_from_dict(data)


@pytest.mark.slow
def test_capacity_search_finds_the_hand_computed_rate(tmp_path: Path) -> None:
    """One server, fixed lengths, one output token, arrivals every 1/λ: each request takes
    s = 1000 × 1e-4 = 0.1 s. Below λ = 1/s nobody waits (TTFT = s); above it request k waits
    k(s − 1/λ), so the last of n has TTFT = s + (n − 1)(s − 1/λ). With the TTFT SLO S at p100:
    S = s + (n − 1)(s − 1/λ*)  ⇒  λ* = 1 / (s − (S − s)/(n − 1)) = 1 / (0.1 − 0.01) = 11.11 req/s
    for n = 11, S = 0.2 s."""
    s, n, slo = 0.1, 11, 0.2
    expected = 1 / (s - (slo - s) / (n - 1))
    store = SqliteStore(tmp_path / "hand.db")
    out = run_sweep(_hand_spec(n, slo), store, LocalBackend(1), FifoDouble())
    (res,) = out.results
    assert res.status == "converged"
    assert res.capacity_rps is not None and res.upper_rps is not None
    assert res.capacity_rps <= expected < res.upper_rps <= res.capacity_rps * 1.001
    assert out.num_simulated == res.num_probes


# --- sweeps: early stopping, stores, resume, backends ------------------------------------------


def _run(tmp_path: Path, name: str, spec: SweepSpec, backend: object) -> list[tuple[object, ...]]:
    store = SqliteStore(tmp_path / f"{name}.db")
    run_sweep(spec, store, backend, FifoDouble())  # type: ignore[arg-type]
    store.close()
    return _rows(tmp_path / f"{name}.db")


def _rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as con:
        probes = con.execute("SELECT key, rate_rps, result_json FROM probes ORDER BY 1, 2")
        results = con.execute("SELECT * FROM results ORDER BY key")
        return [*probes.fetchall(), *results.fetchall()]


@pytest.mark.slow
def test_early_stopping_stops_dominated_configurations(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, SPEC.replace("early_stop = false", "early_stop = true")))
    store = SqliteStore(tmp_path / "early.db")
    out = run_sweep(spec, store, LocalBackend(1), FifoDouble())
    full = run_sweep(
        load_spec(_spec(tmp_path)), SqliteStore(tmp_path / "full.db"), LocalBackend(1), FifoDouble()
    )
    statuses = [r.status for r in out.results]
    assert "dominated" in statuses and out.num_simulated < full.num_simulated
    best = max(full.results, key=lambda r: r.objective or 0)
    assert max(out.results, key=lambda r: r.objective or 0).key == best.key  # same winner


@pytest.mark.slow
def test_early_stopping_compares_configurations_of_one_model_only(tmp_path: Path) -> None:
    text = SPEC.replace("early_stop = false", "early_stop = true").replace(
        'models = ["llama-3.1-8b"]', 'models = ["llama-3.1-8b", "mistral-7b"]'
    )
    spec = load_spec(_spec(tmp_path, text))
    out = run_sweep(spec, SqliteStore(tmp_path / "two.db"), LocalBackend(1), FifoDouble())
    winners = {
        c.model
        for c, r in zip(spec.configurations(), out.results, strict=True)
        if r.status == "converged"
    }
    assert winners == {"llama-3.1-8b", "mistral-7b"}  # each model keeps its own winner


class _Dies:
    """A backend that dies after ``after`` probes, as a killed sweep does."""

    def __init__(self, after: int) -> None:
        self.inner, self.after = LocalBackend(1), after

    def start(self, ctx: SharedContext) -> None:
        self.inner.start(ctx)

    def run(self, tasks: Sequence[ProbeTask]) -> Iterator[tuple[ProbeTask, PointResult]]:
        for item in self.inner.run(tasks):
            if self.after == 0:
                raise KeyboardInterrupt
            self.after -= 1
            yield item

    def close(self) -> None:
        self.inner.close()


@pytest.mark.slow
def test_interrupted_sweep_resumes_and_stores_each_point_once(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path))
    reference = _run(tmp_path, "ref", spec, LocalBackend(1))
    store = SqliteStore(tmp_path / "cut.db")
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, store, _Dies(after=13), FifoDouble())  # type: ignore[arg-type]
    assert len(read_store(tmp_path / "cut.db").probes) == 13
    out = run_sweep(spec, store, LocalBackend(1), FifoDouble())
    assert out.num_reused >= 13
    assert _rows(tmp_path / "cut.db") == reference
    again = run_sweep(spec, store, LocalBackend(1), FifoDouble())
    assert again.num_simulated == 0


@pytest.mark.slow
def test_killed_cli_sweep_resumes_with_each_point_once(tmp_path: Path) -> None:
    """The real thing: ``ridgeline sweep run`` SIGKILLed midway, then run again."""
    spec = _spec(tmp_path)
    db = tmp_path / "killed.db"
    cmd = [
        sys.executable,
        "-c",
        "from ridgeline.cli import main; main()",
        "sweep",
        "run",
        str(spec),
        "--db",
        str(db),
        "--workers",
        "1",
        "--simulator",
        "sweep_double:make_slow",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _count(db) < 5:
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored = _count(db)
    assert stored >= 5
    resume = [*cmd[:-2], "sweep_double:make", "--no-progress"]  # same results, no sleep
    subprocess.run(resume, env=env, check=True, capture_output=True)
    reference = _run(tmp_path, "ref", load_spec(spec), LocalBackend(1))
    assert _rows(db) == reference


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as con:
            return int(con.execute("SELECT count(*) FROM probes").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_local_pool_and_ray_give_identical_results(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'ridgeline[ray]')")
    from ridgeline.sweep import RayBackend

    spec = load_spec(_spec(tmp_path))
    inline = _run(tmp_path, "inline", spec, LocalBackend(1))
    pool = _run(tmp_path, "pool", spec, LocalBackend(2))
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(TESTS)}},  # workers import the double
        )
    except Exception as e:  # noqa: BLE001 - any failure to start is a reason to skip
        pytest.skip(f"ray cannot start a local cluster here: {e}")
    try:
        on_ray = _run(tmp_path, "ray", spec, RayBackend())
    finally:
        ray.shutdown()
    assert inline == pool == on_ray
    assert len(inline) > 8


@pytest.mark.slow
def test_report_ranks_and_finds_the_front(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path))
    _run(tmp_path, "rep", spec, LocalBackend(1))
    rep = sweep_report(read_store(tmp_path / "rep.db"))
    assert rep.num_configs == 8 and rep.status_counts == {"converged": 8}
    best = rep.best
    assert best is not None and "/h200×" in best.label  # the double's fastest chip
    objectives = [s.objective or 0 for s in rep.ranked]
    assert objectives == sorted(objectives, reverse=True)
    assert rep.front and all(p.throughput_per_chip > 0 for p in rep.front)
    if importlib.util.find_spec("pandas") is not None:  # one row per ranked configuration
        df = rep.to_dataframe()
        assert list(df["label"]) == [s.label for s in rep.ranked]
        assert list(df["capacity_rps"]) == [s.capacity_rps for s in rep.ranked]
    assert rep._repr_html_().startswith("<table><caption>small: 8 configurations")


@pytest.mark.slow
def test_parquet_store_round_trips(tmp_path: Path) -> None:
    pytest.importorskip(
        "pyarrow", reason="pyarrow is not installed (pip install 'ridgeline[parquet]')"
    )
    from ridgeline.sweep import ParquetStore

    spec = load_spec(_spec(tmp_path))
    store = ParquetStore(tmp_path / "pq")
    run_sweep(spec, store, LocalBackend(1), FifoDouble())
    sq = SqliteStore(tmp_path / "sq.db")
    run_sweep(spec, sq, LocalBackend(1), FifoDouble())
    assert read_store(tmp_path / "pq") == read_store(tmp_path / "sq.db")


def test_importing_the_sweep_package_keeps_the_analytic_sweep_callable() -> None:
    import ridgeline.sweep  # noqa: F401

    m, a = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
    s = rl.sweep(m, a, rl.Phase.DECODE, np.array([1, 8]), np.array([128, 128]))
    assert s.step_time_s.shape == (2,)


# --- CLI --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_run_status_report(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from ridgeline.cli import app

    runner = CliRunner()
    spec, db = _spec(tmp_path), tmp_path / "cli.db"
    base = ["sweep", "run", str(spec), "--db", str(db), "--workers", "1"]
    args = [*base, "--simulator", "sweep_double:make", "--no-progress", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stderr
    run_out = json.loads(res.stdout)
    assert run_out["num_configs"] == 8 and run_out["num_simulated"] > 8
    res = runner.invoke(app, ["sweep", "status", str(db), "--json"])
    status = json.loads(res.stdout)
    assert (
        status["status_counts"] == {"converged": 8}
        and status["best"]["llama-3.1-8b"]["objective"] > 0
    )
    res = runner.invoke(app, ["sweep", "status", str(db)])
    assert "p[max_num_batched_tokens=" in res.stdout  # knob tags are not eaten as Rich markup
    png = tmp_path / "front.png"
    res = runner.invoke(app, ["sweep", "report", str(db), "--plot", str(png)])
    assert res.exit_code == 0 and "Pareto front" in res.stdout and png.stat().st_size > 1000
    res = runner.invoke(app, ["report", "--sweep", str(db), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.stderr
    assert "Capacity sweep" in (tmp_path / "r" / "report.md").read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", "status", "/nonexistent.db"],
        ["sweep", "run", "/nonexistent.toml"],
        ["sweep", "run", "SPEC", "--simulator", "nomodule:make"],
        ["sweep", "run", "SPEC", "--chips", "1,x"],
    ],
)
def test_cli_errors_are_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    from typer.testing import CliRunner

    from ridgeline.cli import app

    args = [str(_spec(tmp_path)) if a == "SPEC" else a for a in args]
    res = CliRunner().invoke(
        app, [*args, "--db", str(tmp_path / "x.db")] if "run" in args else args
    )
    assert res.exit_code == 2
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1


def test_a_probe_task_carries_no_requests(tmp_path: Path) -> None:
    """Tasks carry a configuration, a rate and a seed; the trace travels once, in the context."""
    import pickle

    trace = REPO / "benchmarks" / "data" / "splitwise_conv_6k.csv"
    w = WorkloadSpec(
        name="conv",
        arrival=Arrival.TRACE,
        num_requests=None,
        trace_path=str(trace),
        duration_s=60.0,
    )
    spec = load_spec(_spec(tmp_path))
    config = spec.configurations()[0]
    from dataclasses import replace

    task = ProbeTask("k", replace(config, workload=w), 4.0, 0)
    ctx = SharedContext(FifoDouble(), {"conv": load_table(w, 0)}, spec.slo)
    assert len(pickle.dumps(task)) < 2_000 < 100_000 < len(pickle.dumps(ctx))  # 6,000 rows


@pytest.mark.slow
def test_a_store_reused_with_another_spec_reports_only_that_spec(tmp_path: Path) -> None:
    db = tmp_path / "reuse.db"
    run_sweep(load_spec(_spec(tmp_path)), SqliteStore(db), LocalBackend(1), FifoDouble())
    narrower = SPEC.replace('accelerators = ["h100-sxm", "h200"]', 'accelerators = ["h200"]')
    out = run_sweep(
        load_spec(_spec(tmp_path, narrower)), SqliteStore(db), LocalBackend(1), FifoDouble()
    )
    assert out.num_simulated == 0  # every h200 probe was already stored
    assert sweep_report(read_store(db)).num_configs == 4
