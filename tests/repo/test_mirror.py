"""The test tree mirrors the source tree (``tools/mirror_tests.py`` holds the rule and moves a
module that is out of place): ``tests/<package>/`` for ``src/ridgeline/<package>/``,
``tests/repo/`` for the checks of the repository as a whole, the root for the top-level modules'
tests, ``conftest.py`` and the helpers."""

from __future__ import annotations

import sys

from srctree import REPO, TESTS, every_test_module

sys.path.insert(0, str(REPO / "tools"))
import mirror_tests  # noqa: E402

FIX = "run python tools/mirror_tests.py"


def test_every_test_module_is_where_the_rule_puts_it() -> None:
    moves, unknown = mirror_tests.misplaced()
    assert unknown == [], f"no place for these (name them in PLACES): {unknown}"
    out_of_place = {str(a.relative_to(REPO)): str(b.relative_to(REPO)) for a, b in moves.items()}
    assert out_of_place == {}, FIX


def test_each_folder_of_tests_is_a_package_of_the_source_or_the_repository() -> None:
    folders = {p.parent.relative_to(TESTS).as_posix() for p in every_test_module()}
    assert folders - {"."} <= mirror_tests.packages() | {mirror_tests.REPO_CHECKS}
    assert {p.parent.name for p in every_test_module()} >= {"analytic", "serving", "sim", "repo"}
    at_root = {p.stem.removeprefix("test_") for p in every_test_module() if p.parent == TESTS}
    assert at_root <= mirror_tests.modules(), "a test at the root names a top-level module"


def test_the_rule_reads_the_package_from_the_name() -> None:
    place = mirror_tests.place
    assert place("test_sim") == place("test_sim_fast") == "sim"
    assert place("test_serving_faults") == "serving"  # the longer package name wins
    assert place("test_serve_drain") == "serve"
    assert place("test_processes") == ""  # src/ridgeline/processes.py
    assert place("test_scheduler") == "serving"  # named in PLACES
    assert place("test_something_new") is None  # the script stops and asks for a place
    assert place("test_data_files") is None  # tests/data/ holds data, never tests


def test_a_module_moved_deeper_still_reaches_the_repository_and_the_data() -> None:
    text = (
        'DATA = Path(__file__).parent / "data"\n'
        "REPO = Path(__file__).resolve().parent.parent\n"
        "HERE = str(Path(__file__).parent)\n"
    )
    assert mirror_tests.deeper(text, 1) == (
        'DATA = Path(__file__).parent.parent / "data"\n'
        "REPO = Path(__file__).resolve().parent.parent.parent\n"
        "HERE = str(Path(__file__).parent)\n"  # its own folder: moves with it
    )


def test_no_text_names_a_test_module_where_it_is_not() -> None:
    assert mirror_tests.stale_references() == [], FIX


def test_a_stale_path_is_redirected_and_others_are_left_alone() -> None:
    where = {"test_sim_fast.py": "tests/sim/test_sim_fast.py"}
    text = "see tests/test_sim_fast.py,\nnot tests/test_nope.py nor tests/sim/test_sim_fast.py"
    fixed, stale = mirror_tests.redirected(text, where)
    assert (
        fixed
        == "see tests/sim/test_sim_fast.py,\nnot tests/test_nope.py nor tests/sim/test_sim_fast.py"
    )
    assert stale == [(1, "tests/test_sim_fast.py", "tests/sim/test_sim_fast.py")]
