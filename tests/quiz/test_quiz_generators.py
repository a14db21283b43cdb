"""Every generator's answer against a hand computation for fixed parameters (the arithmetic is
written out here, from the catalog's published numbers), and every distractor clear of the
answer by more than the question's tolerance."""

from __future__ import annotations

import math
import random

import pytest

from ridgeline.analytic import Phase, Workload
from ridgeline.analytic.questions import memory_needed_bytes
from ridgeline.quiz import GENERATORS, Kind, Module, Question, draw_quiz, generators_for
from ridgeline.quiz.generators import (
    m1_ridge,
    m2_roofline,
    m3_managers,
    m4_architectures,
    m5_tiling,
    m6_kv_sizing,
    m7_kv_runtime,
)
from ridgeline.quiz.types import Mistake
from ridgeline.specs import get_accelerator, get_model

RNG = random.Random(0)

# Hand numbers from the catalog's sources (shared/reference/hardware.md) and config.json files.
LLAMA8_PARAMS = 8_030_261_248  # published count
LLAMA8_EMBED = 128_256 * 4096  # vocab × hidden, untied (lm_head is a separate matrix)
LLAMA8_MATMUL = LLAMA8_PARAMS - LLAMA8_EMBED  # 7,504,924,672
LLAMA8_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K,V × layers × KV heads × head dim × bf16 = 131,072
LLAMA70_PARAMS = 70_553_706_496
SPYRE_LX_USABLE = 1_625_292  # 2 MiB − 64 KiB − 20 % [S37]


def correct_value(q: Question) -> float:
    c = q.correct_choice
    assert c is not None and c.value is not None
    return c.value


def correct_text(q: Question) -> str:
    c = q.correct_choice
    assert c is not None
    return c.text


# --- module 1 ------------------------------------------------------------------------------


def test_ridge_point_h100_hbm() -> None:
    q = m1_ridge.ridge_point_q(RNG, "h100-sxm", "hbm")
    assert q.answer == pytest.approx(989.4e12 / 3.35e12, rel=1e-9)  # 295.3 FLOP/B [S6][S1]
    assert {c.mistake for c in q.choices} == {Mistake.SPARSE_PEAK, Mistake.GIB_FOR_GB}
    sparse = next(c for c in q.choices if c.mistake is Mistake.SPARSE_PEAK)
    assert sparse.value == pytest.approx(2 * 989.4e12 / 3.35e12)


def test_ridge_point_spyre_lx() -> None:
    q = m1_ridge.ridge_point_q(RNG, "ibm-spyre", "lx")
    assert q.answer == pytest.approx(98.3e12 / 6.14e12, rel=1e-9)  # 16.0 FLOP/B


def test_weights_only_intensity_on_h100() -> None:
    q = m1_ridge.weights_intensity_q(RNG, "h100-sxm", "llama-3.1-8b", 8, 1024)
    # 2 FLOPs per MAC for every matmul weight and batch row, plus QKᵀ and PV over 1,025 keys.
    flops = 2 * 8 * LLAMA8_MATMUL + 4 * 8 * 32 * 32 * 128 * 1025
    weight_bytes = (LLAMA8_MATMUL + 8 * 4096) * 2  # every matrix once + 8 gathered embedding rows
    assert q.answer == pytest.approx(flops / weight_bytes, rel=0.01)  # ≈ 8.29
    assert q.rel_tol == 0.05


def test_intensity_with_kv_on_h100() -> None:
    q = m1_ridge.kv_intensity_q(RNG, "h100-sxm", "llama-3.1-8b", 16, 16384)
    flops = 2 * 16 * LLAMA8_MATMUL + 4 * 16 * 32 * 32 * 128 * 16385
    weights = (LLAMA8_MATMUL + 16 * 4096) * 2
    kv = LLAMA8_KV_PER_TOKEN * 16 * 16385  # read 16,384 cached + write 1 per sequence
    assert correct_value(q) == pytest.approx(flops / (weights + kv), rel=0.01)  # ≈ 7.65
    wrong = {c.mistake: c.value for c in q.choices if c.mistake}
    assert wrong[Mistake.WEIGHTS_ONLY] == pytest.approx(flops / weights, rel=0.01)
    assert wrong[Mistake.KV_ALL_QUERY_HEADS] == pytest.approx(flops / (weights + 4 * kv), rel=0.01)


# --- module 2 ------------------------------------------------------------------------------


