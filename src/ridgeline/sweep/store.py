"""Where a sweep's results live: every probe is written (and committed) the moment it finishes,
with its configuration's full description, so an interrupted sweep loses nothing and a resumed one
simulates only what is missing.

Two formats behind one interface: SQLite (stdlib ``sqlite3``, the default; one file) and Parquet
(``pyarrow``, optional; a directory with one part file per finished probe or configuration).

SQLite schema (a probe is identified by its configuration key and its rate)::

    meta    (name PRIMARY KEY, value)               spec as JSON, format version
    configs (key PRIMARY KEY, idx, label, chips, config_json)
    probes  (key, rate_rps, meets_slo, ..., result_json, PRIMARY KEY (key, rate_rps))
    results (key PRIMARY KEY, status, capacity_rps, upper_rps, objective, num_probes)
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from ridgeline.errors import ConfigError
from ridgeline.sweep.kinds import StoreFormat
from ridgeline.sweep.point import Configuration, PointResult

SCHEMA_VERSION = "ridgeline.sweep/1"


@dataclass(frozen=True, slots=True)
class ConfigRow:
    """A configuration as stored: key, position in the grid, label, chips, full description."""

    key: str
    idx: int
    label: str
    chips: int
    config: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ConfigResult:
    """How a configuration's capacity search ended.

    Attributes:
        key: the configuration's key.
        status: a ``search.Status`` value.
        capacity_rps: highest rate that met the SLOs (``None``: none did).
        upper_rps: lowest rate that missed them (``None``: none did).
        objective: capacity × the objective's factor (``None`` where unknown).
        num_probes: simulations this configuration needed.
    """

    key: str
    status: str
    capacity_rps: float | None
    upper_rps: float | None
    objective: float | None
    num_probes: int


@dataclass(frozen=True, slots=True)
class StoredProbe:
    """A finished probe as stored: its configuration key and its result."""

    key: str
    result: PointResult


@dataclass(frozen=True, slots=True)
class SweepData:
    """Everything a store holds, read back."""

    spec: dict[str, Any]
    configs: tuple[ConfigRow, ...]
    probes: tuple[StoredProbe, ...]
    results: tuple[ConfigResult, ...]


class ResultStore(Protocol):
    """Writes each finished probe and configuration at once; reads everything back."""

    def begin(self, spec: dict[str, Any], configs: Sequence[ConfigRow]) -> None:
        """Record the spec and the grid (configurations already there are kept)."""
        ...

    def add_probe(self, key: str, result: PointResult) -> None:
        """Store one finished probe, durably, before returning."""
        ...

    def add_result(self, result: ConfigResult) -> None:
        """Store (or replace) how a configuration's search ended."""
        ...

    def read(self) -> SweepData:
        """Everything stored so far."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


_DDL = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS configs (
    key TEXT PRIMARY KEY, idx INTEGER, label TEXT, chips INTEGER, config_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS probes (
    key TEXT NOT NULL, rate_rps REAL NOT NULL, meets_slo INTEGER, ttft_p_s REAL, tpot_p_s REAL,
    goodput_rps REAL, output_tokens_per_s REAL, result_json TEXT NOT NULL,
    PRIMARY KEY (key, rate_rps));
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY, status TEXT, capacity_rps REAL, upper_rps REAL, objective REAL,
    num_probes INTEGER);
"""


class SqliteStore:
    """A sweep in one SQLite file; each write is its own committed transaction."""

    def __init__(self, path: str | Path) -> None:
        try:
            self._db = sqlite3.connect(str(path))
            self._db.executescript(_DDL)
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"sweep store {path}: {e}") from e

    def begin(self, spec: dict[str, Any], configs: Sequence[ConfigRow]) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema', ?), ('spec', ?), ('keys', ?)",
                (SCHEMA_VERSION, json.dumps(spec, sort_keys=True), _keys_json(configs)),
            )
            self._db.executemany(
                "INSERT OR IGNORE INTO configs VALUES (?, ?, ?, ?, ?)",
                [(c.key, c.idx, c.label, c.chips, json.dumps(c.config)) for c in configs],
            )

    def add_probe(self, key: str, result: PointResult) -> None:
        r = result
        with self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO probes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    r.rate_rps,
                    int(r.meets_slo),
                    r.ttft_p_s,
                    r.tpot_p_s,
                    r.goodput_rps,
                    r.output_tokens_per_s,
                    json.dumps(r.to_dict()),
                ),
            )

    def add_result(self, result: ConfigResult) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?)",
                tuple(asdict(result).values()),
            )

    def read(self) -> SweepData:
        q = self._db.execute
        try:
            meta = dict(q("SELECT name, value FROM meta").fetchall())
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"sweep store: not a sweep database ({e})") from e
        configs = tuple(
            ConfigRow(k, i, lab, c, json.loads(j))
            for k, i, lab, c, j in q("SELECT * FROM configs ORDER BY idx")
        )
        probes = tuple(
            StoredProbe(k, PointResult.from_dict(json.loads(j)))
            for k, j in q("SELECT key, result_json FROM probes ORDER BY key, rate_rps")
        )
        results = tuple(ConfigResult(*row) for row in q("SELECT * FROM results ORDER BY key"))
        data = SweepData(json.loads(meta.get("spec", "{}")), configs, probes, results)
        return _current(data, meta.get("keys"))

    def close(self) -> None:
        self._db.close()


