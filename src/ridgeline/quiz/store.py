"""The attempts store: SQLite (stdlib), three attempts per user per quiz, the highest counts.

An attempt counts only once submitted, so an attempt interrupted mid-way does not count;
starting one records it as *open* (user, attempt number, seed) until it is submitted, so that
``quiz export`` can withhold the answer key of a seed a learner is answering. Each submission runs in one ``BEGIN IMMEDIATE``
transaction that counts the user's attempts and inserts the new one, so two processes
submitting at once are serialised by SQLite's write lock (waiting up to ``BUSY_TIMEOUT_S``)
and neither loses the other's attempt nor slips past the limit.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ridgeline.errors import ConfigError, RidgelineError
from ridgeline.quiz.grading import Result
from ridgeline.quiz.session import PASS_FRACTION

MAX_ATTEMPTS = 3  # the course's module 9: "you can take the quiz up to 3 times"
BUSY_TIMEOUT_S = 30.0
SCHEMA_VERSION = 1
DEFAULT_DB = "ridgeline-quiz.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    user TEXT NOT NULL,
    quiz_id TEXT NOT NULL,
    attempt_no INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    num_correct INTEGER NOT NULL,
    total INTEGER NOT NULL,
    score REAL NOT NULL,
    passed INTEGER NOT NULL,
    submitted_at TEXT NOT NULL,
    answers_json TEXT NOT NULL,
    UNIQUE (user, quiz_id, attempt_no)
)
"""

_OPEN_SCHEMA = """
CREATE TABLE IF NOT EXISTS open_attempts (
    user TEXT NOT NULL,
    quiz_id TEXT NOT NULL,
    attempt_no INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    PRIMARY KEY (user, quiz_id)
)
"""

_EXPORTED_SCHEMA = """
CREATE TABLE IF NOT EXISTS exported_keys (
    quiz_id TEXT NOT NULL,
    seed INTEGER NOT NULL,
    exported_at TEXT NOT NULL,
    PRIMARY KEY (quiz_id, seed)
)
"""


class AttemptLimitError(RidgelineError):
    """The user has used every attempt this quiz allows."""


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One submitted attempt."""

    user: str
    quiz_id: str
    attempt_no: int
    seed: int
    num_correct: int
    total: int
    score: float
    passed: bool
    submitted_at: str


@dataclass(frozen=True, slots=True)
class UserStatus:
    """A user's attempts at one quiz; the highest score counts."""

    user: str
    quiz_id: str
    attempts: tuple[AttemptRecord, ...]
    max_attempts: int = MAX_ATTEMPTS

    @property
    def best(self) -> AttemptRecord | None:
        """The attempt that counts: the highest score, the earliest on a tie."""
        return max(self.attempts, key=lambda a: (a.score, -a.attempt_no), default=None)

    @property
    def passed(self) -> bool:
        return self.best is not None and self.best.passed

    @property
    def remaining(self) -> int:
        return max(0, self.max_attempts - len(self.attempts))

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "schema": "ridgeline.quiz-status/1",
            "user": self.user,
            "quiz_id": self.quiz_id,
            "attempts": [
                {k: getattr(a, k) for k in AttemptRecord.__slots__} for a in self.attempts
            ],
            "best_score": best.score if best else None,
            "passed": self.passed,
            "remaining": self.remaining,
            "pass_fraction": PASS_FRACTION,
        }


def _limit_message(user: str, quiz_id: str, best: float | None) -> str:
    best_text = (
        f"; your highest score, {best:.0%}, is the one that counts" if best is not None else ""
    )
    return (
        f"{user} has used all {MAX_ATTEMPTS} attempts at quiz '{quiz_id}'{best_text}; "
        f"no further attempt is allowed"
    )


def _record(row: tuple[Any, ...]) -> AttemptRecord:
    user, quiz_id, attempt_no, seed, num_correct, total, score, passed, submitted_at = row
    return AttemptRecord(
        user, quiz_id, attempt_no, seed, num_correct, total, score, bool(passed), submitted_at
    )


