"""Request traces: one reader for JSONL and CSV, shared by the simulator and the sweep.

Formats:

- CSV with a header: ``arrived_at,num_prefill_tokens,num_decode_tokens`` (the Splitwise trace
  format, as vidur's processed traces ship it), or the JSONL field names below;
- JSONL, one object a line: ``arrival_s``, ``prompt_tokens`` (a list of token ids) or
  ``prompt_len``, ``output_len``, and optionally ``prefix_id`` / ``prefix_len`` (a shared system
  prompt), ``priority``, ``spec_acceptance``.

``trace_rows`` parses and checks every row (a broken line is one error naming the file, the
line and the field); ``load_trace`` turns rows into the simulator's requests (token ids as
labels, shared prefixes as shared ranges, arrivals from 0); ``trace_columns`` gives the sweep
its arrays of lengths and arrival times, which it re-times per probe.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ridgeline.errors import ConfigError
from ridgeline.sim.workload import RequestSpec, output_tokens, prompt_tokens


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One checked line of a trace."""

    line: int
    arrival_s: float
    prompt_len: int
    output_len: int
    prompt_ids: tuple[int, ...] | None = None
    prefix_id: str | None = None
    prefix_len: int = 0
    priority: int = 0
    spec_acceptance: float | None = None


def _field(row: dict[str, Any], names: tuple[str, ...], where: str, kind: type = int) -> Any:
    for name in names:
        if name in row and row[name] not in (None, ""):
            try:
                value = kind(float(row[name])) if kind is int else kind(row[name])
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: field {name}: not a number: {row[name]!r}") from None
            if value < 0:
                raise ConfigError(f"{where}: field {name}: must be >= 0, got {value}")
            return value
    raise ConfigError(f"{where}: missing field {' or '.join(names)}")


def _prompt(row: dict[str, Any], where: str) -> tuple[int, tuple[int, ...] | None]:
    """The prompt's length, and its token ids when the trace gives them."""
    if isinstance(row.get("prompt_tokens"), list):
        ids = row["prompt_tokens"]
        if not ids or not all(isinstance(t, int) for t in ids):
            raise ConfigError(f"{where}: field prompt_tokens: must be a non-empty list of ints")
        return len(ids), tuple(ids)
    n = _field(row, ("prompt_len", "prompt_tokens", "num_prefill_tokens"), where)
    if n < 1:
        raise ConfigError(f"{where}: field prompt_len: must be >= 1, got {n}")
    return n, None


def _row(row: dict[str, Any], line: int, where: str) -> TraceRow:
    arrival = _field(row, ("arrival_s", "arrived_at"), where, float)
    out_len = _field(row, ("output_len", "num_decode_tokens"), where)
    if out_len < 1:
        raise ConfigError(f"{where}: field output_len: must be >= 1, got {out_len}")
    n, ids = _prompt(row, where)
    prefix = row.get("prefix_id")
    plen = min(int(row.get("prefix_len") or n), n) if prefix is not None and ids is None else 0
    priority = int(_field(row, ("priority",), where)) if "priority" in row else 0
    alpha = _field(row, ("spec_acceptance",), where, float) if "spec_acceptance" in row else None
    if alpha is not None and alpha > 1:
        raise ConfigError(f"{where}: field spec_acceptance: must be in [0, 1], got {alpha}")
    pid = None if prefix is None or ids is not None else str(prefix)
    return TraceRow(line, arrival, n, out_len, ids, pid, plen, priority, alpha)


def trace_rows(path: str | Path, skip: int = 0, limit: int | None = None) -> list[TraceRow]:
    """The checked rows ``skip`` … ``skip + limit`` of a JSONL or CSV trace, in file order.

    Raises:
        ConfigError: the file is missing, or a line is malformed (the message names the file,
            the line and the field), or no row is left.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"trace {p}: no such file")
    rows = _csv_rows(p) if p.suffix.lower() == ".csv" else _jsonl_rows(p)
    out: list[TraceRow] = []
    for i, (line, row) in enumerate(rows):
        if i < skip:
            continue
        if limit is not None and len(out) >= limit:
            break
        out.append(_row(row, line, f"{p}:{line}"))
    if not out:
        raise ConfigError(f"trace {p}: no requests" + (f" after skipping {skip}" if skip else ""))
    return out


def load_trace(path: str | Path, limit: int | None = None, skip: int = 0) -> list[RequestSpec]:
    """The simulator's requests of a trace, arrivals shifted to start at 0, in arrival order.

    Request i (its row in the file) is ``t{i}``; prompts with the same ``prefix_id`` share
    their first ``prefix_len`` tokens."""
    rows = trace_rows(path, skip, limit)
    prefixes: dict[str, int] = {}
    out = []
    for i, r in enumerate(rows, skip):
        if r.prompt_ids is not None:
            prompt: Sequence[int] = r.prompt_ids
        elif r.prefix_id is None:
            prompt = prompt_tokens(i, r.prompt_len)
        else:
            pid = prefixes.setdefault(r.prefix_id, len(prefixes))  # first-seen order
            prompt = prompt_tokens(i, r.prompt_len - r.prefix_len, pid, r.prefix_len)
        out.append(
            RequestSpec(
                f"t{i}",
                r.arrival_s,
                prompt,
                output_tokens(i, r.output_len),
                r.priority,
                r.spec_acceptance,
            )  # fmt: skip
        )
    t0 = min(r.arrival_s for r in out)
    return sorted((replace(r, arrival_s=r.arrival_s - t0) for r in out), key=lambda r: r.arrival_s)


def trace_columns(
    path: str | Path, skip: int = 0, limit: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrival times (s, as in the file), prompt lengths and output lengths of rows ``skip`` …
    ``skip + limit``: what the sweep re-times to each probe's rate."""
    rows = trace_rows(path, skip, limit)
    arrival = np.array([r.arrival_s for r in rows], dtype=np.float64)
    prompt = np.array([r.prompt_len for r in rows], dtype=np.int64)
    return arrival, prompt, np.array([r.output_len for r in rows], dtype=np.int64)


def _jsonl_rows(p: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with p.open() as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{p}:{line_no}: not JSON: {e.msg}") from e
            if not isinstance(row, dict):
                raise ConfigError(f"{p}:{line_no}: expected a JSON object")
            yield line_no, row


def _csv_rows(p: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with p.open(newline="") as f:
        for line_no, row in enumerate(csv.DictReader(f), 2):
            yield line_no, dict(row)
