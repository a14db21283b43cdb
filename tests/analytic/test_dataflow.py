"""The compiled schedule on a scratchpad accelerator, the three orchestrators, and the CLI."""

from __future__ import annotations

import json
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ridgeline.analytic import Phase, Workload
from ridgeline.analytic.dataflow import (
    Bucket,
    Kind,
    ScheduleOptions,
    compile_schedule,
    step_timeline,
)
from ridgeline.analytic.orchestrate import orchestrate
from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.calibration import CostMode


@cache
def _spyre_decode():  # type: ignore[no-untyped-def]
    return compile_schedule(
        get_model("llama-3.1-8b"), get_accelerator("ibm-spyre"), Workload(Phase.DECODE, 1, 4096)
    )


@pytest.mark.slow
def test_spyre_decode_reads_by_category_by_hand() -> None:
    s = _spyre_decode()
    # llama-3.1-8b, bf16. Weights per layer: q 4096², k and v 4096·1024 each, o 4096²,
    # gate/up/down 3·4096·14336, two norms 2·4096 = 218,112,000 params; ×32 = 6,979,584,000;
    # + final norm 4,096 + lm_head 128,256·4,096 = 525,336,576 + one embedding row 4,096
    # = 7,504,928,768 params × 2 B = 15,009,857,536 B.
    weights = 15_009_857_536
    # KV read: 2 (K,V) × 32 layers × 4,096 tokens × 8 heads × 128 × 2 B = 536,870,912 B;
    # KV written for the new token: 2 × 32 × 8 × 128 × 2 = 131,072 B.
    kv_read, kv_write = 536_870_912, 131_072
    # Activations read, elements per layer: attn_norm 8,192 (the fused residual add before it
    # reads the sublayer output and the residual: analytic.ops._norm_op) + qkv 4,096 + attention
    # (q 4,096 + new k,v 2,048) 6,144 + o 4,096 + mlp_norm 8,192 + up/gate 4,096 + act 28,672
    # + down 14,336 = 77,824; ×32 = 2,490,368; + final norm 8,192 + lm_head 4,096
    # = 2,502,656 elements × 2 B = 5,005,312 B.
    act_read = 5_005_312
    # Activations written, per layer: 8,192 (the new residual and the norm's output) + 6,144
    # + 4,096 + 4,096 + 8,192 + 28,672 + 14,336 + 4,096 = 77,824; ×32 + embedding 4,096
    # + final norm 8,192 + lm_head 128,256 = 2,630,912 elements × 2 B = 5,261,824 B.
    act_write = 5_261_824
    assert s.analytic_weight_bytes == weights
    assert s.analytic_kv_bytes == kv_read + kv_write
    assert s.analytic_act_bytes == act_read + act_write
    assert s.loaded_bytes == pytest.approx(weights + kv_read + act_read, rel=1e-12)
    by_cat = s.loaded_by_category()  # what the compiled loads themselves carry
    assert by_cat.weight == pytest.approx(weights, rel=1e-12)
    assert by_cat.kv == pytest.approx(kv_read, rel=1e-12)
    assert by_cat.act == pytest.approx(act_read, rel=1e-12)
    assert by_cat.partial == 0
    assert s.stored_bytes == pytest.approx(kv_write + act_write, rel=1e-12)
    assert s.reload_bytes == 0
    # time at 200 GB/s: (15,551,733,760 + 5,392,896) / 200e9 = 77.79 ms; the schedule is within
    # 0.1% of it (fill and drain of each op)
    assert s.roofline_time_s == pytest.approx(15_557_126_656 / 200e9)
    assert s.roofline_time_s <= s.time_s < 1.001 * s.roofline_time_s


def test_spyre_program_fits_and_is_aligned() -> None:
    s = _spyre_decode()
    assert s.peak_occupancy_bytes <= 1_625_292
    for r in s.runs:
        assert all(b.addr % 128 == 0 and b.size_bytes % 128 == 0 for b in r.program.buffers)
    qkv = next(r for r in s.runs if r.program.name == "attn.qkv_proj")
    assert qkv.program.array_util == pytest.approx(1 / 8)  # M = 1 on an 8x8 array
    assert qkv.dma_busy_s > 50 * qkv.compute_busy_s  # weight streaming, compute idles
    segs = step_timeline(s)
    assert segs[-1].end_s == pytest.approx(s.time_s)
    assert sum(1 for g in segs if g.name == "attn.core") == 32


