"""Commands of the graded quiz: start (interactive or from an answer sheet), status, export."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table

from ridgeline.cli.common import JsonOpt, console, emit_json, err_console, new_app, writable_dir
from ridgeline.errors import ConfigError
from ridgeline.quiz import (
    MAX_ATTEMPTS,
    PASS_FRACTION,
    QUIZ_ID,
    AttemptRecord,
    Kind,
    Question,
    Quiz,
    Result,
    UserStatus,
    draw_quiz,
    grade_quiz,
    parse_response,
    render_html,
    render_key_markdown,
    render_markdown,
)
from ridgeline.quiz.export import how_to_answer
from ridgeline.quiz.grading import AnswerFormatError
from ridgeline.quiz.instructor import SECRET_ENV, check_secret, set_secret
from ridgeline.quiz.ledger import Ledger
from ridgeline.quiz.session import TIME_ALLOWANCE_S
from ridgeline.quiz.sheet import blank_sheet, read_answer_sheet, resolve_seed

quiz_app = new_app("The graded quiz: 22 questions over the seven modules, computed by ridgeline.")

UserOpt = Annotated[str, typer.Option("--user", "-u", help="learner name")]
DbOpt = Annotated[
    Path | None,
    typer.Option("--db", help="a class record (SQLite) that also receives each attempt"),
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="quiz seed (default: per attempt)")]
AnswersOpt = Annotated[
    Path | None, typer.Option("--answers", help="grade this JSON answer sheet, no prompts")
]


def _show_question(i: int, total: int, q: Question) -> None:
    givens = Table(show_header=False, box=None, padding=(0, 2))
    for g in q.givens:
        givens.add_row(g.label, f"[bold]{g.value}[/bold]")
    console.print(
        Panel(
            q.prompt,
            title=f"Question {i}/{total}",
            subtitle=f"Module {q.module.value}: {q.module.title}",
            expand=False,
        )
    )
    console.print(givens)
    for c in q.choices if q.kind is Kind.CHOICE else ():
        console.print(f"  ({c.key}) {c.text}")
    if q.kind is Kind.MATCH:
        console.print("  items: " + "; ".join(q.items))
    console.print(f"[dim]{how_to_answer(q)}[/dim]")


def _ask(q: Question) -> Any:
    """Prompt until the answer can be read; the raw text is what the sheet stores."""
    while True:
        raw = Prompt.ask("Your answer", console=console)
        try:
            parse_response(q, raw)
            return raw
        except AnswerFormatError as e:
            console.print(f"[yellow]{e}; try again[/yellow]")


def _interactive(quiz: Quiz) -> dict[int, Any]:
    answers: dict[int, Any] = {}
    for i, q in enumerate(quiz.questions, start=1):
        _show_question(i, len(quiz.questions), q)
        answers[i] = _ask(q)
        console.print()
    return answers


def _show_result(result: Result, record: AttemptRecord) -> None:
    table = Table(title=f"Quiz {QUIZ_ID}, seed {result.seed}")
    for col in ("#", "module", "", "your answer", "expected"):
        table.add_column(col)
    for m in result.marks:
        mark = "[green]✓[/green]" if m.correct else "[red]✗[/red]"
        table.add_row(str(m.number), str(m.module.value), mark, m.response, m.expected)
    console.print(table)
    for m in result.wrong:
        why = f"\n[yellow]Likely mistake: you {m.mistake.value}.[/yellow]" if m.mistake else ""
        console.print(Panel(f"{m.solution}{why}", title=f"Worked solution, question {m.number}"))
    verdict = "[green]PASS[/green]" if result.passed else "[red]FAIL[/red]"
    console.print(
        f"Score {result.num_correct}/{result.total} = {result.score:.0%}: {verdict} "
        f"({PASS_FRACTION:.0%} needed). Attempt {record.attempt_no} of {MAX_ATTEMPTS} for "
        f"{record.user}."
    )


def _quiz_for(ledger: Ledger, user: str, attempt_no: int, seed: int | None) -> Quiz:
    """The learner's next quiz (no question seen before), or the chosen seed's, checked."""
    if seed is None:
        return draw_quiz(ledger.next_seed(user, attempt_no))
    quiz = draw_quiz(seed)
    ledger.refuse_seed(user, quiz)
    return quiz


def _ask_all(
    ledger: Ledger, user: str, attempt_no: int, quiz: Quiz
) -> tuple[dict[int, Any], float]:
    """The interactive attempt, opened in the ledger; the answers and the seconds it took."""
    ledger.open_attempt(user, attempt_no, quiz.seed)
    console.print(
        f"Quiz {QUIZ_ID} for {user}, attempt {attempt_no} of {MAX_ATTEMPTS}, seed {quiz.seed}: "
        f"{len(quiz.questions)} questions, about {TIME_ALLOWANCE_S // 60} minutes"
    )
    start = time.monotonic()
    try:
        given = _interactive(quiz)
    except (KeyboardInterrupt, EOFError):
        console.print("\nInterrupted: nothing was submitted, so this attempt does not count.")
        raise typer.Exit(130) from None
    return given, time.monotonic() - start


def _time_taken(seconds: float) -> str:
    over = " (over the allowance)" if seconds > TIME_ALLOWANCE_S else ""
    return f"Answered in {seconds / 60:.0f} of about {TIME_ALLOWANCE_S // 60} minutes{over}."


def start_cmd(
    user: UserOpt,
    seed: SeedOpt = None,
    answers: AnswersOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Take the quiz: one question at a time, or grade an answer sheet with --answers.

    Attempts are recorded in the learner's ledger (the quiz home) and, with --db, in a class
    record too; a default quiz repeats no question of the learner's earlier attempts."""
    if as_json and answers is None:
        raise ConfigError("option --json: needs --answers (the interactive quiz talks to a person)")
    ledger = Ledger(db)
    attempt_no = ledger.next_attempt(user)
    elapsed = None
    if answers is not None:
        sheet = read_answer_sheet(answers)
        quiz = _quiz_for(ledger, user, attempt_no, resolve_seed(sheet, seed, str(answers)))
        given = sheet.answers
    else:
        quiz = _quiz_for(ledger, user, attempt_no, seed)
        given, elapsed = _ask_all(ledger, user, attempt_no, quiz)
    result = grade_quiz(quiz, given)
    record = ledger.submit(user, result, {str(k): v for k, v in given.items()}, attempt_no)
    if as_json:
        emit_json({**result.to_dict(), "user": user, "attempt_no": record.attempt_no})
        return
    _show_result(result, record)
    if elapsed is not None:
        console.print(_time_taken(elapsed))


