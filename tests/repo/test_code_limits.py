"""The size limits every change keeps: no file over 600 lines in src/, no function over 50
lines, no identical block of 10 or more lines twice in src/ (docs/design.md, "Code rules";
the engine's C++ kernels are not Python and are not measured here), and no limit met by packing:
``# fmt: skip`` only on a literal table of data, anywhere in the Python of the repository.

``KNOWN`` lists what is still over a limit, each with the work that removes it; an entry that
no longer applies fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

import ridgeline
from srctree import source

SRC = Path(ridgeline.__file__).parent
REPO = SRC.parents[1]
FORMATTED = ("src", "tests", "benchmarks", "tools")  # the trees ruff format keeps
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 50
MIN_BLOCK_LINES = 10

# file, or file::function -> why it is still over the limit
KNOWN: dict[str, str] = {}


def _files(root: Path = SRC) -> list[Path]:
    return sorted(root.rglob("*.py"))


def long_files(root: Path = SRC) -> dict[str, int]:
    """Files over ``MAX_FILE_LINES`` lines, by path relative to ``root``."""
    out = {}
    for path in _files(root):
        n = len(source(path)[0].splitlines())
        if n > MAX_FILE_LINES:
            out[path.relative_to(root).as_posix()] = n
    return out


def long_functions(root: Path = SRC) -> dict[str, int]:
    """Functions (and methods) over ``MAX_FUNCTION_LINES`` lines, decorators excluded."""
    out = {}
    for path in _files(root):
        for node in ast.walk(source(path)[1]):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out[f"{path.relative_to(root).as_posix()}::{node.name}"] = n
    return out


_PUNCTUATION = re.compile(r"^[\s()\[\]{},:]*$")


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text with white space folded) of each line that carries code: no blank
    lines, comments, lone brackets or imports (as the ``duplicates`` tool reads code)."""
    text, tree = source(path)
    imports = {
        i
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for i in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        s = " ".join(line.split())
        if s and not s.startswith("#") and not _PUNCTUATION.match(s) and i not in imports:
            out.append((i, s))
    return out


def repeated_blocks(root: Path = SRC, size: int = MIN_BLOCK_LINES) -> list[tuple[str, str]]:
    """Pairs of places where the same ``size`` code lines stand, letter for letter."""
    seen: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path in _files(root):
        lines = _code_lines(path)
        last_end: dict[tuple[str, ...], int] = {}
        for k in range(len(lines) - size + 1):
            window = tuple(s for _, s in lines[k : k + size])
            start = lines[k][0]
            if last_end.get(window, -1) >= start:  # an overlapping repeat of the same run
                continue
            last_end[window] = lines[k + size - 1][0]
            seen[window].append(f"{path.relative_to(root).as_posix()}:{start}")
    return [(places[0], p) for places in seen.values() if len(places) > 1 for p in places[1:]]


def _is_literal(node: ast.expr) -> bool:
    """A constant (or a negated one), or a display of literals."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) and all(
            _is_literal(v) for v in node.values
        )
    return False


def _is_table(stmt: ast.stmt) -> bool:
    """A table of data: a statement whose value is a list, tuple, set or dict display of literals
    (``NAME = (...)``, ``NAME: T = [...]`` or a bare display), every element a constant or a
    display of constants: rows of numbers and strings, no calls, names or arithmetic."""
    value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.Expr) else None
    displays = ast.List | ast.Tuple | ast.Set | ast.Dict
    return isinstance(value, displays) and _is_literal(value)


def packed_lines(root: Path = REPO, trees: tuple[str, ...] = FORMATTED) -> list[str]:
    """``path:line`` of each ``# fmt: skip`` comment that is not on the last line of a table of
    data (``_is_table``): ruff skips the statement that ends on that line."""
    out = []
    for path in sorted(p for tree in trees for p in (root / tree).rglob("*.py")):
        text, tree = source(path)
        ends = {n.end_lineno: n for n in ast.walk(tree) if isinstance(n, ast.stmt)}
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT and tok.string.endswith("fmt: skip"):
                stmt = ends.get(tok.start[0])
                if stmt is None or not _is_table(stmt):
                    out.append(f"{path.relative_to(root).as_posix()}:{tok.start[0]}")
    return out


@pytest.mark.slow
def test_no_file_over_the_limit() -> None:
    assert {f: n for f, n in long_files().items() if f not in KNOWN} == {}


@pytest.mark.slow
def test_no_function_over_the_limit() -> None:
    assert {f: n for f, n in long_functions().items() if f not in KNOWN} == {}


@pytest.mark.slow
def test_no_identical_block_twice() -> None:
    assert repeated_blocks() == []


@pytest.mark.slow
def test_no_line_packed_past_the_formatter() -> None:
    assert packed_lines() == []


@pytest.mark.slow
def test_known_exceptions_still_apply() -> None:
    current = set(long_files()) | set(long_functions())
    assert [k for k in KNOWN if k not in current] == []


def test_the_checkers_see_what_they_should(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "a.py").write_text(f"def big():\n{body}\n\n\ndef small():\n    return 1\n")
    block = "\n".join(f"y{i} = f({i})" for i in range(MIN_BLOCK_LINES))
    (tmp_path / "b.py").write_text(f"# one\n{block}\n")
    (tmp_path / "c.py").write_text(f"import os\n\n{block}\n\nz = 1\n")
    assert long_functions(tmp_path) == {"a.py::big": MAX_FUNCTION_LINES + 1}
    assert repeated_blocks(tmp_path) == [("b.py:2", "c.py:3")]
    assert repeated_blocks(tmp_path, MIN_BLOCK_LINES + 1) == []


def test_the_packing_check_allows_tables_only(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(
        "ROWS = [\n    (1, 'a', -2.5),\n    (2, 'b', 3.0),\n]  # fmt: skip\n"
        "HEADS = ('x', 'y')  # fmt: skip\n"
        "TERMS = {'a': (1, 2), 'b': None}  # fmt: skip\n"
        "f(a=1,\n  b=2)  # fmt: skip\n"
        "CALLS = [g(1), 2]  # fmt: skip\n"
        "NAMES = (ROWS, HEADS)  # fmt: skip\n"
        "text = '# fmt: skip'\n"
        "def h():\n    return (1,\n            2)  # fmt: skip\n"
    )
    assert packed_lines(tmp_path, ("src",)) == [
        "src/a.py:8",  # a call
        "src/a.py:9",  # a display of a call
        "src/a.py:10",  # a display of names
        "src/a.py:14",  # a return, not a table
    ]
