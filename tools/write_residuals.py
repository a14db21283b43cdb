"""Run ``ridgeline validate`` with leave-one-source-out and store every family's held-out
residuals in src/ridgeline/data/residuals/loso.toml (the intervals of predict and plan).

    python tools/write_residuals.py            # print the per-family summary
    python tools/write_residuals.py --write    # and rewrite the file

tests/fidelity/test_residuals.py checks that the stored residuals equal a fresh run.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ridgeline.fidelity.residuals import MIN_ROWS, dump_residuals, residuals_of
from ridgeline.fidelity.validate import validate

FILE = Path(__file__).parents[1] / "src" / "ridgeline" / "data" / "residuals" / "loso.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the stored file")
    args = parser.parse_args()
    res = residuals_of(validate(loso=True))
    for name, fam in sorted(res.items()):
        if len(fam.rows) >= MIN_ROWS:
            lo, hi = fam.quantiles()
            print(f"{name}: {len(fam.rows)} rows, speed x{math.exp(-hi):.3f}..x{math.exp(-lo):.3f}")
        else:
            print(f"{name}: {len(fam.rows)} rows (too few for an interval)")
    if args.write:
        FILE.write_text(dump_residuals(res))
        print(f"wrote {FILE}")


if __name__ == "__main__":
    main()
