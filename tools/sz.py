"""Line report per package (tinygrad's sz.py): code lines, files, and the longest function.

python tools/sz.py            # table on stdout
"""

from __future__ import annotations

import ast
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "ridgeline"


def _code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def _function_lengths(tree: ast.AST) -> list[int]:
    return [
        (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def main() -> None:
    lines: dict[str, int] = defaultdict(int)
    files: dict[str, int] = defaultdict(int)
    funcs: dict[str, list[int]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).parts
        package = rel[0] if len(rel) > 1 else "(root)"
        text = path.read_text()
        lines[package] += _code_lines(text)
        files[package] += 1
        funcs[package] += _function_lengths(ast.parse(text))
    out = sys.stdout
    out.write("| package | files | code lines | functions | median fn lines | max fn lines |\n")
    out.write("|---|---|---|---|---|---|\n")
    for package in sorted(lines):
        f = funcs[package] or [0]
        out.write(
            f"| {package} | {files[package]} | {lines[package]} | {len(funcs[package])} | "
            f"{statistics.median(f):.0f} | {max(f)} |\n"
        )
    out.write(f"| **total** | {sum(files.values())} | {sum(lines.values())} | | | |\n")


if __name__ == "__main__":
    main()
