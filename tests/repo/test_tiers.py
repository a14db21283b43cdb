"""Every test carries the tier marks it needs, on itself (``tests/conftest.py`` lists no names).

Read from the sources, without running anything: a test that needs torch is marked ``torch``
(the module's ``pytestmark`` or the test's own decorator), and a test that starts a process is
marked ``slow`` (a fresh interpreter costs about a second on a loaded 2-core machine).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import excluded_marks, marked, module_marks
from srctree import TESTS, every_test_module

TORCH_IMPORTS = re.compile(r"^torch(\.|$)")
PROCESS_CALLS = {"run", "Popen", "check_output", "check_call"}


def _modules() -> list[Path]:
    return every_test_module()


def _marks(decorators: list[ast.expr]) -> set[str]:
    return {m for d in decorators for m in re.findall(r"pytest\.mark\.(\w+)", ast.unparse(d))}


def _needs_torch(node: ast.AST) -> Iterator[str]:
    """What in ``node`` needs torch: an import of it or an ``importorskip("torch")``."""
    for sub in ast.walk(node):
        names: list[str] = []
        if isinstance(sub, ast.Import):
            names = [a.name for a in sub.names]
        elif isinstance(sub, ast.ImportFrom) and sub.module:
            names = [sub.module]
        elif isinstance(sub, ast.Call) and ast.unparse(sub.func).endswith("importorskip"):
            names = [ast.unparse(sub.args[0]).strip("'\"")] if sub.args else []
        yield from (n for n in names if TORCH_IMPORTS.match(n))


def _starts_a_process(node: ast.AST) -> bool:
    return any(
        isinstance(sub, ast.Call)
        and isinstance(sub.func, ast.Attribute)
        and sub.func.attr in PROCESS_CALLS
        and ast.unparse(sub.func.value) == "subprocess"
        for sub in ast.walk(node)
    )


def _tests(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            yield node


def test_a_test_that_needs_torch_is_marked_torch() -> None:
    missing = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        if "torch" in module_marks(path):
            continue
        top = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]
        missing += [f"{path.name}: module imports {n}" for t in top for n in _needs_torch(t)]
        for test in _tests(tree):
            if "torch" not in _marks(test.decorator_list):
                missing += [f"{path.name}::{test.name} uses {n}" for n in _needs_torch(test)]
    assert not missing, "mark these torch (pytestmark or @pytest.mark.torch):\n" + "\n".join(
        missing
    )


def test_a_test_that_starts_a_process_is_marked_slow() -> None:
    missing = []
    for path in _modules():
        if "slow" in module_marks(path):
            continue
        tree = ast.parse(path.read_text())
        helpers = {
            n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _starts_a_process(n)
        }
        for test in _tests(tree):
            calls = {ast.unparse(c.func) for c in ast.walk(test) if isinstance(c, ast.Call)}
            if (_starts_a_process(test) or calls & helpers) and "slow" not in _marks(
                test.decorator_list
            ):
                missing.append(f"{path.name}::{test.name}")
    assert not missing, "mark these @pytest.mark.slow (they start a process):\n" + "\n".join(
        missing
    )


def test_the_conftest_lists_no_tests_by_name() -> None:
    text = (TESTS / "conftest.py").read_text()
    named = [n for n in re.findall(r"\"(test_\w+)\"", text)]
    assert named == []


def test_module_marks_are_read_from_pytestmark_without_importing(tmp_path: Path) -> None:
    one = tmp_path / "test_one.py"
    one.write_text("import pytest\n\npytestmark = pytest.mark.torch\n")
    many = tmp_path / "test_many.py"
    many.write_text("import pytest\nx = 1\npytestmark = [pytest.mark.slow, pytest.mark.gpu]\n")
    none = tmp_path / "test_none.py"
    none.write_text("import pytest\n\n\n@pytest.mark.slow\ndef test_x() -> None: ...\n")
    assert (module_marks(one), module_marks(many), module_marks(none)) == (
        {"torch"},
        {"slow", "gpu"},
        set(),
    )


def test_only_certain_exclusions_skip_a_module() -> None:
    assert excluded_marks("not torch and not gpu and not bench and not slow") == {
        "torch",
        "gpu",
        "bench",
        "slow",
    }
    assert excluded_marks("hypothesis and not torch") == {"torch"}
    assert excluded_marks("slow or not torch") == set()  # a torch test may still be selected
    assert excluded_marks("") == set()


def test_a_tier_is_a_mark_not_a_keyword(request: pytest.FixtureRequest) -> None:
    """``item.keywords`` holds the names of the test, its module and its folders besides the
    marks (a folder ``tests/torch/`` would make every test in it "torch"): only a mark counts."""
    request.node.keywords["torch"] = True  # a keyword that is no mark, as a folder name is
    assert "torch" in request.node.keywords
    assert not marked(request.node, "torch") and not marked(request.node, "gpu")
    request.node.add_marker(pytest.mark.torch)
    assert marked(request.node, "torch")
