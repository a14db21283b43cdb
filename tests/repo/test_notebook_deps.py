"""The notebooks run with what the extras install: every module a notebook imports comes with
ridgeline's own dependencies and the ``dev`` extra (``torch`` as well for the lab notebook), and
a fresh virtual environment with ``.[dev]`` alone runs a notebook top to bottom."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TORCH_NOTEBOOKS = {"08_lab_profiling.ipynb"}
STDLIB = set(sys.stdlib_module_names)


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def _project() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def notebook_imports(path: Path) -> set[str]:
    """Top-level modules the notebook's code cells import (IPython magics skipped)."""
    cells = json.loads(path.read_text())["cells"]
    code = "\n".join(
        line
        for c in cells
        if c["cell_type"] == "code"
        for line in "".join(c["source"]).splitlines()
        if not line.startswith(("%", "!"))
    )
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_import_comes_with_the_dev_extra(path: Path) -> None:
    project = _project()
    allowed = _names(project["dependencies"]) | _names(project["optional-dependencies"]["dev"])
    if path.name in TORCH_NOTEBOOKS:
        allowed |= _names(project["optional-dependencies"]["torch"])
    dists = packages_distributions()
    for module in notebook_imports(path) - STDLIB - {"ridgeline"}:
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        assert names & allowed, f"{path.name} imports {module}, which no extra it needs installs"


@pytest.mark.slow
def test_a_fresh_venv_with_the_dev_extra_runs_a_notebook(tmp_path: Path) -> None:
    """pip installs ``.[dev]`` (from the package index pip is configured with) into an empty
    virtual environment, which then executes notebook 01 headless."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    args = [str(py), "-m", "pip", "install", "-q", f"{ROOT}[dev]"]
    install = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800)
    assert install.returncode == 0, install.stderr[-3000:]
    run = (
        "import nbformat, nbclient, sys\n"
        "nb = nbformat.read(sys.argv[1], as_version=4)\n"
        "nbclient.NotebookClient(nb, timeout=600, kernel_name='python3',"
        " resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
        "import ridgeline; print(ridgeline.__file__)\n"
    )
    args = [str(py), "-c", run, str(NOTEBOOKS[0]), str(tmp_path)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(venv) in done.stdout  # the installed package ran, not this checkout's sources
