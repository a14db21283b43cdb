"""The published-measurements dataset (``ridgeline/data/measurements/*.toml``) against its schema.

Each file is parsed with ``tomllib`` alone, so these checks hold for whatever loader reads the
files: required fields, allowed values, catalog names, unique ids, parallelism that multiplies out
to the chip count, and weights that fit in the memory of the chips a row names.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from typing import Any

import pytest

from ridgeline.specs import (
    DType,
    accelerator_names,
    get_accelerator,
    get_model,
    model_names,
    param_counts,
)

KINDS = {"vendor", "mlperf", "paper", "independent"}
DTYPES = {"fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"}
METRICS_BY_SCENARIO = {
    "decode": {"per_user_tokens_per_s", "tpot_s"},
    "offline": {"output_tokens_per_s"},
    "server": {"ttft_s", "tpot_s", "output_tokens_per_s"},
}
SOURCE_FIELDS = {"title", "url", "date", "kind", "publisher", "engine", "note"}
SOURCE_OPTIONAL: dict[str, Callable[[object], bool]] = {
    "attention_kv_reads": lambda v: v in {"per-kv-head", "per-query-head"},
    "activation_quantisation": lambda v: v in {"separate-kernel", "fused"},
    "dense_kv_cache_tokens": lambda v: isinstance(v, int) and v >= 1,
    "device_bandwidth_bytes_per_s": lambda v: isinstance(v, float) and v > 0,
}
ROW_REQUIRED = {
    "id",
    "hardware",
    "chips",
    "tensor_parallel",
    "pipeline_parallel",
    "model",
    "weight_dtype",
    "kv_dtype",
    "scenario",
    "metric",
    "value",
    "isl",
    "osl",
    "quote",
    "note",
}
ROW_OPTIONAL_INTS = {
    "expert_parallel",
    "data_parallel",
    "batch",
    "concurrency",
    "max_seqs",
    "requests",
}
ROW_FIELDS = ROW_REQUIRED | ROW_OPTIONAL_INTS | {"rate_rps"}
ISO_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")


def _files() -> dict[str, dict[str, Any]]:
    root = resources.files("ridgeline.data").joinpath("measurements")
    return {
        entry.name[: -len(".toml")]: tomllib.loads(entry.read_text())
        for entry in root.iterdir()
        if entry.name.endswith(".toml")
    }


FILES = _files()


def _rows() -> Iterator[tuple[str, dict[str, Any]]]:
    for source_id, data in sorted(FILES.items()):
        for row in data["rows"]:
            yield f"{source_id}/{row['id']}", row


ROWS = dict(_rows())


def test_dataset_size_and_coverage() -> None:
    """The dataset's floor: 40 rows over 7 catalog accelerators, Cerebras, Groq and a TPU among them."""
    hardware = {row["hardware"] for row in ROWS.values()}
    assert len(ROWS) >= 40
    assert len(hardware) >= 7
    assert {"cerebras-wse3", "groq-lpu"} <= hardware
    assert any(name.startswith("tpu") for name in hardware)
    assert {row["scenario"] for row in ROWS.values()} == set(METRICS_BY_SCENARIO)


@pytest.mark.parametrize("source_id", sorted(FILES))
def test_source_block(source_id: str) -> None:
    source = dict(FILES[source_id]["source"])
    optional = {k: source.pop(k) for k in list(source) if k in SOURCE_OPTIONAL}
    assert set(source) == SOURCE_FIELDS, f"{source_id}: source fields {sorted(source)}"
    assert all(SOURCE_OPTIONAL[k](v) for k, v in optional.items()), f"{source_id}: {optional}"
    assert all(isinstance(v, str) and v.strip() for v in source.values())
    assert source["kind"] in KINDS
    assert ISO_DATE.match(source["date"]), f"{source_id}: date {source['date']!r} is not ISO 8601"
    assert source["url"].startswith("https://")
    assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", source_id), "file names are lower-case ids"
    assert FILES[source_id]["rows"], f"{source_id}: no rows"


@pytest.mark.parametrize("source_id", sorted(FILES))
def test_row_ids_unique_within_a_source(source_id: str) -> None:
    ids = [row["id"] for row in FILES[source_id]["rows"]]
    assert len(ids) == len(set(ids)), f"{source_id}: duplicate ids"


