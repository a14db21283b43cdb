"""Where the tests' files are, and the package's source files, each read and parsed once per
test session (shared by the layer, size and docs checks).

``TESTS`` is the root of the test tree (this file's folder, beside ``conftest.py``), whichever
folder of it a test module sits in (the tree mirrors ``src/ridgeline/``; see
``tools/mirror_tests.py``)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


@functools.cache
def source(path: Path) -> tuple[str, ast.Module]:
    """A file's text and syntax tree."""
    text = path.read_text()
    return text, ast.parse(text)


def every_test_module() -> list[Path]:
    """Every test module of the tree, in every folder."""
    return sorted(TESTS.rglob("test_*.py"))
