"""Which point simulator a sweep runs: ridgeline's serving simulator by default, or any object
with a ``simulate(config, requests, seed)`` method named as ``module:factory``."""

from __future__ import annotations

import importlib

from ridgeline.errors import ConfigError
from ridgeline.sweep.point import PointSimulator


def default_simulator() -> PointSimulator:
    """ridgeline's serving simulator behind the ``PointSimulator`` seam.

    Raises:
        ConfigError: the simulator (``ridgeline.sim``) is not available in this build.
    """
    raise ConfigError(
        "the serving simulator (ridgeline.sim) is not in this build; "
        "pass --simulator module:factory"
    )


def load_simulator(ref: str | None) -> PointSimulator:
    """``None`` → the default simulator; ``"pkg.mod:factory"`` → ``factory()`` from that module.

    Raises:
        ConfigError: the reference is malformed, or its module or factory cannot be found.
    """
    if ref is None:
        return default_simulator()
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--simulator {ref!r}: expected module:factory")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"--simulator {ref!r}: {e}") from e
    sim = factory()
    if not callable(getattr(sim, "simulate", None)):
        raise ConfigError(f"--simulator {ref!r}: {attr}() has no simulate() method")
    return sim  # type: ignore[no-any-return]
