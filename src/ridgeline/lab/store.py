"""The lab's results store: one SQLite row per measured point, with its full configuration and
environment, written and committed the moment the point is measured.

A sweep asks ``has`` before measuring a point and ``put`` right after, so an interrupted sweep
rerun skips what is stored and loses nothing (the row is committed before the next point
starts). The key is the canonical JSON of the kind and the configuration, so the same point is
stored once, whatever the order of the sweep.

Schema ``ridgeline.lab/1``::

    measurements(id INTEGER PRIMARY KEY, kind TEXT, key TEXT UNIQUE,
                 config TEXT (JSON), env TEXT (JSON), result TEXT (JSON), created_at TEXT)

Standard library only (sqlite3, csv, json): the report reads a database without torch.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ridgeline.errors import ConfigError

SCHEMA = "ridgeline.lab/1"
DEFAULT_DB = "ridgeline-lab.db"
RECORD_KINDS = ("decode", "calibrate", "profile", "kv")  # what the lab commands store

_CREATE = """
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    key TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    env TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Record:
    """One stored measurement: what was measured (config), where (env) and what came out."""

    id: int
    kind: str
    config: dict[str, Any]
    env: dict[str, Any]
    result: dict[str, Any]
    created_at: str

    def flat(self) -> dict[str, Any]:
        """One flat row for CSV: ``config.*``, ``env.*`` and scalar ``result.*`` columns."""
        row: dict[str, Any] = {"id": self.id, "kind": self.kind, "created_at": self.created_at}
        for prefix, part in (("config", self.config), ("env", self.env), ("result", self.result)):
            for k, v in part.items():
                row[f"{prefix}.{k}"] = (
                    v if isinstance(v, str | int | float | None) else json.dumps(v)
                )
        return row


def point_key(kind: str, config: dict[str, Any]) -> str:
    """The identity of a point: its kind and configuration as canonical JSON."""
    return json.dumps({"kind": kind, **config}, sort_keys=True, separators=(",", ":"))


class ResultsStore:
    """A results database; use as a context manager or call ``close``."""

    def __init__(self, path: str | Path = DEFAULT_DB) -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(self.path)
            self._db.executescript(_CREATE)
            self._db.execute(
                "INSERT OR IGNORE INTO meta(name, value) VALUES ('schema', ?)", (SCHEMA,)
            )
            self._db.commit()
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"{self.path}: not a ridgeline lab database ({e})") from None

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def has(self, kind: str, config: dict[str, Any]) -> bool:
        """Whether this point is already stored."""
        cur = self._db.execute(
            "SELECT 1 FROM measurements WHERE key = ?", (point_key(kind, config),)
        )
        return cur.fetchone() is not None

    def put(
        self, kind: str, config: dict[str, Any], env: dict[str, Any], result: dict[str, Any]
    ) -> bool:
        """Store one point and commit at once; False (and nothing written) if it was stored."""
        cur = self._db.execute(
            "INSERT OR IGNORE INTO measurements(kind, key, config, env, result, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                kind,
                point_key(kind, config),
                json.dumps(config, sort_keys=True),
                json.dumps(env, sort_keys=True),
                json.dumps(result, sort_keys=True, allow_nan=False),
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            ),
        )
        self._db.commit()
        return cur.rowcount == 1

    def records(self, kind: str | None = None) -> list[Record]:
        """Stored points, oldest first, of one kind or all."""
        sql = "SELECT id, kind, config, env, result, created_at FROM measurements"
        args: tuple[str, ...] = ()
        if kind is not None:
            sql += " WHERE kind = ?"
            args = (kind,)
        rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return [
            Record(r[0], r[1], json.loads(r[2]), json.loads(r[3]), json.loads(r[4]), r[5])
            for r in rows
        ]

    def count(self, kind: str | None = None) -> int:
        return len(self.records(kind))


def open_existing(path: str | Path) -> ResultsStore:
    """Open a database that must already exist (for reading); ConfigError names the path."""
    if not Path(path).is_file():
        raise ConfigError(f"field --db: no lab database at {path} (run `ridgeline lab sweep`)")
    return ResultsStore(path)


def export_json(records: list[Record], path: str | Path) -> Path:
    """Write the records as one JSON document (schema ``ridgeline.lab/1``)."""
    out = Path(path)
    payload = {
        "schema": SCHEMA,
        "records": [
            {
                "id": r.id,
                "kind": r.kind,
                "created_at": r.created_at,
                "config": r.config,
                "env": r.env,
                "result": r.result,
            }
            for r in records
        ],
    }
    out.write_text(json.dumps(payload, indent=1, sort_keys=True))
    return out


def load_json(path: str | Path) -> list[Record]:
    """The records of a file ``export_json`` wrote (e.g. ``out/lab/measurements.json``)."""
    try:
        payload = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"field --json-file: cannot read {path}: {e}") from e
    if payload.get("schema") != SCHEMA:
        raise ConfigError(f"field schema: {path} is not {SCHEMA}")
    return [
        Record(r["id"], r["kind"], r["config"], r["env"], r["result"], r["created_at"])
        for r in payload["records"]
    ]


def export_csv(records: list[Record], path: str | Path) -> Path:
    """Write the records as CSV, one flat row each (lists and dicts as JSON cells)."""
    out = Path(path)
    rows = [r.flat() for r in records]
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return out
