"""What ``plan`` searches: the layouts of one model on one accelerator.

A layout is everything a user sets when deploying a model, except how many copies run::

    Layout = accelerator x formats (weights, KV) x serving
        aggregated:     one instance kind   (TP x PP [x EP])      x knobs (token budget, max seqs)
        disaggregated:  x prefill instances (TP_p x PP_p) + y decode instances (TP_d x PP_d)

Copies of the layout (replicas of an aggregated instance, units xPyD of a disaggregated one, as
AIConfigurator counts them) are what carry the rate; ``plan.search`` finds how many.

The axes, each bounded so a plan stays seconds:

- formats: a weight format the chip computes natively (its catalog lists a peak for it: bf16,
  or fp16 where bf16 is absent; fp8; fp4), and the KV in 16 bits or, where the chip has an fp8
  peak, in fp8. Integer weight-only formats (int8, int4) dequantise to 16 bits; they are
  searched only when asked for.
- splits: tensor-parallel degrees that divide the heads within the chip's tensor-parallel domain
  (``analytic.deployment.tensor_parallel_degrees``), from the smallest that holds the weights and
  one longest request up to ``SPLIT_SPAN`` times its chips; pipeline stages only where no tensor
  split within the domain holds the model, or where the chip is deployed as a pipeline (Groq,
  Cerebras: ``interconnect.parallelism``).
- token budgets: ``TOKEN_BUDGETS``; max seqs is derived from the bound's batch (``plan.bound``).
- expert parallel: 1. NOTE: ``analytic.deployment.Deployment`` takes expert parallel equal
  to the tensor-parallel degree (vLLM's ``--enable-expert-parallel`` on one data-parallel rank)
  and prices it as the tensor-parallel split: a chip's E/ep whole experts are the same bytes and
  FLOPs as 1/tp of every expert, and the combine after the layer is the same all-reduce; the
  imbalance between chips is not modelled. An expert-parallel layout would be its tensor-parallel
  twin at the same price, so none is enumerated until the pricing tells them apart
  (``tests/plan/test_plan.py`` checks that they price alike). ``Split.expert`` carries a degree to
  the pricing and the engine command lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.analytic import Deployment, Dtypes
from ridgeline.analytic.deployment import tensor_parallel_degrees
from ridgeline.analytic.kv import kv_bytes_per_token, weights_bytes
from ridgeline.analytic.memory import MemoryRule, chip_budget, kv_pool_bytes, kv_share
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.fidelity.prediction import compute_dtype
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import ManagedBy, Parallelism

# vLLM's default token budget is 2048 (8192 for online serving on big GPUs), SGLang's chunked
# prefill 8192 (16384 on big GPUs): the powers of two around them.
TOKEN_BUDGETS = (1024, 2048, 4096, 8192, 16384)
SPLIT_SPAN = 8  # largest split searched, as a multiple of the smallest one's chips
PIPELINE_SPAN = 3  # pipeline depths searched past the shallowest that fits
MAX_STAGES = 4096  # a whole-graph compiler may cut layers across stages (Groq: 78 for 70B)
BLOCK_SIZE = 16  # tokens per KV block (vLLM's default)


class Serving(StrEnum):
    """One instance kind for everything, or prefill and decode pools."""

    AGGREGATED = "aggregated"
    DISAGGREGATED = "disaggregated"


@dataclass(frozen=True, slots=True)
class Formats:
    """Storage formats of the weights and the KV cache; matmuls run as ``compute_dtype`` says."""

    weight: DType
    kv: DType

    @property
    def dtypes(self) -> Dtypes:
        return Dtypes(weight=self.weight, act=compute_dtype(self.weight), kv=self.kv)

    @property
    def label(self) -> str:
        """``fp8, KV fp8``."""
        return f"{self.weight.value}, KV {self.kv.value}"


@dataclass(frozen=True, slots=True)
class Split:
    """How one instance spreads over chips: tensor, pipeline and expert parallel degrees."""

    tensor: int = 1
    pipeline: int = 1
    expert: int = 1

    @property
    def chips(self) -> int:
        return self.tensor * self.pipeline

    @property
    def label(self) -> str:
        """``TP4``, ``TP8 PP2``, ``TP8 EP8``."""
        parts = [f"TP{self.tensor}"]
        if self.pipeline > 1:
            parts.append(f"PP{self.pipeline}")
        if self.expert > 1:
            parts.append(f"EP{self.expert}")
        return " ".join(parts)

    def deployment(self, acc: Accelerator) -> Deployment:
        return Deployment(acc, self.tensor, self.pipeline, expert_parallel=self.expert)


@dataclass(frozen=True, slots=True)
class Knobs:
    """The scheduler's limits: sequences running at once and tokens per step."""

    max_num_seqs: int
    max_num_batched_tokens: int


