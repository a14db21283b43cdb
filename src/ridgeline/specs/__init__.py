"""specs: units, dtypes, accelerators and models as data.

Layer rule: ``specs`` imports only the standard library, numpy, pydantic and
``ridgeline.errors``; every other layer may import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.specs.lazy import lazy_exports

if TYPE_CHECKING:
    from ridgeline.specs.calibration import Calibration, CostMode, Term, family_names, get_family
    from ridgeline.specs.catalog import accelerator_names, get_accelerator, load_accelerator_file
    from ridgeline.specs.dtypes import DType
    from ridgeline.specs.hardware import (
        Accelerator,
        Interconnect,
        LocalMemory,
        ManagedBy,
        MemoryLevel,
        Parallelism,
        Scope,
        Topology,
    )
    from ridgeline.specs.hf_config import get_model, load_config_file, model_names, parse_config
    from ridgeline.specs.model import Attention, LayerSpec, MLASpec, ModelSpec, MoESpec
    from ridgeline.specs.params import ParamCounts, param_counts

__all__ = [
    "Accelerator",
    "Attention",
    "Calibration",
    "CostMode",
    "DType",
    "Interconnect",
    "LayerSpec",
    "LocalMemory",
    "MLASpec",
    "ManagedBy",
    "MemoryLevel",
    "ModelSpec",
    "MoESpec",
    "ParamCounts",
    "Parallelism",
    "Scope",
    "Term",
    "Topology",
    "accelerator_names",
    "family_names",
    "get_accelerator",
    "get_family",
    "get_model",
    "load_accelerator_file",
    "load_config_file",
    "model_names",
    "param_counts",
    "parse_config",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ridgeline.specs.calibration": (
            "Calibration",
            "CostMode",
            "Term",
            "family_names",
            "get_family",
        ),
        "ridgeline.specs.catalog": (
            "accelerator_names",
            "get_accelerator",
            "load_accelerator_file",
        ),
        "ridgeline.specs.dtypes": ("DType",),
        "ridgeline.specs.hardware": (
            "Accelerator",
            "Interconnect",
            "LocalMemory",
            "ManagedBy",
            "MemoryLevel",
            "Parallelism",
            "Scope",
            "Topology",
        ),
        "ridgeline.specs.hf_config": (
            "get_model",
            "load_config_file",
            "model_names",
            "parse_config",
        ),
        "ridgeline.specs.model": (
            "Attention",
            "LayerSpec",
            "MLASpec",
            "ModelSpec",
            "MoESpec",
        ),
        "ridgeline.specs.params": (
            "ParamCounts",
            "param_counts",
        ),
    },
)
