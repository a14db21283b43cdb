"""The lab's torch-free parts: results store, scratchpad fit, CLI faces (the fitted model:
test_lab_fit.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.lab.scratchpad import scratchpad_fit
from ridgeline.lab.store import ResultsStore, export_csv, export_json, open_existing
from ridgeline.specs import DType, get_model


def test_store_keeps_each_point_once_and_exports(tmp_path: Path) -> None:
    db = tmp_path / "lab.db"
    with ResultsStore(db) as store:
        assert store.put("decode", {"batch": 1, "context": 8}, {"host": "h"}, {"t": 0.5})
        assert not store.put("decode", {"context": 8, "batch": 1}, {"host": "h"}, {"t": 9.9})
        assert store.has("decode", {"batch": 1, "context": 8})
        assert not store.has("decode", {"batch": 2, "context": 8})
        records = store.records()
    assert [r.result for r in records] == [{"t": 0.5}]
    export_csv(records, tmp_path / "m.csv")
    export_json(records, tmp_path / "m.json")
    header = (tmp_path / "m.csv").read_text().splitlines()[0]
    assert "config.batch" in header and "result.t" in header
    assert '"schema": "ridgeline.lab/1"' in (tmp_path / "m.json").read_text()


def test_opening_a_missing_database_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--db"):
        open_existing(tmp_path / "nope.db")


def test_scratchpad_fit_on_one_spyre_core() -> None:
    fit_ = scratchpad_fit(get_model("distilgpt2"), "ibm-spyre", DType.FP16)
    # one token of one head of one layer: K and V, 64 elements each, 2 bytes
    assert fit_.bytes_per_token_per_head == 2 * 64 * 2
    assert fit_.tokens_per_head == int(fit_.capacity_bytes // 256)
    assert fit_.tokens_per_layer == int(fit_.capacity_bytes // (256 * 12))
    assert fit_.level == "lx"


def test_cli_lab_error_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["lab", "compare", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--db" in result.output


@pytest.mark.slow
def test_cli_startup_does_not_import_torch() -> None:
    code = "import sys, ridgeline.cli; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