def _show_status(st: UserStatus) -> None:
    table = Table(title=f"{st.user}: quiz {st.quiz_id}")
    for col in ("attempt", "seed", "score", "passed", "submitted"):
        table.add_column(col)
    for a in st.attempts:
        table.add_row(
            str(a.attempt_no),
            str(a.seed),
            f"{a.num_correct}/{a.total} = {a.score:.0%}",
            "yes" if a.passed else "no",
            a.submitted_at,
        )
    console.print(table)
    best = st.best
    if best is None:
        console.print(f"No attempt yet; {st.remaining} of {st.max_attempts} left.")
        return
    verdict = "passed" if st.passed else "not passed"
    console.print(
        f"Highest score {best.score:.0%} (attempt {best.attempt_no}) counts: {verdict}; "
        f"{st.remaining} of {st.max_attempts} attempts left."
    )


def status_cmd(user: UserOpt, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """A learner's attempts (ledger and class record); the highest score counts."""
    st = Ledger(db).status(user)
    if as_json:
        emit_json(st)
    else:
        _show_status(st)


def _export_seed(ledger: Ledger, seed: int | None, user: str | None) -> tuple[int, bool]:
    """The seed to export and whether it is a learner's next quiz (questions only, opened)."""
    if seed is not None:
        return seed, False
    if user is None:
        raise ConfigError("option --seed: give a seed, or --user for that learner's next quiz")
    attempt_no = ledger.next_attempt(user)
    nxt = ledger.next_seed(user, attempt_no)
    ledger.open_attempt(user, attempt_no, nxt)  # its key is withheld from now on
    return nxt, True


def _key_files(
    ledger: Ledger, quiz: Quiz, instructor_key: bool, questions_only: bool
) -> dict[str, str]:
    """The key files export may write for ``quiz``: none when it is questions only; the plain
    key when no learner's attempt uses the seed; an instructor's copy with the secret."""
    seed = quiz.seed
    if questions_only:
        return {}
    holders = tuple(h.describe() for h in ledger.holders(seed))
    if not holders:
        ledger.record_key_export(seed)  # no attempt is graded on this seed later
        return {
            f"quiz-{seed}-key.md": render_key_markdown(quiz),
            f"quiz-{seed}-key.html": render_html(quiz, key=True),
        }
    if instructor_key:
        check_secret(ledger.home, os.environ.get(SECRET_ENV))
        return {f"quiz-{seed}-instructor-key.md": render_key_markdown(quiz, holders)}
    err_console.print(
        f"seed {seed} is used by {'; '.join(holders)}: answer key withheld "
        f"(an instructor writes a marked copy with --instructor-key and the instructor secret)",
        highlight=False,
        soft_wrap=True,
    )
    return {}


def export_cmd(
    seed: Annotated[int | None, typer.Option("--seed", help="quiz seed")] = None,
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="without --seed: this learner's next quiz")
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="directory to write into", callback=writable_dir)
    ] = Path("."),
    db: DbOpt = None,
    questions_only: Annotated[
        bool, typer.Option("--questions-only", help="the quiz and a blank sheet, no key")
    ] = False,
    instructor_key: Annotated[
        bool,
        typer.Option(
            "--instructor-key",
            help=f"write the key of a seed a learner's attempt uses (needs ${SECRET_ENV})",
        ),
    ] = False,
) -> None:
    """Write a printable quiz (Markdown, HTML), a blank answer sheet and its answer key.

    The key of a seed that a learner's open (or next) attempt uses is withheld, in the ledger
    and the class record alike, unless --instructor-key with the instructor secret writes a
    marked copy; a seed whose plain key is exported is recorded, and no attempt is graded on it
    afterwards. --user without --seed exports that learner's next quiz, questions only."""
    ledger = Ledger(db)
    chosen, learner = _export_seed(ledger, seed, user)
    quiz = draw_quiz(chosen)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        f"quiz-{chosen}.md": render_markdown(quiz),
        f"quiz-{chosen}.html": render_html(quiz),
        f"quiz-{chosen}-answers.json": json.dumps(blank_sheet(quiz), indent=2) + "\n",
    }
    files.update(_key_files(ledger, quiz, instructor_key, questions_only or learner))
    for name, text in files.items():
        (out / name).write_text(text)
        console.print(f"wrote {out / name}")


def instructor_init_cmd() -> None:
    """Set up the instructor secret in this quiz home (once, before any attempt): read from
    $RIDGELINE_QUIZ_SECRET, else asked for twice."""
    secret = os.environ.get(SECRET_ENV) or typer.prompt(
        "Instructor secret", hide_input=True, confirmation_prompt=True
    )
    ledger = Ledger()
    path = set_secret(ledger.home, secret, bool(ledger.own.users(QUIZ_ID)))
    console.print(f"wrote the instructor verifier to {path}")


quiz_app.command("start")(start_cmd)
quiz_app.command("status")(status_cmd)
quiz_app.command("export")(export_cmd)
quiz_app.command("instructor-init")(instructor_init_cmd)
