"""The project's exception hierarchy: every user mistake raises a ``RidgelineError``.

The CLI prints the message on one line of stderr and exits with code 2; library users catch
``RidgelineError``. ``assert`` is kept for internal invariants only.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RidgelineError(Exception):
    """Base class of every error a user can cause (bad input, impossible request)."""


class ConfigError(RidgelineError):
    """A catalog file, config.json, trace or option is malformed; the message names the field."""


class UnknownNameError(RidgelineError):
    """A name (accelerator, model, policy, ...) is not in the catalog."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known)}"
        super().__init__(f"unknown {kind} '{name}'{hint}")
        self.kind = kind
        self.name = name


class CapacityError(RidgelineError):
    """A workload cannot fit the memory it is given; the message says by how much."""