@dataclass(frozen=True, slots=True)
class Layout:
    """One candidate deployment, less its number of copies (module docstring).

    Attributes:
        accelerator: catalog name.
        formats: weight and KV formats.
        decode: the aggregated instance's split, or the decode instance's.
        knobs: scheduler limits of every instance.
        prefill: the prefill instance's split (disaggregated only).
        num_prefill, num_decode: instances of each kind in one unit (disaggregated only).
    """

    accelerator: str
    formats: Formats
    decode: Split
    knobs: Knobs
    prefill: Split | None = None
    num_prefill: int = 0
    num_decode: int = 1

    @property
    def serving(self) -> Serving:
        return Serving.AGGREGATED if self.prefill is None else Serving.DISAGGREGATED

    @property
    def chips(self) -> int:
        """Chips of one copy (a replica, or a unit xPyD)."""
        own = self.num_decode * self.decode.chips
        return own + (0 if self.prefill is None else self.num_prefill * self.prefill.chips)

    @property
    def parallel_label(self) -> str:
        """``TP4`` (aggregated) or ``2xTP2 + 1xTP4`` (prefill + decode)."""
        if self.prefill is None:
            return self.decode.label
        return f"{self.num_prefill}x{self.prefill.label} + {self.num_decode}x{self.decode.label}"

    @property
    def key(self) -> str:
        """A unique, readable name: ``h200 fp8, KV fp8 disagg 6xTP1 + 1xTP2 seqs128 tok8192``."""
        kind = "agg" if self.prefill is None else "disagg"
        k = self.knobs
        return (
            f"{self.accelerator} {self.formats.label} {kind} {self.parallel_label} "
            f"seqs{k.max_num_seqs} tok{k.max_num_batched_tokens}"
        )


def kv_tokens(
    model: ModelSpec,
    acc: Accelerator,
    split: Split,
    formats: Formats,
    rule: MemoryRule | None = None,
) -> float:
    """KV tokens one instance holds under the one KV-pool rule (``analytic.memory``: each
    chip's share of the runtime's memory, less its weights and the profile step's reserve),
    0 where nothing is left."""
    dep = split.deployment(acc)
    try:
        pool = kv_pool_bytes(model, dep, formats.dtypes, rule)
    except CapacityError:
        return 0.0
    return pool / kv_bytes_per_token(model, formats.kv)


def _sixteen(acc: Accelerator) -> DType:
    """The chip's 16-bit format: bf16, or fp16 where its catalog lists no bf16 peak."""
    return DType.BF16 if DType.BF16 in acc.peak_flops_per_s else DType.FP16


def formats_of(
    acc: Accelerator,
    weights: Sequence[DType] | None = None,
    kvs: Sequence[DType] | None = None,
) -> list[Formats]:
    """Weight x KV formats searched on ``acc`` (module docstring); ``weights`` and ``kvs``
    replace the native ones (16-bit means the chip's own; fp8 and fp4 need the chip's peak).

    Raises:
        ConfigError: a format the chip has no peak for.
    """
    peaks, sixteen = acc.peak_flops_per_s, _sixteen(acc)
    native = [sixteen] + [d for d in (DType.FP8, DType.FP4) if d in peaks]
    chosen_w = native if weights is None else [_as_run(acc, d, "weight_dtypes") for d in weights]
    native_kv = [sixteen] + ([DType.FP8] if DType.FP8 in peaks else [])
    chosen_kv = native_kv if kvs is None else [_as_run(acc, d, "kv_dtypes") for d in kvs]
    if any(d not in (sixteen, DType.FP8) for d in chosen_kv):
        raise ConfigError("field kv_dtypes: the KV cache is searched in 16 bits or fp8")
    return [Formats(w, kv) for w in dict.fromkeys(chosen_w) for kv in dict.fromkeys(chosen_kv)]


