"""Strided and misaligned reads on this CPU against the layout model.

    python benchmarks/layout.py [--runs 3] [--mib 256]

Each run times every read as the median of five passes beside the baseline read of the same pass
(``ridgeline.lab.layout_bench``); the table gives the median over runs of measured ÷ baseline
time per useful byte, and the model's ratio (``analytic.layout``). The machine is shared: the
load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics

from ridgeline.lab.layout_bench import run_layout_bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=256, help="buffer size (MiB)")
    args = ap.parse_args()
    runs = [run_layout_bench(args.mib * 2**20) for _ in range(args.runs)]
    print(
        f"line {runs[0].line_bytes} B, buffer {args.mib} MiB, {args.runs} runs x "
        f"{runs[0].passes} passes, one thread; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'read':<16}{'measured':>10}{'model':>8}{'measured/model':>16}   runs")
    for i, p in enumerate(runs[0].points):
        ratios = [r.points[i].measured_ratio for r in runs]
        med = statistics.median(ratios)
        name = f"stride {p.value}" if p.kind == "stride" else f"offset {p.value} B"
        spread = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"{name:<16}{med:>10.2f}{p.model_ratio:>8.2f}{med / p.model_ratio:>16.2f}   {spread}")


if __name__ == "__main__":
    main()
