"""Fit every calibration family on the published-measurements dataset and (with --write) store
the fitted numbers, with the rows they were fitted on, in src/ridgeline/data/calibration/.

    python tools/fit_calibration.py            # print the fit
    python tools/fit_calibration.py --write    # and rewrite the families' [terms] lines

tests/fidelity/test_fidelity.py checks that the stored numbers equal a fresh fit.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ridgeline.fidelity.dataset import load_dataset
from ridgeline.fidelity.fit import FamilyFit
from ridgeline.fidelity.validate import fit_all, record_all
from ridgeline.specs.calibration import get_family

FOLDER = Path(__file__).parents[1] / "src" / "ridgeline" / "data" / "calibration"


def _line(term: str, value: float, source: str) -> str:
    return f'{term} = {{ value = {value:.6g}, source = "{source}" }}'


def rewrite(path: Path, fit: FamilyFit) -> None:
    """Replace each fitted (or pinned) term's line in the file's [terms] table."""
    text = path.read_text()
    head, _, rest = text.partition("[terms]\n")
    body, sep, tail = rest.partition("\n[")
    cal = fit.calibration(get_family(fit.family).calibration)
    for term in [*fit.values, *fit.pinned]:
        pattern = re.compile(rf"^{term.value} = .*$", re.MULTILINE)
        new = _line(term.value, cal.value(term), cal.sources[term.value])
        body = pattern.sub(new, body) if pattern.search(body) else f"{body.rstrip()}\n{new}\n"
    path.write_text(f"{head}[terms]\n{body}{sep}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fit in the family files")
    args = parser.parse_args()
    rows = load_dataset()
    fits = fit_all(rows, record_all(rows))
    for name, fit in fits.items():
        if not fit.rows:
            continue
        values = ", ".join(
            [
                f"{t.value} = {v:.4g} ({fit.constraining.get(t, 0)} rows constrain it)"
                for t, v in fit.values.items()
            ]
            + [
                f"{t.value} pinned at its prior ({n} rows constrain it)"
                for t, n in fit.pinned.items()
            ]
        )
        err = fit.mean_abs_log_error
        error = "no rows" if err is None else f"mean |ln ratio| {err:.3f}"
        print(f"{name}: {values} ({len(fit.rows)} rows, {error})")
        if args.write:
            rewrite(FOLDER / f"{name}.toml", fit)


if __name__ == "__main__":
    main()
