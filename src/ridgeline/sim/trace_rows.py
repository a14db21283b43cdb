"""One request of a trace, validated: the rows of a JSONL or CSV trace file.

JSONL fields: ``arrival_s`` (or ``arrived_at``), ``prompt_len`` (or ``prompt_tokens``, a count
or the token ids themselves, or ``num_prefill_tokens``), ``output_len`` (or
``num_decode_tokens``), and optionally ``prefix_id`` with ``prefix_len`` (the leading tokens
shared by every request of that prefix), ``priority`` and ``spec_acceptance``. CSV: the same
names as columns (the Splitwise trace is ``arrived_at,num_prefill_tokens,num_decode_tokens``).

Every number is finite and bounded (``specs.limits``): a ``NaN`` arrival would lose its request
from the event loop, a negative ``prefix_len`` would grow the prompt, a fractional token count
would be truncated; all three are refused with the file, line and field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ridgeline.errors import ConfigError
from ridgeline.specs.inputs import Fraction, Whole, parse_json, text_lines, validation_message
from ridgeline.specs.limits import MAX_CONTEXT, MAX_SECONDS

TokenCount = Annotated[float, Field(ge=1, le=MAX_CONTEXT, allow_inf_nan=False), Whole]
PrefixLen = Annotated[float, Field(ge=0, le=MAX_CONTEXT, allow_inf_nan=False), Whole]
TokenId = Annotated[int, Field(ge=0, lt=2**63)]


class TraceRow(BaseModel):
    """One request of a trace (see the module docstring for the field names)."""

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
        TokenCount,
        Field(validation_alias=AliasChoices("prompt_len", "prompt_tokens", "num_prefill_tokens")),
    ]
    output_len: Annotated[
        TokenCount, Field(validation_alias=AliasChoices("output_len", "num_decode_tokens"))
    ]
    prompt_ids: Annotated[list[TokenId], Field(min_length=1, max_length=MAX_CONTEXT)] | None = None
    prefix_id: str | int | None = None
    prefix_len: PrefixLen | None = None
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
    def _consistent(self) -> TraceRow:
        if self.prefix_len is not None and self.prefix_len > self.prompt_len:
            raise ValueError(
                f"field prefix_len: {self.prefix_len:g} exceeds the prompt's "
                f"{self.prompt_len:g} tokens"
            )
        return self


def parse_row(row: dict[str, Any], where: str) -> TraceRow:
    """Validate one row; empty CSV cells count as absent.

    Raises:
        ConfigError: ``where: field NAME: ...``.
    """
    present = {k: v for k, v in row.items() if v is not None and v != ""}
    try:
        return TraceRow.model_validate(present)
    except ValidationError as e:
        message = validation_message(e)
        if message.startswith("field prompt_ids"):  # the user wrote prompt_tokens
            message = message.replace("field prompt_ids", "field prompt_tokens", 1)
        raise ConfigError(f"{where}: {message}") from None


def jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line of a JSONL trace."""
    for line_no, line in text_lines(path, "trace"):
        if not line.strip():
            continue
        row = parse_json(line, f"{path}:{line_no}")
        if not isinstance(row, dict):
            raise ConfigError(f"{path}:{line_no}: expected a JSON object")
        yield line_no, row


def csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of a CSV trace with a header line."""
    lines = text_lines(path, "trace")
    reader = csv.DictReader(text for _, text in lines)
    try:
        for line_no, row in enumerate(reader, 2):
            if None in row:
                raise ConfigError(f"{path}:{line_no}: more cells than the header has columns")
            yield line_no, dict(row)
    except csv.Error as e:
        raise ConfigError(f"{path}:{reader.line_num}: not valid CSV: {e}") from None
