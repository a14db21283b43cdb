"""ridgeline: where the time and memory of LLM inference go, on each kind of accelerator, and why.

The Python API is the same set of functions the CLI calls; results are frozen dataclasses with
``to_dict()`` (and ``_repr_html_()`` in a notebook), sweeps return numpy arrays.

>>> import ridgeline as rl
>>> m, h100 = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
>>> round(h100.ridge_point(), 1)
295.3
>>> rl.kv_bytes_per_token(m)
131072.0

The names of ``ridgeline.analytic`` and ``ridgeline.specs`` load on first use (PEP 562), so
``import ridgeline`` and the CLI's help start without numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ridgeline.errors import CapacityError as CapacityError
from ridgeline.errors import ConfigError as ConfigError
from ridgeline.errors import RidgelineError as RidgelineError
from ridgeline.errors import UnknownNameError as UnknownNameError

if TYPE_CHECKING:
    from ridgeline.analytic import *  # noqa: F403
    from ridgeline.specs import *  # noqa: F403

__version__ = "0.1.0"
_LAZY = ("ridgeline.analytic", "ridgeline.specs")
_ERRORS = ["CapacityError", "ConfigError", "RidgelineError", "UnknownNameError"]


def _public() -> list[str]:
    names = [n for mod in _LAZY for n in importlib.import_module(mod).__all__]
    return [*names, *_ERRORS]


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return _public()
    for mod in _LAZY:
        module = importlib.import_module(mod)
        if name in module.__all__:
            return getattr(module, name)
    raise AttributeError(f"module 'ridgeline' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted({*globals(), *_public()})
