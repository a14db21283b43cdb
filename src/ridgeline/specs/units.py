"""Units. GB = 1e9 bytes and GiB = 2**30 bytes; every printed size says which one it uses."""

from __future__ import annotations

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40


def fmt_bytes(num_bytes: float, binary: bool = False) -> str:
    """Format a byte count with a decimal (GB) or binary (GiB) prefix."""
    base, names = (
        (1024.0, ("B", "KiB", "MiB", "GiB", "TiB", "PiB"))
        if binary
        else (
            1000.0,
            ("B", "KB", "MB", "GB", "TB", "PB"),
        )
    )
    value = float(num_bytes)
    for name in names:
        if abs(value) < base or name == names[-1]:
            return f"{value:.3g} {name}" if name != "B" else f"{value:.0f} B"
        value /= base
    raise AssertionError("unreachable")


def fmt_rate(value: float, unit: str) -> str:
    """Format a rate such as FLOP/s or B/s with a decimal prefix (k, M, G, T, P, E)."""
    for prefix, scale in (
        ("E", 1e18),
        ("P", 1e15),
        ("T", 1e12),
        ("G", 1e9),
        ("M", 1e6),
        ("k", 1e3),
    ):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def fmt_seconds(seconds: float) -> str:
    """Format a duration in s, ms, us or ns."""
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {name}"
    return f"{seconds / 1e-9:.4g} ns"
