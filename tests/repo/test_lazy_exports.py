"""The lazy packages' exports (``specs.lazy``): each public name is declared once, under
``TYPE_CHECKING`` in its package's ``__init__``, and every declaration is checked here against
the module it names."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

import ridgeline
from ridgeline.specs.lazy import declared_exports

SRC = Path(ridgeline.__file__).resolve().parent
LAZY = sorted(
    ".".join(("ridgeline", *p.parent.relative_to(SRC).parts))
    for p in SRC.rglob("__init__.py")
    if "lazy_exports(__name__, __file__)" in p.read_text()
)


def test_the_lazy_packages_are_found() -> None:
    assert LAZY == [
        "ridgeline",
        "ridgeline.analytic",
        "ridgeline.quiz",
        "ridgeline.sim",
        "ridgeline.specs",
        "ridgeline.sweep",
    ]


@pytest.mark.parametrize("name", LAZY)
def test_every_declared_name_is_the_object_its_module_defines(name: str) -> None:
    package = importlib.import_module(name)
    exports = declared_exports(package.__file__ or "")
    assert exports.lazy, f"{name} declares nothing under TYPE_CHECKING"
    for module, names in exports.lazy.items():
        for attr in names:
            value, defined = getattr(package, attr), getattr(importlib.import_module(module), attr)
            if isinstance(value, types.ModuleType) and value.__name__ == f"{name}.{attr}":
                # ``rl.sweep`` once ``ridgeline.sweep`` is imported: the package stands in for
                # the analytic function and forwards calls to it (sweep/__init__.py)
                assert callable(value) and callable(defined)
                continue
            assert value is defined, f"{name}.{attr} is not {module}.{attr}"


@pytest.mark.parametrize("name", LAZY)
def test_all_is_exactly_the_declared_names_and_star_import_gives_them(name: str) -> None:
    package = importlib.import_module(name)
    exports = declared_exports(package.__file__ or "")
    declared = {n for names in exports.lazy.values() for n in names} | set(exports.eager)
    assert sorted(package.__all__) == sorted(declared)
    assert len(package.__all__) == len(declared)  # no name declared twice
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)
    assert set(namespace) - {"__builtins__"} == declared
    assert declared <= set(dir(package))


def test_the_root_re_exports_analytic_specs_and_the_errors() -> None:
    analytic, specs = importlib.import_module("ridgeline.analytic"), ridgeline.specs
    assert set(ridgeline.__all__) == {
        *analytic.__all__,
        *specs.__all__,
        "CapacityError",
        "ConfigError",
        "RidgelineError",
        "UnknownNameError",
    }


def test_declared_exports_reads_the_type_checking_block(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ridgeline.errors import ConfigError as ConfigError\n"
        "from ridgeline.specs.lazy import lazy_exports\n"
        "if TYPE_CHECKING:\n"
        "    from ridgeline.specs.dtypes import DType as DType\n"
        "    from ridgeline.specs.units import fmt_bytes as fmt_bytes\n"
        "    from ridgeline.specs.dtypes import DType as Format\n"
    )
    exports = declared_exports(init)
    assert exports.lazy == {
        "ridgeline.specs.dtypes": ("DType", "Format"),
        "ridgeline.specs.units": ("fmt_bytes",),
    }
    assert exports.eager == ("ConfigError",)


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'ridgeline.sim' has no attribute 'nope'"):
        _ = ridgeline.sim.nope  # type: ignore[attr-defined]
