"""Plain JSON values from library results, for every face (``--json``, the explorer's API)."""

from __future__ import annotations

import math
import sys
from enum import Enum
from typing import Any


def plain_json(obj: Any) -> Any:
    """Enums by value, numpy arrays as lists and scalars as numbers, non-finite floats as null,
    dict keys as strings; everything else as it is."""
    if isinstance(obj, dict):
        return {str(plain_json(k)): plain_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain_json(v) for v in obj]
    if isinstance(obj, Enum):
        return obj.value
    # NOTE: numpy is not imported here (a command's start-up): an object can only be one of
    # its arrays or scalars if numpy is already loaded
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return plain_json(obj.tolist())
    if np is not None and isinstance(obj, np.generic):
        return plain_json(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
