"""The import rules of DESIGN.md, enforced: a layer imports only the layers above it, and only
``engine`` and ``lab`` import torch or transformers."""

from __future__ import annotations

import ast
from pathlib import Path

import ridgeline

ROOT = Path(ridgeline.__file__).parent
LIBRARY = {
    "errors",
    "specs",
    "analytic",
    "serving",
    "sim",
    "fidelity",
    "engine",
    "lab",
    "quiz",
    "sweep",
}

# layer -> the ridgeline packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "data": set(),
    "specs": {"errors", "data"},
    "analytic": {"errors", "specs"},
    "serving": {"errors", "specs", "analytic"},
    "sim": {"errors", "specs", "analytic", "serving"},
    "fidelity": {"errors", "specs", "analytic", "serving", "sim"},
    "engine": {"errors", "specs", "analytic", "serving"},
    "lab": {"errors", "specs", "analytic", "serving", "sim", "engine"},
    "quiz": {"errors", "specs", "analytic", "serving", "sim"},
    "sweep": {"errors", "specs", "analytic", "serving", "sim"},
    "report": LIBRARY,
    "cli": LIBRARY | {"report", "web", "serve", "cli"},
    "web": LIBRARY | {"report"},
    "serve": {"errors", "specs", "serving", "engine"},
}
TORCH_OK = {"engine", "lab"}
HEAVY = {"torch", "transformers", "safetensors"}


def _imports(path: Path) -> set[str]:
    """Top-level module names imported by a file (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names.add(".".join((*base, node.module or "")).rstrip("."))
            elif node.module:
                names.add(node.module)
    return names


def _layer(path: Path) -> str:
    rel = path.relative_to(ROOT).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def test_every_module_respects_its_layer() -> None:
    violations = []
    for path in ROOT.rglob("*.py"):
        layer = _layer(path)
        if layer == "__init__":
            continue
        assert layer in ALLOWED, f"{path}: layer '{layer}' has no rule in ALLOWED"
        for name in _imports(path):
            parts = name.split(".")
            inner = parts[0] == "ridgeline" and len(parts) > 1 and parts[1] != layer
            if inner and parts[1] not in ALLOWED[layer]:
                violations.append(f"{path.relative_to(ROOT)} imports {name}")
            if parts[0] in HEAVY and layer not in TORCH_OK:
                violations.append(f"{path.relative_to(ROOT)} imports {name} outside engine/lab")
    assert violations == []


def test_the_rule_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = ROOT / "analytic" / "_probe_violation.py"
    bad.write_text("import torch\nfrom ridgeline.sim import x\n")
    try:
        names = _imports(bad)
        assert "torch" in names and "ridgeline.sim" in names
    finally:
        bad.unlink()
