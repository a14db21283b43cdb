"""Why the fast mode (``sim.fast``) does not run a configuration, or None when it does.

The fast mode keeps one mixed instance's scheduler state in lists and prices plain decode in
closed form; it reproduces the step-by-step loop only where that loop has nothing it does not
model. Everything else runs in the step loop (``sim.loop``: still closed-form decode runs where
``Scheduler.decode_run_limit`` allows, but every other step scheduled, priced and applied one
at a time: about ten times slower on large workloads). ``fast_mode_off`` is the one place that
decides, and ``SimResult.fast_mode_off`` carries its answer to the CLI and the JSON, so a
configuration never leaves the fast mode unannounced.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from ridgeline.sim.fast_cache import outputs_reused

if TYPE_CHECKING:
    from ridgeline.sim.loop import Simulation


class FastModeOff(StrEnum):
    """A reason the step loop runs a simulation in place of the fast mode."""

    TURNED_OFF = "turned_off"
    CLOSED_LOOP = "closed_loop"
    DISAGGREGATION = "disaggregation"
    INSTANCES = "instances"
    KV_TIERS = "kv_tiers"
    SPEC_DECODE = "spec_decode"
    COMPILED_SHAPES = "compiled_shapes"
    OUTPUTS_REUSED = "outputs_reused"

    @property
    def why(self) -> str:
        """The reason in words, for the CLI's one line."""
        return _WHY[self]


_WHY = {
    FastModeOff.TURNED_OFF: "fast_forward is off",
    FastModeOff.CLOSED_LOOP: "a closed loop (arrivals wait for completions)",
    FastModeOff.DISAGGREGATION: "prefill/decode disaggregation",
    FastModeOff.INSTANCES: "more than one instance (replicas)",
    FastModeOff.KV_TIERS: "KV tiers below the device",
    FastModeOff.SPEC_DECODE: "speculative decoding",
    FastModeOff.COMPILED_SHAPES: "compiled shapes (their executor prices the steps)",
    FastModeOff.OUTPUTS_REUSED: "prefix caching with prompts that repeat earlier outputs",
}


def fast_mode_off(sim: Simulation) -> FastModeOff | None:
    """Why ``sim`` runs in the step loop, or None when the fast mode reproduces it (the first
    reason that applies, in the order of ``FastModeOff``)."""
    cfg = sim.cfg
    checks = (
        (not cfg.fast_forward, FastModeOff.TURNED_OFF),
        (sim.clients is not None, FastModeOff.CLOSED_LOOP),
        (cfg.disagg is not None, FastModeOff.DISAGGREGATION),
        (len(sim.instances) != 1 or sim.instances[0].role != "mixed", FastModeOff.INSTANCES),
        (bool(cfg.tiers), FastModeOff.KV_TIERS),
        (cfg.scheduler.spec is not None, FastModeOff.SPEC_DECODE),
        (cfg.compiled is not None, FastModeOff.COMPILED_SHAPES),
    )
    for applies, reason in checks:
        if applies:
            return reason
    if cfg.prefix_caching and outputs_reused(sim.workload):  # a scan: only when it matters
        return FastModeOff.OUTPUTS_REUSED
    return None
