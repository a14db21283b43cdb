"""A learner's attempts, tied to the learner rather than to a database file.

Every attempt is recorded in the learner's own ledger, ``attempts.db`` in the quiz home
(``quiz_home``: one per account), whatever ``--db`` says; ``--db`` names a class record that
receives a copy. The attempt limit, the open attempts, the exported keys and the questions a
learner has seen are read from both, so a fresh ``--db`` gives no new attempts and cannot
uncover the key of one's own open attempt.

No question is repeated within a learner's attempts: a default seed is the first of the
learner's candidate seeds whose 22 questions share none with the quizzes of the learner's
earlier attempts (``next_seed``), and a seed chosen by hand (``--seed``, an answer sheet) that
repeats one is refused. A question is its generator, prompt and givens (``fingerprint``): the
same question with its choices in another order is the same question.

Limits: the ledger is a file of the learner's account. A learner who deletes it and gives a
fresh ``--db`` starts over; a course that must prevent that keeps the class record (``--db``)
where learners cannot write, and an instructor reads it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.errors import ConfigError
from ridgeline.quiz.grading import Result
from ridgeline.quiz.session import QUIZ_ID, Quiz, attempt_seed, draw_quiz
from ridgeline.quiz.store import (
    MAX_ATTEMPTS,
    AttemptRecord,
    AttemptStore,
    SeedHolder,
    UserStatus,
)
from ridgeline.quiz.types import Question

HOME_ENV = "RIDGELINE_QUIZ_HOME"
LEDGER_FILE = "attempts.db"
MAX_CANDIDATES = 1000  # seeds tried for a quiz with no question seen before (a few suffice)


def quiz_home() -> Path:
    """The learner's quiz folder: ``$RIDGELINE_QUIZ_HOME``, else ``$XDG_DATA_HOME/ridgeline/quiz``,
    else ``~/.local/share/ridgeline/quiz``."""
    if os.environ.get(HOME_ENV):
        path = Path(os.environ[HOME_ENV])
        if path.exists() and not path.is_dir():  # else status read no attempts from it
            raise ConfigError(f"{HOME_ENV}: {path} is not a directory")
        return path
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ridgeline" / "quiz"


def fingerprint(q: Question) -> str:
    """A question's identity: its generator, prompt and givens (not the order of its choices)."""
    givens = "\n".join(f"{g.label}={g.value}" for g in q.givens)
    return hashlib.sha256(f"{q.generator}\n{q.prompt}\n{givens}".encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Repeat:
    """A question of a quiz that a learner has already been asked."""

    number: int  # its position in the new quiz (1-based)
    seed: int  # the earlier quiz's seed
    prompt: str


class Ledger:
    """The learner's ledger (``quiz_home()/attempts.db``) and, optionally, a class record."""

    def __init__(self, record: str | Path | None = None, home: Path | None = None) -> None:
        self.home = home or quiz_home()
        self.own = AttemptStore(self.home / LEDGER_FILE)
        extra = None if record is None else AttemptStore(record)
        same = extra is not None and _same_file(extra.path, self.own.path)
        self.stores = (self.own,) if extra is None or same else (self.own, extra)

    def _prepare(self) -> None:
        try:
            self.own.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"{self.own.path.parent}: cannot create the quiz home: {e}") from None

    def status(self, user: str) -> UserStatus:
        """The user's submitted attempts: the store that holds the most of them."""
        found = [s.status(user, QUIZ_ID) for s in self.stores]
        return max(found, key=lambda st: len(st.attempts))

    def next_attempt(self, user: str) -> int:
        """The number of the user's next attempt, counted in every store.

        Raises:
            AttemptLimitError: every attempt is used.
        """
        self._prepare()
        return max(s.next_attempt(user, QUIZ_ID) for s in self.stores)

    def submit(
        self, user: str, result: Result, answers: dict[str, Any], attempt_no: int
    ) -> AttemptRecord:
        """Record the attempt in the ledger (checking the limit), then in the class record."""
        self._prepare()
        record = self.own.submit(user, QUIZ_ID, result, answers, attempt_no)
        for store in self.stores[1:]:  # numbered as the ledger numbered it
            store.submit(user, QUIZ_ID, result, answers, record.attempt_no)
        return record

    def open_attempt(self, user: str, attempt_no: int, seed: int) -> None:
        self._prepare()
        for store in self.stores:
            store.open_attempt(user, QUIZ_ID, attempt_no, seed)

    def key_exported(self, seed: int) -> bool:
        return any(s.key_exported(QUIZ_ID, seed) for s in self.stores)

    def record_key_export(self, seed: int) -> None:
        self._prepare()
        for store in self.stores:
            store.record_key_export(QUIZ_ID, seed)

    def _seeds(self, user: str) -> tuple[set[int], set[int]]:
        """The seeds of the user's submitted attempts and of open ones, in every store."""
        done: set[int] = set()
        opened: set[int] = set()
        for store in self.stores:
            d, o = store.seeds(user, QUIZ_ID)
            done.update(d)
            opened.update(o)
        return done, opened

    def seen(self, user: str, resuming: int | None = None) -> dict[str, int]:
        """Fingerprints of every question of the user's attempts, each with its quiz's seed;
        without the questions of an open attempt on ``resuming`` (the one being taken now)."""
        done, opened = self._seeds(user)
        seeds = done | (opened - {resuming} if resuming not in done else opened)
        return {fingerprint(q): seed for seed in sorted(seeds) for q in draw_quiz(seed).questions}

    def repeats(self, user: str, quiz: Quiz) -> tuple[Repeat, ...]:
        """The questions of ``quiz`` the user has been asked in another attempt (an open
        attempt on the same seed is this one, resumed or answered on a sheet)."""
        seen = self.seen(user, resuming=quiz.seed)
        return tuple(
            Repeat(i, seen[fp], q.prompt)
            for i, q in enumerate(quiz.questions, start=1)
            if (fp := fingerprint(q)) in seen
        )

    def next_seed(self, user: str, attempt_no: int) -> int:
        """The seed of the user's open attempt ``attempt_no`` (an interrupted quiz resumes with
        the same questions), else the first candidate seed whose quiz repeats no question of
        the user's attempts and whose key was not exported."""
        opened = self.own.opened(user, QUIZ_ID)
        if opened is not None and opened[0] == attempt_no and not self.key_exported(opened[1]):
            return opened[1]
        seen = self.seen(user)
        for k in range(MAX_CANDIDATES):
            seed = attempt_seed(user, attempt_no, QUIZ_ID, k)
            fresh = not any(fingerprint(q) in seen for q in draw_quiz(seed).questions)
            if fresh and not self.key_exported(seed):
                return seed
        raise ConfigError(  # the bank would have to be nearly exhausted: a bug, said plainly
            f"no quiz without a repeated question in {MAX_CANDIDATES} seeds for {user}"
        )

    def holders(self, seed: int) -> tuple[SeedHolder, ...]:
        """Who would read their own answers in the key of ``seed``: open attempts on it, and
        known learners whose next attempt would draw it by default."""
        found = {
            (h.user, h.attempt_no): h for s in self.stores for h in s.open_seeds(QUIZ_ID, seed)
        }
        for user, done, opened in _users(self.stores):
            nxt = done + 1
            if not opened and nxt <= MAX_ATTEMPTS and self.next_seed(user, nxt) == seed:
                found.setdefault((user, nxt), SeedHolder(user, nxt, False))
        return tuple(found.values())

    def refuse_seed(self, user: str, quiz: Quiz) -> None:
        """Refuse a quiz whose key was exported, or that repeats a question the user has seen.

        Raises:
            ConfigError: naming the seed and the first repeated question.
        """
        if self.key_exported(quiz.seed):
            raise ConfigError(
                f"option --seed: the answer key of seed {quiz.seed} was exported (quiz export); "
                "take the quiz with another --seed"
            )
        rep = self.repeats(user, quiz)
        if rep:
            first = rep[0]
            raise ConfigError(
                f"option --seed: seed {quiz.seed} repeats {len(rep)} question(s) {user} was asked "
                f"before (question {first.number}, from seed {first.seed}); take the quiz "
                "without --seed for a quiz with none"
            )


def _users(stores: Iterable[AttemptStore]) -> list[tuple[str, int, bool]]:
    merged: dict[str, tuple[int, bool]] = {}
    for store in stores:
        for user, done, opened in store.users(QUIZ_ID):
            old_done, old_open = merged.get(user, (0, False))
            merged[user] = (max(old_done, done), old_open or opened)
    return [(u, d, o) for u, (d, o) in sorted(merged.items())]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
