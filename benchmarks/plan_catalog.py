"""Benchmark: ``ridgeline plan`` over the whole catalog (13 accelerators) for one model, on the
local process pool against the same plan in one process (the baseline), in one run.

    python benchmarks/plan_catalog.py [--model llama-3.1-70b] [--workers 2] [--rate 8.38]

Prints each run's wall time and CPU time (this process and its workers, reaped before the
clock is read), the load average before and after, and the ratio of the two runs; both must
give the same plan (the decisions are taken between rounds, in shortlist order).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import time

from ridgeline.plan import Plan, PlanRequest, Targets, run_plan
from ridgeline.plan.request import WorkloadChoice
from ridgeline.specs import accelerator_names
from ridgeline.sweep.backends import LocalBackend

REAP_S = 1.0  # the pool's killed workers are reaped by its own thread; give it this long


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the pool's workers)."""
    time.sleep(REAP_S)
    multiprocessing.active_children()
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def timed(req: PlanRequest, workers: int) -> tuple[Plan, float, float]:
    """The plan, its wall seconds and CPU seconds."""
    cpu = _cpu()
    wall = time.perf_counter()
    plan = run_plan(req, LocalBackend(workers))
    wall = time.perf_counter() - wall
    return plan, wall, _cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-70b")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=8.38)
    parser.add_argument("--isl", type=int, default=4000)
    parser.add_argument("--osl", type=int, default=500)
    parser.add_argument("--ttft", type=float, default=1.0)
    parser.add_argument("--tpot", type=float, default=0.03)
    args = parser.parse_args()
    wl = WorkloadChoice(isl=args.isl, osl=args.osl).spec()
    names = tuple(accelerator_names())
    req = PlanRequest(args.model, wl, args.rate, Targets(args.ttft, args.tpot), names)
    print(
        f"{args.model}, ISL {args.isl} / OSL {args.osl}, {args.rate:g} req/s, TTFT p90 <= "
        f"{args.ttft:g} s, TPOT p90 <= {args.tpot * 1e3:g} ms, {len(names)} accelerators, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
    )
    pool, pool_wall, pool_cpu = timed(req, args.workers)
    print(
        f"local pool, {args.workers} workers: {pool_wall:.1f} s wall, {pool_cpu:.1f} s CPU, "
        f"{pool.num_simulations} simulations; {pool.verdict}"
    )
    here, here_wall, here_cpu = timed(req, 1)
    print(
        f"one process (baseline): {here_wall:.1f} s wall, {here_cpu:.1f} s CPU, "
        f"{here.num_simulations} simulations"
    )
    a, b = pool.to_dict(), here.to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    print(
        f"pool / one process: {pool_wall / here_wall:.2f}x wall, {pool_cpu / here_cpu:.2f}x CPU; "
        f"same plan: {'yes' if a == b else 'no'}; load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