class ParquetStore:
    """A sweep as a directory of Parquet part files (needs ``pyarrow``)::

    DIR/configs.parquet · DIR/spec.json · DIR/probes/<key>-<rate>.parquet · DIR/results/<key>.parquet
    """

    def __init__(self, path: str | Path) -> None:
        try:
            import pyarrow  # noqa: F401
        except ImportError as e:
            raise ConfigError(
                "--format parquet needs pyarrow: pip install ridgeline[parquet]"
            ) from e
        self._dir = Path(path)
        (self._dir / "probes").mkdir(parents=True, exist_ok=True)
        (self._dir / "results").mkdir(exist_ok=True)

    def _write(self, rows: list[dict[str, Any]], path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        tmp.replace(path)  # atomic: a killed sweep never leaves half a file

    def begin(self, spec: dict[str, Any], configs: Sequence[ConfigRow]) -> None:
        (self._dir / "spec.json").write_text(json.dumps(spec, sort_keys=True))
        (self._dir / "keys.json").write_text(_keys_json(configs))
        rows = [{**asdict(c), "config": json.dumps(c.config)} for c in configs]
        self._write(rows, self._dir / "configs.parquet")

    def add_probe(self, key: str, result: PointResult) -> None:
        name = f"{key}-{result.rate_rps.hex()}.parquet"
        self._write([{"key": key, **result.to_dict()}], self._dir / "probes" / name)

    def add_result(self, result: ConfigResult) -> None:
        self._write([asdict(result)], self._dir / "results" / f"{result.key}.parquet")

    def read(self) -> SweepData:
        import pyarrow.parquet as pq

        spec = json.loads((self._dir / "spec.json").read_text())
        configs = tuple(
            ConfigRow(r["key"], r["idx"], r["label"], r["chips"], json.loads(r["config"]))
            for r in pq.read_table(self._dir / "configs.parquet").to_pylist()
        )
        probes = []
        for f in sorted((self._dir / "probes").glob("*.parquet")):
            row = pq.read_table(f).to_pylist()[0]
            probes.append(StoredProbe(row.pop("key"), PointResult.from_dict(row)))
        probes.sort(key=lambda p: (p.key, p.result.rate_rps))
        results = tuple(
            ConfigResult(**pq.read_table(f).to_pylist()[0])
            for f in sorted((self._dir / "results").glob("*.parquet"))
        )
        keys = self._dir / "keys.json"
        data = SweepData(spec, configs, tuple(probes), results)
        return _current(data, keys.read_text() if keys.exists() else None)

    def close(self) -> None:
        """Nothing to close: each part file is complete when written."""


def _keys_json(configs: Sequence[ConfigRow]) -> str:
    return json.dumps(sorted(c.key for c in configs))


def _current(data: SweepData, keys_json: str | None) -> SweepData:
    """Only the configurations of the spec last run on this store (a store reused with another
    spec keeps the old rows, for reuse, but does not report them)."""
    if keys_json is None:
        return data
    keys = set(json.loads(keys_json))
    configs = [c for c in data.configs if c.key in keys]
    probes = [p for p in data.probes if p.key in keys]
    results = [r for r in data.results if r.key in keys]
    return SweepData(data.spec, tuple(configs), tuple(probes), tuple(results))


def open_store(path: str | Path, fmt: StoreFormat | None = None) -> ResultStore:
    """Open (or create) a store; the format follows the path (a directory or ``.parquet`` means
    Parquet) unless given."""
    path = Path(path)
    if fmt is None:
        parquet = path.is_dir() or path.suffix == ".parquet"
        fmt = StoreFormat.PARQUET if parquet else StoreFormat.SQLITE
    if fmt is StoreFormat.PARQUET:
        return ParquetStore(path)
    return SqliteStore(path)


def config_row(idx: int, key: str, config: Configuration) -> ConfigRow:
    """The stored form of a configuration."""
    return ConfigRow(key, idx, config.label, config.chips, config.to_dict())


def read_store(path: str | Path) -> SweepData:
    """Read a stored sweep (SQLite file or Parquet directory) without creating one.

    Raises:
        ConfigError: nothing is at ``path``, or it is not a sweep store.
    """
    if not Path(path).exists():
        raise ConfigError(f"sweep store {path}: no such file or directory")
    store = open_store(path)
    try:
        return store.read()
    finally:
        store.close()
