"""The course notebooks run headless, top to bottom, without an error (nbclient + ipykernel,
the ``dev`` extra), each showing at least one inline plot."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a kernel per notebook

nbformat = pytest.importorskip("nbformat", reason="the notebooks need the dev extra")
nbclient = pytest.importorskip("nbclient", reason="the notebooks need the dev extra")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent.parent / "notebooks").glob("*.ipynb"))
TORCH = {"08_lab_profiling.ipynb"}


def test_one_notebook_per_course_module_and_the_lab() -> None:
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(1, 9)]


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.torch) if p.name in TORCH else p for p in NOTEBOOKS],
    ids=[p.stem for p in NOTEBOOKS],
)
def test_notebook_runs_and_plots(path: Path, tmp_path: Path) -> None:
    if path.name in TORCH:
        pytest.importorskip("torch", reason="the lab notebook needs the torch extra")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