def test_phase_bound_decode_batch1_is_bandwidth_bound() -> None:
    q = m2_roofline.phase_bound_q(
        RNG, "h100-sxm", "llama-3.1-8b", m2_roofline.Phase.DECODE, 1, 1024
    )
    # ≈ 2 FLOPs per 2-byte weight = 1 FLOP/B, far below 295 FLOP/B.
    assert correct_text(q).startswith("bandwidth-bound")


def test_phase_bound_prefill_is_compute_bound() -> None:
    q = m2_roofline.phase_bound_q(
        RNG, "h100-sxm", "llama-3.1-8b", m2_roofline.Phase.PREFILL, 1, 2048
    )
    # ≈ 2·2048 FLOPs per 2-byte weight ≈ 2,000 FLOP/B > 295.
    assert correct_text(q).startswith("compute-bound")


@pytest.mark.slow
def test_phase_bound_key_does_not_hang_on_activation_bytes() -> None:
    """Regression: some draws had a key that flipped when activation bytes, which
    the question does not state, were left out. Every draw is now robust both ways."""
    from ridgeline.analytic import step_cost

    for seed in range(400):
        q = m2_roofline.phase_bound(random.Random(seed))
        p = q.params
        m, acc = get_model(p["model"]), get_accelerator(p["accelerator"])
        cost = step_cost(m, acc, Workload(Phase(p["phase"]), p["batch"], p["tokens"]))
        lean = cost.flops / (cost.weight_bytes + cost.kv_read_bytes + cost.kv_write_bytes)
        compute_with, compute_without = (
            cost.arithmetic_intensity > cost.ridge_point,
            lean > cost.ridge_point,
        )
        assert compute_with == compute_without, (seed, p)
        assert correct_text(q).startswith("compute" if compute_with else "bandwidth")


def test_kv_per_token_mha_trap_of_deepseek_uses_its_key_and_value_widths() -> None:
    """Regression: DeepSeek-V3's all-query-heads trap used head_dim 56 (hidden ÷
    heads); plain attention caches a 192-wide key (128 nope + 64 rope) and a 128-wide value
    per head: 61 layers x 128 heads x (192 + 128) x 2 B = 4,997,120 B per token."""
    q = m6_kv_sizing.kv_per_token_q(RNG, "deepseek-v3")
    wrong = {c.mistake: c.value for c in q.choices if c.mistake}
    assert wrong[Mistake.KV_ALL_QUERY_HEADS] == pytest.approx(61 * 128 * 320 * 2 / 1024)


def test_rank_ridge_points_of_the_five() -> None:
    names = ("h100-sxm", "tpu-v5e", "groq-lpu", "ibm-spyre", "cerebras-wse3")
    q = m2_roofline.rank_ridge_q(RNG, names)
    # h100 989.4/3.35 = 295; v5e 197/0.819 = 241; groq 188/80 = 2.35; spyre 98.3/0.2 = 491.5;
    # cerebras 15.8e3/21e3 = 0.75 (TFLOP/s ÷ TB/s)
    assert q.answer == ("D", "A", "B", "C", "E")
    assert q.kind is Kind.ORDER


def test_spyre_decode_reads() -> None:
    q = m2_roofline.spyre_reads_q(RNG, "llama-3.1-8b", 1, 4096)
    weights = (LLAMA8_MATMUL + 4096) * 2
    kv = LLAMA8_KV_PER_TOKEN * 4097
    assert q.answer == pytest.approx((weights + kv) / 1e9, rel=0.01)  # ≈ 15.55 GB
    gib = next(c for c in q.choices if c.mistake is Mistake.GIB_FOR_GB)
    assert gib.value == pytest.approx(q.answer * 1e9 / 2**30)


def test_attainable_compute_bound_prefill_uses_the_dense_peak() -> None:
    q = m2_roofline.attainable_q(
        RNG, "h100-sxm", "llama-3.1-8b", m2_roofline.Phase.PREFILL, 1, 2048
    )
    assert correct_value(q) == pytest.approx(989.4)  # TFLOP/s: the dense roof
    wrong = {c.mistake: c.value for c in q.choices if c.mistake}
    assert wrong[Mistake.SPARSE_PEAK] == pytest.approx(2 * 989.4)


def test_attainable_memory_bound_decode_is_intensity_times_bandwidth() -> None:
    q = m2_roofline.attainable_q(RNG, "h100-sxm", "llama-3.1-8b", m2_roofline.Phase.DECODE, 1, 1024)
    flops = 2 * LLAMA8_MATMUL + 4 * 32 * 32 * 128 * 1025
    moved = (LLAMA8_MATMUL + 4096) * 2 + LLAMA8_KV_PER_TOKEN * 1025  # weights + KV (+ tiny acts)
    assert correct_value(q) == pytest.approx(flops / moved * 3.35e12 / 1e12, rel=0.01)  # ≈ 3.4
    wrong = {c.mistake: c.value for c in q.choices if c.mistake}
    assert wrong[Mistake.NO_MEMORY_ROOF] == pytest.approx(989.4)


