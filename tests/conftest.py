"""Test tiers: unit tests need no torch; ``torch`` tests run on the CPU and are skipped when torch
is not installed; ``gpu`` tests need CUDA; ``bench`` is opt-in."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_torch = importlib.util.find_spec("torch") is not None
    cuda = False
    if has_torch:
        import torch

        cuda = torch.cuda.is_available()
    for item in items:
        if "torch" in item.keywords and not has_torch:
            item.add_marker(
                pytest.mark.skip(reason="torch is not installed (pip install .[torch])")
            )
        if "gpu" in item.keywords and not cuda:
            item.add_marker(pytest.mark.skip(reason="no CUDA device"))
