"""Request traces: one reader for JSONL and CSV, shared by the simulator and the sweep.

Formats:

- CSV with a header: ``arrived_at,num_prefill_tokens,num_decode_tokens`` (the Splitwise trace
  format, as vidur's processed traces ship it), or the JSONL field names below;
- JSONL, one object a line: ``arrival_s`` (or ``arrived_at``), ``prompt_tokens`` (a list of
  token ids, or a count) or ``prompt_len`` (or ``num_prefill_tokens``), ``output_len`` (or
  ``num_decode_tokens``), and optionally ``prefix_id`` / ``prefix_len`` (a shared system
  prompt: its leading ``prefix_len`` tokens, the whole prompt when absent), ``priority``,
  ``spec_acceptance``.

``trace_rows`` parses and checks every row (a broken line is one error naming the file, the
line and the field); ``load_trace`` turns rows into the simulator's requests (token ids as
labels, shared prefixes as shared ranges, arrivals from 0); ``trace_columns`` gives the sweep
its arrays of lengths and arrival times, which it re-times per probe.

The file is read as bytes, line by line (``specs.inputs.text_lines``), so a binary file is one
error naming its line. Every number is finite and bounded (``specs.limits``): a ``NaN`` arrival
would lose its request from the event loop, a negative ``prefix_len`` would grow the prompt and
a fractional token count would be truncated, so all three are refused.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ridgeline.errors import ConfigError
from ridgeline.sim.workload import RequestSpec, output_tokens, prompt_tokens
from ridgeline.specs.inputs import Fraction, Whole, parse_json, text_lines, validation_message
from ridgeline.specs.limits import MAX_CONTEXT, MAX_SECONDS


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


_TokenCount = Annotated[float, Field(ge=1, le=MAX_CONTEXT, allow_inf_nan=False), Whole]
_PrefixLen = Annotated[float, Field(ge=0, le=MAX_CONTEXT, allow_inf_nan=False), Whole]
_TokenId = Annotated[int, Field(ge=0, lt=2**63)]


class _RowFile(BaseModel):
    """What one line may hold (see the module docstring for the field names)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    arrival_s: Annotated[
        float,
        Field(
            ge=0,
            le=MAX_SECONDS,
            allow_inf_nan=False,
            validation_alias=AliasChoices("arrival_s", "arrived_at"),
        ),
    ]
    prompt_len: Annotated[
        _TokenCount,
        Field(validation_alias=AliasChoices("prompt_len", "prompt_tokens", "num_prefill_tokens")),
    ]
    output_len: Annotated[
        _TokenCount, Field(validation_alias=AliasChoices("output_len", "num_decode_tokens"))
    ]
    prompt_ids: Annotated[list[_TokenId], Field(min_length=1, max_length=MAX_CONTEXT)] | None = None
    prefix_id: str | int | None = None
    prefix_len: _PrefixLen | None = None
    priority: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] = 0
    spec_acceptance: Fraction | None = None

    @model_validator(mode="before")
    @classmethod
    def _token_ids(cls, row: Any) -> Any:
        """``prompt_tokens`` as a list is the prompt itself; its length is the prompt length."""
        if isinstance(row, dict) and isinstance(row.get("prompt_tokens"), list):
            ids = row["prompt_tokens"]
            return {**row, "prompt_ids": ids, "prompt_tokens": len(ids)}
        return row

    @model_validator(mode="after")
    def _consistent(self) -> _RowFile:
        if self.prefix_len is not None and self.prefix_len > self.prompt_len:
            raise ValueError(
                f"field prefix_len: {self.prefix_len:g} exceeds the prompt's "
                f"{self.prompt_len:g} tokens"
            )
        return self


def _row(raw: dict[str, Any], line: int, where: str) -> TraceRow:
    """Check one row; empty CSV cells count as absent.

    Raises:
        ConfigError: ``where: field NAME: ...``.
    """
    present = {k: v for k, v in raw.items() if v is not None and v != ""}
    try:
        r = _RowFile.model_validate(present)
    except ValidationError as e:
        message = validation_message(e)
        if message.startswith("field prompt_ids"):  # the user wrote prompt_tokens
            message = message.replace("field prompt_ids", "field prompt_tokens", 1)
        raise ConfigError(f"{where}: {message}") from None
    n = int(r.prompt_len)
    ids = None if r.prompt_ids is None else tuple(r.prompt_ids)
    shared = r.prefix_id is not None and ids is None
    plen = (n if r.prefix_len is None else int(r.prefix_len)) if shared else 0
    pid = str(r.prefix_id) if shared else None
    return TraceRow(
        line, r.arrival_s, n, int(r.output_len), ids, pid, plen, r.priority, r.spec_acceptance
    )


def trace_rows(path: str | Path, skip: int = 0, limit: int | None = None) -> list[TraceRow]:
    """The checked rows ``skip`` … ``skip + limit`` of a JSONL or CSV trace, in file order.

    Raises:
        ConfigError: the file is missing, a directory or binary, or a line is malformed (the
            message names the file, the line and the field), or no row is left.
    """
    p = Path(path)
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
            )
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
    """(line number, object) of every non-blank line of a JSONL trace."""
    for line_no, line in text_lines(p, "trace"):
        if not line.strip():
            continue
        row = parse_json(line, f"{p}:{line_no}")
        if not isinstance(row, dict):
            raise ConfigError(f"{p}:{line_no}: expected a JSON object")
        yield line_no, row


def _csv_rows(p: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of a CSV trace with a header line."""
    reader = csv.DictReader(text for _, text in text_lines(p, "trace"))
    try:
        for line_no, row in enumerate(reader, 2):
            if None in row:
                raise ConfigError(f"{p}:{line_no}: more cells than the header has columns")
            yield line_no, dict(row)
    except csv.Error as e:
        raise ConfigError(f"{p}:{reader.line_num}: not valid CSV: {e}") from None
