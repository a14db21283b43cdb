"""Lazy package exports (PEP 562): a package's public names load their submodule on first use.

``import ridgeline.sim`` then costs only the modules a simulation needs, not every layer the
package re-exports (the roofline's deployments, the dataflow compiler, the five-architecture
comparison). Each public name is declared once, as an import under ``TYPE_CHECKING`` (what a
type checker reads); at run time the same block, read from the package's source, gives the
table of lazy names and the package's ``__all__``::

    if TYPE_CHECKING:
        from ridgeline.sim.loop import simulate as simulate

    __getattr__, __dir__ = lazy_exports(__name__, __file__)

Adding a public name is one line in that block (the ``X as X`` form marks it re-exported for
type checkers); ``tests/repo/test_lazy_exports.py`` checks every table against its modules.

NOTE: ``lazy_exports`` sets ``__all__`` itself rather than returning it: a type checker that
meets an ``__all__`` it cannot read as a literal list exports nothing through
``from package import *`` (the root package re-exports ``analytic`` and ``specs`` that way),
while with none it exports the block's ``X as X`` names.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Exports:
    """What a package's ``__init__`` declares public: ``lazy`` maps each module to the names its
    ``if TYPE_CHECKING:`` block imports from it (``from M import *`` stands for ``M.__all__``);
    ``eager`` are the names it imports at once in the ``from M import X as X`` form."""

    lazy: dict[str, tuple[str, ...]]
    eager: tuple[str, ...]


def _imported(stmt: ast.stmt) -> tuple[str, list[str]] | None:
    if not (isinstance(stmt, ast.ImportFrom) and stmt.module):
        return None
    names = [a.asname or a.name for a in stmt.names]
    if names == ["*"]:
        names = list(importlib.import_module(stmt.module).__all__)
    return stmt.module, names


def declared_exports(init_file: str | Path) -> Exports:
    """The public names ``init_file`` declares (see ``Exports``), read from its source."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    lazy: dict[str, tuple[str, ...]] = {}
    eager = [
        a.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for a in node.names
        if a.asname == a.name
    ]
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for module, names in filter(None, map(_imported, node.body)):
                lazy[module] = (*lazy.get(module, ()), *names)
    return Exports(lazy, tuple(eager))


def lazy_exports(
    package: str, init_file: str | Path
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` from the imports its ``init_file``
    declares under ``TYPE_CHECKING``; any other attribute may be a submodule
    (``analytic.tiling``). Sets the package's ``__all__``: those names and its eager
    ``X as X`` imports."""
    exports = declared_exports(init_file)
    where = {name: module for module, names in exports.lazy.items() for name in names}
    sys.modules[package].__all__ = sorted({*where, *exports.eager})  # type: ignore[attr-defined]

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
