"""Parse the simulator's compact command-line forms (``--tiers``, ``--disagg``) into configs,
and the host tier of an accelerator. Light (no numpy, no compiled shapes): a plain ``simulate``
loads only what its run uses."""

from __future__ import annotations

from ridgeline.errors import ConfigError
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.tiers import TierSpec
from ridgeline.specs import Accelerator


def host_tier(hw: Accelerator) -> TierSpec:
    """The accelerator's host-memory level as a KV tier."""
    level = next((lvl for lvl in hw.levels if lvl.name == "host"), None)
    if level is None or level.bandwidth_bytes_per_s is None:
        raise ConfigError(
            f"{hw.name}: no 'host' memory level with a bandwidth; give --tiers NAME:BYTES:BW"
        )
    return TierSpec("host", level.total_capacity_bytes, level.bandwidth_bytes_per_s)


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
