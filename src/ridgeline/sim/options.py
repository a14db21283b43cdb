"""Parse the simulator's compact command-line forms (``--tiers``, ``--disagg``) into configs."""

from __future__ import annotations

from ridgeline.errors import ConfigError
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.tiers import TierSpec
from ridgeline.sim.static_variants import host_tier
from ridgeline.specs import Accelerator


def parse_tiers(text: str, hw: Accelerator) -> tuple[TierSpec, ...]:
    """``host`` (the accelerator's host level) or ``NAME:BYTES:BYTES_PER_S[:LATENCY_S]``,
    comma-separated, fastest first; e.g. ``host,disk:2e12:3e9:1e-4``."""
    tiers = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part == "host":
            tiers.append(host_tier(hw))
            continue
        fields = part.split(":")
        if len(fields) not in (3, 4):
            raise ConfigError(
                f"field tiers: {part!r}: expected host or NAME:BYTES:BYTES_PER_S[:LATENCY_S]"
            )
        try:
            nums = [float(x) for x in fields[1:]]
        except ValueError:
            raise ConfigError(f"field tiers: {part!r}: sizes must be numbers") from None
        tiers.append(TierSpec(fields[0], nums[0], nums[1], nums[2] if len(nums) > 2 else 0.0))
    if not tiers:
        raise ConfigError("field tiers: empty")
    return tuple(tiers)


def parse_disagg(text: str, link_bw: float, link_latency_s: float) -> Disagg:
    """``P:D`` prefill and decode instance counts, e.g. ``2:1``."""
    try:
        p, d = (int(x) for x in text.split(":"))
    except ValueError:
        raise ConfigError(f"field disagg: {text!r}: expected P:D, e.g. 1:1") from None
    return Disagg(p, d, link_bw, link_latency_s)