class AttemptStore:
    """Attempts in one SQLite file; every call opens its own connection (process-safe)."""

    def __init__(self, path: str | Path = DEFAULT_DB) -> None:
        self.path = Path(path)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken with ``BEGIN IMMEDIATE``; committed or rolled back."""
        try:
            con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as e:
            raise ConfigError(f"{self.path}: cannot open the attempts database: {e}") from None
        try:
            con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            con.execute("BEGIN IMMEDIATE")
            con.execute(_SCHEMA)
            con.execute(_OPEN_SCHEMA)
            con.execute(_EXPORTED_SCHEMA)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            yield con
            con.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise ConfigError(f"{self.path}: not a usable attempts database: {e}") from None
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            con.close()

    def _records(self, con: sqlite3.Connection, user: str, quiz_id: str) -> list[AttemptRecord]:
        rows = con.execute(
            "SELECT user, quiz_id, attempt_no, seed, num_correct, total, score, passed, "
            "submitted_at FROM attempts WHERE user = ? AND quiz_id = ? ORDER BY attempt_no",
            (user, quiz_id),
        ).fetchall()
        return [_record(row) for row in rows]

    def status(self, user: str, quiz_id: str) -> UserStatus:
        """Every submitted attempt of ``user`` at ``quiz_id`` (none when there is no file yet:
        looking does not create the database)."""
        if not self.path.exists():
            return UserStatus(user, quiz_id, ())
        with self._tx() as con:
            return UserStatus(user, quiz_id, tuple(self._records(con, user, quiz_id)))

    def next_attempt(self, user: str, quiz_id: str) -> int:
        """The number the user's next attempt will get; opens (or creates) the database, so a
        bad path fails before any question is asked.

        Raises:
            AttemptLimitError: when every attempt is used (checked again on submission).
        """
        with self._tx() as con:
            done = self._records(con, user, quiz_id)
        if len(done) >= MAX_ATTEMPTS:
            raise AttemptLimitError(_limit_message(user, quiz_id, max(a.score for a in done)))
        return len(done) + 1

    def submit(
        self,
        user: str,
        quiz_id: str,
        result: Result,
        answers: dict[str, Any],
        attempt_no: int | None = None,
    ) -> AttemptRecord:
        """Record a graded attempt, atomically checking the limit; ``attempt_no`` (default: the
        next in this file) numbers it as the learner's ledger did.

        Raises:
            AttemptLimitError: the user has ``MAX_ATTEMPTS`` attempts (or the number is past it).
        """
        with self._tx() as con:
            done = self._records(con, user, quiz_id)
            number = max(len(done) + 1, attempt_no or 0)
            if len(done) >= MAX_ATTEMPTS or number > MAX_ATTEMPTS:
                best = max((a.score for a in done), default=None)
                raise AttemptLimitError(_limit_message(user, quiz_id, best))
            record = AttemptRecord(
                user=user,
                quiz_id=quiz_id,
                attempt_no=number,
                seed=result.seed,
                num_correct=result.num_correct,
                total=result.total,
                score=result.score,
                passed=result.passed,
                submitted_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            con.execute(
                "INSERT INTO attempts (user, quiz_id, attempt_no, seed, num_correct, total, "
                "score, passed, submitted_at, answers_json) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    user,
                    quiz_id,
                    record.attempt_no,
                    record.seed,
                    record.num_correct,
                    record.total,
                    record.score,
                    int(record.passed),
                    record.submitted_at,
                    json.dumps(answers, default=str),
                ),
            )
            con.execute("DELETE FROM open_attempts WHERE user = ? AND quiz_id = ?", (user, quiz_id))
            return record

    def open_attempt(self, user: str, quiz_id: str, attempt_no: int, seed: int) -> None:
        """Record that ``user`` is answering attempt ``attempt_no`` with ``seed`` (until it is
        submitted; an interrupted attempt stays open, and starting again replaces it)."""
        with self._tx() as con:
            con.execute(
                "INSERT OR REPLACE INTO open_attempts (user, quiz_id, attempt_no, seed, "
                "started_at) VALUES (?,?,?,?,?)",
                (user, quiz_id, attempt_no, seed, datetime.now(UTC).isoformat(timespec="seconds")),
            )

    def record_key_export(self, quiz_id: str, seed: int) -> None:
        """Remember that the plain answer key of ``seed`` left the database's hands, so that no
        attempt is graded on it later (``key_exported``)."""
        with self._tx() as con:
            con.execute(
                "INSERT OR IGNORE INTO exported_keys (quiz_id, seed, exported_at) VALUES (?,?,?)",
                (quiz_id, seed, datetime.now(UTC).isoformat(timespec="seconds")),
            )

    def key_exported(self, quiz_id: str, seed: int) -> bool:
        """Whether the plain answer key of ``seed`` was exported (False without a file)."""
        if not self.path.exists():
            return False
        with self._tx() as con:
            row = con.execute(
                "SELECT 1 FROM exported_keys WHERE quiz_id = ? AND seed = ?", (quiz_id, seed)
            ).fetchone()
        return row is not None

    def seeds(self, user: str, quiz_id: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The seeds of the user's submitted attempts and of the open one (none without a
        file)."""
        if not self.path.exists():
            return (), ()
        with self._tx() as con:
            done = con.execute(
                "SELECT seed FROM attempts WHERE user = ? AND quiz_id = ?", (user, quiz_id)
            ).fetchall()
            opened = con.execute(
                "SELECT seed FROM open_attempts WHERE user = ? AND quiz_id = ?", (user, quiz_id)
            ).fetchall()
        return tuple(s for (s,) in done), tuple(s for (s,) in opened)

    def users(self, quiz_id: str) -> tuple[tuple[str, int, bool], ...]:
        """Every user with an attempt: (user, submitted attempts, has an open attempt)."""
        if not self.path.exists():
            return ()
        with self._tx() as con:
            done = dict(
                con.execute(
                    "SELECT user, COUNT(*) FROM attempts WHERE quiz_id = ? GROUP BY user",
                    (quiz_id,),
                ).fetchall()
            )
            opened = {
                u
                for (u,) in con.execute(
                    "SELECT user FROM open_attempts WHERE quiz_id = ?", (quiz_id,)
                )
            }
        return tuple((u, done.get(u, 0), u in opened) for u in sorted(set(done) | opened))

    def opened(self, user: str, quiz_id: str) -> tuple[int, int] | None:
        """The user's open attempt as (attempt number, seed), or None."""
        if not self.path.exists():
            return None
        with self._tx() as con:
            row = con.execute(
                "SELECT attempt_no, seed FROM open_attempts WHERE user = ? AND quiz_id = ?",
                (user, quiz_id),
            ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def open_seeds(self, quiz_id: str, seed: int) -> tuple[SeedHolder, ...]:
        """Open attempts on ``seed`` (none without a file)."""
        if not self.path.exists():
            return ()
        with self._tx() as con:
            rows = con.execute(
                "SELECT user, attempt_no FROM open_attempts WHERE quiz_id = ? AND seed = ?",
                (quiz_id, seed),
            ).fetchall()
        return tuple(SeedHolder(u, n, True) for u, n in rows)


@dataclass(frozen=True, slots=True)
class SeedHolder:
    """A learner whose attempt uses a seed: started (``open``) or next by default."""

    user: str
    attempt_no: int
    open: bool

    def describe(self) -> str:
        state = "open" if self.open else "next"
        return f"{self.user}'s {state} attempt {self.attempt_no}"
