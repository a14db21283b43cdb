"""How long ``ridgeline --help`` takes, against the interpreter starting and doing nothing, in
the same run (the target: under 0.3 s median on a quiet machine).

    python benchmarks/cli_startup.py [--runs 21]

Wall time of each process, medians and best of ``--runs``; the CPU time (user + system) of the
help too, which a busy machine inflates less than wall time. The load average is printed
before and after: quote the figures from a quiet run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _time(cmd: list[str], runs: int) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    load = os.getloadavg()[0]
    cases = {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "ridgeline --help": [str(BIN / "ridgeline"), "--help"],
        "ridgeline --version": [str(BIN / "ridgeline"), "--version"],
    }
    medians = {}
    for name, cmd in cases.items():
        wall, cpu = _time(cmd, runs)
        medians[name] = statistics.median(wall)
        print(f"{name:28s} median {medians[name] * 1e3:6.0f} ms   best {min(wall) * 1e3:6.0f} ms"
              f"   cpu median {statistics.median(cpu) * 1e3:6.0f} ms")  # fmt: skip
    ratio = medians["ridgeline --help"] / medians["python -c pass (baseline)"]
    target = "met" if medians["ridgeline --help"] < 0.3 else "not met"
    print(f"help / bare interpreter: {ratio:.1f}x; target < 300 ms median: {target}")
    print(
        f"load average: {load:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
