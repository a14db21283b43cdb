"""Answer sheets: a learner's answers in a JSON file, for grading without a terminal.

Format (``ridgeline quiz export`` writes a blank one)::

    {"seed": 1234, "answers": {"1": 295.3, "2": "B", "3": "C,A,E,B,D", "4": ["kernel", ...]}}

``answers`` may also be a list, the n-th entry answering question n. A missing or ``null``
answer is graded wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.errors import ConfigError
from ridgeline.quiz.session import Quiz


@dataclass(frozen=True, slots=True)
class AnswerSheet:
    """The seed a sheet answers and its raw answers by question number (1-based)."""

    seed: int | None
    answers: dict[int, Any]


def _keyed(answers: Any, where: str) -> dict[int, Any]:
    if isinstance(answers, list):
        return {i: a for i, a in enumerate(answers, start=1)}
    if not isinstance(answers, dict):
        raise ConfigError(f"{where}: field answers: expected an object or a list")
    out = {}
    for key, value in answers.items():
        try:
            out[int(key)] = value
        except ValueError:
            raise ConfigError(f"{where}: field answers.{key}: keys are question numbers") from None
    return out


def read_answer_sheet(path: str | Path) -> AnswerSheet:
    """Read an answer sheet.

    Raises:
        ConfigError: naming the file and the bad field.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict) or "answers" not in data:
        raise ConfigError(f"{path}: field answers: required")
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"{path}: field seed: expected an integer, got {seed!r}")
    return AnswerSheet(seed, _keyed(data["answers"], str(path)))


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
