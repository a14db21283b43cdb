"""What one step of inference processes: phase, batch, context and the three dtypes."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.errors import ConfigError
from ridgeline.specs.dtypes import DType
from ridgeline.specs.limits import MAX_BATCH, MAX_CONTEXT

__all__ = ["MAX_BATCH", "MAX_CONTEXT", "Dtypes", "Phase", "Workload", "check_size"]


class Phase(StrEnum):
    PREFILL = "prefill"
    DECODE = "decode"


_STREAM_FORMATS = (DType.FP32, DType.BF16, DType.FP16)


@dataclass(frozen=True, slots=True)
class Dtypes:
    """Storage formats of weights, activations and the KV cache (bf16 by default).

    Matmuls run at the activation dtype's peak (weight-only quantisation dequantises on the fly);
    set ``act`` to fp8/int8 for W8A8.
    """

    weight: DType = DType.BF16
    act: DType = DType.BF16
    kv: DType = DType.BF16

    @property
    def compute(self) -> DType:
        return self.act

    @property
    def stream(self) -> DType:
        """The format of the residual stream between GEMMs: what norms, activation functions,
        attention and the tensor-parallel collectives read and write. 8- and 4-bit GEMMs
        quantise their inputs on the fly and write 16-bit outputs, so a quantised ``act``
        leaves the stream in bf16 (TensorRT-LLM's FP8 and NVFP4 recipes; vLLM's all-reduce runs
        in the model dtype)."""
        return self.act if self.act in _STREAM_FORMATS else DType.BF16

    @staticmethod
    def serving(weight: DType, kv: DType | None = None) -> Dtypes:
        """The formats a serving engine runs a ``weight`` checkpoint in: FP8/FP4 (and FP16)
        checkpoints run their matmuls in the same format (TensorRT-LLM's FP8 and NVFP4 recipes:
        W8A8, W4A4), integer weight-only formats dequantise to bf16 (AWQ, GPTQ); the KV cache is
        ``kv``, or FP8 beside FP8/FP4 weights and bf16 otherwise."""
        act = weight if weight in (DType.FP8, DType.FP4, DType.FP16) else DType.BF16
        low = weight in (DType.FP8, DType.FP4)
        return Dtypes(weight, act, kv or (DType.FP8 if low else DType.BF16))

    @property
    def label(self) -> str:
        """``bf16``, or the formats that differ: ``w fp8, a fp8, kv fp8``."""
        if self.weight == self.act == self.kv:
            return self.weight.value
        return f"w {self.weight.value}, a {self.act.value}, kv {self.kv.value}"


@dataclass(frozen=True, slots=True)
class Workload:
    """One step of a uniform batch.

    Decode: each of ``batch`` sequences adds one token and reads the KV of ``context_len`` cached
    tokens. Prefill: each sequence processes ``prompt_len`` new tokens (default: ``context_len``)
    on top of ``context_len - prompt_len`` cached ones (a later chunk of a chunked prefill).
    """

    phase: Phase
    batch: int
    context_len: int
    prompt_len: int | None = None
    dtypes: Dtypes = Dtypes()

    def __post_init__(self) -> None:
        check_size("batch", self.batch, 1, MAX_BATCH)
        low = 1 if self.phase is Phase.PREFILL else 0
        check_size("context", self.context_len, low, MAX_CONTEXT)
        if self.prompt_len is not None:
            check_size("prompt", self.prompt_len, 1, MAX_CONTEXT)
            if self.phase is Phase.PREFILL and self.prompt_len > self.context_len:
                raise ConfigError(
                    f"prompt ({self.prompt_len}) must not exceed context ({self.context_len})"
                )

    @property
    def new_tokens_per_seq(self) -> int:
        if self.phase is Phase.DECODE:
            return 1
        return self.prompt_len if self.prompt_len is not None else self.context_len

    @property
    def prior_tokens_per_seq(self) -> int:
        if self.phase is Phase.DECODE:
            return self.context_len
        return self.context_len - self.new_tokens_per_seq

    @property
    def num_new_tokens(self) -> int:
        return self.batch * self.new_tokens_per_seq


def check_size(field: str, value: int, low: int, high: int) -> None:
    """Raise ``ConfigError`` naming ``field`` unless ``low <= value <= high`` (an integer)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"field {field}: expected an integer, got {value!r}")
    if value < low:
        raise ConfigError(f"field {field}: must be at least {low}, got {value}")
    if value > high:
        raise ConfigError(f"field {field}: {value} is absurdly large (limit {high:,})")
