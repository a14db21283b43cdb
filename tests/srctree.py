"""The package's source files, each read and parsed once per test session (shared by the
layer, size and docs checks)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def source(path: Path) -> tuple[str, ast.Module]:
    """A file's text and syntax tree."""
    text = path.read_text()
    return text, ast.parse(text)
