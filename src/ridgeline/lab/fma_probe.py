"""Two C++ probes of one core: the FMA rate it sustains and the clock it runs at.

- **FMA loop**: ``ACC`` independent chains of ``acc = acc · b + c`` in the widest vector registers
  the build targets (``-march=native``: AVX-512, else AVX2 + FMA). Twelve chains cover the FMA
  latency × pipes of every table entry (Zen 1: 5 cycles × 1 full-width FMA per cycle; Skylake-SP:
  4 × 2; Zen 4: 4 × 2), so the loop is bound by the FMA pipes alone, not by a chain's latency
  (Agner Fog, instruction tables). 2 FLOP per lane per FMA.
- **Clock**: a chain of dependent integer adds, one cycle each on every x86-64 core since the
  P6 (Agner Fog), so adds per second = cycles per second: the clock the core ran the loop at,
  boost included, which /proc/cpuinfo under a hypervisor does not show.

Both are timed in thread CPU time (``CLOCK_THREAD_CPUTIME_ID``): a thread the OS deschedules on a
shared machine is not slower, it is waiting. ``threads`` > 1 runs one loop per OpenMP thread and
adds their rates (each over its own CPU time).

The C++ is ``csrc/fma_probe.cpp``, built the way the engine's kernels are (``engine.kernel_build``:
``-O3 -march=native``, once per environment and build key, under the same build lock); without a
compiler the probe is ``None``.
"""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path
from types import ModuleType

from ridgeline.engine.kernel_build import (
    KernelBuildError,
    KernelTarget,
    ensure_built,
    import_built,
    plan,
)
from ridgeline.lab.compute_peak import CoreProbe

CSRC = Path(__file__).with_name("csrc")
FMA_ITERS = 20_000_000  # 12 × 20 M FMAs: ~0.1-0.3 s per timing on a 2-4 GHz core
CLOCK_ITERS = 50_000_000  # 400 M adds: ~0.1-0.2 s


@cache
def _module() -> ModuleType | None:
    """The built probe (compiled on first use), or None with a warning where it cannot be."""
    try:
        p = plan(KernelTarget.NATIVE, csrc=CSRC)
        ensure_built(p)
        return import_built(p)
    except KernelBuildError as e:
        warnings.warn(f"the lab's FMA probe is skipped: {e}", stacklevel=2)
        return None


def probe_core(threads: int = 1, repeats: int = 5) -> CoreProbe | None:
    """Best FMA rate and clock over ``repeats``; None without a compiler or FMA instructions."""
    mod = _module()
    if mod is None or mod.fma_lanes() == 0:
        return None
    rates = [sum(mod.fma_rates(FMA_ITERS, threads)) for _ in range(repeats)]
    clocks = [mod.add_chain_hz(CLOCK_ITERS) for _ in range(repeats)]
    return CoreProbe(
        threads=threads,
        fma_flops_per_s=max(rates),
        clock_hz=max(clocks) or None,
        lanes=int(mod.fma_lanes()),
    )
