"""The C++ the lab compiles before it measures, said out loud: what, with which flags, about how
long, and a line every ``HEARTBEAT_S`` while it compiles.

``lab calibrate`` times two compiled things on a CPU: the FMA and clock probe (``lab/csrc``,
``lab.fma_probe``) and the engine's packed GEMM (``engine/csrc``, ``engine.cpp_ext``). Each is
built once per environment (``engine.kernel_build``); a cold build is a minute or two of CPU,
and on a loaded 2-core machine it has taken over ten minutes of wall time. Building them here,
before the first measurement, keeps compile time out of every timing and tells the user what the
wait is for.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ridgeline.engine.kernel_build import (
    BuildPlan,
    KernelBuildError,
    KernelTarget,
    check_environment,
    ensure_built,
)
from ridgeline.engine.kernel_build import plan as build_plan

Say = Callable[[str], None]
HEARTBEAT_S = 20.0
# CPU seconds per translation unit of a cold build: measured 25 s for the FMA probe's one unit and
# 63 s for the engine's five (both including torch's headers) on a 2-vCPU AMD EPYC (Zen 1).
CPU_S_PER_UNIT = 20.0
LAB_CSRC = Path(__file__).with_name("csrc")


@dataclass(frozen=True, slots=True)
class Build:
    """One compiled thing the lab needs: what it is and its build plan."""

    what: str
    plan: BuildPlan

    @property
    def built(self) -> bool:
        return self.plan.marker.exists()


def lab_builds() -> tuple[Build, ...]:
    """The FMA and clock probe, and the engine's kernels (native for this CPU)."""
    return (
        Build("the lab's FMA and clock probe", build_plan(KernelTarget.NATIVE, csrc=LAB_CSRC)),
        Build("the engine's kernels (its packed GEMM)", build_plan(KernelTarget.NATIVE)),
    )


def load_average() -> float | None:
    """The 1-minute load average (None where the OS does not give one)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def announcement(b: Build) -> str:
    """What is about to compile and roughly how long it takes."""
    p = b.plan
    units = len(p.sources)
    load, cores = load_average(), os.cpu_count() or 1
    busy = f"load {load:.1f} on {cores} cores now" if load is not None else f"{cores} cores"
    return (
        f"compiling {b.what}: {units} C++ unit(s), {' '.join(p.flags)}, into {p.directory}; "
        f"about {units * CPU_S_PER_UNIT:.0f} s of CPU, longer in wall time on a busy machine "
        f"({busy}); once per environment"
    )


@contextmanager
def heartbeat(say: Say, what: str, every_s: float = HEARTBEAT_S) -> Iterator[None]:
    """Say ``still <what> (N s)`` every ``every_s`` seconds until the block ends."""
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(every_s):
            say(f"still {what} ({time.monotonic() - start:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def build_all(say: Say, builds: tuple[Build, ...] | None = None) -> list[str]:
    """Build what is not built yet, announcing each; returns what could not be built (the
    measurement that needs it is then skipped, as ``fma_probe`` and ``gemm_probe`` do).

    Raises:
        ConfigError: a build variable is wrong (checked before anything is announced).
    """
    check_environment()
    failed = []
    for b in builds if builds is not None else lab_builds():
        if b.built:
            continue
        say(announcement(b))
        try:
            with heartbeat(say, f"compiling {b.what}"):
                result = ensure_built(b.plan, progress=say)
        except KernelBuildError as e:
            say(f"could not compile {b.what}: {e}")
            failed.append(b.what)
            continue
        say(f"compiled {b.what} in {result.seconds:.0f} s")
    return failed
