"""Commands of the graded quiz: start (interactive or from an answer sheet), status, export."""

from __future__ import annotations

import json
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
    AttemptStore,
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
from ridgeline.quiz.session import attempt_seed
from ridgeline.quiz.sheet import blank_sheet, read_answer_sheet, resolve_seed
from ridgeline.quiz.store import DEFAULT_DB

quiz_app = new_app("The graded quiz: 22 questions over the seven modules, computed by ridgeline.")

UserOpt = Annotated[str, typer.Option("--user", "-u", help="learner name")]
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite file of attempts")]
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


def _refuse_exported(store: AttemptStore, seed: int) -> None:
    """No graded attempt on a seed whose answer key was exported from this database."""
    if store.key_exported(QUIZ_ID, seed):
        raise ConfigError(
            f"option --seed: the answer key of seed {seed} was exported (quiz export); "
            "take the quiz with another --seed"
        )


def start_cmd(
    user: UserOpt,
    seed: SeedOpt = None,
    answers: AnswersOpt = None,
    db: DbOpt = Path(DEFAULT_DB),
    as_json: JsonOpt = False,
) -> None:
    """Take the quiz: one question at a time, or grade an answer sheet with --answers.

    \b
    Example:
      ridgeline quiz start --user ada --db out/quiz.db
    """
    if as_json and answers is None:
        raise ConfigError("option --json: needs --answers (the interactive quiz talks to a person)")
    store = AttemptStore(db)
    attempt_no = store.next_attempt(user, QUIZ_ID)
    if answers is not None:
        sheet = read_answer_sheet(answers)
        quiz = draw_quiz(resolve_seed(sheet, seed, str(answers)))
        _refuse_exported(store, quiz.seed)
        given = sheet.answers
    else:
        quiz = draw_quiz(seed if seed is not None else attempt_seed(user, attempt_no))
        _refuse_exported(store, quiz.seed)
        store.open_attempt(user, QUIZ_ID, attempt_no, quiz.seed)
        console.print(
            f"Quiz {QUIZ_ID} for {user}, attempt {attempt_no} of {MAX_ATTEMPTS}, seed {quiz.seed}"
        )
        try:
            given = _interactive(quiz)
        except (KeyboardInterrupt, EOFError):
            console.print("\nInterrupted: nothing was submitted, so this attempt does not count.")
            raise typer.Exit(130) from None
    result = grade_quiz(quiz, given)
    record = store.submit(user, QUIZ_ID, result, {str(k): v for k, v in given.items()})
    if as_json:
        emit_json({**result.to_dict(), "user": user, "attempt_no": record.attempt_no})
    else:
        _show_result(result, record)


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


def status_cmd(user: UserOpt, db: DbOpt = Path(DEFAULT_DB), as_json: JsonOpt = False) -> None:
    """A learner's attempts; the highest score counts.

    \b
    Example:
      ridgeline quiz status --user ada --db out/quiz.db
    """
    st = AttemptStore(db).status(user, QUIZ_ID)
    if as_json:
        emit_json(st)
    else:
        _show_status(st)


def export_cmd(
    seed: Annotated[int, typer.Option("--seed", help="quiz seed")],
    out: Annotated[
        Path, typer.Option("--out", help="directory to write into", callback=writable_dir)
    ] = Path("."),
    db: DbOpt = Path(DEFAULT_DB),
    instructor_key: Annotated[
        bool,
        typer.Option(
            "--instructor-key", help="write the key of a seed a learner's attempt uses (marked)"
        ),
    ] = False,
) -> None:
    """Write a printable quiz (Markdown, HTML), its answer key and a blank answer sheet.

    The key of a seed that a learner's open (or next) attempt uses is withheld unless
    --instructor-key, which writes a marked instructor copy instead; a seed whose key is
    exported is recorded in --db, and no attempt is graded on it afterwards.

    \b
    Example:
      ridgeline quiz export --seed 7 --out out/quiz --db out/quiz.db
    """
    quiz = draw_quiz(seed)
    out.mkdir(parents=True, exist_ok=True)
    store = AttemptStore(db)
    holders = tuple(h.describe() for h in store.seed_holders(QUIZ_ID, seed))
    files = {
        f"quiz-{seed}.md": render_markdown(quiz),
        f"quiz-{seed}.html": render_html(quiz),
        f"quiz-{seed}-answers.json": json.dumps(blank_sheet(quiz), indent=2) + "\n",
    }
    if not holders:
        files[f"quiz-{seed}-key.md"] = render_key_markdown(quiz)
        files[f"quiz-{seed}-key.html"] = render_html(quiz, key=True)
        store.record_key_export(QUIZ_ID, seed)  # no attempt is graded on this seed later
    elif instructor_key:
        files[f"quiz-{seed}-instructor-key.md"] = render_key_markdown(quiz, holders)
    else:
        err_console.print(
            f"seed {seed} is used by {'; '.join(holders)}: answer key withheld "
            f"(an instructor writes a marked copy with --instructor-key)",
            highlight=False,
        )
    for name, text in files.items():
        (out / name).write_text(text)
        console.print(f"wrote {out / name}")


quiz_app.command("start")(start_cmd)
quiz_app.command("status")(status_cmd)
quiz_app.command("export")(export_cmd)
