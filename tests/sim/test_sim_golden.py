"""Golden file: the simulator's full JSON (per request too) on a tiny trace.

Any change to the scheduler, the block pool or the cost model that moves a number shows up here.
If the change is intended, regenerate with ``RIDGELINE_UPDATE_GOLDEN=1 pytest tests/sim/test_sim_golden.py``
and bump ``GOLDEN_VERSION`` when the schema changes.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ridgeline.analytic.pricing import Pricing
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import SimConfig, load_trace, simulate
from ridgeline.specs import get_accelerator, get_model

DATA = Path(__file__).parent.parent / "data"
GOLDEN = DATA / "golden" / "simulate_trace_tiny.json"
GOLDEN_VERSION = 2


def _round(x: Any) -> Any:
    """Floats to 10 significant digits (NaN as null) so the file is stable across platforms."""
    if isinstance(x, float):
        return None if math.isnan(x) else float(f"{x:.10g}")
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v) for v in x]
    return x


def _result() -> dict[str, Any]:
    cfg = SimConfig(
        get_model("llama-2-7b"),
        Pricing.ideal(get_accelerator("a100-80gb")),  # the golden figures are the roofline's
        SchedulerConfig(max_num_batched_tokens=512),
        num_blocks=50,
        prefix_caching=True,
    )
    csv = [
        replace(r, request_id=f"csv-{r.request_id}") for r in load_trace(DATA / "trace_tiny.csv")
    ]
    workload = sorted(load_trace(DATA / "trace_tiny.jsonl") + csv, key=lambda r: r.arrival_s)
    res = simulate(cfg, workload)
    return {"golden_version": GOLDEN_VERSION, **_round(res.to_dict(with_requests=True))}


def test_simulate_matches_the_golden_file() -> None:
    got = json.loads(json.dumps(_result()))
    if os.environ.get("RIDGELINE_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert got["golden_version"] == want["golden_version"]
    assert got == want