def test_bucket_padding_is_counted() -> None:
    m, spyre = get_model("llama-3.1-8b"), get_accelerator("ibm-spyre")
    s = compile_schedule(
        m, spyre, Workload(Phase.DECODE, 3, 3000), options=ScheduleOptions(keep_events=False)
    )
    assert s.bucket == Bucket(4, 4096)
    full = compile_schedule(
        m, spyre, Workload(Phase.DECODE, 4, 4096), options=ScheduleOptions(keep_events=False)
    )
    assert s.loaded_bytes == pytest.approx(full.loaded_bytes)
    assert 0 < s.padding_fraction < 0.1
    with pytest.raises(ConfigError, match="field bucket"):
        compile_schedule(m, spyre, Workload(Phase.DECODE, 8, 10), Bucket(4, 16))


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    model=st.sampled_from(["gpt2", "llama-3.1-8b", "mixtral-8x7b", "qwen2.5-7b"]),
    phase=st.sampled_from(list(Phase)),
    batch=st.integers(1, 8),
    context=st.integers(1, 1024),
    ring=st.booleans(),
)
def test_schedule_bytes_equal_analytic_plus_declared_reloads(
    model: str, phase: Phase, batch: int, context: int, ring: bool
) -> None:
    m, spyre = get_model(model), get_accelerator("ibm-spyre")
    w = Workload(phase, batch, context)
    opts = ScheduleOptions(use_ring=ring, keep_events=False)
    s = compile_schedule(m, spyre, w, Bucket(batch, context), opts)
    assert s.loaded_bytes == pytest.approx(s.analytic_read_bytes + s.reload_bytes, rel=1e-9)
    assert s.stored_bytes == pytest.approx(s.analytic_write_bytes + s.restore_bytes, rel=1e-9)
    for r in s.runs:
        prog = r.program
        assert prog.total(Kind.LOAD, reload=True) == 0 or prog.reload_note
        assert prog.occupancy_bytes <= spyre.level("lx").usable_capacity_bytes
        if prog.plan is not None:  # re-loads are exactly the extra passes of the tiling
            t, ps, c = prog.terms, prog.plan.passes, s.core.cores
            a = float(t.act_read_bytes) / t.count  # the whole input, per core
            b = float(t.weight_bytes) / t.count / c  # this core's columns
            out = float(t.act_write_bytes) / t.count / c
            expected = (ps.a_reads - 1) * a + (ps.b_reads - 1) * b + ps.c_reads * out
            if not ring:  # every core also reads the other cores' share of the input once
                expected += a * (c - 1) / c
            assert prog.total(Kind.LOAD, reload=True) == pytest.approx(expected, abs=1e-6)


def test_orchestrators_share_one_kv_cache() -> None:
    g = get_accelerator
    rep = orchestrate(
        get_model("llama-3.1-8b"),
        1,
        4096,
        g("h100-sxm"),
        g("tpu-v6e"),
        g("ibm-spyre"),
        CostMode.IDEAL,
    )
    assert rep.traffic.kv_read_bytes == 536_870_912
    assert [r.binding for r in rep.rows] == ["hbm", "hbm", "lpddr5"]
    gpu, tpu, spyre = rep.rows
    # block table: ⌈4096/16⌉ = 256 entries × 4 B × 32 layers = 32,768 B on top of the KV
    assert gpu.moves[0].moved_bytes == rep.traffic.hbm_bytes + 32_768
    assert gpu.time_s == pytest.approx(gpu.moves[0].moved_bytes / 3.35e12)
    assert spyre.time_s > tpu.time_s > gpu.time_s
    # calibrated (the default): the KV streams at the family's KV bandwidth efficiency
    expected = orchestrate(
        get_model("llama-3.1-8b"), 1, 4096, g("h100-sxm"), g("tpu-v6e"), g("ibm-spyre")
    )
    eff = g("h100-sxm").calibration.kv_bandwidth_efficiency
    assert expected.mode is CostMode.CALIBRATED and eff < 1
    assert expected.rows[0].time_s == pytest.approx(gpu.time_s / eff, rel=1e-12)


runner = CliRunner()


