"""Lazy package exports (PEP 562): a package's public names load their submodule on first use.

``import ridgeline.sim`` then costs only the modules a simulation needs, not every layer the
package re-exports (the roofline's deployments, the dataflow compiler, the five-architecture
comparison). Each lazy ``__init__`` keeps its real imports under ``TYPE_CHECKING`` for type
checkers and lists the same names for run time::

    __getattr__, __dir__ = lazy_exports(__name__, {"ridgeline.sim.loop": ("simulate", ...)})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping


def lazy_exports(
    package: str, modules: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``modules`` maps each module to the
    names it exports; any other attribute may be a submodule (``analytic.tiling``)."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
