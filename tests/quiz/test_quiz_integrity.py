"""Quiz integrity: attempts tied to the learner's ledger, not to a ``--db`` file; the key of one's
own open attempt withheld whatever ``--db`` says; the instructor key only with the instructor
secret; no question repeated within a learner's attempts; a questions-only export; the time
allowance stated. Each test has its own quiz home (``conftest._quiz_home``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.quiz import MAX_ATTEMPTS, Ledger, draw_quiz, fingerprint, quiz_home
from ridgeline.quiz.session import TIME_ALLOWANCE_S, attempt_seed
from test_quiz_cli import right_answers, sheet

runner = CliRunner()
SECRET = {"RIDGELINE_QUIZ_SECRET": "correct horse battery staple"}


def quiz(*args: str, stdin: str | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["quiz", *args], input=stdin, env=env)


def grade_next(tmp_path: Path, user: str, db: Path | None, num_right: int = 10):  # type: ignore[no-untyped-def]
    """Grade a sheet of the learner's next quiz (the seed the ledger would give)."""
    ledger = Ledger(db)
    attempt = min(len(ledger.status(user).attempts) + 1, MAX_ATTEMPTS)
    seed = ledger.next_seed(user, attempt)
    path = sheet(tmp_path, num_right, seed, f"{user}-{attempt}.json")
    extra = ["--db", str(db)] if db is not None else []
    return quiz("start", "--user", user, "--answers", str(path), *extra, "--json")


def test_a_fresh_db_gives_no_new_attempts(tmp_path: Path) -> None:
    for _ in range(MAX_ATTEMPTS):
        r = grade_next(tmp_path, "bo", tmp_path / "class.db")
        assert r.exit_code == 0, r.output
    # the ledger counted them: neither a new class record nor none at all gives a fourth
    for db in (tmp_path / "fresh.db", None):
        r = grade_next(tmp_path, "bo", db)
        assert r.exit_code == 2 and "all 3 attempts" in r.stderr
    # the learner's ledger lives in the quiz home, apart from any --db
    assert (quiz_home() / "attempts.db").exists()
    assert len(Ledger(tmp_path / "fresh.db").status("bo").attempts) == MAX_ATTEMPTS


def test_an_open_attempt_keeps_its_key_whatever_the_db(tmp_path: Path) -> None:
    r = quiz("start", "--user", "ana", stdin="")  # opened, then interrupted before question 1
    assert r.exit_code == 130
    seed = attempt_seed("ana", 1)
    assert f"seed {seed}" in r.output
    out = tmp_path / "out"
    r = quiz("export", "--seed", str(seed), "--out", str(out), "--db", str(tmp_path / "other.db"))
    assert (
        r.exit_code == 0
        and "answer key withheld" in r.stderr
        and "ana's open attempt 1" in r.stderr
    )
    assert not list(out.glob("*key*"))


