"""Keep the test tree a mirror of the source tree: move each test module to its place.

    python tools/mirror_tests.py          # move what is out of place (git mv), fix references
    python tools/mirror_tests.py --check  # list what is out of place; exit 1 if anything is

The tree (``tests/repo/test_mirror.py`` holds it to this rule):

- ``tests/<package>/`` holds the tests of ``src/ridgeline/<package>/`` (``tests/sim/`` those of
  ``ridgeline.sim``);
- ``tests/repo/`` holds the checks of the repository as a whole: code limits, layers, docs, the
  test tiers, the notebooks, and the answers every face must agree on;
- ``tests/test_<module>.py`` at the root tests the top-level module ``src/ridgeline/<module>.py``;
- the root also keeps ``conftest.py`` and the helpers the tests import (``serving_helpers``,
  ``engine_support``, ...), which pytest finds through ``pythonpath = ["tests"]``, and the data.

A module's place is read from its name: ``test_<package>.py`` and ``test_<package>_*.py`` go to
``tests/<package>/`` (``test_sim_fast.py`` to ``tests/sim/``); the others are named in ``PLACES``.
A new test module whose name says neither must be added to ``PLACES`` (the script stops on it).

Moving a module one folder down, the script keeps what it reaches through ``__file__``: the
repository (``Path(__file__).parent.parent``) and the data (``Path(__file__).parent / "data"``)
gain one ``.parent``; any other use is listed for a reader to check. A path to a test module
that names another place than its own (``tests/test_sim_fast.py`` once it is in ``tests/sim/``)
is rewritten in the repository's text files, whether this run moved it or a merge brought the
old path back.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
PACKAGE = ROOT / "src" / "ridgeline"
REPO_CHECKS = "repo"  # the folder of the checks that belong to no one package
NOT_TESTS = {"data", "hypothesis-examples"}  # folders of the tree that hold no tests

# Test modules whose name does not start with their package's (module stem -> folder).
PLACES = {
    # analytic: costs, pricing, memory, tiling and the compiled schedule
    "test_calibration": "analytic",
    "test_dataflow": "analytic",
    "test_deploy": "analytic",
    "test_flash_layout": "analytic",
    "test_golden_tiling": "analytic",
    "test_kv_manage": "analytic",
    "test_memory_rule": "analytic",
    "test_pallas": "analytic",
    "test_pricing": "analytic",
    "test_properties": "analytic",
    "test_recompute": "analytic",
    "test_tiling": "analytic",
    # specs and the shipped data
    "test_catalog_new": "specs",
    "test_peaks": "specs",
    # serving: the block pool and the scheduler
    "test_block_pool": "serving",
    "test_block_pool_stateful": "serving",
    "test_scheduler": "serving",
    "test_scheduler_property": "serving",
    # sim: the simulator's parts, engine profiles over it, workloads and pools
    "test_compiled": "sim",
    "test_engines": "sim",
    "test_inference_perf": "sim",
    "test_kv_lessons": "sim",
    "test_pools": "sim",
    "test_replicas": "sim",
    "test_simulate_cli": "cli",
    # engine
    "test_kernel_build": "engine",
    # fidelity and the published measurements it reads
    "test_measurements_data": "fidelity",
    "test_residuals": "fidelity",
    "test_validation": "fidelity",
    # lab
    "test_serve_check": "lab",
    # the repository as a whole
    "test_api_habits": REPO_CHECKS,
    "test_bad_inputs": REPO_CHECKS,
    "test_code_limits": REPO_CHECKS,
    "test_course_consistency": REPO_CHECKS,
    "test_docs": REPO_CHECKS,
    "test_docs_hygiene": REPO_CHECKS,
    "test_five_paths": REPO_CHECKS,
    "test_hypothesis_profiles": REPO_CHECKS,
    "test_layers": REPO_CHECKS,
    "test_lazy_exports": REPO_CHECKS,
    "test_no_sentinels": REPO_CHECKS,
    "test_notebook_deps": REPO_CHECKS,
    "test_notebooks": REPO_CHECKS,
    "test_readme": REPO_CHECKS,
    "test_mirror": REPO_CHECKS,
    "test_tiers": REPO_CHECKS,
}
# ``Path(__file__)`` followed by what lies outside the module's own folder: the repository
# (``.parent.parent``) or the tests' data.
REACHES_OUT = re.compile(
    r"(Path\(__file__\)(?:\.resolve\(\))?\.parent)(?=\.parent|\s*/\s*\"data\")"
)
FILE_USE = re.compile(r"\bPath\(__file__\)")  # a module's own place (not ``ridgeline.__file__``)
TEXT_SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".txt", ".sh", ".yml", ".yaml", ""}


def packages() -> set[str]:
    """The subpackages of ``ridgeline`` (folders of ``src/ridgeline/`` with an ``__init__``) that
    can name a folder of tests (``ridgeline.data``'s tests cannot: ``tests/data/`` is data)."""
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")} - NOT_TESTS


def modules() -> set[str]:
    """The top-level modules of ``ridgeline`` (``processes``, ``errors``, ...)."""
    return {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}


def place(stem: str) -> str | None:
    """The folder under ``tests/`` of test module ``stem`` ("" for the root), or None when its
    name says nothing and ``PLACES`` does not name it."""
    if stem in PLACES:
        return PLACES[stem]
    words = stem.removeprefix("test_").split("_")
    for n in range(len(words), 0, -1):  # the longest package name first: serving before serve
        if "_".join(words[:n]) in packages():
            return "_".join(words[:n])
    return "" if "_".join(words) in modules() else None


def modules_in_tree() -> list[Path]:
    """Every test module of the tree."""
    return sorted(
        p for p in TESTS.rglob("test_*.py") if not NOT_TESTS & set(p.relative_to(TESTS).parts)
    )


def misplaced() -> tuple[dict[Path, Path], list[str]]:
    """Modules out of place (where each is -> where it belongs), and the ones with no place."""
    moves, unknown = {}, []
    for path in modules_in_tree():
        folder = place(path.stem)
        if folder is None:
            unknown.append(str(path.relative_to(ROOT)))
            continue
        target = TESTS / folder / path.name
        if path != target:
            moves[path] = target
    return moves, unknown


def _depth(path: Path) -> int:
    return len(path.relative_to(TESTS).parts)


def deeper(text: str, levels: int) -> str:
    """A module's text once it sits ``levels`` folders deeper: what it reaches outside its own
    folder through ``Path(__file__)`` (the repository, the tests' data) gains ``levels``
    ``.parent``."""
    return REACHES_OUT.sub(lambda m: m.group(1) + ".parent" * levels, text)


def _rewrite_file_uses(target: Path, levels: int) -> list[str]:
    """Give the module's reaches out of its folder ``levels`` more ``.parent``; return the other
    lines that use ``__file__``, for a reader."""
    text = target.read_text()
    fixed = deeper(text, levels)
    if fixed != text:
        target.write_text(fixed)
    return [
        f"{target.relative_to(ROOT)}:{i}: {line.strip()}"
        for i, line in enumerate(fixed.splitlines(), 1)
        if FILE_USE.search(line) and not REACHES_OUT.search(line)
    ]


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = [ROOT / line for line in out.stdout.splitlines()]
    # the data, this script and its test (their example paths stay examples)
    skip = ("tests/hypothesis-examples/", "tests/data/", "tools/mirror_tests.py")
    skip += ("tests/repo/test_mirror.py",)
    return [
        p
        for p in paths
        if p.suffix in TEXT_SUFFIXES
        and p.is_file()
        and not str(p.relative_to(ROOT)).startswith(skip)
    ]


REFERENCE = re.compile(r"(?<![\w/])tests/(?:[\w-]+/)?(test_\w+\.py)\b")


def stale_references(fix: bool = False) -> list[str]:
    """``file:line: old -> new`` for each path to a test module, in the repository's text files,
    that names a place the module is not in (``tests/test_x.py`` once it is in
    ``tests/sim/``); with ``fix``, rewrite them. A path to no module of the tree stays."""
    where = {p.name: p.relative_to(ROOT).as_posix() for p in modules_in_tree()}
    found = []
    for path in _tracked_text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        fixed, stale = redirected(text, where)
        found += [f"{path.relative_to(ROOT)}:{line}: {old} -> {new}" for line, old, new in stale]
        if fix and stale:
            path.write_text(fixed)
    return found


def redirected(text: str, where: dict[str, str]) -> tuple[str, list[tuple[int, str, str]]]:
    """``text`` with each stale path to a test module replaced, and (line, old, new) of each."""
    parts, stale, at = [], [], 0
    for m in REFERENCE.finditer(text):
        new = where.get(m.group(1), m.group(0))
        if new == m.group(0) or (ROOT / m.group(0)).exists():
            continue
        stale.append((text.count("\n", 0, m.start()) + 1, m.group(0), new))
        parts += [text[at : m.start()], new]
        at = m.end()
    return "".join(parts) + text[at:], stale


def move(moves: dict[Path, Path]) -> list[str]:
    """``git mv`` each module to its place and keep what it reaches; return what to check."""
    review, rewritten = [], []
    for src, dst in sorted(moves.items()):
        dst.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
        levels = _depth(dst) - _depth(src)
        if levels > 0:
            review += _rewrite_file_uses(dst, levels)
            rewritten.append(str(dst))
        elif FILE_USE.search(dst.read_text()):  # moved up or sideways: no rule, a reader checks
            review.append(f"{dst.relative_to(ROOT)}: moved from {src.parent}; check its __file__")
    stale_references(fix=True)
    if rewritten:  # a longer path may push a line past the formatter's length
        subprocess.run([sys.executable, "-m", "ruff", "format", "-q", *rewritten], cwd=ROOT)
    return review


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list, move nothing")
    args = parser.parse_args(argv)
    moves, unknown = misplaced()
    for name in unknown:
        print(f"{name}: no place (name it in PLACES in tools/mirror_tests.py)", file=sys.stderr)
    if args.check:
        for src, dst in sorted(moves.items()):
            print(f"{src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
        stale = stale_references()
        for line in stale:
            print(f"stale path: {line}")
        return 1 if moves or unknown or stale else 0
    if unknown:
        return 2
    for line in move(moves):
        print(f"check: {line}")
    print(f"moved {len(moves)} test modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
