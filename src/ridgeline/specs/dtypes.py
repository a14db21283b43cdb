"""Numeric formats and their storage size."""

from __future__ import annotations

from enum import StrEnum

from ridgeline.errors import UnknownNameError


class DType(StrEnum):
    """A storage / compute format. ``bytes`` is the storage size of one element."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    FP4 = "fp4"

    @property
    def bytes(self) -> float:
        """Bytes per element (int4 and fp4 pack two elements per byte)."""
        return _BYTES[self]

    @property
    def bits(self) -> int:
        return int(_BYTES[self] * 8)

    @classmethod
    def parse(cls, name: str | DType) -> DType:
        """Parse a dtype name (case-insensitive; ``float16``/``half`` and friends accepted)."""
        if isinstance(name, DType):
            return name
        key = _ALIASES.get(name.strip().lower(), name.strip().lower())
        try:
            return cls(key)
        except ValueError:
            raise UnknownNameError("dtype", name, [d.value for d in cls]) from None


_BYTES: dict[DType, float] = {
    DType.FP32: 4.0,
    DType.BF16: 2.0,
    DType.FP16: 2.0,
    DType.FP8: 1.0,
    DType.INT8: 1.0,
    DType.INT4: 0.5,
    DType.FP4: 0.5,
}

_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}
