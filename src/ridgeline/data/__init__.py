"""data: the shipped catalog (``hardware/*.toml`` with a source per number, ``models/*.json``
Hugging Face configs) and samples of public request traces (``traces/*.csv``, provenance in
``traces/README.md``).

Layer rule: imports ``errors`` only.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ridgeline.errors import UnknownNameError

TRACES = Path(str(resources.files("ridgeline.data").joinpath("traces")))


def trace_names() -> list[str]:
    """Names of the shipped trace samples (``splitwise_conv``, ``splitwise_code``, ...)."""
    return sorted(p.stem for p in TRACES.glob("*.csv"))


def trace_path(name_or_path: str | Path) -> Path:
    """A trace file: ``name_or_path`` itself when it exists or names a folder or a suffix, else
    the shipped sample of that name (``splitwise_conv`` or ``splitwise_conv.csv``).

    >>> trace_path("splitwise_conv").name
    'splitwise_conv.csv'
    """
    path = Path(name_or_path)
    if path.exists() or path.parent != Path("."):
        return path  # a path: its reader names what is wrong with it (no such file, a bad line)
    sample = TRACES / f"{path.name.removesuffix('.csv')}.csv"
    if sample.is_file():
        return sample
    if path.suffix:
        return path
    raise UnknownNameError(
        "trace (not a file, not a shipped sample)", str(name_or_path), trace_names()
    )
