"""specs: units, dtypes, accelerators and models as data.

Layer rule: ``specs`` imports only the standard library, numpy, pydantic and
``ridgeline.errors``; every other layer may import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.specs.lazy import lazy_exports

if TYPE_CHECKING:
    from ridgeline.specs.calibration import Calibration as Calibration
    from ridgeline.specs.calibration import Term as Term
    from ridgeline.specs.calibration import family_names as family_names
    from ridgeline.specs.calibration import get_family as get_family
    from ridgeline.specs.catalog import accelerator_names as accelerator_names
    from ridgeline.specs.catalog import get_accelerator as get_accelerator
    from ridgeline.specs.catalog import load_accelerator_file as load_accelerator_file
    from ridgeline.specs.cost_mode import CostMode as CostMode
    from ridgeline.specs.dtypes import DType as DType
    from ridgeline.specs.hardware import Accelerator as Accelerator
    from ridgeline.specs.hardware import Interconnect as Interconnect
    from ridgeline.specs.hardware import LocalMemory as LocalMemory
    from ridgeline.specs.hardware import ManagedBy as ManagedBy
    from ridgeline.specs.hardware import MemoryLevel as MemoryLevel
    from ridgeline.specs.hardware import Parallelism as Parallelism
    from ridgeline.specs.hardware import Scope as Scope
    from ridgeline.specs.hardware import Topology as Topology
    from ridgeline.specs.hf_config import get_model as get_model
    from ridgeline.specs.hf_config import load_config_file as load_config_file
    from ridgeline.specs.hf_config import model_names as model_names
    from ridgeline.specs.hf_config import parse_config as parse_config
    from ridgeline.specs.model import Attention as Attention
    from ridgeline.specs.model import LayerSpec as LayerSpec
    from ridgeline.specs.model import MLASpec as MLASpec
    from ridgeline.specs.model import ModelSpec as ModelSpec
    from ridgeline.specs.model import MoESpec as MoESpec
    from ridgeline.specs.params import ParamCounts as ParamCounts
    from ridgeline.specs.params import param_counts as param_counts

__getattr__, __dir__ = lazy_exports(__name__, __file__)
