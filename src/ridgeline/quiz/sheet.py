"""Answer sheets: a learner's answers in a JSON file, for grading without a terminal.

Format (``ridgeline quiz export`` writes a blank one)::

    {"seed": 1234, "answers": {"1": 295.3, "2": "B", "3": "C,A,E,B,D", "4": ["kernel", ...]}}

``answers`` may also be a list, the n-th entry answering question n. A missing or ``null``
answer is graded wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.errors import ConfigError
from ridgeline.quiz.session import Quiz
from ridgeline.specs.inputs import parse_json, read_text, short_repr
from ridgeline.specs.limits import MAX_SEED

MAX_QUESTION = 1_000  # question numbers past this are not questions of any quiz


@dataclass(frozen=True, slots=True)
class AnswerSheet:
    """The seed a sheet answers and its raw answers by question number (1-based)."""

    seed: int | None
    answers: dict[int, Any]


def _keyed(answers: Any, where: str) -> dict[int, Any]:
    if isinstance(answers, list):
        if len(answers) > MAX_QUESTION:
            raise ConfigError(f"{where}: field answers: more than {MAX_QUESTION} answers")
        return {i: a for i, a in enumerate(answers, start=1)}
    if not isinstance(answers, dict):
        raise ConfigError(f"{where}: field answers: expected an object or a list")
    out = {}
    for key, value in answers.items():
        number = int(key) if key.strip().isdigit() else 0
        if not 1 <= number <= MAX_QUESTION:
            raise ConfigError(
                f"{where}: field answers.{short_repr(key)}: keys are question numbers "
                f"1 to {MAX_QUESTION}"
            )
        out[number] = value
    return out


def read_answer_sheet(path: str | Path) -> AnswerSheet:
    """Read an answer sheet.

    Raises:
        ConfigError: naming the file and the bad field; a sheet whose every answer is blank.
    """
    path = Path(path)
    data = parse_json(read_text(path), str(path))
    if not isinstance(data, dict) or "answers" not in data:
        raise ConfigError(f"{path}: field answers: required")
    seed = data.get("seed")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED
    ):
        raise ConfigError(
            f"{path}: field seed: expected an integer from 0 to {MAX_SEED:,}, "
            f"got {short_repr(seed)}"
        )
    answers = _keyed(data["answers"], str(path))
    if all(a is None or (isinstance(a, str) and not a.strip()) for a in answers.values()):
        # a blank sheet (as quiz export writes it) graded would use an attempt for nothing
        raise ConfigError(
            f"{path}: field answers: every answer is blank; fill in the sheet first "
            "(no attempt was used)"
        )
    return AnswerSheet(seed, answers)


def resolve_seed(sheet: AnswerSheet, seed: int | None, where: str) -> int:
    """The seed to grade a sheet against: the sheet's own, or the one given, if they agree."""
    if sheet.seed is not None and seed is not None and sheet.seed != seed:
        raise ConfigError(f"{where}: field seed: the sheet answers seed {sheet.seed}, not {seed}")
    chosen = sheet.seed if sheet.seed is not None else seed
    if chosen is None:
        raise ConfigError(f"{where}: field seed: required (the seed the quiz was exported with)")
    return chosen


def blank_sheet(quiz: Quiz) -> dict[str, Any]:
    """A sheet to fill in: the quiz's seed and a null answer per question."""
    return {"seed": quiz.seed, "answers": {str(i): None for i in range(1, len(quiz.questions) + 1)}}