# --- module 3 ------------------------------------------------------------------------------


def test_match_managers() -> None:
    pairs = (("h100-sxm", "smem"), ("h100-sxm", "l2"), ("ibm-spyre", "lx"), ("ibm-spyre", "lpddr5"))
    q = m3_managers.match_managers_q(RNG, pairs)
    assert q.answer == ("kernel", "hardware", "compiler", "runtime")  # hardware.md legends


def test_who_manages_groq_sram() -> None:
    q = m3_managers.who_manages_q(RNG, "groq-lpu", "sram")
    assert correct_text(q).startswith("the compiler")  # the TSP has no reactive hardware [S29]
    assert len(q.choices) == 4


def test_no_cache_is_spyre() -> None:
    q = m3_managers.no_cache_q(RNG, "ibm-spyre", ("h100-sxm", "mi300x", "xeon-spr"))
    assert correct_text(q) == "ibm-spyre"  # LX = compiler, LPDDR5 = runtime


# --- module 4 ------------------------------------------------------------------------------


def test_scarce_resource_capacity_on_groq() -> None:
    q = m4_architectures.scarce_q(RNG, "groq-lpu", "llama-3.1-70b", 1, 1024)
    assert correct_text(q).startswith("capacity")  # 141 GB of weights, 0.23 GB of SRAM


def test_scarce_resource_bandwidth_on_h100() -> None:
    q = m4_architectures.scarce_q(RNG, "h100-sxm", "llama-3.1-8b", 1, 1024)
    assert correct_text(q).startswith("bandwidth")  # 16 GB fits 80 GB; ~1 FLOP/B < 295


def test_chips_to_hold_70b_on_groq_and_spyre() -> None:
    groq = m4_architectures.chips_q(RNG, "groq-lpu", "llama-3.1-70b", "bf16")
    assert groq.answer == math.ceil(LLAMA70_PARAMS * 2 / 230e6) == 614
    spyre = m4_architectures.chips_q(RNG, "ibm-spyre", "llama-3.1-70b", "bf16")
    assert spyre.answer == 2  # 141.1 GB over 112 GB usable


def test_rank_memory_capacity_and_bandwidth() -> None:
    names = ("h100-sxm", "tpu-v5e", "groq-lpu", "ibm-spyre", "cerebras-wse3")
    # capacity: 80 GB, 16 GB, 0.23 GB, 112 GB usable, 44 GB
    assert m4_architectures.rank_memory_q(RNG, names, "capacity").answer == tuple("DAEBC")
    # bandwidth: 3.35 TB/s, 0.819, 80, 0.2, 21,000
    assert m4_architectures.rank_memory_q(RNG, names, "bandwidth").answer == tuple("ECABD")


# --- module 5 ------------------------------------------------------------------------------


def test_spyre_tile_fp16_aligned_to_64() -> None:
    q = m5_tiling.spyre_tile_q(RNG, "fp16", 64)
    # 5·t²·2 ≤ 1,625,292 → t ≤ 403.1 → 384; single-buffered 3·t²·2 → 520.5 → 512;
    # raw 2 MiB: 5·t²·2 ≤ 2,097,152 → 457.9 → 448; unaligned 403.
    assert q.answer == 384
    traps = {c.mistake: c.value for c in q.choices}
    assert traps == {
        Mistake.SINGLE_BUFFER: 512,
        Mistake.RAW_CAPACITY: 448,
        Mistake.NO_ALIGNMENT: 403,
    }


def test_spyre_tile_fp8_aligned_to_32() -> None:
    assert m5_tiling.spyre_tile_q(RNG, "fp8", 32).answer == 544  # √(1,625,292/5) = 570.1


def test_tile_intensity() -> None:
    q = m5_tiling.tile_intensity_q(RNG, 4096, 4096, 128)
    traffic = 32 * 32 * 4096 * (128 + 128) * 2 + 4096 * 4096 * 2  # 2,181,038,080 B
    assert q.answer == pytest.approx(2 * 4096**3 / traffic, rel=1e-9)  # 63.0
    assert q.choices[0].value == pytest.approx(2 * 4096**3 / (3 * 4096 * 4096 * 2))  # 1,365