@pytest.mark.parametrize("key", sorted(ROWS))
def test_row(key: str) -> None:
    """Every row: schema, catalog names, parallelism, scenario fields and memory fit."""
    row = ROWS[key]
    _check_schema(key, row)
    assert row["hardware"] in accelerator_names(), f"{key}: hardware {row['hardware']}"
    assert row["model"] in model_names(), f"{key}: model {row['model']}"
    product = row["tensor_parallel"] * row["pipeline_parallel"] * row.get("expert_parallel", 1)
    assert product == row["chips"], f"{key}: tp x pp x ep = {product}, chips = {row['chips']}"
    _check_scenario_fields(key, row)
    weight_bytes = _params(row["model"]) * DType(row["weight_dtype"]).bytes
    capacity_bytes = row["chips"] * get_accelerator(row["hardware"]).device_capacity_bytes
    assert weight_bytes <= capacity_bytes, f"{key}: {weight_bytes:.3g} B > {capacity_bytes:.3g} B"


def _check_schema(key: str, row: dict[str, Any]) -> None:
    assert set(row) >= ROW_REQUIRED, f"{key}: missing {sorted(ROW_REQUIRED - set(row))}"
    assert set(row) <= ROW_FIELDS, f"{key}: unknown fields {sorted(set(row) - ROW_FIELDS)}"
    for name in ("chips", "tensor_parallel", "pipeline_parallel", "isl", "osl"):
        assert isinstance(row[name], int) and row[name] >= 1, f"{key}: {name}"
    for name in ROW_OPTIONAL_INTS & set(row):
        assert isinstance(row[name], int) and row[name] >= 1, f"{key}: {name}"
    assert isinstance(row["value"], float) and row["value"] > 0, f"{key}: value"
    assert row["weight_dtype"] in DTYPES and row["kv_dtype"] in DTYPES
    assert row["metric"] in METRICS_BY_SCENARIO[row["scenario"]], f"{key}: metric vs scenario"
    assert row["quote"].strip() and row["note"].strip()


def _check_scenario_fields(key: str, row: dict[str, Any]) -> None:
    """Decode rows state their batch; server rows state their load."""
    if row["scenario"] == "decode":
        assert "batch" in row, f"{key}: decode rows need a batch"
    if row["scenario"] == "server":
        assert "rate_rps" in row or "concurrency" in row, f"{key}: server rows need a load"
    if "rate_rps" in row:
        assert isinstance(row["rate_rps"], float) and row["rate_rps"] > 0, f"{key}: rate_rps"
    if "batch" in row and "max_seqs" in row:
        assert row["batch"] <= row["max_seqs"], f"{key}: batch above max_seqs"


@cache
def _params(model: str) -> int:
    """Total parameters: a misread chip count or dtype shows up as weights that cannot fit."""
    return param_counts(get_model(model)).total


def test_fit_check_catches_a_chip_count_too_small() -> None:
    """The fit check in ``test_row`` is not vacuous: 16-bit Llama-2-70B on 576 Groq LPUs does not fit, which
    is why the Groq row records 8-bit weights."""
    params = _params("llama-2-70b")
    groq_bytes = 576 * get_accelerator("groq-lpu").device_capacity_bytes
    assert params * DType.BF16.bytes > groq_bytes >= params * DType.INT8.bytes


def test_acceptance_anchor_rows_are_present() -> None:
    """The anchor rows (Cerebras, Groq, TensorRT-LLM), with the figures the sources publish."""
    expected = {
        "cerebras-inference-launch/llama-3.1-8b-per-user": 1800.0,
        "cerebras-inference-launch/llama-3.1-70b-per-user": 450.0,
        "groq-lpu-2024/llama-2-70b-per-user": 300.0,
        "trtllm-perf-v0-17/8b-h100-tp1-fp8-128-128": 28836.77,
        "trtllm-perf-v0-17/8b-h100-tp1-fp8-2048-128": 3556.73,
        "trtllm-perf-v0-17/8b-h200-tp1-fp8-128-128": 29526.04,
        "trtllm-perf-v0-17/8b-h200-tp1-fp8-2048-128": 3794.14,
    }
    assert {key: ROWS[key]["value"] for key in expected} == expected
