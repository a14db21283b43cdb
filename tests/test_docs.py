"""Docstring examples are tests (SimPy's docs-as-doctests)."""

from __future__ import annotations

import doctest

import ridgeline


def test_package_docstring_examples() -> None:
    result = doctest.testmod(ridgeline, verbose=False)
    assert result.attempted > 0 and result.failed == 0
