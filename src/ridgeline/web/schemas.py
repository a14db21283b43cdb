"""Request and response models of the explorer's API: every input validated, every bound stated.

A model or accelerator is named from the catalog (never a path: the server reads no file a client
names); an uploaded config.json travels inline as ``config`` and is parsed by
``ridgeline.specs.parse_config``. Sizes are capped below the library's own "absurd" limits so one
request stays cheap.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ridgeline.analytic import DEFAULT_ACCELERATORS, Dtypes, dataflow, tiling
from ridgeline.errors import RidgelineError
from ridgeline.specs import DType, accelerator_names, get_accelerator, model_names
from ridgeline.specs.calibration import CostMode

MAX_BATCH = 1_000_000
MAX_CONTEXT = 10_000_000
MAX_CONFIG_KEYS = 400  # a real config.json has tens of keys; a big one is not a config
MAX_COMPARE = 8

DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_ACCELERATOR = "h100-sxm"

ModelName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="a catalog model (see /api/models); ignored when config is given",
        json_schema_extra={"enum": model_names()},
    ),
]
AcceleratorName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="a catalog accelerator (see /api/accelerators)",
        json_schema_extra={"enum": accelerator_names()},
    ),
]
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["model_type"],
    "properties": {"model_type": {"type": "string", "minLength": 1, "maxLength": 200}},
    "maxProperties": MAX_CONFIG_KEYS,
}


def _has_model_type(config: dict[str, Any] | None) -> dict[str, Any] | None:
    if config is not None and not isinstance(config.get("model_type"), str):
        raise ValueError("a config.json names its model_type (a string)")
    return config


ConfigJson = Annotated[
    dict[str, Any] | None,
    Field(
        max_length=MAX_CONFIG_KEYS,
        description="an uploaded Hugging Face config.json (parsed offline); wins over model",
        json_schema_extra={"anyOf": [CONFIG_SCHEMA, {"type": "null"}]},
    ),
    AfterValidator(_has_model_type),
]


def _unsatisfiable(message: str) -> PydanticCustomError:
    """A rule across fields, which JSON Schema cannot state: its 422 has type unsatisfiable."""
    return PydanticCustomError("unsatisfiable", message)


class _Body(BaseModel):
    """Every body: no unknown field, no NaN or infinity (JSON has none; Python's parser does),
    and no true, false or string where the schema says number (pydantic's lax mode reads
    them as 1, 0 and the number written)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_or_strings_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool | str) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            kinds = get_args(annotation) or (annotation,)
            if {int, float} & set(kinds) and type(value) not in kinds:
                raise ValueError(f"expected a number, got {value!r}")
        return value


ModeField = Annotated[
    CostMode,
    Field(
        description="how steps are priced: calibrated (the expected time, the default) or "
        "ideal (the roofline: datasheet peaks, no latencies)"
    ),
]
MAX_CHIPS = 4096
Chips = Annotated[int, Field(ge=1, le=MAX_CHIPS)]
MemoryUtilization = Annotated[
    float | None,
    Field(
        gt=0.0,
        le=1.0,
        description="fraction of each chip's device memory for weights, reserve and KV (vLLM's "
        "gpu_memory_utilization; null: 0.9 under a runtime allocator, 1 under a compiler)",
    ),
]


class ModelBody(_Body):
    """A model: a catalog name, or an uploaded config.json with the name to show for it."""

    model: ModelName = DEFAULT_MODEL
    config: ConfigJson = None
    config_name: Annotated[str, Field(min_length=1, max_length=200)] = "uploaded"


class WorkloadBody(ModelBody):
    """A model on an accelerator, with the sizes of a prefill and a decode step."""

    accelerator: AcceleratorName = DEFAULT_ACCELERATOR
    batch: Annotated[int, Field(ge=1, le=MAX_BATCH, description="sequences in the batch")] = 1
    context: Annotated[
        int, Field(ge=0, le=MAX_CONTEXT, description="tokens cached per sequence at decode")
    ] = 4096
    prompt: Annotated[
        int, Field(ge=1, le=MAX_CONTEXT, description="prompt tokens per sequence at prefill")
    ] = 2048
    weight_dtype: DType = DType.BF16
    act_dtype: DType = DType.BF16
    kv_dtype: DType = DType.BF16
    mode: ModeField = CostMode.CALIBRATED

    def dtypes(self) -> Dtypes:
        return Dtypes(self.weight_dtype, self.act_dtype, self.kv_dtype)


