"""A quiz session: 22 questions over the seven modules, drawn for a seed.

Each module contributes three questions from three different generators; the 22nd comes from
a generator not used yet. Each question draws its own parameters from a generator seeded by
(quiz seed, position, generator name), so one question's draws never shift another's.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from ridgeline.quiz.bank import Generator, generators_for
from ridgeline.quiz.types import Module, Question
from ridgeline.specs.inputs import check_int
from ridgeline.specs.limits import MAX_SEED

QUIZ_ID = "memory-systems"  # the course's one graded quiz
NUM_QUESTIONS = 22  # the course's graded quiz (module 9): 22 questions
PASS_FRACTION = 0.8  # "You need 80% to pass"
PER_MODULE = 3
# About 55 minutes for 22 questions, many of them a short calculation (the course's graded quiz,
# module 9): stated at the start and on the printed quiz; the time taken is shown at the end.
TIME_ALLOWANCE_S = 55 * 60


@dataclass(frozen=True, slots=True)
class Quiz:
    """The questions of one quiz, in course order."""

    seed: int
    questions: tuple[Question, ...]

    def modules(self) -> dict[Module, int]:
        """How many questions each module contributes."""
        return {m: sum(1 for q in self.questions if q.module is m) for m in Module}


def _pick_generators(rng: random.Random, num_questions: int) -> list[Generator]:
    chosen: list[Generator] = []
    spare: list[Generator] = []
    for module in Module:
        pool = generators_for(module)
        rng.shuffle(pool)
        chosen += pool[:PER_MODULE]
        spare += pool[PER_MODULE:]
    rng.shuffle(spare)
    while len(chosen) < num_questions:
        chosen.append(spare.pop() if spare else chosen[rng.randrange(len(chosen))])
    chosen = chosen[:num_questions]
    return sorted(chosen, key=lambda g: g.module)


def draw_quiz(seed: int, num_questions: int = NUM_QUESTIONS) -> Quiz:
    """The quiz for ``seed``: the same seed always gives the same questions and answers.

    Raises:
        ConfigError: ``seed`` outside [0, ``specs.limits.MAX_SEED``].
    """
    check_int("seed", seed, 0, MAX_SEED)
    rng = random.Random(seed)
    questions = []
    for i, gen in enumerate(_pick_generators(rng, num_questions)):
        questions.append(gen.make(random.Random(f"{seed}/{i}/{gen.name}")))
    return Quiz(seed, tuple(questions))


def attempt_seed(user: str, attempt_no: int, quiz_id: str = QUIZ_ID, k: int = 0) -> int:
    """The k-th candidate seed of a user's n-th attempt: stable across runs and machines
    (``quiz.ledger`` takes the first candidate whose quiz repeats none of the user's questions)."""
    tail = "" if k == 0 else f"/{k}"
    digest = hashlib.sha256(f"{quiz_id}/{user}/{attempt_no}{tail}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 1_000_000
