"""Golden files for the JSON of ``ridgeline schedule`` and ``ridgeline orchestrate``.

The files carry the schema version (``ridgeline.schedule/1``); a change of any number fails
here first. After a deliberate change, rewrite them with
``RIDGELINE_UPDATE_GOLDEN=1 pytest tests/analytic/test_golden_tiling.py`` and review the diff.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app

GOLDEN = Path(__file__).parent.parent / "data" / "golden"
CASES = {  # the ideal roofline's figures (the datasheet's bandwidth); calibrated is the default
    "schedule_spyre_decode_llama8b_b1_t4096.json": ["schedule", "--json", "--ideal"],
    "orchestrate_llama8b_b1_t4096.json": ["orchestrate", "--json", "--ideal"],
}


def _close(got: Any, want: Any, where: str = "$") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for k in want:
            _close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_json_matches_golden(name: str) -> None:
    r = CliRunner().invoke(app, CASES[name])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    path = GOLDEN / name
    if os.environ.get("RIDGELINE_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    _close(got, json.loads(path.read_text()))
