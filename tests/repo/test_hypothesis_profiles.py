"""The seeded profile holds under ``CI=true`` too (CI sets it): Hypothesis then loads its own
``ci`` profile first, and a profile derived from that one cannot carry the stored database."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from srctree import TESTS

pytestmark = pytest.mark.slow  # a fresh interpreter

PROBE = """
import conftest
from hypothesis import settings
s = settings.default
print(settings.get_current_profile_name(), s.derandomize, type(s.database).__name__)
"""


@pytest.mark.parametrize("ci", ["true", ""])
def test_seeded_profile_keeps_its_database_with_or_without_ci(ci: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    env.pop("RIDGELINE_HYPOTHESIS_PROFILE", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=TESTS, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["seeded", "False", "ReadOnlyDatabase"]