@pytest.mark.slow
def test_cli_schedule_json_and_timeline(tmp_path) -> None:  # type: ignore[no-untyped-def]
    png = tmp_path / "t.png"
    r = runner.invoke(app, ["schedule", "--json", "--timeline", str(png)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["schema"] == "ridgeline.schedule/1"
    assert d["bytes_per_level"]["dram_loaded"] == pytest.approx(15_551_733_760)
    assert png.stat().st_size > 10_000


@pytest.mark.slow
def test_cli_commands_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for args in (
        ["tile", "--m", "1", "--k", "4096", "--n", "4096", "--plot", str(tmp_path / "a.png")],
        ["flash", "--context", "2048", "--plot", str(tmp_path / "f.png")],
        ["orchestrate", "--json"],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output


def test_cli_error_is_one_line_exit_2() -> None:
    r = runner.invoke(app, ["tile", "--k", "0"])
    assert r.exit_code == 2
    # the option is refused before any work, by the CLI's bounds (cli.common)
    assert (
        r.stderr.strip()
        == "error: Invalid value for '--k': Input should be greater than or equal to 1"
    )


def test_program_listing_shows_double_buffered_addresses() -> None:
    from ridgeline.analytic.dataflow import listing, program_of

    prog = program_of(_spyre_decode(), "attn.qkv_proj")
    lines = listing(prog, max_steps=2)
    # c-stationary 1x64x192 per core: K/64 = 64 steps, weight tiles 64·192·2 = 24,576 B,
    # alternating between the two B buffers
    assert "64 steps per layer" in lines[0]
    weights = [ln for ln in lines if "load    weight" in ln]
    assert all("24,576 B" in ln for ln in weights)
    assert weights[0].split("LX ")[1] != weights[1].split("LX ")[1]
    with pytest.raises(ConfigError, match="field program"):
        program_of(_spyre_decode(), "nope")


def test_a_machine_without_a_level_below_its_scratchpad_is_refused() -> None:
    with pytest.raises(ConfigError, match="field device_level"):
        compile_schedule(
            get_model("gpt2"), get_accelerator("groq-lpu"), Workload(Phase.DECODE, 1, 8)
        )


def _toy(n_tiles: int, buffers: int, load_s: float, compute_s: float, store_s: float):  # type: ignore[no-untyped-def]
    """A streamed op on a core moving 1 B/s and computing 1 FLOP/s."""
    from ridgeline.analytic.dataflow import (
        Buffer,
        Category,
        Core,
        Instr,
        OpKind,
        OpProgram,
        Step,
        simulate_op,
    )
    from ridgeline.analytic.ops import OpTerms

    stores = (Instr(Kind.STORE, Category.ACT, store_s),) if store_s else ()
    step = Step(
        (Instr(Kind.LOAD, Category.ACT, load_s),),
        Instr(Kind.COMPUTE, Category.NONE, 0.0, compute_s),
        stores,
    )
    bufs = tuple(Buffer(f"in[{i}]", i, 1) for i in range(buffers))
    prog = OpProgram(
        "toy", 1, OpKind.STREAM, (step,) * n_tiles, bufs, None, OpTerms("toy", 1, 0.0), 1.0
    )
    core = Core(1, 1e6, 1, 1, 1.0, 1.0, 1.0)
    return simulate_op(prog, core, keep_events=True)


def test_double_buffering_timeline_by_hand() -> None:
    # 4 tiles, load 1 s, compute 2 s. Double-buffered: load0 [0,1], compute0 [1,3], load1 [1,2],
    # compute1 [3,5], load2 waits for buffer 0 (compute0 ends at 3) [3,4], compute2 [5,7],
    # load3 [5,6], compute3 [7,9] → 9 s = one exposed load + 4 computes.
    assert _toy(4, 2, 1.0, 2.0, 0.0).time_s == 9.0
    # single buffer: load, compute, load, compute ... → 4 × 3 = 12 s
    assert _toy(4, 1, 1.0, 2.0, 0.0).time_s == 12.0
    # loads and stores share one DMA queue: 3 tiles of load 1 + store 1, compute 1 →
    # the queue is busy 6 s and everything else hides under it
    run = _toy(3, 2, 1.0, 1.0, 1.0)
    assert run.time_s == 6.0 and run.dma_busy_s == 6.0 and run.compute_busy_s == 3.0


@pytest.mark.slow
def test_without_the_ring_every_core_rereads_what_the_ring_carried() -> None:
    m, spyre, w = (
        get_model("llama-3.1-8b"),
        get_accelerator("ibm-spyre"),
        Workload(Phase.DECODE, 1, 4096),
    )
    ring = _spyre_decode()
    alone = compile_schedule(
        m, spyre, w, options=ScheduleOptions(use_ring=False, keep_events=False)
    )
    assert alone.ring_bytes == 0
    assert alone.reload_bytes == pytest.approx(ring.ring_bytes)  # 73.4 MB, now from LPDDR5
    assert alone.time_s > ring.time_s
