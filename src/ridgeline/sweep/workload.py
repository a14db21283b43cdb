"""Workloads of a sweep: where request lengths come from (a trace or a distribution) and how
arrivals are laid out at the rate a capacity probe asks for.

A workload is materialized once (``load_table``: the trace read, or the lengths drawn) and then
re-timed per probe (``at_rate``), so a trace is read and shipped to workers once per sweep.

How many requests a probe has: a fixed ``num_requests``, or ``duration_s`` seconds of arrivals
(ceil(rate × duration_s) requests, at most ``max_requests``). A fixed count hides overload at
high rates — a finite burst drains, and may drain within the SLOs — whereas at a fixed duration an
overload by a factor ρ leaves a backlog of (ρ − 1) × duration_s seconds of work, which the TTFT
SLO sees.

Re-timing a trace keeps its burstiness: arrivals are scaled by ``native rate / asked rate``,
where the native rate is (n − 1) / (t_last − t_first) over the window used.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np

from ridgeline.errors import ConfigError
from ridgeline.sim.trace_rows import parse_row
from ridgeline.specs.inputs import short_repr, text_lines

TRACE_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")


class Arrival(StrEnum):
    """How arrivals are laid out at a given rate."""

    POISSON = "poisson"  # exponential gaps, seeded
    UNIFORM = "uniform"  # one request every 1/rate seconds exactly
    TRACE = "trace"  # the trace's own gaps, scaled to the rate


@dataclass(frozen=True, slots=True)
class Lengths:
    """A token-length distribution: fixed (``low == high``) or uniform on [low, high]."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.high:
            raise ConfigError(f"lengths [{self.low}, {self.high}]: need 1 <= low <= high")

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths drawn with ``rng``."""
        if self.low == self.high:
            return np.full(n, self.low, dtype=np.int64)
        return rng.integers(self.low, self.high + 1, n, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A workload axis value.

    Attributes:
        name: label used in reports.
        arrival: how arrivals are laid out (a trace workload uses ``TRACE``).
        num_requests: requests per probe (the first ones of the trace after ``skip``), or
            ``None`` when ``duration_s`` sets it.
        trace_path: CSV with ``arrived_at,num_prefill_tokens,num_decode_tokens`` (or ``None``).
        skip: trace rows skipped before the window.
        prompt_tokens: prompt lengths of a synthetic workload.
        output_tokens: output lengths of a synthetic workload.
        duration_s: seconds of arrivals per probe (instead of ``num_requests``).
        max_requests: most requests per probe in ``duration_s`` mode (trace rows read, lengths
            drawn).
    """

    name: str
    arrival: Arrival
    num_requests: int | None
    trace_path: str | None = None
    skip: int = 0
    prompt_tokens: Lengths | None = None
    output_tokens: Lengths | None = None
    duration_s: float | None = None
    max_requests: int = 20_000

    def __post_init__(self) -> None:
        if (self.num_requests is None) == (self.duration_s is None):
            raise ConfigError(f"workload '{self.name}': give num_requests or duration_s, one")
        if min(self.num_requests or 2, self.max_requests) < 2 or (self.duration_s or 1) <= 0:
            raise ConfigError(f"workload '{self.name}': needs >= 2 requests and duration_s > 0")
        is_trace = self.arrival is Arrival.TRACE
        if is_trace != (self.trace_path is not None):
            raise ConfigError(f"workload '{self.name}': a trace workload needs `trace`, only it")
        if not is_trace and (self.prompt_tokens is None or self.output_tokens is None):
            raise ConfigError(f"workload '{self.name}': needs prompt_tokens and output_tokens")

    @property
    def table_size(self) -> int:
        """Requests materialized once: the fixed count, or the most a probe may take."""
        return self.num_requests if self.num_requests is not None else self.max_requests

    def requests_at(self, rate_rps: float, available: int) -> int:
        """How many requests the probe at ``rate_rps`` takes from a table of ``available``."""
        if self.duration_s is None:
            return available
        return max(2, min(available, math.ceil(rate_rps * self.duration_s)))


@dataclass(frozen=True, slots=True)
class RequestTable:
    """A workload's requests before timing: lengths, and the trace's own arrivals (if any)."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    trace_arrival_s: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Requests:
    """The requests of one probe, in arrival order, at ``rate_rps``."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    rate_rps: float

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)


