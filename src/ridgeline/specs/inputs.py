"""Reading what a user hands in: files as bytes first, then text, JSON or TOML, and pydantic
validation errors as one line that names the field.

Every loader (config.json, chip TOML, traces, sweep specs, answer sheets) reads through here, so
a missing file, a directory, a binary or oversized file, a ``NaN`` in JSON or a nesting too deep
to parse is the same one-line ``ConfigError`` everywhere; the bounds are in ``specs.limits``.
"""

from __future__ import annotations

import json
import math
import numbers
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

from ridgeline.errors import ConfigError
from ridgeline.specs.limits import MAX_DOCUMENT_BYTES, MAX_SECONDS, MAX_TRACE_LINE_BYTES

# ---- typed fields shared by the file formats and the API bodies -------------------------------

Finite = Annotated[float, Field(allow_inf_nan=False)]
PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


def _label(path: Path, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def _open_bytes(path: Path, what: str, max_bytes: int) -> bytes:
    label = _label(path, what)
    if path.is_dir():
        raise ConfigError(f"{label}: is a directory, not a file")
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise ConfigError(f"{label}: no such file") from None
    except OSError as e:
        raise ConfigError(f"{label}: cannot read it: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{label}: larger than {max_bytes / 2**20:g} MiB")
    return data


def decode_text(data: bytes, where: str) -> str:
    """UTF-8 text of ``data`` (a leading byte-order mark is dropped).

    Raises:
        ConfigError: the bytes are binary (a NUL byte) or not UTF-8, naming the offset.
    """
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ConfigError(f"{where}: a binary file, not text (NUL byte at offset {nul})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{where}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None


def read_text(path: str | Path, what: str = "", max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The text of a small file (a config, a spec, a sheet), read as bytes first.

    Args:
        path: the file.
        what: what the file is, for messages (``"trace"``, ``"sweep spec"``); may be empty.
        max_bytes: refuse files larger than this.

    Raises:
        ConfigError: missing, a directory, unreadable, too large, binary or not UTF-8.
    """
    p = Path(path)
    return decode_text(_open_bytes(p, what, max_bytes), _label(p, what))


def text_lines(path: str | Path, what: str = "") -> Iterator[tuple[int, str]]:
    """(line number, text) of a large line-oriented file (a trace), each line decoded on its own.

    Raises:
        ConfigError: as ``read_text``, naming the line that is binary, not UTF-8 or too long.
    """
    p = Path(path)
    label = _label(p, what)
    if p.is_dir():
        raise ConfigError(f"{label}: is a directory, not a file")
    try:
        f = p.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"{label}: no such file") from None
    except OSError as e:
        raise ConfigError(f"{label}: cannot read it: {e.strerror or e}") from None
    with f:
        for line_no, raw in enumerate(iter(lambda: f.readline(MAX_TRACE_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_TRACE_LINE_BYTES:
                raise ConfigError(f"{p}:{line_no}: a line longer than {MAX_TRACE_LINE_BYTES:,} B")
            yield line_no, decode_text(raw, f"{p}:{line_no}")


def _no_constant(name: str) -> Any:
    raise ConfigError(f"{name} is not a number JSON allows")


def parse_json(text: str, where: str) -> Any:
    """A JSON document; ``NaN`` and ``Infinity`` (which Python accepts) are refused.

    Raises:
        ConfigError: naming ``where`` and the line of a syntax error.
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except ConfigError as e:
        raise ConfigError(f"{where}: not valid JSON ({e})") from None
    except (ValueError, RecursionError) as e:  # 5,000-digit integers, nesting past the stack
        raise ConfigError(f"{where}: not valid JSON ({_first_line(e)})") from None


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """A TOML document.

    Raises:
        ConfigError: naming ``where`` and the line of a syntax error.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: {e}") from None
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"{where}: not valid TOML ({_first_line(e)})") from None


def _first_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text.splitlines()[0]


# ---- validation errors -------------------------------------------------------------------------

_TAGS = ("int", "float", "str", "bool", "list", "tuple", "dict", "none", "literal")


def _is_field(part: int | str) -> bool:
    """Pydantic puts union members (``constrained-int``, ``list[int]``) in the location."""
    if isinstance(part, int):
        return True
    word = part.removeprefix("constrained-")
    return "[" not in part and word not in _TAGS and not part.startswith("function-")


def field_path(loc: Sequence[int | str]) -> str:
    """``levels.2.capacity_bytes`` from a pydantic error location."""
    return ".".join(str(p) for p in loc if _is_field(p))


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr`` of a user value, on one line and at most ``limit`` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_BOUNDS = {
    "greater_than": ("must be >", "gt"),
    "greater_than_equal": ("must be >=", "ge"),
    "less_than": ("must be <", "lt"),
    "less_than_equal": ("must be <=", "le"),
}


def _number(x: Any) -> str:
    """A bound as people write it: 0 not 0.0, 1e+18 not 1000000000000000000."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        x = int(x)
    return f"{x:,}" if isinstance(x, int) and abs(x) < 10**15 else f"{x:g}"


_NOT_A_NUMBER = ("float_parsing", "float_type", "int_parsing", "int_type", "int_parsing_size")


def _message(err: Any) -> str:
    """The project's wording for pydantic's common errors (``must be >= 1, got 0``)."""
    kind, got = err["type"], short_repr(err.get("input"))
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "not a field of this file (a typo?)"
    if kind in _NOT_A_NUMBER:
        return f"not a number: {got}"
    if kind == "int_from_float":
        return f"must be a whole number, got {got}"
    if kind == "finite_number":
        return f"must be a finite number, got {got}"
    if kind in _BOUNDS:
        words, key = _BOUNDS[kind]
        return f"{words} {_number(err.get('ctx', {}).get(key))}, got {got}"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{msg}, got {got}" if err["loc"] else msg  # a whole-object check names its fields


def validation_message(e: ValidationError) -> str:
    """``field a.b: must be >= 1, got 0`` for the first error of a pydantic validation."""
    err = e.errors()[0]
    where = field_path(err["loc"])
    return f"field {where}: {_message(err)}" if where else _message(err)


def whole(value: float) -> float:
    """A count written as a number must be a whole number (``cores = 0.5`` is refused)."""
    if not math.isfinite(value) or value != int(value):
        raise ValueError("must be a whole number")
    return value


Whole = AfterValidator(whole)


# ---- checks of single values (dataclasses built from CLI options and library calls) -----------


def check_int(field: str, value: int, low: int, high: int) -> int:
    """``value`` if it is an integer in [low, high].

    Raises:
        ConfigError: ``field NAME: must be >= LOW, got VALUE`` (or ``<= HIGH``, or not an integer).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"field {field}: expected an integer, got {short_repr(value)}")
    if value < low:
        raise ConfigError(f"field {field}: must be >= {low:,}, got {value:,}")
    if value > high:
        raise ConfigError(f"field {field}: must be <= {high:,}, got {value:,}")
    return value


def check_real(field: str, value: float, low: float, high: float, low_open: bool = False) -> float:
    """``value`` if it is a finite number in [low, high] ((low, high] with ``low_open``).

    Raises:
        ConfigError: naming the field, for NaN, infinities and values out of range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"field {field}: expected a number, got {short_repr(value)}")
    if not math.isfinite(value):
        raise ConfigError(f"field {field}: must be a finite number, got {value}")
    if value < low or (low_open and value == low):
        raise ConfigError(
            f"field {field}: must be {'>' if low_open else '>='} {low:g}, got {value:g}"
        )
    if value > high:
        raise ConfigError(f"field {field}: must be <= {high:g}, got {value:g}")
    return value
