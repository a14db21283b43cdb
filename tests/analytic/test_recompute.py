"""Recompute or cache (``analytic.recompute``, ``ridgeline recompute``, the quiz item): the KV
cache trades FLOPs for bytes, priced by hand on the roofline."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from ridgeline.analytic import Phase, Workload, step_cost
from ridgeline.analytic.recompute import recompute_point, recompute_trade
from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.quiz import grade, parse_response
from ridgeline.quiz.generators import m6_recompute
from ridgeline.quiz.types import Mistake, Module
from ridgeline.specs import get_accelerator, get_model

RNG = random.Random(0)


def test_cache_read_and_recompute_by_hand() -> None:
    m, h100 = get_model("llama-3.1-8b"), get_accelerator("h100-sxm")
    p = recompute_point(m, h100, 1024)
    # K and V: 2 × 32 layers × 1,024 tokens × 8 KV heads × 128 × 2 B
    assert p.kv_bytes == 2 * 32 * 1024 * 8 * 128 * 2 == 134_217_728
    assert p.read_s == pytest.approx(134_217_728 / 3.35e12)  # 40.07 us at 3.35 TB/s
    prefill = step_cost(m, h100, Workload(Phase.PREFILL, 1, 1024))
    assert (p.recompute_flops, p.recompute_s) == (prefill.flops, prefill.step_time_s)
    # a prefill is ~2 FLOPs per parameter per token: 1.46e13 FLOPs, 108,602 per byte kept
    assert p.recompute_flops == pytest.approx(1.4576e13, rel=1e-3)
    assert p.flops_per_byte == pytest.approx(p.recompute_flops / 134_217_728)
    assert p.ratio == pytest.approx(prefill.step_time_s / (134_217_728 / 3.35e12))
    assert 410 < p.ratio < 415


def test_every_architecture_caches_and_the_ridge_point_says_why() -> None:
    m = get_model("llama-3.1-8b")
    for name in ("h100-sxm", "tpu-v5e", "cerebras-wse3", "groq-lpu", "ibm-spyre"):
        acc = get_accelerator(name)
        t = recompute_trade(m, acc, (1024, 4096))
        assert t.caches and t.level == acc.device_level
        assert t.ridge_point == pytest.approx(acc.ridge_point())
        assert all(p.flops_per_byte > 100 * t.ridge_point for p in t.points)
        assert "cache" in t.sentence()
    # attention's FLOPs grow with the context squared: the FLOPs per byte kept grow too
    t = recompute_trade(m, get_accelerator("h100-sxm"), (1024, 32768))
    assert t.points[1].flops_per_byte > t.points[0].flops_per_byte


def test_a_bad_context_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="field context"):
        recompute_point(get_model("llama-3.1-8b"), get_accelerator("h100-sxm"), 0)


def test_recompute_cli_table_and_json() -> None:
    r = CliRunner().invoke(app, ["recompute", "--hw", "ibm-spyre", "-t", "4096", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["schema"] == "ridgeline.recompute/1"
    (trade,) = d["trades"]
    assert trade["accelerator"] == "ibm-spyre" and trade["mode"] == "ideal" and trade["caches"]
    assert trade["points"][0]["kv_bytes"] == 2 * 32 * 4096 * 8 * 128 * 2
    r = CliRunner().invoke(app, ["recompute", "--hw", "h100-sxm", "-t", "1024"])
    assert r.exit_code == 0 and "FLOP per byte kept / ridge" in r.stdout and "413x" in r.stdout


def test_the_quiz_item_by_hand() -> None:
    q = m6_recompute.recompute_q(RNG, "llama-3.1-8b", "h100-sxm", 1024)
    assert q.module is Module.KV_SIZING and q.generator == "recompute_cache"
    m, h100 = get_model("llama-3.1-8b"), get_accelerator("h100-sxm")
    prefill = step_cost(m, h100, Workload(Phase.PREFILL, 1, 1024)).step_time_s
    want = prefill / (134_217_728 / 3.35e12)
    assert q.answer == pytest.approx(want)
    assert grade(q, parse_response(q, f"{want:.4g}")).correct
    # the classic mistakes land on traps: all 32 query heads (4x the bytes), K without V
    traps = {c.mistake: c.value for c in q.choices}
    assert traps[Mistake.KV_ALL_QUERY_HEADS] == pytest.approx(want / 4)
    assert traps[Mistake.KV_WITHOUT_V] == pytest.approx(want * 2)
    assert not grade(q, parse_response(q, f"{want / 4:.4g}")).correct