class KvBody(WorkloadBody):
    """A workload, and what fits under the KV-pool rule on a deployment of the accelerator
    (``analytic.memory``: tensor_parallel and pipeline_parallel null: the smallest that holds
    the weights)."""

    # NOTE: at least 1 token: analytic.techniques divides by the KV of the context (0 at 0).
    context: Annotated[
        int, Field(ge=1, le=MAX_CONTEXT, description="tokens cached per sequence")
    ] = 4096
    memory_utilization: MemoryUtilization = None
    tensor_parallel: Chips | None = None
    pipeline_parallel: Chips | None = None


class CompareBody(WorkloadBody):
    """A workload on several accelerators (default: the five architectures of the course)."""

    accelerators: Annotated[list[AcceleratorName], Field(min_length=1, max_length=MAX_COMPARE)] = (
        list(DEFAULT_ACCELERATORS)
    )


class _Out(BaseModel):
    """A response: the fields named here are checked; the library's other fields pass through."""

    model_config = ConfigDict(extra="allow")


class ModelSummary(_Out):
    name: str
    family: str
    params: int
    active_params: int
    layers: int
    attention: str
    kv_bytes_per_token: float
    weights_bytes: float


class ModelList(_Out):
    models: list[ModelSummary]


class AcceleratorSummary(_Out):
    name: str
    kind: str
    device_level: str
    device_capacity_bytes: float
    device_bandwidth_bytes_per_s: float
    peak_flops_per_s: dict[str, float]
    ridge_point_flops_per_byte: float


class AcceleratorList(_Out):
    accelerators: list[AcceleratorSummary]


class StepOut(_Out):
    model: str
    accelerator: str
    phase: str
    bound: str
    arithmetic_intensity: float
    ridge_point_flops_per_byte: float
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    step_time_s: float
    ops: list[dict[str, Any]]


class RooflineOut(_Out):
    mode: CostMode
    prefill: StepOut
    decode: StepOut
    prefill_speed: dict[str, Any]  # ideal and calibrated (``analytic.speed.SpeedQuote``)
    decode_speed: dict[str, Any]


class KvOut(_Out):
    model: str
    kv_bytes_per_token: float
    kv_bytes: float
    weights_bytes: float
    crossover_context_tokens: int | None
    device_capacity_bytes: float
    capacity: dict[str, Any] | None
    capacity_error: str | None
    curve: dict[str, list[float]]


class QuestionsOut(_Out):
    mode: CostMode
    accelerator: str
    bound: str
    scarce: str
    reason: str
    roofline: dict[str, Any]
    expected: dict[str, Any]
    levels: list[dict[str, Any]]
    decode_reads: dict[str, Any]
    speed: dict[str, Any]


class CompareOut(_Out):
    mode: CostMode
    model: str
    rows: list[dict[str, Any]]


# ---- simulation (the serving simulator, ``ridgeline.sim``) ----------------------------------

MAX_SIM_REQUESTS = 1000
MAX_SIM_TOKENS = 1_000_000  # requests × (prompt + output)
MAX_SIM_SECONDS = 30.0


