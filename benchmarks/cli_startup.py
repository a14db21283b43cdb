"""Start-up of the ``ridgeline`` command, against the interpreter starting and doing nothing, in
the same run. Targets (a quiet 2-core machine): ``hw list`` and every command's ``--help`` under
0.3 s; a ``simulate`` process on 1,000 requests under 0.6 s of CPU.

    python benchmarks/cli_startup.py [--runs 5] [--importtime]

Each case runs ``--runs`` times as a fresh process: the median wall time and the median CPU time
(user + system, which a busy machine inflates less than wall time), and the ratio of each to the
bare interpreter's. ``--importtime`` adds, for ``simulate`` on 1,000 requests, the modules whose
import took longest (``python -X importtime``, cumulative). The load average is printed before
and after: quote the figures of a quiet run.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

RIDGELINE = [sys.executable, "-m", "ridgeline"]
TARGET_S = {"help": 0.3, "hw list": 0.3}
SIMULATE = ["simulate", "--requests", "1000"]
SIMULATE_CPU_TARGET_S = 0.6


@dataclass(frozen=True, slots=True)
class Timing:
    wall_s: float
    cpu_s: float


def measure(cmd: list[str], runs: int) -> Timing:
    """Median wall and CPU seconds of ``runs`` fresh processes of ``cmd``."""
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return Timing(statistics.median(wall), statistics.median(cpu))


def commands() -> list[list[str]]:
    """Every leaf command, as its argument path (``["lab", "sweep"]``), from the CLI's table."""
    from ridgeline.cli.root import COMMANDS, load_command

    paths: list[list[str]] = []

    def walk(path: list[str], cmd: object) -> None:
        sub = getattr(cmd, "commands", None)
        if sub is None:
            paths.append(path)
            return
        for name, child in sub.items():
            walk([*path, name], child)

    for name, entry in COMMANDS.items():
        walk([name], load_command(name, entry))
    return paths


def slowest_imports(args: list[str], top: int = 12) -> list[tuple[str, float]]:
    """The modules of ``ridgeline ARGS`` with the longest cumulative import time."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ridgeline", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    rows = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)$", done.stderr, re.M)
    top_level = [(name, int(cum) / 1e6) for cum, indent, name in rows if len(indent) <= 3]
    return sorted(top_level, key=lambda r: -r[1])[:top]


def _row(name: str, t: Timing, base: Timing, target_s: float | None) -> str:
    verdict = "" if target_s is None else ("  ok" if t.wall_s < target_s else "  OVER")
    return (
        f"{name:36s} wall {t.wall_s * 1e3:6.0f} ms ({t.wall_s / base.wall_s:4.1f}x)   "
        f"cpu {t.cpu_s * 1e3:6.0f} ms ({t.cpu_s / base.cpu_s:4.1f}x){verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--importtime", action="store_true")
    opts = parser.parse_args()
    load = os.getloadavg()[0]
    base = measure([sys.executable, "-c", "pass"], opts.runs)
    print(_row("python -c pass (baseline)", base, base, None))
    print(_row("ridgeline --help", measure([*RIDGELINE, "--help"], opts.runs), base, 0.3))
    print(_row("ridgeline hw list", measure([*RIDGELINE, "hw", "list"], opts.runs), base, 0.3))
    helps = {" ".join(p): measure([*RIDGELINE, *p, "--help"], opts.runs) for p in commands()}
    for name, t in sorted(helps.items(), key=lambda kv: -kv[1].wall_s):
        print(_row(f"ridgeline {name} --help", t, base, TARGET_S["help"]))
    over = [n for n, t in helps.items() if t.wall_s >= TARGET_S["help"]]
    sim = measure([*RIDGELINE, *SIMULATE], opts.runs)
    print(_row("ridgeline simulate --requests 1000", sim, base, None))
    print(
        f"--help of {len(helps)} commands: median {statistics.median(t.wall_s for t in helps.values()) * 1e3:.0f} ms,"
        f" slowest {max(t.wall_s for t in helps.values()) * 1e3:.0f} ms; over 0.3 s: {over or 'none'}"
    )
    verdict = "met" if sim.cpu_s < SIMULATE_CPU_TARGET_S else "not met"
    print(f"simulate on 1,000 requests: {sim.cpu_s:.2f} s of CPU (target < 0.6 s: {verdict})")
    if opts.importtime:
        print("slowest imports of simulate --requests 1000 (cumulative):")
        for name, seconds in slowest_imports(SIMULATE):
            print(f"  {seconds * 1e3:6.1f} ms  {name}")
    print(
        f"load average: {load:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
