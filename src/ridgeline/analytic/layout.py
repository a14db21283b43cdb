"""Layout and access: banked memory, alignment to a transfer granule, access order.

Three first-order models of how the *way* bytes are touched sets the bandwidth a kernel gets
(course module 5):

- Banks: a memory of B banks, each ``bank_width`` bytes wide, serves one word per bank per
  cycle. Lanes whose words fall in the same bank (different words) serialise; the conflict
  degree is the largest number of distinct words that share a bank (CUDA C++ Programming
  Guide, "Shared Memory": a stride of s 4-byte words over 32 banks conflicts gcd(s, 32) ways).
- Alignment: an access of ``size`` bytes at ``offset`` touches
  ⌈(offset mod g + size) ÷ g⌉ granules of g bytes, against ⌈size ÷ g⌉ when aligned (CUDA C++
  Best Practices Guide, "Coalesced Access to Global Memory": a misaligned warp access touches
  one more 32-B sector; on Spyre g is the 128-B stick [S35]).
- Access order: walking a row-major array column by column fetches a whole line per element
  unless the lines of one column's rows all stay cached until the next column (spatial
  locality; Hennessy & Patterson, *Computer Architecture*, ch. 2, loop interchange).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from ridgeline.errors import ConfigError
from ridgeline.specs.hardware import MemoryLevel
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_BYTES, MAX_COUNT


def _positive(field: str, value: float) -> None:
    if value <= 0:
        raise ConfigError(f"field {field}: must be positive, got {value}")


@dataclass(frozen=True, slots=True)
class BankAccess:
    """One strided access by ``lanes`` lanes against a banked memory."""

    banks: int
    bank_width_bytes: float
    stride_words: int
    lanes: int
    conflict_degree: int
    peak_bytes_per_s: float | None

    @property
    def efficiency(self) -> float:
        """Share of the banks' peak the access gets: 1 ÷ conflict degree."""
        return 1.0 / self.conflict_degree

    @property
    def effective_bytes_per_s(self) -> float | None:
        if self.peak_bytes_per_s is None:
            return None
        return self.peak_bytes_per_s * self.efficiency

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(efficiency=self.efficiency, effective_bytes_per_s=self.effective_bytes_per_s)
        return d


def bank_conflicts(
    stride_words: int,
    banks: int,
    bank_width_bytes: float,
    lanes: int | None = None,
    peak_bytes_per_s: float | None = None,
) -> BankAccess:
    """Conflict degree of lane i reading word i·stride (one word per lane).

    Word w lives in bank w mod ``banks``; lanes reading the *same* word are served by one
    broadcast, so the degree counts distinct words per bank (CUDA C++ Programming Guide,
    Shared Memory). ``lanes`` defaults to ``banks`` (a warp of 32 on 32 banks).
    """
    _positive("banks", banks)
    _positive("bank_width_bytes", bank_width_bytes)
    n = banks if lanes is None else lanes
    _positive("lanes", n)
    words = {i * stride_words for i in range(n)}
    degree = max(Counter(w % banks for w in words).values())
    return BankAccess(banks, bank_width_bytes, stride_words, n, degree, peak_bytes_per_s)


def level_bank_conflicts(level: MemoryLevel, stride_words: int) -> BankAccess:
    """``bank_conflicts`` on a catalog level's banks, bank width and per-instance bandwidth
    (e.g. one H100 SM's shared memory)."""
    if level.banks is None or level.bank_width_bytes is None:
        raise ConfigError(f"level {level.name}: field banks: the catalog gives no bank layout")
    bw = level.bandwidth_bytes_per_s
    peak = bw / level.instances if bw is not None else None
    return bank_conflicts(stride_words, level.banks, level.bank_width_bytes, None, peak)


@dataclass(frozen=True, slots=True)
class Alignment:
    """Granules one access touches, aligned and as placed."""

    offset_bytes: float
    size_bytes: float
    granule_bytes: float
    granules_aligned: int
    granules_touched: int

    @property
    def overhead(self) -> float:
        """Extra transfers caused by misalignment, as a fraction of the aligned count."""
        return self.granules_touched / self.granules_aligned - 1.0

    @property
    def efficiency(self) -> float:
        """Useful bytes ÷ bytes transferred."""
        return self.size_bytes / (self.granules_touched * self.granule_bytes)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(overhead=self.overhead, efficiency=self.efficiency)
        return d


def alignment(offset_bytes: float, size_bytes: float, granule_bytes: float) -> Alignment:
    """Transactions of an access at ``offset_bytes`` of ``size_bytes``: ⌈(offset mod g + size)/g⌉
    granules, against ⌈size/g⌉ when aligned (g = ``granule_bytes``: a 128-B Spyre stick, a 32-B
    GPU sector, a 128-B cache line)."""
    _positive("size_bytes", size_bytes)
    _positive("granule_bytes", granule_bytes)
    if offset_bytes < 0:
        raise ConfigError(f"field offset_bytes: must be >= 0, got {offset_bytes}")
    head = offset_bytes % granule_bytes
    touched = math.ceil((head + size_bytes) / granule_bytes)
    aligned = math.ceil(size_bytes / granule_bytes)
    return Alignment(offset_bytes, size_bytes, granule_bytes, aligned, touched)


def padded_bytes(rows: int, cols: int, elem_bytes: float, granule_bytes: float) -> float:
    """Bytes of a row-major [rows, cols] array whose rows are padded to whole granules (Spyre
    stickification: each row starts on a 128-B stick)."""
    _positive("rows", rows)
    _positive("cols", cols)
    return rows * math.ceil(cols * elem_bytes / granule_bytes) * granule_bytes


class Order(StrEnum):
    ROW = "row-major"
    COLUMN = "column-major"