def test_flash_block_sizes() -> None:
    h100 = m5_tiling.flash_block_q(RNG, "h100-sxm", "smem", 128)
    assert h100.answer == 228  # 233,472 B / 2 = 116,736 elements / 512
    assert h100.choices[0].value == 456
    spyre = m5_tiling.flash_block_q(RNG, "ibm-spyre", "lx", 64)
    assert spyre.answer == math.ceil(SPYRE_LX_USABLE / 2 / 256) == 3175


def test_bank_conflict_degree() -> None:
    assert m5_tiling.bank_conflict_q(RNG, 32, 8).answer == 8
    assert m5_tiling.bank_conflict_q(RNG, 32, 6).answer == 2  # banks 0,6,...: 16 distinct
    odd = m5_tiling.bank_conflict_q(RNG, 16, 3)
    assert odd.answer == 1 and odd.choices[0].value == 3


# --- module 6 ------------------------------------------------------------------------------


def test_kv_size_choices() -> None:
    q = m6_kv_sizing.kv_size_q(RNG, "llama-3.1-8b", 4, 8192, "bf16")
    size = 2 * 32 * 4 * 8192 * 8 * 128 * 2  # 4,294,967,296 B
    assert correct_value(q) == pytest.approx(size / 1e9)
    wrong = {c.mistake: c.value for c in q.choices if c.mistake}
    assert wrong == pytest.approx(
        {
            Mistake.KV_ALL_QUERY_HEADS: 4 * size / 1e9,
            Mistake.GIB_FOR_GB: size / 2**30,
            Mistake.KV_WITHOUT_V: size / 2 / 1e9,
        }
    )


def test_kv_crossover() -> None:
    q = m6_kv_sizing.kv_crossover_q(RNG, "llama-3.1-8b", 1)
    assert q.answer == math.ceil(LLAMA8_PARAMS * 2 / LLAMA8_KV_PER_TOKEN) == 122_533
    q32 = m6_kv_sizing.kv_crossover_q(RNG, "llama-3.1-8b", 32)
    assert q32.answer == math.ceil(LLAMA8_PARAMS * 2 / (32 * LLAMA8_KV_PER_TOKEN))


def test_kv_saving_mqa_and_gqa() -> None:
    mqa = m6_kv_sizing.kv_saving_q(RNG, "llama-2-7b", 1, 4096, "mqa")
    mha = 2 * 32 * 4096 * 32 * 128 * 2  # 2 GiB
    assert mqa.answer == pytest.approx((mha - mha / 32) / 1e9)  # 2.080 GB
    gqa = m6_kv_sizing.kv_saving_q(RNG, "llama-3.1-8b", 8, 8192, "gqa")
    mha8 = 2 * 32 * 8 * 8192 * 32 * 128 * 2
    assert gqa.answer == pytest.approx(mha8 * (1 - 8 / 32) / 1e9)
    fp8 = m6_kv_sizing.kv_saving_q(RNG, "llama-2-7b", 1, 4096, "fp8 kv")
    assert fp8.answer == pytest.approx(mha / 2 / 1e9)


def test_kv_per_token_gqa_and_mla() -> None:
    assert m6_kv_sizing.kv_per_token_q(RNG, "llama-3.1-8b").answer == 128.0  # 131,072 B
    # DeepSeek-V3: 61 layers × (512 latent + 64 rope) × 2 B = 70,272 B
    assert m6_kv_sizing.kv_per_token_q(RNG, "deepseek-v3").answer == pytest.approx(70_272 / 1024)


# --- module 7 ------------------------------------------------------------------------------


def test_paged_blocks() -> None:
    q = m7_kv_runtime.paged_blocks_q(RNG, 1000, 37, 16)
    assert q.answer == 65  # ⌈1,037 / 16⌉
    assert {c.mistake: c.value for c in q.choices} == {
        Mistake.NO_CEIL: 64,
        Mistake.TOKENS_NOT_BLOCKS: 1037,
    }


def test_contiguous_waste() -> None:
    q = m7_kv_runtime.contiguous_waste_q(RNG, "llama-3.1-8b", 1000, 4096, 16)
    assert q.answer == pytest.approx(3096 * LLAMA8_KV_PER_TOKEN / 1e6)  # 405.8 MB


def test_prefix_savings() -> None:
    q = m7_kv_runtime.prefix_savings_q(RNG, "llama-3.1-8b", 8, 200, 5, 32)
    # ⌊200/32⌋ = 6 full blocks = 192 tokens, reused by 7 of the 8 requests
    assert q.answer == pytest.approx(7 * 192 * LLAMA8_KV_PER_TOKEN / 1e9)  # 0.176 GB
    traps = {c.mistake: c.value for c in q.choices}
    assert traps[Mistake.PARTIAL_BLOCK_SHARED] == pytest.approx(7 * 200 * 131072 / 1e9)
    assert traps[Mistake.ALL_REQUESTS_SAVE] == pytest.approx(8 * 192 * 131072 / 1e9)


