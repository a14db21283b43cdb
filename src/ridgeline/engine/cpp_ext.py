"""Compiling the engine's C++ kernels: one place for ``load_inline`` and its failure mode.

Each kernel module (``paged_kernel``, ``panel_gemm``, ``fused_ops``) holds its source and
compiles it on first use; the build is cached under ``TORCH_EXTENSIONS_DIR`` (default
``~/.cache/torch_extensions``), keyed by the module name, so a changed source takes a new name.
Without a compiler or headers the engine keeps its torch path, and says so once.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

OPENMP = ("-fopenmp",)  # at::parallel_for follows torch.set_num_threads through OpenMP


def compile_inline(
    name: str,
    source: str,
    functions: Sequence[str],
    cflags: Sequence[str],
    ldflags: Sequence[str] = (),
    fallback: str = "",
    verbose: bool = False,
) -> Any | None:
    """The compiled module ``name``, or None, with a warning naming ``fallback``, if it fails."""
    try:
        from torch.utils.cpp_extension import load_inline

        return load_inline(
            name=name,
            cpp_sources=source,
            functions=list(functions),
            extra_cflags=["-O3", "-march=native", *cflags],
            extra_ldflags=list(ldflags),
            verbose=verbose,
        )
    except Exception as e:  # compiler missing, headers missing, build error
        instead = f"; {fallback}" if fallback else ""
        warnings.warn(f"{name} unavailable ({type(e).__name__}: {e}){instead}", stacklevel=3)
        return None
