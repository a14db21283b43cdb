"""Module 7's new generators against hand computations, and the answer key a learner's open
attempt must not be able to export."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.quiz import QUIZ_ID, AttemptStore, Ledger, draw_quiz, fingerprint, grade_quiz
from ridgeline.quiz.bank import generators_for
from ridgeline.quiz.generators import m7_costs
from ridgeline.quiz.session import attempt_seed
from ridgeline.quiz.types import Kind, Module
from ridgeline.specs.kv_practice import Technique

R = random.Random(0)
KV_8B = 131_072  # llama-3.1-8b: 2 × 32 layers × 8 KV heads × 128 × 2 B


def test_module_7_has_ten_generators() -> None:
    names = {g.name for g in generators_for(Module.KV_RUNTIME)}
    assert {
        "static_waste",
        "chunked_gap",
        "disagg_transfer",
        "tier_transfer",
        "bucket_padding",
        "spyre_technique",
    } <= names and len(names) == 10


def test_static_waste_by_hand() -> None:
    # 4 slots × 400 steps = 1,600 slot-steps; used 100 + 200 + 300 + 400 = 1,000; idle 600
    q = m7_costs.static_waste_q(R, (100, 200, 300, 400))
    assert q.answer == pytest.approx(37.5)
    assert [c.value for c in q.choices] == [pytest.approx(60.0)]  # 600 ÷ 1,000 (the trap)


def test_chunked_gap_by_hand() -> None:
    """llama-3.1-8b on an H100 (989 TFLOP/s, 3.35 TB/s), 16 × 2,048 decoding, 4,096-token
    prompt in 512-token chunks."""
    q = m7_costs.chunked_gap_q(R, "llama-3.1-8b", "h100-sxm", 16, 4096, 512)
    # decode streams the weights (15,009,857,536 B: the embedding table is only gathered) and
    # the KV of 16 × 2,048 tokens at 3.35 TB/s
    decode_ms = (15_009_857_536 + 16 * 2048 * KV_8B) / 3.35e12 * 1e3  # ≈ 5.76 ms
    # prefill is compute-bound: 2 × 6.98e9 layer params × 4,096 tokens, attention
    # 4 × 32 layers × 4,096 × Σ_{t≤4096} t; plus the memory-bound SiLU·mul
    # (3 × 4,096 × 14,336 × 2 B × 32), the two norms of each layer with their fused residual add
    # (read sublayer output and residual, write new residual and normed input: 4 passes,
    # 2 × 4 × 4,096² × 2 B × 32) and the lm_head of the last token (its 525,336,576 bf16 weights)
    flops = 2 * 6_979_321_856 * 4096 + 4 * 32 * 4096 * 4096 * 4097 / 2
    elementwise = 32 * (3 * 4096 * 14336 * 2 + 2 * 4 * 4096 * 4096 * 2) + 525_336_576 * 2
    prefill_ms = (flops / 989e12 + elementwise / 3.35e12) * 1e3  # ≈ 68.6 ms
    assert q.answer == pytest.approx(decode_ms + prefill_ms * 512 / 4096, rel=0.02)
    whole = next(c.value for c in q.choices if c.mistake and c.mistake.name == "WHOLE_PROMPT_GAP")
    assert whole == pytest.approx(decode_ms + prefill_ms, rel=0.02)


def test_disagg_transfer_by_hand() -> None:
    # 4,096 tokens × 131,072 B = 536,870,912 B over 50 GB/s = 10.737 ms, + 1 ms latency
    q = m7_costs.disagg_transfer_q(R, "llama-3.1-8b", 4096, 50.0, 1.0)
    assert q.answer == pytest.approx(1.0 + 536_870_912 / 50e9 * 1e3)


def test_tier_transfer_by_hand() -> None:
    # ⌊1,000 ÷ 16⌋ = 62 full blocks = 992 tokens × 131,072 B over Spyre's PCIe Gen5 x16 (63 GB/s)
    q = m7_costs.tier_transfer_q(R, "llama-3.1-8b", "ibm-spyre", 1000, 16)
    assert q.answer == pytest.approx(992 * KV_8B / 63e9 * 1e3)


def test_bucket_padding_by_hand() -> None:
    # 3 sequences of 3,000 tokens run the (4, 4096) program: 4 × 4,096 × 131,072 B read
    # against 3 × 3,000 × 131,072 B of their own = 967,835,648 B of padding
    q = m7_costs.bucket_padding_q(R, "llama-3.1-8b", 3, 3000, (1024, 2048, 4096))
    assert q.answer == pytest.approx((4 * 4096 - 3 * 3000) * KV_8B / 1e9)
    assert q.answer == pytest.approx(0.967835648)


def test_spyre_technique_is_the_sourced_form() -> None:
    q = m7_costs.spyre_technique_q(random.Random(3), Technique.CHUNKED_PREFILL)
    assert q.kind is Kind.CHOICE and q.correct_choice is not None
    assert q.correct_choice.text == "chunks of one compiled chunk shape"
    assert {c.text for c in q.choices if c.mistake} >= {"prompts split under a token budget"}


def test_every_new_generator_grades_its_own_answer() -> None:
    for make in (
        m7_costs.static_waste,
        m7_costs.chunked_gap,
        m7_costs.disagg_transfer,
        m7_costs.tier_transfer,
        m7_costs.bucket_padding,
        m7_costs.spyre_technique,
    ):
        for seed in range(15):
            q = make(random.Random(seed))
            assert q.module is Module.KV_RUNTIME and q.solution
            assert all(c.value is None or c.value != q.answer for c in q.choices if c.mistake)


def _export(tmp_path: Path, seed: int, *extra: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    args = [
        "quiz",
        "export",
        "--seed",
        str(seed),
        "--out",
        str(out),
        "--db",
        str(tmp_path / "q.db"),
        *extra,
    ]
    return CliRunner().invoke(app, args, env=env), out


def test_a_learner_cannot_export_the_key_of_an_open_attempt(tmp_path: Path) -> None:
    store = AttemptStore(tmp_path / "q.db")
    seed = attempt_seed("ana", 1)
    store.open_attempt("ana", QUIZ_ID, 1, seed)  # what ``quiz start`` records before question 1
    r, out = _export(tmp_path, seed)
    assert r.exit_code == 0, r.output
    assert "answer key withheld" in r.stderr and "ana's open attempt 1" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        f"quiz-{seed}-answers.json",
        f"quiz-{seed}.html",
        f"quiz-{seed}.md",
    ]
    # the instructor's copy needs the flag and the instructor secret, goes to another file and
    # says whose seed it is
    secret = {"RIDGELINE_QUIZ_SECRET": "a long instructor secret"}
    r = CliRunner().invoke(app, ["quiz", "instructor-init"], env=secret)
    assert r.exit_code == 0, r.output
    r, out = _export(tmp_path, seed, "--instructor-key", env=secret)
    key = out / f"quiz-{seed}-instructor-key.md"
    assert r.exit_code == 0 and key.exists() and not (out / f"quiz-{seed}-key.md").exists()
    assert key.read_text().startswith(f"# ridgeline quiz — INSTRUCTOR answer key, seed {seed}")
    # once submitted, the attempt is closed; ana's next default seed is protected instead
    quiz = draw_quiz(seed)
    store.submit("ana", QUIZ_ID, grade_quiz(quiz, {}), {})
    r, _ = _export(tmp_path, Ledger(tmp_path / "q.db").next_seed("ana", 2))
    assert "ana's next attempt 2" in r.stderr
    r, out = _export(tmp_path, seed)  # a closed attempt's key is an ordinary export again
    assert (out / f"quiz-{seed}-key.md").exists() and r.stderr == ""


def test_no_attempt_is_graded_on_a_seed_whose_key_was_exported(tmp_path: Path) -> None:
    """A learner who exports the key of their first default seed before starting cannot then
    take (or grade an answer sheet on) that seed: the default moves to another one."""
    seed = attempt_seed("bo", 1)
    r, out = _export(tmp_path, seed)
    assert r.exit_code == 0 and (out / f"quiz-{seed}-key.md").exists()
    db = str(tmp_path / "q.db")
    r = CliRunner().invoke(app, ["quiz", "start", "-u", "bo", "--db", db, "--seed", str(seed)])
    assert r.exit_code == 2 and f"answer key of seed {seed} was exported" in r.stderr
    r = CliRunner().invoke(app, ["quiz", "start", "-u", "bo", "--db", db], input="")
    assert r.exit_code == 130 and f"seed {attempt_seed('bo', 1, k=1)}" in r.output
    sheet = out / f"quiz-{seed}-answers.json"
    filled = json.loads(sheet.read_text()) | {"answers": {"1": "1"}}  # a blank one is refused
    sheet.write_text(json.dumps(filled))
    r = CliRunner().invoke(app, ["quiz", "start", "-u", "bo", "--db", db, "--answers", str(sheet)])
    assert r.exit_code == 2 and "was exported" in r.stderr
    assert AttemptStore(tmp_path / "q.db").status("bo", QUIZ_ID).attempts == ()
    # another seed still works: one that repeats no question of bo's open (interrupted) attempt
    seen = {fingerprint(q) for q in draw_quiz(attempt_seed("bo", 1, k=1)).questions}
    other = next(
        s
        for s in range(seed + 1, seed + 200)
        if not seen & {fingerprint(q) for q in draw_quiz(s).questions}
    )
    r = CliRunner().invoke(
        app, ["quiz", "start", "-u", "bo", "--db", db, "--seed", str(other)], input=""
    )
    assert r.exit_code == 130 and f"seed {other}" in r.output  # it starts; EOF interrupts it
