"""Benchmark: a ~200-configuration capacity search — llama-3.1-8b and llama-3.1-70b; h100-sxm,
h200, mi300x, tpu-v5p; 1 to 8 chips (tensor and pipeline splits); two policies; the conversation
trace — run once on the ``local`` backend and once on ``ray``, on this machine.

Prints the wall time of each backend, the number of simulations each ran (and that their results
are identical), then the Pareto front for llama-3.1-70b as a Markdown table; writes the stores and
the 70B front plot under ``--out``.

    python benchmarks/sweep_capacity.py [--quick] [--workers N] [--backends local,ray] [--out DIR]

``--quick``: tensor-parallel splits only (1, 2, 4, 8 chips; 64 configurations), 10 s of arrivals
per probe (at most 1,000 requests) and a 10 % tolerance, instead of 60 s (at most 6,000) and 5 %.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import time
from pathlib import Path

from ridgeline.report.figures import save_figure
from ridgeline.report.sweep_section import front_table, plot_front
from ridgeline.sweep import (
    BackendKind,
    ServingSimulator,
    SqliteStore,
    SweepSpec,
    make_backend,
    read_store,
    run_sweep,
    spec_from_dict,
    sweep_report,
)

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "benchmarks" / "data" / "splitwise_conv_6k.csv"  # provenance: data/README.md

# (tensor_parallel, pipeline_parallel): every split of 1-8 chips with tp a power of two, plus
# 3 and 6 chips — 13 splits x 4 accelerators x 2 models x 2 policies = 208 configurations.
FULL_SPLITS = [
    (1, 1),
    (2, 1),
    (1, 2),
    (4, 1),
    (2, 2),
    (1, 4),
    (8, 1),
    (4, 2),
    (2, 4),
    (1, 8),
    (1, 3),
    (2, 3),
    (1, 6),
]
QUICK_SPLITS = [(1, 1), (2, 1), (4, 1), (8, 1)]


def build_spec(quick: bool, trace: Path, decide_early: bool = True) -> SweepSpec:
    splits = QUICK_SPLITS if quick else FULL_SPLITS
    data = {
        "sweep": {
            "name": "capacity-" + ("quick" if quick else "full"),
            "models": ["llama-3.1-8b", "llama-3.1-70b"],
            "accelerators": ["h100-sxm", "h200", "mi300x", "tpu-v5p"],
            "objective": "goodput_per_chip",
            "seed": 0,
        },
        "deployments": [
            {"chips": tp * pp, "tensor_parallel": tp, "pipeline_parallel": pp} for tp, pp in splits
        ],
        "policies": [
            {"name": "chunked-512", "max_num_batched_tokens": 512},
            {"name": "budget-8192", "max_num_batched_tokens": 8192},
        ],
        # rate x duration_s requests per probe: an overload by a factor rho leaves
        # (rho - 1) x duration_s of backlog, which the TTFT SLO sees
        "workloads": [
            {
                "name": "conv",
                "trace": str(trace),
                "duration_s": 10.0 if quick else 60.0,
                "max_requests": 1000 if quick else 6000,
            }
        ],
        "slo": {"ttft_s": 1.0, "tpot_s": 0.05, "percentile": 90},
        "search": {
            "rate_start_rps": 2.0,
            "rel_tolerance": 0.10 if quick else 0.05,
            "decide_early": decide_early,
        },
    }
    return spec_from_dict(data)


def _rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as con:
        probes = con.execute("SELECT key, rate_rps, result_json FROM probes ORDER BY 1, 2")
        results = con.execute("SELECT * FROM results ORDER BY key")
        return [*probes.fetchall(), *results.fetchall()]


def _cpu_s() -> float:
    """CPU seconds of this process and its finished child processes (the pool's workers)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_one(spec: SweepSpec, kind: BackendKind, workers: int, db: Path) -> tuple[float, int]:
    db.unlink(missing_ok=True)
    store = SqliteStore(db)
    start = time.perf_counter()
    cpu = _cpu_s()
    out = run_sweep(spec, store, make_backend(kind, workers), ServingSimulator())
    wall = time.perf_counter() - start
    cpu = _cpu_s() - cpu
    store.close()
    print(
        f"{kind.value:>5}: {wall:8.1f} s wall, {cpu:.1f} s cpu (this process and its workers), "
        f"{out.num_simulated} simulations "
        f"({out.num_decided_early} stopped once the SLOs were missed), "
        f"{out.num_rounds} rounds, {len(out.results)} configurations, {workers} workers"
    )
    return wall, out.num_simulated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backends", default="local,ray")
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "sweep_capacity")
    parser.add_argument(
        "--no-decide-early",
        action="store_true",
        help="simulate every probe to its end (the baseline for deciding missed probes early)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    spec = build_spec(args.quick, args.trace, not args.no_decide_early)
    print(
        f"{spec.name}: {len(spec.configurations())} configurations, "
        f"{spec.workloads[0].duration_s:g} s of arrivals per probe, load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    dbs = {}
    for name in args.backends.split(","):
        kind = BackendKind(name)
        dbs[kind] = args.out / f"{spec.name}-{kind.value}.db"
        run_one(spec, kind, args.workers, dbs[kind])
    rows = [_rows(db) for db in dbs.values()]
    if len(rows) > 1:
        print(f"identical results across backends: {all(r == rows[0] for r in rows)}")
    rep = sweep_report(read_store(next(iter(dbs.values()))), "llama-3.1-70b")
    png = save_figure(
        plot_front(rep, "llama-3.1-70b: TPOT p90 vs throughput per chip"),
        args.out / "front_70b.png",
    )
    best = rep.best
    if best is not None:
        print(f"best 70B configuration by {rep.objective}: {best.label}: {best.objective:.3g}")
    table = front_table(rep)
    print("\n| " + " | ".join(table.headers) + " |\n|" + "---|" * len(table.headers))
    for row in table.rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nwrote {png}")


if __name__ == "__main__":
    main()
