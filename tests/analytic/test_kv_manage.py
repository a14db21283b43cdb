"""``kv-manage`` (the five architectures side by side) and ``layout`` (banks, alignment, order)."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache

import pytest
from typer.testing import CliRunner

from ridgeline.analytic.layout import LayoutQuery, Order, layout_report
from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import SimConfig, WorkloadSpec, generate, parse_lengths, simulate
from ridgeline.sim.kv_manage import KVManageOptions, aggregate, kv_manage, kv_path
from ridgeline.sim.variants import variant
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.kv_practice import Provider, Technique, kv_practice

runner = CliRunner()
SCHED = SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=256, max_model_len=2048)


def _trace():  # type: ignore[no-untyped-def]
    spec = WorkloadSpec(
        num_requests=8,
        rate_per_s=2.0,
        prompt=parse_lengths("lognormal:300", 300),
        output=parse_lengths("lognormal:40", 40),
        num_prefixes=2,
        prefix_len=256,
    )
    return generate(spec)


@cache
def _report():  # type: ignore[no-untyped-def]
    model = get_model("llama-3.1-8b")
    return kv_manage(model, _trace(), KVManageOptions(SCHED), ("h100-sxm", "ibm-spyre"))


@pytest.mark.slow
def test_each_architecture_says_who_allocates_and_where_kv_lives() -> None:
    gpu, spyre = _report().rows
    assert (gpu.allocator, spyre.allocator) == (Provider.RUNTIME, Provider.BOTH)
    # a vLLM block: 16 tokens × 131,072 B of llama-3.1-8b KV per token
    assert gpu.granularity_bytes == 16 * 131_072
    assert spyre.path == "lpddr5 (runtime) → lx (compiler)"
    assert gpu.path.startswith("hbm (runtime) → l2 (hardware) → smem (kernel)")
    assert [t.technique for t in gpu.techniques] == list(Technique)
    # the providers come from data/kv_management.toml
    assert (
        spyre.techniques[1].provider
        is kv_practice("dataflow").technique(Technique.PAGED_ATTENTION).provider
    )


@pytest.mark.slow
def test_technique_effects_are_the_simulators_numbers() -> None:
    """Prefix caching on the H100 row: TTFT p50 without and with, as two independent runs."""
    gpu = _report().rows[0]
    prefix = next(t for t in gpu.techniques if t.technique is Technique.PREFIX_CACHING)
    wl = _trace()
    base = SimConfig(
        get_model("llama-3.1-8b"), Pricing.expected(get_accelerator("h100-sxm")), SCHED
    )
    without = simulate(variant(base, "paged", wl), wl).ttft_s.p50 * 1e3
    with_ = simulate(variant(base, "prefix", wl), wl).ttft_s.p50 * 1e3
    assert (prefix.without, prefix.with_) == (pytest.approx(without), pytest.approx(with_))
    assert prefix.with_ < prefix.without  # the shared prefixes are not recomputed
    assert prefix.change == pytest.approx(with_ / without - 1)


def test_aggregate_sums_capacity_bandwidth_and_peak() -> None:
    h = get_accelerator("h100-sxm")
    two = aggregate(h, 2)
    assert two.device_capacity_bytes == 2 * h.device_capacity_bytes
    assert two.device_bandwidth_bytes_per_s == 2 * h.device_bandwidth_bytes_per_s
    assert two.level("smem").instances == 2 * h.level("smem").instances
    assert kv_path(two) == kv_path(h)


@pytest.mark.slow
def test_kv_manage_cli_json() -> None:
    r = runner.invoke(
        app,
        [
            "kv-manage",
            "-m",
            "gpt2",
            "--hw",
            "ibm-spyre",
            "-n",
            "4",
            "--max-model-len",
            "1024",
            "--prefixes",
            "0",
            "--prompt",
            "fixed:200",
            "--output",
            "fixed:20",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["schema"] == "ridgeline.kv-manage/3" and d["mode"] == "calibrated"
    assert [t["technique"] for t in d["rows"][0]["techniques"]] == [t.value for t in Technique]


def test_layout_report_by_hand() -> None:
    level = get_accelerator("h100-sxm").level("smem")
    rep = layout_report(level, 128.0, LayoutQuery(strides=(1, 2, 6, 32, 33)))
    # 32 lanes over 32 banks: degree gcd(stride, 32)
    assert [b.conflict_degree for b in rep.banks] == [1, 2, 2, 32, 1]
    # 256 B at offset 32 touches ⌈(32 + 256) / 128⌉ = 3 sticks instead of 2
    assert [a.granules_touched for a in rep.alignments] == [2, 3, 3, 3, 2]
    walks = {t.order: t.amplification for t in rep.traversals}
    # column by column, every 4-B element pulls a 128-B line: 32 bytes per useful byte
    assert walks == {Order.ROW: 1.0, Order.COLUMN: 32.0}
    cached = layout_report(level, 128.0, replace(LayoutQuery(), cache_bytes=1024 * 128))
    assert {t.amplification for t in cached.traversals} == {1.0}


@pytest.mark.slow
def test_layout_cli_json_and_plot(tmp_path) -> None:  # type: ignore[no-untyped-def]
    png = tmp_path / "l.png"
    r = runner.invoke(
        app, ["layout", "--stride", "4", "--granule", "32", "--json", "--plot", str(png)]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["schema"] == "ridgeline.layout/1" and d["banks"][0]["conflict_degree"] == 4
    assert png.stat().st_size > 10_000
