"""Test tiers and the Hypothesis profiles.

Tiers are pytest markers on the tests themselves (a module's ``pytestmark``, a test's
decorator); nothing here lists tests by name. ``torch`` tests run on the CPU and are skipped
when torch is not installed; ``gpu`` tests need CUDA; ``bench`` is opt-in; ``slow`` marks what
takes more than about half a second on a quiet 2-core machine (processes, servers, browsers,
whole reports and sweeps, the docs' commands, the notebooks), so that ``make test-fast`` (no
torch, not slow) stays under 20 s. ``make test`` runs every tier but ``gpu`` and ``bench``.
``tests/repo/test_tiers.py`` checks that a test which needs torch or starts processes says so.

Property and schema tests (Hypothesis, schemathesis) run under one of two profiles:

- ``seeded``, the default (under ``CI=true`` too, where Hypothesis alone would load its own
  ``ci`` profile): one fixed seed (``CI_SEED``: each test draws the same examples on every run)
  and the stored example database ``tests/hypothesis-examples/`` replayed read-only, so a failure
  found once is tried on every run and a run never fails by chance;
- ``explore`` (``make test-explore``): fresh random examples on each run; a failure it finds is
  saved into ``tests/hypothesis-examples/`` (commit it: from then on ``seeded`` replays it).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase, ReadOnlyDatabase

EXAMPLES_DB = Path(__file__).resolve().parent / "hypothesis-examples"
PROFILE_VARIABLE = "RIDGELINE_HYPOTHESIS_PROFILE"
CI_SEED = 33  # any fixed number; Hypothesis's derandomize would drop the stored database

# Both profiles start from Hypothesis's own defaults, not from the profile in force: with CI set
# in the environment Hypothesis loads its built-in "ci" profile (derandomize=True, no database),
# and a profile derived from it cannot carry a database (InvalidArgument at collection).
SEEDED = "seeded"
settings.register_profile(
    SEEDED,
    parent=settings.get_profile("default"),
    derandomize=False,
    deadline=None,  # a shared 2-core machine: slowness is not a failure
    database=ReadOnlyDatabase(DirectoryBasedExampleDatabase(EXAMPLES_DB)),
    print_blob=True,
)
settings.register_profile(
    "explore",
    parent=settings.get_profile("default"),
    derandomize=False,
    database=DirectoryBasedExampleDatabase(EXAMPLES_DB),
    print_blob=True,
)
# ``pytest --hypothesis-profile explore`` overrides this (Hypothesis's plugin loads it later).
settings.load_profile(os.environ.get(PROFILE_VARIABLE, SEEDED))


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's plugin reads --hypothesis-seed
def pytest_configure(config: pytest.Config) -> None:
    """Under the ``seeded`` profile every Hypothesis test runs with ``CI_SEED`` (unless
    ``--hypothesis-seed`` names another)."""
    profile = config.getoption("hypothesis_profile", None) or settings.get_current_profile_name()
    if profile == SEEDED and config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(CI_SEED)


def module_marks(path: Path) -> set[str]:
    """The marks a test module's ``pytestmark`` gives every test in it, read without importing
    the module (``pytestmark = pytest.mark.torch`` or a list of such marks)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return set(re.findall(r"pytest\.mark\.(\w+)", ast.unparse(node.value)))
    return set()


def excluded_marks(markexpr: str) -> set[str]:
    """Marks whose presence alone deselects a test under ``-m markexpr``: the ``not NAME`` terms
    of an expression made only of ``and``-joined terms (any ``or`` and nothing is certain)."""
    if re.search(r"\bor\b", markexpr):
        return set()
    return set(re.findall(r"\bnot\s+(\w+)", markexpr))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A module whose ``pytestmark`` the ``-m`` expression excludes is not even imported (a torch
    module imports torch, a slow one schemathesis, playwright or nbclient: seconds of the fast
    tier)."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    excluded = excluded_marks(config.getoption("markexpr", "") or "")
    return True if excluded & module_marks(collection_path) else None


def marked(item: pytest.Item, mark: str) -> bool:
    """Whether ``item`` carries the mark ``mark`` (its own, its class's or its module's), not
    merely a name that says it (``item.keywords`` holds the node names too)."""
    return item.get_closest_marker(mark) is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_torch = importlib.util.find_spec("torch") is not None
    for item in items:
        if marked(item, "torch") and not has_torch:
            item.add_marker(
                pytest.mark.skip(reason="torch is not installed (pip install .[torch])")
            )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if marked(item, "gpu"):
        torch = pytest.importorskip("torch", reason="torch is not installed")
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device")


@pytest.fixture(autouse=True)
def _quiz_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own quiz home (the learners' ledger), never the user's own."""
    monkeypatch.setenv("RIDGELINE_QUIZ_HOME", str(tmp_path_factory.mktemp("quiz-home")))
