"""The simulate path imports only what a simulation needs (the first step soon after the
process starts): no plotting, fitting, dataframes, torch, fidelity dataset or dataflow
compiler, and a package's names still resolve lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ridgeline as rl
from ridgeline import analytic as an

_RUN = """
import sys
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import SimConfig, WorkloadSpec, generate, simulate
from ridgeline.analytic.pricing import Pricing
from ridgeline.specs import get_accelerator, get_model
cfg = SimConfig(get_model("llama-2-7b"), Pricing.expected(get_accelerator("h100-sxm")),
                SchedulerConfig())
result = simulate(cfg, generate(WorkloadSpec(num_requests=50, rate_per_s=4.0)))
assert result.num_completed == 50
print(" ".join(sorted(sys.modules)))
"""
_HEAVY = ("scipy", "matplotlib", "pandas", "torch", "typer", "rich")
_UNNEEDED = (
    "ridgeline.fidelity",
    "ridgeline.analytic.dataflow",
    "ridgeline.analytic.deploy",
    "ridgeline.sim.compiled",
    "ridgeline.report",
)


@pytest.mark.slow
def test_a_simulation_loads_no_heavy_module() -> None:
    out = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert not {m for m in loaded if m.split(".")[0] in _HEAVY}
    # a package and its submodules (analytic.deployment, a one-chip split's memory, is needed)
    assert not {m for m in loaded for u in _UNNEEDED if m == u or m.startswith(u + ".")}


def test_lazy_packages_resolve_names_and_submodules() -> None:
    assert rl.kv_bytes_per_token(rl.get_model("llama-3.1-8b")) == 131072.0
    assert an.tiling.__name__ == "ridgeline.analytic.tiling"
    assert "simulate" in dir(__import__("ridgeline.sim").sim)
    with pytest.raises(AttributeError, match="no_such_name"):
        an.no_such_name  # noqa: B018


def test_one_chip_is_read_alone_and_equals_the_catalog() -> None:
    """A name reads its own file (start-up); the result is the catalog's entry, field for
    field, for every shipped accelerator and calibration family."""
    from ridgeline.specs import calibration, catalog

    for name, acc in catalog._catalog().items():
        assert catalog._shipped(name) == acc
        assert rl.get_accelerator(name) == acc
    for name, fam in calibration._families().items():
        assert calibration._shipped_family(name) == fam
    assert catalog._shipped("no-such-chip") is None