@dataclass(frozen=True, slots=True)
class Traversal:
    """Bytes fetched to read every element of a row-major [rows, cols] array once."""

    order: Order
    useful_bytes: float
    fetched_bytes: float

    @property
    def amplification(self) -> float:
        """Bytes fetched per useful byte (1.0 is perfect)."""
        return self.fetched_bytes / self.useful_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": self.order.value,
            "useful_bytes": self.useful_bytes,
            "fetched_bytes": self.fetched_bytes,
            "amplification": self.amplification,
        }


def traversal(
    rows: int,
    cols: int,
    elem_bytes: float,
    line_bytes: float,
    order: Order,
    cache_bytes: float = 0.0,
) -> Traversal:
    """Bytes fetched in lines of ``line_bytes`` to walk a row-major array in ``order``.

    Row order reads each row's lines once: rows·⌈cols·e/line⌉·line. Column order touches one
    line per element unless a column's ``rows`` lines fit in ``cache_bytes`` (then each line
    is fetched once, as in row order). Rows are assumed to start on a line boundary.
    """
    _positive("elem_bytes", elem_bytes)
    _positive("line_bytes", line_bytes)
    useful = rows * cols * elem_bytes
    row_fetch = padded_bytes(rows, cols, elem_bytes, line_bytes)
    if order is Order.ROW or rows * line_bytes <= cache_bytes:
        return Traversal(order, useful, row_fetch)
    return Traversal(order, useful, rows * cols * max(line_bytes, elem_bytes))


def strided_efficiency(stride_elems: int, elem_bytes: float, granule_bytes: float) -> float:
    """Useful share of the bytes moved when reading one element every ``stride_elems``
    elements with transfers of ``granule_bytes`` (a long run, aligned start)."""
    _positive("stride_elems", stride_elems)
    span = stride_elems * elem_bytes
    if span >= granule_bytes:
        return elem_bytes / granule_bytes
    return 1.0 / stride_elems


@dataclass(frozen=True, slots=True)
class LayoutReport:
    """The three layout effects for one setting: bank conflicts by stride, alignment by offset
    against a transfer granule, and the bytes a row- or column-major walk fetches."""

    bank_level: str
    banks: tuple[BankAccess, ...]
    granule_bytes: float
    alignments: tuple[Alignment, ...]
    line_bytes: float
    traversals: tuple[Traversal, ...]
    shape: tuple[int, int]
    elem_bytes: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.layout/1",
            "bank_level": self.bank_level,
            "banks": [b.to_dict() for b in self.banks],
            "granule_bytes": self.granule_bytes,
            "alignments": [a.to_dict() for a in self.alignments],
            "line_bytes": self.line_bytes,
            "shape": list(self.shape),
            "elem_bytes": self.elem_bytes,
            "traversals": [t.to_dict() for t in self.traversals],
        }


@dataclass(frozen=True, slots=True)
class LayoutQuery:
    """What ``layout_report`` evaluates: strides (words), an access of ``access_bytes`` at
    each offset, and a [rows, cols] array walked in both orders with ``cache_bytes`` of cache."""

    strides: tuple[int, ...] = (1, 2, 3, 4, 8, 16, 32, 33)
    access_bytes: float = 256.0
    offsets: tuple[float, ...] = (0.0, 32.0, 64.0, 96.0, 128.0)
    rows: int = 1024
    cols: int = 1024
    elem_bytes: float = 4.0
    cache_bytes: float = 0.0

    def __post_init__(self) -> None:
        for stride in self.strides:
            check_int("stride_words", stride, 1, MAX_COUNT)
        whole_bytes("size_bytes", self.access_bytes, 1)  # the name alignment() gives it
        for offset in self.offsets:
            whole_bytes("offset_bytes", offset, 0)
        check_int("rows", self.rows, 1, MAX_COUNT)
        check_int("cols", self.cols, 1, MAX_COUNT)
        check_real("elem_bytes", self.elem_bytes, 0, MAX_BYTES, low_open=True)
        if self.elem_bytes * 8 != int(self.elem_bytes * 8):  # int4 is 0.5 B, fp6 0.75 B
            raise ConfigError(f"field elem_bytes: a whole number of bits, got {self.elem_bytes} B")
        whole_bytes("cache_bytes", self.cache_bytes, 0)


def whole_bytes(field: str, value: float, low: int) -> float:
    """``value`` if it is a whole number of bytes in [low, ``MAX_BYTES``].

    Raises:
        ConfigError: naming ``field`` (a 0.3-B granule was printed as "0-B granules").
    """
    check_real(field, value, low, MAX_BYTES)
    if value != int(value):
        raise ConfigError(f"field {field}: a whole number of bytes, got {value}")
    return value


def layout_report(
    bank_level: MemoryLevel, granule_bytes: float, query: LayoutQuery = LayoutQuery()
) -> LayoutReport:
    """Bank conflicts on ``bank_level`` (its catalog banks), alignment and traversal against
    transfers of ``granule_bytes`` (a 128-B Spyre stick, a 32-B GPU sector, a 64-B line)."""
    whole_bytes("granule_bytes", granule_bytes, 1)
    banks = tuple(level_bank_conflicts(bank_level, s) for s in query.strides)
    aligns = tuple(alignment(o, query.access_bytes, granule_bytes) for o in query.offsets)
    walks = tuple(
        traversal(query.rows, query.cols, query.elem_bytes, granule_bytes, order, query.cache_bytes)
        for order in Order
    )
    return LayoutReport(
        bank_level.name,
        banks,
        granule_bytes,
        aligns,
        granule_bytes,
        walks,
        (query.rows, query.cols),
        query.elem_bytes,
    )
