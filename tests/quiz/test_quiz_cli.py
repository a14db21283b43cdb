"""The quiz through the CLI with a temporary database: answer sheets, the interactive run,
attempt limits, the highest score counting, the pass threshold, interruption, export, errors,
and two processes submitting at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.quiz import MAX_ATTEMPTS, QUIZ_ID, AttemptStore, Kind, Ledger, draw_quiz
from ridgeline.quiz.session import attempt_seed
from test_quiz_learners import LIBRARY, as_typed

runner = CliRunner()
SEED = 42


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["quiz", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def right_answers(seed: int) -> list[object]:
    """What the library learner types for each question of ``seed``'s quiz."""
    quiz = draw_quiz(seed)
    return [as_typed(q, LIBRARY[q.generator](q, dict(q.params))) for q in quiz.questions]


def sheet(tmp_path: Path, num_right: int, seed: int = SEED, name: str = "a.json") -> Path:
    """An answer sheet with the first ``num_right`` answers right and the rest blank."""
    answers = right_answers(seed)
    answers = answers[:num_right] + [None] * (len(answers) - num_right)
    path = tmp_path / name
    path.write_text(json.dumps({"seed": seed, "answers": answers}))
    return path


def next_seed(user: str, db: Path) -> int:
    """The seed the learner's next attempt draws (no question of an earlier one repeated)."""
    ledger = Ledger(db)
    done = len(ledger.status(user).attempts)
    return ledger.next_seed(user, min(done + 1, MAX_ATTEMPTS))


def submit(tmp_path: Path, db: Path, user: str, num_right: int) -> tuple[int, dict, str]:
    """Grade a sheet of the learner's next quiz with ``num_right`` answers right."""
    path = sheet(tmp_path, num_right, next_seed(user, db), f"{user}.json")
    code, out, err = run("start", "--user", user, "--answers", str(path), "--db", str(db), "--json")
    return code, (json.loads(out) if code == 0 else {}), err


