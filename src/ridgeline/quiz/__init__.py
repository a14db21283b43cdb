"""quiz: the course's graded quiz — parametric questions computed by the library, grading,
22-question sessions, printable exports and an attempts store.

Every answer is computed by ridgeline's own functions — ``specs``, ``analytic`` (roofline, KV,
tiling, flash, layout) and the ``serving`` runtime (``quiz.runtime`` admits requests into its
block pool) — never typed in.

Layer rule: imports ``specs``, ``analytic``, ``serving``, ``sim`` and ``errors`` only; never
torch, never ``cli`` or ``report``.
"""

from typing import TYPE_CHECKING

from ridgeline.specs.lazy import lazy_exports

if TYPE_CHECKING:
    from ridgeline.quiz.bank import GENERATORS as GENERATORS
    from ridgeline.quiz.bank import Generator as Generator
    from ridgeline.quiz.bank import generators_for as generators_for
    from ridgeline.quiz.export import render_html as render_html
    from ridgeline.quiz.export import render_key_markdown as render_key_markdown
    from ridgeline.quiz.export import render_markdown as render_markdown
    from ridgeline.quiz.grading import Mark as Mark
    from ridgeline.quiz.grading import Result as Result
    from ridgeline.quiz.grading import grade as grade
    from ridgeline.quiz.grading import grade_quiz as grade_quiz
    from ridgeline.quiz.grading import parse_response as parse_response
    from ridgeline.quiz.ledger import Ledger as Ledger
    from ridgeline.quiz.ledger import fingerprint as fingerprint
    from ridgeline.quiz.ledger import quiz_home as quiz_home
    from ridgeline.quiz.session import NUM_QUESTIONS as NUM_QUESTIONS
    from ridgeline.quiz.session import PASS_FRACTION as PASS_FRACTION
    from ridgeline.quiz.session import QUIZ_ID as QUIZ_ID
    from ridgeline.quiz.session import Quiz as Quiz
    from ridgeline.quiz.session import draw_quiz as draw_quiz
    from ridgeline.quiz.store import MAX_ATTEMPTS as MAX_ATTEMPTS
    from ridgeline.quiz.store import AttemptLimitError as AttemptLimitError
    from ridgeline.quiz.store import AttemptRecord as AttemptRecord
    from ridgeline.quiz.store import AttemptStore as AttemptStore
    from ridgeline.quiz.store import UserStatus as UserStatus
    from ridgeline.quiz.types import Choice as Choice
    from ridgeline.quiz.types import Given as Given
    from ridgeline.quiz.types import Kind as Kind
    from ridgeline.quiz.types import Mistake as Mistake
    from ridgeline.quiz.types import Module as Module
    from ridgeline.quiz.types import Question as Question
    from ridgeline.quiz.types import Response as Response

__getattr__, __dir__ = lazy_exports(__name__, __file__)
