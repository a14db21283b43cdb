"""The published-measurements dataset: inference speeds that others measured on real hardware.

One TOML file per source in ``ridgeline/data/measurements`` (the schema is in that folder's
README.md): a ``[source]`` table (title, URL, date, kind) and ``[[rows]]``, each a figure with the
deployment, model, dtypes and scenario needed to predict it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ridgeline.errors import ConfigError
from ridgeline.specs.dtypes import DType


class SourceKind(StrEnum):
    VENDOR = "vendor"
    MLPERF = "mlperf"
    PAPER = "paper"
    INDEPENDENT = "independent"


class Scenario(StrEnum):
    """What was measured: per-user decode speed, offline throughput, or latency under load."""

    DECODE = "decode"
    OFFLINE = "offline"
    SERVER = "server"


class Metric(StrEnum):
    PER_USER_TOKENS_PER_S = "per_user_tokens_per_s"
    OUTPUT_TOKENS_PER_S = "output_tokens_per_s"
    TTFT_S = "ttft_s"
    TPOT_S = "tpot_s"


class AttentionReads(StrEnum):
    """How the engine's decode attention reads a grouped-query KV cache."""

    PER_KV_HEAD = "per-kv-head"  # each KV head once for its group of query heads (GQA-aware)
    PER_QUERY_HEAD = "per-query-head"  # once per query head: group-size times the bytes


class ActivationQuantisation(StrEnum):
    """Where the engine quantises the activations an 8- or 4-bit GEMM reads."""

    SEPARATE_KERNEL = "separate-kernel"  # a kernel of its own before each GEMM (PyTorch flows)
    FUSED = "fused"  # in the norm or activation kernel before it (TensorRT engines)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_Count = Annotated[int, Field(ge=1, le=1_000_000)]


class _SourceFile(_Strict):
    title: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(pattern=r"^https?://")]
    date: Annotated[str, Field(pattern=r"^\d{4}-\d{2}(-\d{2})?$")]
    kind: SourceKind
    publisher: Annotated[str, Field(min_length=1)]
    engine: str = ""
    note: str = ""
    attention_kv_reads: AttentionReads = AttentionReads.PER_KV_HEAD
    activation_quantisation: ActivationQuantisation = ActivationQuantisation.SEPARATE_KERNEL
    dense_kv_cache_tokens: _Count | None = None
    device_bandwidth_bytes_per_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None


class _RowFile(_Strict):
    id: Annotated[str, Field(min_length=1)]
    hardware: Annotated[str, Field(min_length=1)]
    chips: _Count
    tensor_parallel: _Count = 1
    pipeline_parallel: _Count = 1
    expert_parallel: _Count = 1
    data_parallel: _Count = 1
    model: Annotated[str, Field(min_length=1)]
    weight_dtype: DType
    kv_dtype: DType
    scenario: Scenario
    metric: Metric
    value: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    isl: _Count
    osl: _Count
    batch: _Count | None = None
    concurrency: _Count | None = None
    max_seqs: _Count | None = None
    requests: _Count | None = None
    rate_rps: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    quote: Annotated[str, Field(min_length=1)]
    note: str = ""


class _DatasetFile(_Strict):
    source: _SourceFile
    rows: Annotated[list[_RowFile], Field(min_length=1)]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a set of measurements was published."""

    id: str
    title: str
    url: str
    date: str
    kind: SourceKind
    publisher: str
    engine: str
    attention_kv_reads: AttentionReads = AttentionReads.PER_KV_HEAD
    activation_quantisation: ActivationQuantisation = ActivationQuantisation.SEPARATE_KERNEL
    dense_kv_cache_tokens: int | None = None
    device_bandwidth_bytes_per_s: float | None = None  # stated, when below the catalog part's


@dataclass(frozen=True, slots=True)
class Row:
    """One published figure and everything needed to predict it (units: tokens, seconds)."""

    source: Source
    id: str
    hardware: str
    chips: int
    tensor_parallel: int
    pipeline_parallel: int
    expert_parallel: int
    data_parallel: int
    model: str
    weight_dtype: DType
    kv_dtype: DType
    scenario: Scenario
    metric: Metric
    value: float
    isl: int
    osl: int
    batch: int | None
    concurrency: int | None
    max_seqs: int | None
    requests: int | None
    rate_rps: float | None
    quote: str
    note: str

    @property
    def key(self) -> str:
        """``<source-id>/<row-id>``, unique in the dataset."""
        return f"{self.source.id}/{self.id}"


def parse_source(data: dict[str, Any], source_id: str) -> tuple[Row, ...]:
    """Validate one source file's document; raises ``ConfigError`` naming the field."""
    try:
        f = _DatasetFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"measurements/{source_id}.toml: field {loc}: {err['msg']}") from None
    src = Source(source_id, **f.source.model_dump(exclude={"note"}))
    rows = tuple(Row(source=src, **r.model_dump()) for r in f.rows)
    _check_rows(rows, source_id)
    return rows


def _check_rows(rows: tuple[Row, ...], source_id: str) -> None:
    ids = [r.id for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"measurements/{source_id}.toml: field rows.id: duplicate {dup}")
    for r in rows:
        split = r.tensor_parallel * r.pipeline_parallel * r.expert_parallel
        if split != r.chips:
            raise ConfigError(
                f"measurements/{source_id}.toml: row {r.id}: field chips: {r.chips} != "
                f"tensor_parallel x pipeline_parallel x expert_parallel = {split}"
            )


def load_source_file(path: str | Path) -> tuple[Row, ...]:
    """The rows of one source file (its id is the file name without ``.toml``)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read a TOML measurement file: {e}") from None
    return parse_source(data, path.stem)


def load_dataset(directory: str | Path | None = None) -> tuple[Row, ...]:
    """Every row of the shipped dataset (or of the ``*.toml`` files of ``directory``), sorted
    by key."""
    if directory is None:
        return _shipped()
    rows: list[Row] = []
    for path in sorted(Path(directory).glob("*.toml")):
        rows.extend(load_source_file(path))
    return tuple(sorted(rows, key=lambda r: r.key))


@cache
def _shipped() -> tuple[Row, ...]:
    rows: list[Row] = []
    folder = resources.files("ridgeline.data").joinpath("measurements")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text(encoding="utf-8"))
            rows.extend(parse_source(data, entry.name.removesuffix(".toml")))
    return tuple(sorted(rows, key=lambda r: r.key))
