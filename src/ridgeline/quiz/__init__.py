"""quiz: the course's graded quiz — parametric questions computed by the library, grading,
22-question sessions, printable exports and an attempts store.

Every answer is computed by ridgeline's own functions — ``specs``, ``analytic`` (roofline, KV,
tiling, flash, layout) and the ``serving`` runtime (``quiz.runtime`` admits requests into its
block pool) — never typed in.

Layer rule: imports ``specs``, ``analytic``, ``serving``, ``sim`` and ``errors`` only; never
torch, never ``cli`` or ``report``.
"""

from ridgeline.quiz.bank import GENERATORS, Generator, generators_for
from ridgeline.quiz.export import render_html, render_key_markdown, render_markdown
from ridgeline.quiz.grading import Mark, Result, grade, grade_quiz, parse_response
from ridgeline.quiz.ledger import Ledger, fingerprint, quiz_home
from ridgeline.quiz.session import NUM_QUESTIONS, PASS_FRACTION, QUIZ_ID, Quiz, draw_quiz
from ridgeline.quiz.store import (
    MAX_ATTEMPTS,
    AttemptLimitError,
    AttemptRecord,
    AttemptStore,
    UserStatus,
)
from ridgeline.quiz.types import Choice, Given, Kind, Mistake, Module, Question, Response

__all__ = [
    "GENERATORS",
    "MAX_ATTEMPTS",
    "NUM_QUESTIONS",
    "PASS_FRACTION",
    "QUIZ_ID",
    "AttemptLimitError",
    "AttemptRecord",
    "AttemptStore",
    "Choice",
    "Generator",
    "Given",
    "Kind",
    "Ledger",
    "Mark",
    "Mistake",
    "Module",
    "Question",
    "Quiz",
    "Response",
    "Result",
    "UserStatus",
    "draw_quiz",
    "fingerprint",
    "generators_for",
    "grade",
    "grade_quiz",
    "parse_response",
    "quiz_home",
    "render_html",
    "render_key_markdown",
    "render_markdown",
]
