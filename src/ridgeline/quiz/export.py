"""Printable quizzes: the questions (Markdown or HTML) and a separate answer key."""

from __future__ import annotations

import html

from ridgeline.quiz.session import PASS_FRACTION, TIME_ALLOWANCE_S, Quiz
from ridgeline.quiz.types import Kind, Question


def how_to_answer(q: Question) -> str:
    """One line telling the learner what form the answer takes."""
    if q.kind is Kind.NUMERIC:
        tol = "exact" if q.rel_tol == 0 else f"within ±{q.rel_tol:.0%}"
        return f"Answer: a number in {q.unit} ({tol})."
    if q.kind is Kind.CHOICE:
        return "Answer: one letter."
    if q.kind is Kind.ORDER:
        return "Answer: the keys in order, comma-separated."
    return f"Answer: one of {', '.join(q.options)} for each item, in order, comma-separated."


def _question_md(i: int, q: Question) -> list[str]:
    out = [f"### {i}. {q.prompt}", "", f"*Module {q.module.value}: {q.module.title}*", ""]
    out += [f"- {g.label}: **{g.value}**" for g in q.givens]
    if q.kind is Kind.CHOICE:
        out += ["", *[f"- ({c.key}) {c.text}" for c in q.choices]]
    if q.kind is Kind.MATCH:
        out += [
            "",
            "Items: " + "; ".join(f"({k}) {t}" for k, t in zip(q.item_keys, q.items, strict=True)),
        ]
    return [*out, "", how_to_answer(q), ""]


def render_markdown(quiz: Quiz) -> str:
    """The quiz to print: givens and choices, no answers."""
    head = [
        f"# ridgeline quiz — seed {quiz.seed}",
        "",
        f"{len(quiz.questions)} questions over the seven modules; {PASS_FRACTION:.0%} passes; "
        f"about {TIME_ALLOWANCE_S // 60} minutes. GB = 1e9 bytes, GiB = 2^30 bytes.",
        "",
    ]
    body = [line for i, q in enumerate(quiz.questions, 1) for line in _question_md(i, q)]
    return "\n".join(head + body)


def common_wrong_answers(q: Question) -> str:
    """The classic wrong answers a numeric question watches for, for the marker."""
    if q.kind is not Kind.NUMERIC or not q.choices:
        return ""
    traps = "; ".join(f"{c.text} ({c.mistake.value})" for c in q.choices if c.mistake)
    return f" Common wrong answers: {traps}."


def render_key_markdown(quiz: Quiz, holders: tuple[str, ...] = ()) -> str:
    """The answer key: each answer, its worked solution and the classic wrong answers.

    ``holders`` names the learners whose attempt uses this seed: the key is then an
    instructor's copy and says so at the top."""
    out = [f"# ridgeline quiz — answer key, seed {quiz.seed}", ""]
    if holders:
        out = [
            f"# ridgeline quiz — INSTRUCTOR answer key, seed {quiz.seed}",
            "",
            f"Seed {quiz.seed} is in use by {'; '.join(holders)}: do not share this key.",
            "",
        ]
    for i, q in enumerate(quiz.questions, 1):
        tol = f" (±{q.rel_tol:.0%})" if q.kind is Kind.NUMERIC and q.rel_tol else ""
        out += [f"{i}. **{q.expected}**{tol} — {q.solution}{common_wrong_answers(q)}", ""]
    return "\n".join(out)


_STYLE = (
    "body{font-family:sans-serif;max-width:48em;margin:2em auto;line-height:1.4}"
    "h3{margin-top:1.6em}.m{color:#555;font-style:italic}"
    "@media print{h3{page-break-after:avoid}}"
)


def _question_html(i: int, q: Question) -> str:
    e = html.escape
    parts = [
        f"<h3>{i}. {e(q.prompt)}</h3>",
        f"<p class='m'>Module {q.module.value}: {e(q.module.title)}</p>",
    ]
    parts.append(
        "<ul>" + "".join(f"<li>{e(g.label)}: <b>{e(g.value)}</b></li>" for g in q.givens) + "</ul>"
    )
    if q.kind is Kind.CHOICE:
        parts.append(
            "<ol type='A'>" + "".join(f"<li>{e(c.text)}</li>" for c in q.choices) + "</ol>"
        )
    if q.kind is Kind.MATCH:
        parts.append("<p>Items: " + e("; ".join(q.items)) + "</p>")
    parts.append(f"<p>{e(how_to_answer(q))}</p>")
    return "\n".join(parts)


def render_html(quiz: Quiz, key: bool = False) -> str:
    """The quiz (or, with ``key``, its answer key) as a standalone printable HTML page."""
    e = html.escape
    title = f"ridgeline quiz — {'answer key, ' if key else ''}seed {quiz.seed}"
    lead = (
        ""
        if key
        else f"<p>{len(quiz.questions)} questions; {PASS_FRACTION:.0%} passes; about "
        f"{TIME_ALLOWANCE_S // 60} minutes.</p>\n"
    )
    if key:
        body = (
            "<ol>"
            + "".join(f"<li><b>{e(q.expected)}</b> — {e(q.solution)}</li>" for q in quiz.questions)
            + "</ol>"
        )
    else:
        body = "\n".join(_question_html(i, q) for i, q in enumerate(quiz.questions, 1))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{e(title)}</h1>\n{lead}{body}\n</body></html>\n"
    )