@pytest.mark.slow
def test_a_perfect_sheet_passes_and_shows_in_status(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    code, res, err = submit(tmp_path, db, "ada", 22)
    assert code == 0, err
    assert (res["num_correct"], res["total"], res["passed"], res["attempt_no"]) == (22, 22, True, 1)
    code, out, _ = run("status", "--user", "ada", "--db", str(db))
    assert code == 0 and "100%" in out and "passed" in out and "2 of 3 attempts left" in out


@pytest.mark.slow
def test_pass_threshold_is_80_percent(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    _, res18, _ = submit(tmp_path, db, "u18", 18)  # 81.8 %
    _, res17, _ = submit(tmp_path, db, "u17", 17)  # 77.3 %
    assert res18["passed"] and not res17["passed"]


@pytest.mark.slow
def test_three_attempts_the_highest_counts_and_a_fourth_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    for num_right in (10, 19, 15):
        code, _, err = submit(tmp_path, db, "bo", num_right)
        assert code == 0, err
    st = json.loads(run("status", "--user", "bo", "--db", str(db), "--json")[1])
    assert [a["num_correct"] for a in st["attempts"]] == [10, 19, 15]
    assert st["best_score"] == 19 / 22 and st["passed"] and st["remaining"] == 0
    code, out, err = submit(tmp_path, db, "bo", 22)
    assert code == 2 and out == {}
    assert err.count("\n") == 1 and "all 3 attempts" in err and "86%" in err
    code, _, err = run("start", "--user", "bo", "--db", str(db), stdin="1\n")  # interactive too
    assert code == 2 and "all 3 attempts" in err
    assert len(AttemptStore(db).status("bo", QUIZ_ID).attempts) == MAX_ATTEMPTS


@pytest.mark.slow
def test_failing_attempts_do_not_pass(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    for num_right in (5, 17):
        submit(tmp_path, db, "cy", num_right)
    st = json.loads(run("status", "--user", "cy", "--db", str(db), "--json")[1])
    assert st["best_score"] == 17 / 22 and not st["passed"] and st["remaining"] == 1


@pytest.mark.slow
def test_wrong_answers_get_worked_solutions(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    code, out, _ = run(
        "start", "--user", "di", "--answers", str(sheet(tmp_path, 20)), "--db", str(db)
    )
    assert code == 0
    assert "Worked solution, question 21" in out and "Worked solution, question 22" in out
    assert "Worked solution, question 20" not in out
    assert "Score 20/22 = 91%" in out and "PASS" in out


@pytest.mark.slow
def test_interactive_run_driven_by_stdin(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    seed = attempt_seed("eve", 1)
    typed = [a if isinstance(a, str) else ",".join(a) for a in right_answers(seed)]  # type: ignore[arg-type]
    quiz = draw_quiz(seed)
    first = quiz.questions[0]
    bad = "Z" if first.kind is not Kind.NUMERIC else "lots"
    stdin = "\n".join([bad, *typed]) + "\n"  # an unreadable answer is asked again
    code, out, err = run("start", "--user", "eve", "--db", str(db), stdin=stdin)
    assert code == 0, err
    assert "Question 1/22" in out and "Question 22/22" in out and "try again" in out
    assert first.givens[0].value in out
    assert "Score 22/22 = 100%" in out and "PASS" in out


@pytest.mark.slow
def test_an_interrupted_attempt_does_not_count(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    typed = right_answers(attempt_seed("fay", 1))[:3]
    stdin = "\n".join(a if isinstance(a, str) else ",".join(a) for a in typed) + "\n"  # type: ignore[arg-type]
    code, out, _ = run("start", "--user", "fay", "--db", str(db), stdin=stdin)
    assert code == 130 and "does not count" in out
    assert AttemptStore(db).status("fay", QUIZ_ID).attempts == ()


def test_export_writes_quiz_key_and_blank_sheet(tmp_path: Path) -> None:
    code, out, _ = run(
        "export", "--seed", "7", "--out", str(tmp_path), "--db", str(tmp_path / "q.db")
    )
    assert code == 0 and out.count("wrote") == 5
    quiz_md = (tmp_path / "quiz-7.md").read_text()
    key_md = (tmp_path / "quiz-7-key.md").read_text()
    assert quiz_md.count("\n### ") == 22 and "Answer:" in quiz_md
    first = draw_quiz(7).questions[0]
    assert first.solution not in quiz_md and first.solution in key_md
    assert "<h3>1. " in (tmp_path / "quiz-7.html").read_text()
    blank = json.loads((tmp_path / "quiz-7-answers.json").read_text())
    assert blank["seed"] == 7 and len(blank["answers"]) == 22


@pytest.mark.slow
def test_sheet_errors_are_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    no_seed = tmp_path / "n.json"
    no_seed.write_text(json.dumps({"answers": [1, 2]}))
    code, _, err = run("start", "--user", "g", "--answers", str(no_seed), "--db", db)
    assert code == 2 and "field seed: required" in err and err.count("\n") == 1
    code, _, err = run(
        "start", "--user", "g", "--answers", str(sheet(tmp_path, 1)), "--seed", "3", "--db", db
    )
    assert code == 2 and "answers seed 42, not 3" in err
    code, _, err = run("start", "--user", "g", "--json", "--db", db)
    assert code == 2 and "--json: needs --answers" in err
    broken = tmp_path / "b.json"
    broken.write_text("{")
    code, _, err = run("start", "--user", "g", "--answers", str(broken), "--db", db)
    assert code == 2 and "not valid JSON" in err
    assert AttemptStore(db).status("g", QUIZ_ID).attempts == ()


def test_status_and_a_bad_database_path(tmp_path: Path) -> None:
    code, out, _ = run("status", "--user", "h", "--db", str(tmp_path / "none.db"))
    assert code == 0 and "No attempt yet; 3 of 3 left." in out
    assert not (tmp_path / "none.db").exists()
    bad = str(tmp_path / "no" / "such" / "dir" / "q.db")
    code, out, err = run("start", "--user", "h", "--db", bad, stdin="1\n")
    assert code == 2 and err.startswith("error: ") and "cannot open" in err
    assert "Question 1" not in out  # refused before any question is asked
    not_db = tmp_path / "text.db"
    not_db.write_text("this is not a database " * 100)
    code, _, err = run("status", "--user", "h", "--db", str(not_db))
    assert code == 2 and "not a usable attempts database" in err and err.count("\n") == 1


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ridgeline.quiz import AttemptLimitError, AttemptStore, QUIZ_ID, draw_quiz, grade_quiz
    db, me = sys.argv[1], sys.argv[2]
    store, result = AttemptStore(db), grade_quiz(draw_quiz(1), {})
    Path(db + "." + me + ".ready").touch()
    while not Path(db + ".go").exists():  # start together, so the writes really contend
        time.sleep(0.005)
    refused = 0
    for attempt in range(3):
        for user in [f"{me}-{i}" for i in range(5)] + [f"shared-{i}" for i in range(5)]:
            try:
                store.submit(user, QUIZ_ID, result, {})
            except AttemptLimitError:
                refused += 1
    print(refused)
    """
)


@pytest.mark.slow
def test_two_processes_submitting_at_once_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), name], stdout=subprocess.PIPE, text=True
        )
        for name in ("p", "q")
    ]
    deadline = time.monotonic() + 60
    while not all(Path(f"{db}.{n}.ready").exists() for n in "pq"):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    Path(f"{db}.go").touch()
    refused = [int(p.communicate(timeout=60)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    store = AttemptStore(db)
    for user in [f"{n}-{i}" for n in "pq" for i in range(5)]:
        assert [a.attempt_no for a in store.status(user, QUIZ_ID).attempts] == [1, 2, 3]
    # Both processes tried the shared users 3 times each: exactly 3 attempts stick, 3 refused.
    for i in range(5):
        assert [a.attempt_no for a in store.status(f"shared-{i}", QUIZ_ID).attempts] == [1, 2, 3]
    assert sum(refused) == 5 * 3


def test_a_blank_sheet_is_refused_and_uses_no_attempt(tmp_path: Path) -> None:
    # regression: the README's steps graded the blank sheet quiz export writes (0/22) and used
    # one of the learner's three attempts
    db = str(tmp_path / "q.db")
    code, _, _ = run("export", "--seed", "7", "--out", str(tmp_path), "--db", db)
    assert code == 0
    blank = tmp_path / "quiz-7-answers.json"
    code, _, err = run("start", "--user", "ada", "--answers", str(blank), "--db", db)
    assert code == 2 and err == (
        f"error: {blank}: field answers: every answer is blank; fill in the sheet first "
        "(no attempt was used)\n"
    )
    assert AttemptStore(db).status("ada", QUIZ_ID).attempts == ()
