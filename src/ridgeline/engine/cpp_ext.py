"""Loading the engine's compiled kernels: one place for the build and its failure mode.

``kernel_build`` compiles ``engine/csrc`` into one module per target, once per environment.
The kernel wrappers (``paged_kernel``, ``panel_gemm``, ``fused_ops``, ``fused_layer``) take
their functions from it. Without a compiler or headers the engine keeps its torch paths and
says so once per process; a live build lock held past its bound is an error, never a hang.
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


@cache
def _load(target: KernelTarget, root: Path | None) -> ModuleType | KernelBuildError:
    try:
        p = plan(target, root)
        ensure_built(p)
        return import_built(p)
    except KernelBuildError as e:  # BuildLockTimeout is no KernelBuildError: it propagates
        return e


def load_kernels(
    target: KernelTarget | str = KernelTarget.NATIVE, fallback: str = "", root: Path | None = None
) -> ModuleType | None:
    """The compiled kernels of ``target`` (built on first use), or None, with a warning naming
    ``fallback``, where they cannot be built. One attempt per process and target."""
    loaded = _load(KernelTarget.parse(target), root)
    if isinstance(loaded, KernelBuildError):
        instead = f"; {fallback}" if fallback else ""
        warnings.warn(f"the engine's C++ kernels are unavailable ({loaded}){instead}", stacklevel=3)
        return None
    return loaded