def read_trace(path: str | Path, skip: int = 0, limit: int | None = None) -> RequestTable:
    """Read a trace CSV (``arrived_at,num_prefill_tokens,num_decode_tokens``).

    Raises:
        ConfigError: the file is missing, a column is missing, or a line is malformed (the
            message names the file and line).
    """
    path = Path(path)
    lines = (text for _, text in text_lines(path, "trace"))
    try:
        rows = _parse_rows(path, csv.reader(lines), skip, limit)
    except csv.Error as e:
        raise ConfigError(f"trace {path}: not valid CSV: {e}") from None
    if len(rows) < 2:
        raise ConfigError(f"trace {path}: fewer than 2 requests after skipping {skip}")
    arr = np.array(rows, dtype=np.float64)
    return RequestTable(arr[:, 1].astype(np.int64), arr[:, 2].astype(np.int64), arr[:, 0])


def _parse_rows(
    path: Path, reader: Iterator[list[str]], skip: int, limit: int | None
) -> list[tuple[float, int, int]]:
    header = next(reader, None)
    if header is None or tuple(h.strip() for h in header) != TRACE_COLUMNS:
        raise ConfigError(f"trace {path} line 1: header must be {','.join(TRACE_COLUMNS)}")
    rows: list[tuple[float, int, int]] = []
    for line_no, row in enumerate(reader, start=2):
        if line_no - 2 < skip:
            continue
        if limit is not None and len(rows) >= limit:
            break
        rows.append(_parse_row(path, line_no, row))
    return rows


def _parse_row(path: Path, line_no: int, row: list[str]) -> tuple[float, int, int]:
    try:
        t, p, d = row
    except ValueError:
        raise ConfigError(
            f"trace {path} line {line_no}: malformed row {short_repr(','.join(row))}"
        ) from None
    cells = {"arrived_at": t, "num_prefill_tokens": p, "num_decode_tokens": d}
    r = parse_row(cells, f"trace {path} line {line_no}")
    return r.arrival_s, int(r.prompt_len), int(r.output_len)


def load_table(spec: WorkloadSpec, seed: int) -> RequestTable:
    """Materialize a workload once: read its trace window, or draw its lengths with ``seed``."""
    n = spec.table_size
    if spec.trace_path is not None:
        table = read_trace(spec.trace_path, spec.skip, n)
        if spec.num_requests is not None and len(table.prompt_tokens) < n:
            raise ConfigError(
                f"workload '{spec.name}': trace {spec.trace_path} has only "
                f"{len(table.prompt_tokens)} requests after skip={spec.skip}, num_requests={n}"
            )
        return table
    assert spec.prompt_tokens is not None and spec.output_tokens is not None
    rng = np.random.default_rng(seed)
    prompts = spec.prompt_tokens.draw(n, rng)
    return RequestTable(prompts, spec.output_tokens.draw(n, rng))


def at_rate(
    table: RequestTable,
    arrival: Arrival,
    rate_rps: float,
    seed: int,
    num_requests: int | None = None,
) -> Requests:
    """Lay the first ``num_requests`` of the table (all by default) out in time at ``rate_rps``.

    Poisson gaps come from ``np.random.default_rng(seed)``, so a probe is a pure function of
    (table, rate, seed) and gives the same requests on every machine.
    """
    n = len(table.prompt_tokens) if num_requests is None else num_requests
    assert 2 <= n <= len(table.prompt_tokens)
    if arrival is Arrival.TRACE:
        assert table.trace_arrival_s is not None
        t = table.trace_arrival_s[:n] - table.trace_arrival_s[0]
        native_rps = (n - 1) / t[-1] if t[-1] > 0 else rate_rps
        times = t * (native_rps / rate_rps)
    elif arrival is Arrival.UNIFORM:
        times = np.arange(n, dtype=np.float64) / rate_rps
    else:
        gaps = np.random.default_rng(seed).exponential(1.0 / rate_rps, n)
        times = np.cumsum(gaps) - gaps[0]
    return Requests(times, table.prompt_tokens[:n], table.output_tokens[:n], rate_rps)
