"""ridgeline: where the time and memory of LLM inference go, on each kind of accelerator, and why.

The Python API is the same set of functions the CLI calls; results are frozen dataclasses with
``to_dict()``, sweeps return numpy arrays.

>>> import ridgeline as rl
>>> m, h100 = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
>>> round(h100.ridge_point(), 1)
295.3
>>> rl.kv_bytes_per_token(m)
131072.0
"""

from typing import TYPE_CHECKING

# the two packages load none of their modules until a name is used (``specs.lazy``)
from ridgeline.errors import CapacityError as CapacityError
from ridgeline.errors import ConfigError as ConfigError
from ridgeline.errors import RidgelineError as RidgelineError
from ridgeline.errors import UnknownNameError as UnknownNameError
from ridgeline.specs.lazy import lazy_exports

if TYPE_CHECKING:
    from ridgeline.analytic import *  # noqa: F403
    from ridgeline.specs import *  # noqa: F403

__version__ = "0.1.0"
__getattr__, __dir__ = lazy_exports(__name__, __file__)