class SimulateBody(ModelBody):
    """A bounded serving simulation: fixed-length requests, Poisson arrivals (or all queued at
    t = 0: ``arrival`` offline) on one instance of a TP x PP deployment, priced in ``mode``.

    Larger runs belong to the CLI (``ridgeline simulate``); the explorer refuses them with a 422.
    """

    accelerator: AcceleratorName = DEFAULT_ACCELERATOR
    tensor_parallel: Chips = 1
    pipeline_parallel: Chips = 1
    arrival: Literal["poisson", "offline"] = "poisson"
    memory_utilization: MemoryUtilization = None
    mode: ModeField = CostMode.CALIBRATED
    num_requests: Annotated[int, Field(ge=1, json_schema_extra={"maximum": MAX_SIM_REQUESTS})] = 200
    rate_per_s: Annotated[float, Field(gt=0, le=10_000, description="mean arrivals per second")] = (
        10.0
    )
    prompt_len: Annotated[int, Field(ge=1, le=32_768)] = 512
    output_len: Annotated[int, Field(ge=1, le=8_192)] = 128
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0
    weight_dtype: DType = DType.BF16
    act_dtype: DType = DType.BF16
    kv_dtype: DType = DType.BF16

    @field_validator("num_requests")
    @classmethod
    def _bounded(cls, n: int) -> int:
        if n > MAX_SIM_REQUESTS:
            raise ValueError(
                f"{n:,} requests is more than the explorer runs ({MAX_SIM_REQUESTS:,}); "
                f"use 'ridgeline simulate -n {n}' for a run that size"
            )
        return n

    @model_validator(mode="after")
    def _bounded_tokens(self) -> SimulateBody:
        tokens = self.num_requests * (self.prompt_len + self.output_len)
        if tokens > MAX_SIM_TOKENS:
            raise _unsatisfiable(
                f"num_requests × (prompt_len + output_len) = {tokens:,} tokens is more than the "
                f"explorer simulates ({MAX_SIM_TOKENS:,}); use 'ridgeline simulate' instead"
            )
        return self

    def dtypes(self) -> Dtypes:
        return Dtypes(self.weight_dtype, self.act_dtype, self.kv_dtype)


class JobOut(_Out):
    id: str
    status: Literal["queued", "running", "done", "failed"]
    done: int
    total: int
    elapsed_s: float
    error: str | None
    result: dict[str, Any] | None


# ---- tiling and compiled schedules (``analytic.dataflow``, ``analytic.flash``) -----------------

MAX_SCHEDULE_TOKENS = 4096  # new tokens in the compiled step: compile time grows with them
MAX_SCHEDULE_BATCH = 1024
MAX_SCHEDULE_CONTEXT = 131_072


def _accelerators_with(check: Any) -> list[str]:
    """Catalog accelerators for which ``check`` raises nothing (the schema's enum)."""
    names = []
    for name in accelerator_names():
        try:
            check(get_accelerator(name))
            names.append(name)
        except RidgelineError:
            continue
    return names


ScratchpadName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="a catalog accelerator with a per-core scratchpad",
        json_schema_extra={"enum": _accelerators_with(tiling.scratchpad_level)},
    ),
]
ScheduleName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="a catalog accelerator whose cores a step can be compiled for",
        json_schema_extra={"enum": _accelerators_with(lambda a: dataflow.core_of(a, Dtypes()))},
    ),
]


class ScheduleBody(ModelBody):
    """One step compiled for a scratchpad accelerator (static bucket, double-buffered)."""

    accelerator: ScheduleName = "ibm-spyre"
    phase: Literal["decode", "prefill"] = "decode"
    batch: Annotated[int, Field(ge=1, le=MAX_SCHEDULE_BATCH)] = 1
    context: Annotated[
        int, Field(ge=1, le=MAX_SCHEDULE_CONTEXT, description="decode: cached; prefill: prompt")
    ] = 4096
    buffers: Annotated[int, Field(ge=1, le=4, description="1 single, 2 double buffering")] = 2
    weight_dtype: DType = DType.BF16
    act_dtype: DType = DType.BF16
    kv_dtype: DType = DType.BF16
    mode: ModeField = CostMode.CALIBRATED

    @model_validator(mode="after")
    def _bounded_tokens(self) -> ScheduleBody:
        tokens = self.batch * (self.context if self.phase == "prefill" else 1)
        if tokens > MAX_SCHEDULE_TOKENS:
            raise _unsatisfiable(
                f"a prefill of batch × context = {tokens:,} tokens is more than the explorer "
                f"compiles ({MAX_SCHEDULE_TOKENS:,}); use 'ridgeline schedule' instead"
            )
        return self

    def dtypes(self) -> Dtypes:
        return Dtypes(self.weight_dtype, self.act_dtype, self.kv_dtype)


