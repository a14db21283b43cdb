"""Plain JSON values from library results, for every face (``--json``, the explorer's API)."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

import numpy as np


def plain_json(obj: Any) -> Any:
    """Enums by value, numpy arrays as lists and scalars as numbers, non-finite floats as null,
    dict keys as strings; everything else as it is."""
    if isinstance(obj, dict):
        return {str(plain_json(k)): plain_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain_json(v) for v in obj]
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, np.ndarray):
        return plain_json(obj.tolist())
    if isinstance(obj, np.generic):
        return plain_json(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
