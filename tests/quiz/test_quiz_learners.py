"""Grading from the learner's side: one who answers with the library's own functions scores
100%; one who makes the classic mistakes fails the questions that target them; tolerance
edges; answers read from text."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ridgeline.analytic import (
    Bound,
    Phase,
    Workload,
    crossover_context,
    decode_intensity,
    decode_reads,
    five_questions,
    kv_bytes,
    kv_bytes_per_token,
    step_cost,
    techniques,
    weights_bytes,
)
from ridgeline.analytic.flash import block_sizes
from ridgeline.analytic.layout import bank_conflicts
from ridgeline.analytic.tiling import LoopOrder, Matmul, Tile, plan
from ridgeline.quiz import Kind, Mistake, Question, draw_quiz, grade, grade_quiz, parse_response
from ridgeline.quiz.formulas import largest_square_tile
from ridgeline.quiz.generators import m1_ridge, m5_tiling
from ridgeline.quiz.grading import AnswerFormatError
from ridgeline.quiz.runtime import (
    paged_table_blocks,
    prefix_cache_blocks,
    reservation,
    static_batch_slot_steps,
)
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.spec_decode import expected_tokens_per_step
from ridgeline.specs import DType, ManagedBy, get_accelerator, get_model
from ridgeline.specs.kv_practice import Technique, kv_practice

Params = dict[str, Any]


def nearest(q: Question, value: float) -> str:
    """Pick the option whose number is closest to what the learner computed."""
    return min(q.choices, key=lambda c: abs((c.value or 0.0) - value)).key


def labelled(q: Question, word: str) -> str:
    """Pick the option whose text contains ``word``."""
    return next(c.key for c in q.choices if word in c.text)


def ranked(q: Question, value: Callable[[str], float]) -> str:
    names = q.params["accelerators"]
    order = sorted(range(len(names)), key=lambda i: -value(names[i]))
    return ",".join(q.item_keys[i] for i in order)


def _model_acc(p: Params) -> tuple[Any, Any]:
    return get_model(p["model"]), get_accelerator(p["accelerator"])


def _lx() -> Any:
    return get_accelerator("ibm-spyre").level("lx")


def _level_bytes(p: Params) -> int:
    lvl = get_accelerator(p["accelerator"]).level(p["level"])
    return int(lvl.usable_bytes or lvl.capacity_bytes)


def _prefix_saving(p: Params) -> float:
    without, with_cache = prefix_cache_blocks(
        p["num_requests"], p["prefix_len"], p["suffix_len"], p["block_size"]
    )
    per = kv_bytes_per_token(get_model(p["model"]))
    return (without - with_cache) * p["block_size"] * per / 1e9


def _technique_saving(p: Params) -> float:
    rows = {t.name: t for t in techniques(get_model(p["model"]), p["batch"], p["context"])}
    return (rows["mha"].kv_bytes - rows[p["technique"]].kv_bytes) / 1e9


# What a learner computes with ridgeline's functions, from the question's parameters.
LIBRARY: dict[str, Callable[[Question, Params], Any]] = {
    "ridge_point": lambda q, p: get_accelerator(p["accelerator"]).ridge_point(
        DType.BF16, p["level"]
    ),
    "weights_intensity": lambda q, p: (
        decode_intensity(*_model_acc(p), p["batch"], p["context"]).weights_only
    ),
    "kv_intensity": lambda q, p: nearest(
        q, decode_intensity(*_model_acc(p), p["batch"], p["context"]).with_kv
    ),
    "phase_bound": lambda q, p: labelled(
        q,
        "compute-bound"
        if step_cost(*_model_acc(p), Workload(Phase(p["phase"]), p["batch"], p["tokens"])).bound
        is Bound.COMPUTE
        else "bandwidth-bound",
    ),
    "attainable": lambda q, p: nearest(
        q,
        step_cost(
            *_model_acc(p), Workload(Phase(p["phase"]), p["batch"], p["tokens"])
        ).attainable_flops_per_s
        / 1e12,
    ),
    "rank_ridge": lambda q, p: ranked(q, lambda n: get_accelerator(n).ridge_point() or 0.0),
    "spyre_reads": lambda q, p: (
        decode_reads(
            get_model(p["model"]), get_accelerator("ibm-spyre"), p["batch"], p["context"]
        ).total_bytes
        / 1e9
    ),
    "match_managers": lambda q, p: [
        get_accelerator(a).level(lvl).managed_by.value for a, lvl in p["levels"]
    ],
    "who_manages": lambda q, p: labelled(
        q, get_accelerator(p["accelerator"]).level(p["level"]).managed_by.value
    ),
    "no_cache": lambda q, p: next(
        c.key
        for c in q.choices
        if all(lvl.managed_by is not ManagedBy.HARDWARE for lvl in get_accelerator(c.text).levels)
    ),
    "scarce_resource": lambda q, p: labelled(
        q,
        five_questions(
            *_model_acc(p), Workload(Phase.DECODE, p["batch"], p["context"])
        ).scarce.value,
    ),
    "chips_to_hold": lambda q, p: math.ceil(
        weights_bytes(get_model(p["model"]), DType.parse(p["weight_dtype"]))
        / get_accelerator(p["accelerator"]).device_capacity_bytes
    ),
    "rank_memory": lambda q, p: ranked(
        q,
        lambda n: (
            get_accelerator(n).device_capacity_bytes
            if p["quantity"] == "capacity"
            else get_accelerator(n).device_bandwidth_bytes_per_s
        ),
    ),
    "spyre_tile": lambda q, p: largest_square_tile(
        _lx().usable_bytes, DType.parse(p["dtype"]).bytes, p["align"]
    ),
    "tile_intensity": lambda q, p: (
        plan(
            Matmul(p["size"], p["depth"], p["size"]),
            Tile(p["tile"], p["depth"], p["tile"]),
            LoopOrder.C_STATIONARY,
            float("inf"),
        ).intensity
    ),
    "flash_block": lambda q, p: block_sizes(_level_bytes(p), p["head_dim"], 2).bc,
    "bank_conflict": lambda q, p: (
        bank_conflicts(p["stride_words"], p["num_banks"], 4).conflict_degree
    ),
    "kv_size": lambda q, p: nearest(
        q,
        kv_bytes(get_model(p["model"]), p["batch"], p["context"], DType.parse(p["kv_dtype"])) / 1e9,
    ),
    "kv_crossover": lambda q, p: crossover_context(get_model(p["model"]), batch=p["batch"]),
    "kv_saving": lambda q, p: _technique_saving(p),
    "kv_per_token": lambda q, p: kv_bytes_per_token(get_model(p["model"])) / 1024,
    "recompute_cache": lambda q, p: _recompute_ratio(p),
    "paged_blocks": lambda q, p: paged_table_blocks(p["prompt"] + p["output"], p["block_size"]),
    "contiguous_waste": lambda q, p: (
        reservation(p["tokens"], p["max_len"], p["block_size"]).reserved_waste_tokens
        * kv_bytes_per_token(get_model(p["model"]))
        / 1e6
    ),
    "prefix_savings": lambda q, p: _prefix_saving(p),
    "spec_decode": lambda q, p: expected_tokens_per_step(p["accept_rate"], p["num_draft"]),
    "static_waste": lambda q, p: _idle_percent(p["outputs"]),
    "chunked_gap": lambda q, p: _chunked_gap_ms(p),
    "disagg_transfer": lambda q, p: (
        Disagg(1, 1, p["link_gb_per_s"] * 1e9, p["latency_ms"] / 1e3).transfer_s(
            p["prompt"], kv_bytes_per_token(get_model(p["model"]))
        )
        * 1e3
    ),
    "tier_transfer": lambda q, p: _tier_ms(p),
    "bucket_padding": lambda q, p: _padding_gb(p),
    "spyre_technique": lambda q, p: next(
        c.key
        for c in q.choices
        if c.text == kv_practice("dataflow").technique(Technique(p["technique"])).becomes
    ),
}


def _recompute_ratio(p: Params) -> float:
    """A prefill of the context on the roofline ÷ reading its K and V at the bandwidth."""
    m, acc = get_model(p["model"]), get_accelerator(p["accelerator"])
    prefill = step_cost(m, acc, Workload(Phase.PREFILL, 1, p["context"])).step_time_s
    kv = 2 * m.num_layers * p["context"] * m.num_kv_heads * m.head_dim * 2
    return prefill / (kv / acc.device_bandwidth_bytes_per_s)


def _idle_percent(outputs: list[int]) -> float:
    held, used = static_batch_slot_steps(tuple(outputs))
    return 100 * (held - used) / held


def _chunked_gap_ms(p: Params) -> float:
    m, acc = get_model(p["model"]), get_accelerator(p["accelerator"])
    d = step_cost(m, acc, Workload(Phase.DECODE, p["batch"], 2048)).step_time_s
    whole = step_cost(m, acc, Workload(Phase.PREFILL, 1, p["prompt"])).step_time_s
    return (d + whole * p["chunk"] / p["prompt"]) * 1e3


def _tier_ms(p: Params) -> float:
    full = p["prefix"] // p["block_size"] * p["block_size"]
    bw = get_accelerator(p["accelerator"]).level("host").bandwidth_bytes_per_s
    return full * kv_bytes_per_token(get_model(p["model"])) / bw * 1e3


def _padding_gb(p: Params) -> float:
    m, b, t = get_model(p["model"]), p["batch"], p["context"]
    program_b = 1 << (b - 1).bit_length()  # compiled batch sizes are powers of two
    program_t = next(x for x in p["buckets"] if x >= t)
    return (kv_bytes(m, program_b, program_t) - kv_bytes(m, b, t)) / 1e9


def as_typed(q: Question, value: Any) -> Any:
    """What a person types: numbers to four significant digits (integers exactly)."""
    if q.kind is Kind.NUMERIC:
        return f"{value:.0f}" if q.rel_tol == 0 else f"{value:.4g}"
    return value


@pytest.mark.parametrize("seed", range(12))
def test_the_library_learner_scores_100_percent(seed: int) -> None:
    quiz = draw_quiz(seed)
    answers = {
        i: as_typed(q, LIBRARY[q.generator](q, dict(q.params)))
        for i, q in enumerate(quiz.questions, 1)
    }
    result = grade_quiz(quiz, answers)
    assert [m.number for m in result.wrong] == []
    assert result.score == 1.0 and result.passed


def _mha_kv(m: Any, batch: int, context: int, dtype: DType = DType.BF16) -> float:
    """KV counted with every query head: the classic mistake, by hand."""
    return 2 * m.num_layers * batch * context * m.num_heads * m.head_dim * dtype.bytes


def _kv_intensity_mha(q: Question, p: Params) -> str:
    m, acc = _model_acc(p)
    di = decode_intensity(m, acc, p["batch"], p["context"])
    return nearest(q, di.flops / (di.weight_bytes + _mha_kv(m, p["batch"], p["context"] + 1)))


def _spyre_tile_single(q: Question, p: Params) -> float:
    b, align = DType.parse(p["dtype"]).bytes, p["align"]
    return align * math.floor(math.sqrt(_lx().usable_bytes / (3 * b)) / align)


# The classic mistakes, each computed by hand from the parameters.
MISTAKES: dict[tuple[str, Mistake], Callable[[Question, Params], Any]] = {
    ("ridge_point", Mistake.SPARSE_PEAK): lambda q, p: (
        2 * get_accelerator(p["accelerator"]).ridge_point(DType.BF16, p["level"])
    ),
    ("attainable", Mistake.SPARSE_PEAK): lambda q, p: nearest(
        q, 2 * get_accelerator(p["accelerator"]).peak(DType.BF16) / 1e12
    ),
    ("kv_intensity", Mistake.WEIGHTS_ONLY): lambda q, p: nearest(
        q, decode_intensity(*_model_acc(p), p["batch"], p["context"]).weights_only
    ),
    ("kv_intensity", Mistake.KV_ALL_QUERY_HEADS): _kv_intensity_mha,
    ("kv_size", Mistake.KV_ALL_QUERY_HEADS): lambda q, p: nearest(
        q,
        _mha_kv(get_model(p["model"]), p["batch"], p["context"], DType.parse(p["kv_dtype"])) / 1e9,
    ),
    ("kv_size", Mistake.GIB_FOR_GB): lambda q, p: nearest(
        q,
        kv_bytes(get_model(p["model"]), p["batch"], p["context"], DType.parse(p["kv_dtype"]))
        / 2**30,
    ),
    ("kv_crossover", Mistake.KV_ALL_QUERY_HEADS): lambda q, p: (
        weights_bytes(get_model(p["model"])) / _mha_kv(get_model(p["model"]), p["batch"], 1)
    ),
    ("spyre_reads", Mistake.GIB_FOR_GB): lambda q, p: (
        decode_reads(
            get_model(p["model"]), get_accelerator("ibm-spyre"), p["batch"], p["context"]
        ).total_bytes
        / 2**30
    ),
    ("spyre_tile", Mistake.SINGLE_BUFFER): _spyre_tile_single,
    ("tile_intensity", Mistake.COMPULSORY_ONLY): lambda q, p: (
        2 * p["size"] ** 2 * p["depth"] / ((2 * p["size"] * p["depth"] + p["size"] ** 2) * 2)
    ),
    ("flash_block", Mistake.BYTES_FOR_ELEMENTS): lambda q, p: math.ceil(
        _level_bytes(p) / (4 * p["head_dim"])
    ),
    ("bank_conflict", Mistake.STRIDE_AS_DEGREE): lambda q, p: p["stride_words"],
    ("paged_blocks", Mistake.NO_CEIL): lambda q, p: (p["prompt"] + p["output"]) // p["block_size"],
    ("prefix_savings", Mistake.PARTIAL_BLOCK_SHARED): lambda q, p: (
        (p["num_requests"] - 1) * p["prefix_len"] * kv_bytes_per_token(get_model(p["model"])) / 1e9
    ),
    ("spec_decode", Mistake.LINEAR_ACCEPTANCE): lambda q, p: 1 + p["num_draft"] * p["accept_rate"],
    ("static_waste", Mistake.WASTE_OVER_USEFUL): lambda q, p: (
        100 * (len(p["outputs"]) * max(p["outputs"]) - sum(p["outputs"])) / sum(p["outputs"])
    ),
    ("disagg_transfer", Mistake.FORGOT_LATENCY): lambda q, p: (
        p["prompt"] * kv_bytes_per_token(get_model(p["model"])) / (p["link_gb_per_s"] * 1e9) * 1e3
    ),
    ("bucket_padding", Mistake.CONTEXT_PADDING_ONLY): lambda q, p: (
        (
            kv_bytes(
                get_model(p["model"]),
                p["batch"],
                next(x for x in p["buckets"] if x >= p["context"]),
            )
            - kv_bytes(get_model(p["model"]), p["batch"], p["context"])
        )
        / 1e9
    ),
    ("contiguous_waste", Mistake.GIB_FOR_GB): lambda q, p: (
        (p["max_len"] - p["tokens"]) * kv_bytes_per_token(get_model(p["model"])) / 2**20
    ),
}


def _targets(q: Question) -> set[Mistake]:
    return {c.mistake for c in q.choices if c.mistake is not None}


@pytest.mark.slow
def test_classic_mistakes_fail_the_questions_they_target() -> None:
    checked: set[tuple[str, Mistake]] = set()
    for seed in range(30):
        for q in draw_quiz(seed).questions:
            for (gen, mistake), wrong in MISTAKES.items():
                if gen != q.generator or mistake not in _targets(q):
                    continue
                mark = grade(q, as_typed(q, wrong(q, dict(q.params))))
                assert not mark.correct, (gen, mistake, q.params)
                assert mark.mistake is mistake, (gen, mistake, mark.response)
                checked.add((gen, mistake))
    assert checked == set(MISTAKES)  # every mistake was exercised at least once


@pytest.mark.slow
def test_a_learner_making_the_classic_mistakes_fails_the_quiz() -> None:
    for seed in range(10):
        quiz = draw_quiz(seed)
        answers = {}
        for i, q in enumerate(quiz.questions, 1):
            wrong = [f for (g, m), f in MISTAKES.items() if g == q.generator and m in _targets(q)]
            answer = (wrong[0] if wrong else LIBRARY[q.generator])(q, dict(q.params))
            answers[i] = as_typed(q, answer)
        assert not grade_quiz(quiz, answers).passed


def test_numeric_tolerance_edges() -> None:
    q = m1_ridge.ridge_point_q(None, "h100-sxm", "hbm")  # type: ignore[arg-type]
    a = q.answer
    assert isinstance(a, float) and q.rel_tol == 0.02
    for inside in (a * 1.02, a * 0.98, a):
        assert grade(q, inside).correct
    for outside in (a * 1.0201, a * 0.9799, -a):
        assert not grade(q, outside).correct


def test_exact_answers_take_no_tolerance() -> None:
    q = m5_tiling.spyre_tile_q(None, "fp16", 64)  # type: ignore[arg-type]
    assert grade(q, "384").correct and grade(q, 384.0).correct
    assert not grade(q, "383").correct and not grade(q, "385").correct
    mark = grade(q, "512")
    assert not mark.correct and mark.mistake is Mistake.SINGLE_BUFFER


def test_responses_are_read_from_text() -> None:
    q = m5_tiling.spyre_tile_q(None, "fp16", 64)  # type: ignore[arg-type]
    assert parse_response(q, "1,234 elements") == 1234.0
    assert parse_response(q, " 3.84e2 ") == 384.0
    with pytest.raises(AnswerFormatError, match="expected a number"):
        parse_response(q, "about four hundred")
    quiz = draw_quiz(3)
    order = next(q for q in quiz.questions if q.kind is Kind.ORDER)
    backwards = tuple(reversed(order.item_keys))
    assert parse_response(order, " ".join(k.lower() for k in backwards)) == backwards
    with pytest.raises(AnswerFormatError, match="once"):
        parse_response(order, "A,A,B,C,D")
    match = next(q for q in quiz.questions if q.kind is Kind.MATCH)
    assert parse_response(match, "k h c r") == ("kernel", "hardware", "compiler", "runtime")
    with pytest.raises(AnswerFormatError, match="one per item"):
        parse_response(match, "kernel")


def test_missing_and_unreadable_answers_are_wrong_and_say_why() -> None:
    quiz = draw_quiz(5)
    result = grade_quiz(quiz, {1: "not a number at all", 2: None})
    assert result.num_correct == 0 and not result.passed
    assert "expected" in result.marks[0].response
    assert result.marks[1].response == "(no answer)"
    assert all(m.solution for m in result.wrong)


@pytest.mark.slow
@given(
    answer=st.floats(min_value=1e-6, max_value=1e15),
    tol=st.sampled_from([0.01, 0.02, 0.03, 0.05]),
    u=st.floats(min_value=-3.0, max_value=3.0),
)
def test_a_response_is_right_exactly_when_inside_the_tolerance(
    answer: float, tol: float, u: float
) -> None:
    q = replace(
        m1_ridge.ridge_point_q(None, "h100-sxm", "hbm"),  # type: ignore[arg-type]
        answer=answer,
        rel_tol=tol,
    )
    response = answer * (1 + u * tol)
    if abs(u) <= 0.999:
        assert grade(q, response).correct
    if abs(u) >= 1.001:
        assert not grade(q, response).correct