class FlashBody(ModelBody):
    """FlashAttention traffic up to ``context`` on each accelerator's per-core scratchpad."""

    context: Annotated[int, Field(ge=1, le=MAX_CONTEXT)] = 32_768
    accelerators: Annotated[list[ScratchpadName], Field(min_length=1, max_length=MAX_COMPARE)] = [
        "h100-sxm",
        "tpu-v5e",
        "ibm-spyre",
    ]


class ScheduleOut(_Out):
    mode: CostMode
    model: str
    accelerator: str
    time_s: float
    roofline_time_s: float
    ops: list[dict[str, Any]]


class FlashOut(_Out):
    rows: list[dict[str, Any]]


# ---- KV management on the five architectures (``sim.kv_manage``) ----------------------------

MAX_KV_MANAGE_REQUESTS = 24  # 14 simulations per architecture: kept to seconds here
MAX_KV_MANAGE_LEN = 4096


class KvManageBody(ModelBody):
    """Who manages the KV cache on each architecture, and what the seven techniques change on a
    small shared-prefix trace (two simulations per technique; the CLI runs bigger ones)."""

    accelerators: Annotated[list[AcceleratorName], Field(min_length=1, max_length=5)] = [
        "h100-sxm",
        "tpu-v5e",
        "cerebras-wse3",
        "groq-lpu",
        "ibm-spyre",
    ]
    num_requests: Annotated[int, Field(ge=1, le=MAX_KV_MANAGE_REQUESTS)] = 12
    rate_per_s: Annotated[float, Field(gt=0, le=1000)] = 2.0
    prompt_len: Annotated[int, Field(ge=1, le=2048, description="mean prompt tokens")] = 256
    output_len: Annotated[int, Field(ge=1, le=256, description="mean output tokens")] = 64
    prefixes: Annotated[int, Field(ge=0, le=8, description="shared system prompts")] = 2
    prefix_len: Annotated[int, Field(ge=0, le=1024)] = 512
    max_model_len: Annotated[int, Field(ge=64, le=MAX_KV_MANAGE_LEN)] = 2048
    mode: ModeField = CostMode.CALIBRATED


class KvManageOut(_Out):
    mode: CostMode
    model: str
    workload: str
    rows: list[dict[str, Any]]


# ---- plan (``ridgeline.plan``): the cheapest deployment that meets latency targets ----------

MAX_PLAN_ACCELERATORS = 4  # simulations grow with them; the CLI plans over the whole catalog
MAX_PLAN_SECONDS = 30.0  # seconds of arrivals per simulation
MAX_PLAN_SIMULATED = 3
MAX_PLAN_REQUESTS = 1_000  # requests of one simulation at most


class PlanBody(ModelBody):
    """A bounded plan: fixed-length requests at a rate, TTFT and TPOT targets at a percentile,
    over a few accelerators (``ridgeline plan --all`` searches the whole catalog)."""

    accelerators: Annotated[
        list[AcceleratorName], Field(min_length=1, max_length=MAX_PLAN_ACCELERATORS)
    ] = ["h100-sxm", "h200"]
    isl: Annotated[int, Field(ge=1, le=32_768, description="prompt tokens per request")] = 1024
    osl: Annotated[int, Field(ge=1, le=8_192, description="output tokens per request")] = 128
    rate_rps: Annotated[float, Field(gt=0, le=1_000, description="requests per second")] = 4.0
    ttft_s: Annotated[float, Field(gt=0, le=600, description="time to first token target")] = 1.0
    tpot_s: Annotated[float, Field(gt=0, le=60, description="time per output token target")] = 0.05
    percentile: Annotated[float, Field(gt=0, le=100, description="of both targets")] = 90.0
    max_chips: Annotated[int, Field(ge=1, le=100_000)] = 64
    weight_dtypes: Annotated[list[DType], Field(min_length=1, max_length=4)] | None = None
    seconds: Annotated[
        float, Field(gt=0, le=MAX_PLAN_SECONDS, description="arrivals per simulation")
    ] = 20.0
    simulated: Annotated[int, Field(ge=1, le=MAX_PLAN_SIMULATED)] = 2


class PlanOut(_Out):
    model: str
    verdict: str
    mode: str
    winner: dict[str, Any] | None
    front: list[dict[str, Any]]
    accelerators: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    commands: list[dict[str, Any]]
