"""Reading a learner's answers and grading them: numeric answers within the question's stated
relative tolerance, choice keys, orderings and matchings; a wrong answer that equals a known
trap is named after its classic mistake."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ridgeline.errors import RidgelineError
from ridgeline.quiz.session import PASS_FRACTION, Quiz
from ridgeline.quiz.types import Kind, Mistake, Module, Question, Response

# Float noise allowance on top of the stated tolerance, so that 2% of 100 accepts 102 exactly.
_EPS = 1e-9


class AnswerFormatError(RidgelineError):
    """A response that cannot be read for its question (not a number, an unknown key...)."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One graded question."""

    number: int
    generator: str
    module: Module
    correct: bool
    response: str
    expected: str
    mistake: Mistake | None
    solution: str


@dataclass(frozen=True, slots=True)
class Result:
    """A graded quiz: the marks, the score and whether it passes."""

    seed: int
    marks: tuple[Mark, ...]
    pass_fraction: float

    @property
    def num_correct(self) -> int:
        return sum(1 for m in self.marks if m.correct)

    @property
    def total(self) -> int:
        return len(self.marks)

    @property
    def score(self) -> float:
        """Fraction of questions answered correctly."""
        return self.num_correct / self.total if self.total else 0.0

    @property
    def passed(self) -> bool:
        return self.score >= self.pass_fraction - _EPS

    @property
    def wrong(self) -> tuple[Mark, ...]:
        return tuple(m for m in self.marks if not m.correct)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.quiz-result/1",
            "seed": self.seed,
            "num_correct": self.num_correct,
            "total": self.total,
            "score": self.score,
            "passed": self.passed,
            "pass_fraction": self.pass_fraction,
            "marks": [
                {
                    "number": m.number,
                    "generator": m.generator,
                    "module": int(m.module),
                    "correct": m.correct,
                    "response": m.response,
                    "expected": m.expected,
                    "mistake": m.mistake.name if m.mistake else None,
                    "solution": None if m.correct else m.solution,
                }
                for m in self.marks
            ],
        }


def _number(raw: Any) -> float:
    if isinstance(raw, bool):
        raise AnswerFormatError(f"expected a number, got {raw!r}")
    if isinstance(raw, int | float):
        value = float(raw)
    else:
        text = str(raw).strip().replace(",", "").replace("_", "")
        text = re.sub(r"\s*[A-Za-z/%·]+(\s*[A-Za-z/]+)*$", "", text)  # a trailing unit
        try:
            value = float(text)
        except ValueError:
            raise AnswerFormatError(f"expected a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise AnswerFormatError(f"expected a finite number, got {raw!r}")
    return value


def _parts(raw: Any) -> list[str]:
    if isinstance(raw, list | tuple):
        return [str(p).strip() for p in raw]
    return [p.strip() for p in re.split(r"[,\s]+", str(raw).strip()) if p.strip()]


def _option(word: str, options: tuple[str, ...]) -> str:
    hits = [o for o in options if o.startswith(word.lower())] if word else []
    if len(hits) != 1:
        raise AnswerFormatError(f"'{word}' is not one of {', '.join(options)}")
    return hits[0]


def parse_response(q: Question, raw: Any) -> Response:
    """Read a raw answer (text, number or list) for question ``q``.

    Raises:
        AnswerFormatError: naming what was expected.
    """
    if q.kind is Kind.NUMERIC:
        return _number(raw)
    if q.kind is Kind.CHOICE:
        key = str(raw).strip().upper()
        keys = [c.key for c in q.choices]
        if key not in keys:
            raise AnswerFormatError(f"expected one of {', '.join(keys)}, got {raw!r}")
        return key
    parts = _parts(raw)
    if q.kind is Kind.ORDER:
        order = tuple(p.upper() for p in parts)
        if sorted(order) != sorted(q.item_keys):
            raise AnswerFormatError(f"expected each of {', '.join(q.item_keys)} once, got {raw!r}")
        return order
    if len(parts) != len(q.items):
        raise AnswerFormatError(f"expected {len(q.items)} answers, one per item, got {raw!r}")
    return tuple(_option(p, q.options) for p in parts)


def is_correct(q: Question, response: Response) -> bool:
    """Whether a parsed response is right; numbers within ``q.rel_tol`` of the answer count."""
    if q.kind is Kind.NUMERIC:
        assert isinstance(q.answer, float) and isinstance(response, float)
        return abs(response - q.answer) <= (q.rel_tol + _EPS) * abs(q.answer)
    return response == q.answer


def _mistake(q: Question, response: Response) -> Mistake | None:
    if q.kind is Kind.CHOICE:
        return next((c.mistake for c in q.choices if c.key == response), None)
    for trap in q.choices:
        if q.kind is Kind.NUMERIC and isinstance(response, float) and trap.value is not None:
            if abs(response - trap.value) <= (q.rel_tol + _EPS) * abs(trap.value):
                return trap.mistake
        elif isinstance(response, tuple) and ",".join(response) == trap.text:
            return trap.mistake
    return None


def _text(response: Response | None) -> str:
    if response is None:
        return "(no answer)"
    if isinstance(response, tuple):
        return ",".join(response)
    return f"{response:.6g}" if isinstance(response, float) else response


def grade(q: Question, raw: Any, number: int = 0) -> Mark:
    """Grade one raw answer; an unreadable or missing one is wrong, and says why."""
    try:
        response = None if raw is None else parse_response(q, raw)
    except AnswerFormatError as e:
        return Mark(
            number, q.generator, q.module, False, f"{raw!r} ({e})", q.expected, None, q.solution
        )
    ok = response is not None and is_correct(q, response)
    mistake = None if ok or response is None else _mistake(q, response)
    return Mark(number, q.generator, q.module, ok, _text(response), q.expected, mistake, q.solution)


def grade_quiz(quiz: Quiz, answers: Mapping[int, Any]) -> Result:
    """Grade answers keyed by question number (1-based); missing answers are wrong."""
    marks = tuple(grade(q, answers.get(i), i) for i, q in enumerate(quiz.questions, start=1))
    return Result(quiz.seed, marks, PASS_FRACTION)