def test_the_instructor_key_needs_the_instructor_secret(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    assert quiz("instructor-init", env=SECRET).exit_code == 0
    assert quiz("start", "--user", "cy", stdin="").exit_code == 130  # cy's attempt 1 is open
    seed = attempt_seed("cy", 1)
    r = quiz("export", "--seed", str(seed), "--out", out, "--instructor-key")
    assert r.exit_code == 2 and "give the instructor secret" in r.stderr
    wrong = {"RIDGELINE_QUIZ_SECRET": "not the instructor's secret"}
    r = quiz("export", "--seed", str(seed), "--out", out, "--instructor-key", env=wrong)
    assert r.exit_code == 2 and "wrong instructor secret" in r.stderr
    r = quiz("export", "--seed", str(seed), "--out", out, "--instructor-key", env=SECRET)
    assert r.exit_code == 0, r.output
    key = Path(out) / f"quiz-{seed}-instructor-key.md"
    assert "cy's open attempt 1" in key.read_text()
    # the verifier is set once, and never after learners have started
    r = quiz("instructor-init", env=SECRET)
    assert r.exit_code == 2 and "already set up" in r.stderr


def test_no_instructor_secret_can_be_set_up_after_attempts() -> None:
    assert quiz("start", "--user", "di", stdin="").exit_code == 130
    r = quiz("instructor-init", env=SECRET)
    assert r.exit_code == 2 and "attempts are already recorded" in r.stderr
    r = quiz("export", "--seed", str(attempt_seed("di", 1)), "--instructor-key")
    assert r.exit_code == 2 and "no instructor secret is set up" in r.stderr


def test_a_learners_three_quizzes_share_no_question(tmp_path: Path) -> None:
    seeds = []
    for _ in range(MAX_ATTEMPTS):
        r = grade_next(tmp_path, "eve", None)
        assert r.exit_code == 0, r.output
        seeds.append(json.loads(r.stdout)["seed"])
    prints = [{fingerprint(q) for q in draw_quiz(s).questions} for s in seeds]
    assert len(set(seeds)) == 3
    assert not (prints[0] & prints[1] or prints[0] & prints[2] or prints[1] & prints[2])


def test_a_chosen_seed_that_repeats_a_question_is_refused(tmp_path: Path) -> None:
    first = Ledger().next_seed("fay", 1)
    r = quiz("start", "--user", "fay", "--answers", str(sheet(tmp_path, 22, first)), "--json")
    assert r.exit_code == 0, r.output
    # the same seed again repeats all 22 questions; the message names the first one
    again = sheet(tmp_path, 22, first, "again.json")
    r = quiz("start", "--user", "fay", "--answers", str(again))
    assert r.exit_code == 2
    assert f"seed {first} repeats 22 question(s)" in r.stderr and "question 1" in r.stderr
    assert len(Ledger().status("fay").attempts) == 1


def test_the_default_seed_skips_candidates_that_repeat_a_question() -> None:
    """Two users whose first candidate for attempt 2 repeats a question of attempt 1 get a later
    candidate, and it repeats none."""
    found = 0
    for i in range(40):
        user = f"u{i}"
        ledger = Ledger()
        ledger.open_attempt(user, 1, attempt_seed(user, 1))
        seen = set(ledger.seen(user))
        if not seen & {fingerprint(q) for q in draw_quiz(attempt_seed(user, 2)).questions}:
            continue
        nxt = ledger.next_seed(user, 2)
        assert nxt != attempt_seed(user, 2)
        assert not seen & {fingerprint(q) for q in draw_quiz(nxt).questions}
        found += 1
        if found == 2:
            return
    pytest.fail("no user in 40 had a first candidate that repeats a question")


def test_questions_only_export_writes_no_key_and_keeps_the_seed_usable(tmp_path: Path) -> None:
    r = quiz("export", "--seed", "7", "--out", str(tmp_path), "--questions-only")
    assert r.exit_code == 0 and r.stdout.count("wrote") == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "quiz-7-answers.json",
        "quiz-7.html",
        "quiz-7.md",
    ]
    answers = right_answers(7)
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"seed": 7, "answers": answers}))
    r = quiz("start", "--user", "gil", "--answers", str(path), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["num_correct"] == 22


def test_a_learners_next_quiz_exports_questions_only_and_opens_the_attempt(tmp_path: Path) -> None:
    r = quiz("export", "--user", "hal", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    seed = attempt_seed("hal", 1)
    assert (tmp_path / f"quiz-{seed}.md").exists() and not list(tmp_path.glob("*key*"))
    r = quiz("export", "--seed", str(seed), "--out", str(tmp_path / "k"))
    assert "hal's open attempt 1" in r.stderr  # withheld from anyone now


def test_the_time_allowance_is_stated(tmp_path: Path) -> None:
    minutes = TIME_ALLOWANCE_S // 60
    assert minutes == 55
    r = quiz("start", "--user", "ida", stdin="")
    assert f"about {minutes} minutes" in r.output
    quiz("export", "--seed", "3", "--out", str(tmp_path), "--questions-only")
    assert f"about {minutes} minutes" in (tmp_path / "quiz-3.md").read_text()
    assert f"about {minutes} minutes" in (tmp_path / "quiz-3.html").read_text()


def test_an_interrupted_attempt_resumes_with_the_same_questions() -> None:
    first = quiz("start", "--user", "jo", stdin="")
    again = quiz("start", "--user", "jo", stdin="")
    seed = attempt_seed("jo", 1)
    assert first.exit_code == again.exit_code == 130
    assert f"attempt 1 of 3, seed {seed}" in first.output
    assert f"attempt 1 of 3, seed {seed}" in again.output
