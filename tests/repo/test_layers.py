"""The import rules of docs/design.md ("Layers"), enforced: a layer imports only the layers
above it, and only ``engine`` and ``lab`` import torch or transformers.

Every import form counts: ``import ridgeline.sim``, ``from ridgeline import sim``, ``from
ridgeline.sim import x``, relative imports (``from .. import sim``), imports inside functions,
and ``importlib.import_module("ridgeline.sim")`` with a literal name. The checker runs on any
package root, so it tests itself on a throwaway tree in a temporary directory.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ridgeline
from srctree import source

ROOT = Path(ridgeline.__file__).parent
BASE = {"errors", "defaults", "data", "processes"}  # leaves every layer may use
LIBRARY = BASE | {"specs", "analytic", "serving", "sim", "fidelity", "engine", "lab", "quiz"}
LIBRARY |= {"sweep", "plan"}

# layer -> the ridgeline packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "defaults": set(),
    "processes": set(),
    "data": {"errors"},
    "__main__": {"cli"},
    "specs": BASE,
    "analytic": BASE | {"specs"},
    "serving": BASE | {"specs", "analytic"},
    "sim": BASE | {"specs", "analytic", "serving"},
    "fidelity": BASE | {"specs", "analytic", "serving", "sim"},
    "engine": BASE | {"specs", "analytic", "serving"},
    "lab": BASE | {"specs", "analytic", "serving", "sim", "engine"},
    "quiz": BASE | {"specs", "analytic", "serving", "sim"},
    "sweep": BASE | {"specs", "analytic", "serving", "sim"},
    # plan: a search over deployments on predict's pricing (fidelity) and the sweep's backends
    "plan": BASE | {"specs", "analytic", "serving", "sim", "fidelity", "sweep"},
    "report": LIBRARY,
    "cli": LIBRARY | {"report", "web", "serve", "cli"},
    "web": LIBRARY | {"report"},
    "serve": BASE | {"specs", "serving", "engine"},
}
TORCH_OK = {"engine", "lab"}
HEAVY = {"torch", "transformers", "safetensors"}


def _literal_import(node: ast.Call) -> str | None:
    """``importlib.import_module("x")`` / ``import_module("x")`` / ``__import__("x")``."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    arg = node.args[0] if node.args else None
    if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
        return str(arg.value)
    return None


def _from_names(node: ast.ImportFrom, package: tuple[str, ...]) -> set[str]:
    """The modules a ``from ... import ...`` reaches: the base, and base.name for each name (a
    name may be a submodule: ``from ridgeline import sim``)."""
    if node.level:
        base = ".".join((*package[: len(package) - node.level + 1], node.module or ""))
    else:
        base = node.module or ""
    base = base.rstrip(".")
    return {base} | {f"{base}.{alias.name}" for alias in node.names if alias.name != "*"}


def imports_of(path: Path, root: Path) -> set[str]:
    """Module names a file imports, in every form (relative imports resolved against ``root``,
    the directory of the top-level package)."""
    tree = source(path)[1]
    package = path.relative_to(root.parent).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= _from_names(node, package)
        elif isinstance(node, ast.Call) and (literal := _literal_import(node)):
            names.add(literal)
    return names


def _layer(path: Path, root: Path) -> str:
    rel = path.relative_to(root).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def violations(root: Path, allowed: dict[str, set[str]]) -> list[str]:
    """Every import of a ridgeline layer that its importer may not use, and every torch import
    outside engine and lab."""
    top = root.name
    found = []
    for path in sorted(root.rglob("*.py")):
        layer = _layer(path, root)
        if layer == "__init__":
            continue
        assert layer in allowed, f"{path}: layer '{layer}' has no rule in ALLOWED"
        for name in imports_of(path, root):
            parts = name.split(".")
            inner = parts[0] == top and len(parts) > 1 and parts[1] != layer
            if inner and parts[1] in allowed and parts[1] not in allowed[layer]:
                found.append(f"{path.relative_to(root)} imports {name}")
            if parts[0] in HEAVY and layer not in TORCH_OK:
                found.append(f"{path.relative_to(root)} imports {name} outside engine/lab")
    return found


@pytest.mark.slow
def test_every_module_respects_its_layer() -> None:
    assert violations(ROOT, ALLOWED) == []


def test_the_checker_sees_every_import_form(tmp_path: Path) -> None:
    pkg = tmp_path / "ridgeline"
    (pkg / "analytic").mkdir(parents=True)
    (pkg / "sim").mkdir()
    for init in (pkg, pkg / "analytic", pkg / "sim"):
        (init / "__init__.py").write_text("")
    (pkg / "sim" / "loop.py").write_text("")
    (pkg / "analytic" / "bad.py").write_text(
        "import torch\n"
        "import ridgeline.sim.loop\n"
        "from ridgeline import sim\n"
        "from ridgeline.sim import loop\n"
        "from .. import sim as again\n"
        "from ..sim.loop import x\n"
        "def later():\n"
        "    import importlib\n"
        "    importlib.import_module('ridgeline.sim')\n"
    )
    (pkg / "analytic" / "good.py").write_text("from ridgeline import analytic\nfrom . import bad\n")
    found = violations(pkg, {"analytic": {"errors", "specs"}, "sim": {"analytic"}})
    bad = "analytic/bad.py imports "
    assert sorted(found) == sorted(
        [
            f"{bad}torch outside engine/lab",
            f"{bad}ridgeline.sim.loop",  # import ridgeline.sim.loop; from ..sim.loop import x
            f"{bad}ridgeline.sim",  # from ridgeline import sim; importlib; from .. import sim
            f"{bad}ridgeline.sim.loop.x",
        ]
    )
    assert not list(ROOT.rglob("_probe*.py"))  # nothing written into the package
