"""docs/quiz.md's recorded sessions (an export, an interactive run, the attempt limit) are what
a fresh run prints: ``tools/quiz_demo.py`` writes them between their ``<!-- demo:NAME -->``
markers, and ``--check`` says which differ, so a change to the bank or the catalog that moves a
question cannot leave the page behind."""

from __future__ import annotations

import subprocess
import sys

import pytest

from srctree import REPO

pytestmark = pytest.mark.slow  # the quiz commands and an interactive session, as processes


def test_the_pages_transcripts_are_a_fresh_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "quiz_demo.py"), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
