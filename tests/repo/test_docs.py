"""Docstring examples are tests (SimPy's docs-as-doctests)."""

from __future__ import annotations

import doctest
import importlib

import pytest

import ridgeline


def test_package_docstring_examples() -> None:
    result = doctest.testmod(ridgeline, verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("name", ["ridgeline.data", "ridgeline.specs.html"])
def test_module_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), verbose=False)
    assert result.attempted > 0 and result.failed == 0