def _as_run(acc: Accelerator, d: DType, field: str) -> DType:
    """``d`` as ``acc`` runs it: 16-bit formats as the chip's own; fp8 and fp4 only with a peak."""
    if d in (DType.BF16, DType.FP16):
        return _sixteen(acc)
    if d in (DType.FP8, DType.FP4) and d not in acc.peak_flops_per_s:
        raise ConfigError(f"field {field}: {acc.name} has no {d.value} peak in its catalog file")
    if d is DType.FP32:
        raise ConfigError(f"field {field}: fp32 is not a serving format")
    return d


def splits_of(
    model: ModelSpec, acc: Accelerator, formats: Formats, longest_tokens: int, max_chips: int
) -> list[Split]:
    """Splits of one instance that hold the weights and one request of ``longest_tokens``
    (module docstring), at most ``max_chips`` chips each."""
    degrees = [d for d in tensor_parallel_degrees(model, acc) if d <= max_chips]
    fitting = [
        Split(tp) for tp in degrees if kv_tokens(model, acc, Split(tp), formats) >= longest_tokens
    ]
    pipeline = acc.interconnect is not None and (
        acc.interconnect.parallelism is Parallelism.PIPELINE or not fitting
    )
    if pipeline:
        fitting += _pipelines(model, acc, formats, longest_tokens, degrees, max_chips)
    if not fitting:
        return []
    least = min(s.chips for s in fitting)
    return [s for s in fitting if s.chips <= SPLIT_SPAN * least]


def _pipelines(
    model: ModelSpec,
    acc: Accelerator,
    formats: Formats,
    longest_tokens: int,
    degrees: Sequence[int],
    max_chips: int,
) -> list[Split]:
    """Per tensor-parallel degree, the shallowest pipeline that fits and ``PIPELINE_SPAN``
    deeper ones (each a quarter deeper: more chips, more KV room)."""
    most = model.num_layers if acc.device.managed_by is not ManagedBy.COMPILER else MAX_STAGES
    out = []
    for tp in degrees:
        need = _stages_needed(model, acc, formats, tp, longest_tokens)
        if need is None or need > most or tp * need > max_chips:
            continue
        depths = {need}
        for _ in range(PIPELINE_SPAN):
            depths.add(min(most, math.ceil(max(depths) * 1.25)))
        out += [Split(tp, pp) for pp in sorted(depths) if pp > 1 and tp * pp <= max_chips]
    return out


def _stages_needed(
    model: ModelSpec, acc: Accelerator, formats: Formats, tp: int, longest_tokens: int
) -> int | None:
    """Fewest stages of ``tp`` chips holding the weights and ``longest_tokens`` of KV under
    the KV-pool rule: each chip keeps u·capacity − reserve − weights/(tp·pp) for KV, and the
    pp stages hold the tokens' KV × kv_share(tp) per chip; the reserve is read at pp = 1 (it
    does not depend on the stages)."""
    budget = chip_budget(model, Deployment(acc, tp), formats.dtypes)
    usable = budget.usable_bytes - budget.reserve_bytes
    weights = weights_bytes(model, formats.weight) / tp
    kv = longest_tokens * kv_bytes_per_token(model, formats.kv) * kv_share(model, tp)
    # pp·usable − weights ≥ kv  ⇔  pp ≥ (weights + kv) / usable
    return max(1, math.ceil((weights + kv) / usable)) if usable > 0 else None