def test_spec_decode_expected_tokens() -> None:
    q = m7_kv_runtime.spec_decode_q(RNG, 0.8, 4)
    assert q.answer == pytest.approx((1 - 0.8**5) / (1 - 0.8))  # 3.3616
    assert q.choices[0].value == pytest.approx(1 + 4 * 0.8)


# --- every generator -------------------------------------------------------------------------


def test_every_module_has_at_least_three_generators() -> None:
    for module in Module:
        assert len(generators_for(module)) >= 3, module


# The generators the hand checks above pin down; a new generator must add its own.
HAND_CHECKED = {
    "ridge_point",
    "weights_intensity",
    "kv_intensity",
    "phase_bound",
    "rank_ridge",
    "spyre_reads",
    "attainable",
    "match_managers",
    "who_manages",
    "no_cache",
    "scarce_resource",
    "chips_to_hold",
    "rank_memory",
    "spyre_tile",
    "tile_intensity",
    "flash_block",
    "bank_conflict",
    "kv_size",
    "kv_crossover",
    "kv_saving",
    "kv_per_token",
    # hand-checked in tests/analytic/test_recompute.py
    "recompute_cache",
    "paged_blocks",
    "contiguous_waste",
    "prefix_savings",
    "spec_decode",
    # hand-checked in tests/quiz/test_quiz_m7.py
    "static_waste",
    "chunked_gap",
    "disagg_transfer",
    "tier_transfer",
    "bucket_padding",
    "spyre_technique",
}


def test_every_generator_has_a_hand_check() -> None:
    assert {g.name for g in GENERATORS} == HAND_CHECKED


SEEDS = range(40)


def _all_questions() -> list[Question]:
    return [g.make(random.Random(seed)) for g in GENERATORS for seed in SEEDS]


@pytest.mark.slow
def test_every_distractor_is_outside_the_tolerance() -> None:
    for q in _all_questions():
        if q.kind is Kind.NUMERIC:
            assert isinstance(q.answer, float) and math.isfinite(q.answer) and q.answer > 0
            for trap in q.choices:
                assert trap.value is not None and trap.mistake is not None
                assert abs(trap.value - q.answer) > q.rel_tol * abs(q.answer), (q.generator, trap)
        elif q.kind is Kind.CHOICE:
            right = q.correct_choice
            assert right is not None, q.generator
            assert len({c.text for c in q.choices}) == len(q.choices) >= 2
            for c in q.choices:
                if c is right:
                    continue
                assert c.mistake is not None
                if right.value is not None:
                    assert c.value is not None
                    assert abs(c.value - right.value) > q.rel_tol * abs(right.value), q.generator


@pytest.mark.slow
def test_orders_and_matches_are_well_formed() -> None:
    for q in _all_questions():
        if q.kind is Kind.ORDER:
            assert sorted(q.answer) == sorted(q.item_keys) and len(q.item_keys) == 5
        if q.kind is Kind.MATCH:
            assert len(q.answer) == len(q.items) and set(q.answer) <= set(q.options)


def test_a_seed_gives_the_same_quiz() -> None:
    a, b = draw_quiz(11), draw_quiz(11)
    assert a == b
    assert draw_quiz(12) != a


@pytest.mark.slow
def test_a_quiz_covers_all_seven_modules() -> None:
    for seed in range(25):
        quiz = draw_quiz(seed)
        assert len(quiz.questions) == 22
        counts = quiz.modules()
        assert all(counts[m] >= 2 for m in Module), counts
        assert len({q.generator for q in quiz.questions}) == 22  # 25 generators, no repeats


@pytest.mark.slow
def test_single_chip_questions_only_draw_workloads_that_fit_the_chip() -> None:
    one_chip = {"weights_intensity", "kv_intensity", "phase_bound", "attainable", "spyre_reads"}
    for gen in (g for g in GENERATORS if g.name in one_chip):
        for seed in SEEDS:
            p = gen.make(random.Random(seed)).params
            acc = get_accelerator(p.get("accelerator", "ibm-spyre"))
            phase = Phase(p.get("phase", "decode"))
            tokens = p.get("tokens", p.get("context"))
            need = memory_needed_bytes(get_model(p["model"]), Workload(phase, p["batch"], tokens))
            assert need <= acc.device_capacity_bytes, (gen.name, p)
