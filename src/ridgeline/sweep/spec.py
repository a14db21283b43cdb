"""The sweep spec: the axes of a sweep (models, accelerators, deployments, policies and their
knobs, workloads), its SLOs, its objective and how the capacity search runs — read from TOML.

Example (every table but ``[sweep]``, ``[[workloads]]`` and ``[slo]`` is optional)::

    [sweep]
    name = "demo"
    models = ["llama-3.1-8b"]
    accelerators = ["h100-sxm", "mi300x"]
    chips = [1, 2]                     # tensor parallel over all chips; or [[deployments]]
    objective = "goodput_per_dollar"   # goodput | goodput_per_chip | _per_dollar | _per_watt
    mode = "calibrated"                # how steps are priced: calibrated (default) or ideal
    seed = 0

    [[dtypes]]                         # an axis: one variant per table (default: bf16)
    weight = "bf16"

    [[dtypes]]
    weight = "fp8"                     # kv defaults to fp8 beside fp8 weights, act to the weights'

    [[policies]]
    name = "chunked"
    max_num_batched_tokens = [512, 2048]   # a list is an axis: one variant per value

    [[workloads]]
    name = "conv"
    trace = "traces/splitwise_conv.csv"    # relative to this file
    duration_s = 60                        # rate x 60 s of arrivals per probe (or num_requests)

    [slo]
    ttft_s = 2.0
    tpot_s = 0.1
    percentile = 90

    [prices.h100-sxm]
    usd_per_chip_hour = 2.5
    watts_per_chip = 700

Errors name the field (``policies.0.block_size: ...``) or the TOML line.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ridgeline.errors import ConfigError
from ridgeline.sim.workload import Arrival, Lengths, WorkloadSpec
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.inputs import check_int, parse_toml, read_text, validation_message
from ridgeline.specs.limits import (
    MAX_BATCH,
    MAX_BLOCK_SIZE,
    MAX_CHIPS,
    MAX_CONTEXT,
    MAX_DRAFT_TOKENS,
    MAX_REQUESTS,
    MAX_SECONDS,
    MAX_SEED,
)
from ridgeline.sweep.kinds import Objective
from ridgeline.sweep.point import ChipSplit, Configuration, DataTypes, Policy, Slo


@dataclass(frozen=True, slots=True)
class Price:
    """What the user says one chip costs to run: dollars per hour and watts (either may be
    unknown)."""

    usd_per_chip_hour: float | None = None
    watts_per_chip: float | None = None


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How the capacity search brackets and bisects the rate of one configuration.

    Attributes:
        rate_start_rps: first rate probed.
        rel_tolerance: stop when the bracket hi/lo is within 1 + this.
        max_probes: simulations per configuration at most.
        rate_min_rps: below this a configuration counts as unable to meet the SLOs.
        rate_max_rps: the search does not probe above this.
        early_stop: stop a configuration once it cannot beat the best one on the objective.
        decide_early: stop a probe's simulation once its TTFT objective is certainly missed.
    """

    rate_start_rps: float = 1.0
    rel_tolerance: float = 0.05
    max_probes: int = 14
    rate_min_rps: float = 1e-3
    rate_max_rps: float = 1e5
    early_stop: bool = True
    decide_early: bool = True


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """A whole sweep: its axes (a cartesian product), SLOs, objective, search settings and the
    pricing mode of every probe (calibrated by default, ``analytic.pricing``)."""

    name: str
    models: tuple[str, ...]
    accelerators: tuple[str, ...]
    deployments: tuple[ChipSplit, ...]
    policies: tuple[Policy, ...]
    workloads: tuple[WorkloadSpec, ...]
    slo: Slo
    objective: Objective = Objective.GOODPUT
    prices: Mapping[str, Price] = field(default_factory=dict)
    search: SearchSettings = SearchSettings()
    seed: int = 0
    dtypes: tuple[DataTypes, ...] = (DataTypes(),)
    mode: CostMode = CostMode.CALIBRATED

    def configurations(self) -> tuple[Configuration, ...]:
        """Every combination of the axes, in a fixed order (model, accelerator, deployment,
        policy, workload, data types)."""
        grid = itertools.product(
            self.models,
            self.accelerators,
            self.deployments,
            self.policies,
            self.workloads,
            self.dtypes,
        )
        return tuple(Configuration(m, a, d, p, w, t, self.mode) for m, a, d, p, w, t in grid)

    def objective_factor(self, config: Configuration) -> float | None:
        """Multiplier from capacity (req/s) to the objective; ``None`` where it is unknown
        (no watts for that accelerator)."""
        price = self.prices.get(config.accelerator, Price())
        if self.objective is Objective.GOODPUT:
            return 1.0
        if self.objective is Objective.GOODPUT_PER_CHIP:
            return 1.0 / config.chips
        if self.objective is Objective.GOODPUT_PER_DOLLAR:
            assert price.usd_per_chip_hour is not None, "checked when the spec was read"
            return 3600.0 / (price.usd_per_chip_hour * config.chips)
        if price.watts_per_chip is None:
            return None
        return 1.0 / (price.watts_per_chip * config.chips)


# --- the file format (pydantic validates and names fields; converted to the dataclasses) ----


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PosInt = Annotated[int, Field(ge=1, le=MAX_CONTEXT)]
PosFloat = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
Chips = Annotated[int, Field(ge=1, le=MAX_CHIPS)]
BlockSize = Annotated[int, Field(ge=1, le=MAX_BLOCK_SIZE)]
NumSeqs = Annotated[int, Field(ge=1, le=MAX_BATCH)]
NumRequests = Annotated[int, Field(ge=2, le=MAX_REQUESTS)]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
MAX_PROBES = 1_000
SpecTokens = Annotated[int, Field(ge=0, le=MAX_DRAFT_TOKENS)]


class _DeploymentFile(_Strict):
    chips: Chips
    tensor_parallel: Chips | None = None
    pipeline_parallel: Chips = 1


class _PolicyFile(_Strict):
    name: Annotated[str, Field(min_length=1)]
    scheduler: str | list[str] = "fcfs"
    block_size: BlockSize | list[BlockSize] = 16
    max_num_batched_tokens: PosInt | list[PosInt] = 2048
    max_num_seqs: NumSeqs | list[NumSeqs] = 256
    long_prefill_token_threshold: PosInt | list[PosInt] | None = None
    enable_prefix_caching: bool | list[bool] = False
    num_speculative_tokens: SpecTokens | list[SpecTokens] = 0


class _WorkloadFile(_Strict):
    name: Annotated[str, Field(min_length=1)]
    num_requests: NumRequests | None = None
    duration_s: PosFloat | None = None
    max_requests: NumRequests = 20_000
    trace: str | None = None
    skip: Annotated[int, Field(ge=0, le=MAX_REQUESTS)] = 0
    arrival: Arrival | None = None
    prompt_tokens: PosInt | tuple[PosInt, PosInt] | None = None
    output_tokens: PosInt | tuple[PosInt, PosInt] | None = None


class _SweepTable(_Strict):
    name: str = "sweep"
    models: Annotated[list[str], Field(min_length=1)]
    accelerators: Annotated[list[str], Field(min_length=1)]
    chips: list[Chips] | None = None
    objective: Objective = Objective.GOODPUT
    mode: CostMode = CostMode.CALIBRATED
    seed: Seed = 0


class _DtypesFile(_Strict):
    weight: DType = DType.BF16
    kv: DType | None = None
    act: DType | None = None


class _SloFile(_Strict):
    ttft_s: PosFloat
    tpot_s: PosFloat
    percentile: Annotated[float, Field(gt=0, le=100)] = 90.0


class _SearchFile(_Strict):
    rate_start_rps: PosFloat = 1.0
    rel_tolerance: PosFloat = 0.05
    max_probes: Annotated[int, Field(ge=1, le=MAX_PROBES)] = 14
    rate_min_rps: PosFloat = 1e-3
    rate_max_rps: PosFloat = 1e5
    early_stop: bool = True
    decide_early: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> _SearchFile:
        if self.rate_min_rps > self.rate_max_rps:
            raise ValueError(
                f"rate_min_rps ({self.rate_min_rps:g}) is above rate_max_rps "
                f"({self.rate_max_rps:g})"
            )
        return self


class _PriceFile(_Strict):
    usd_per_chip_hour: PosFloat | None = None
    watts_per_chip: PosFloat | None = None


class _SpecFile(_Strict):
    sweep: _SweepTable
    deployments: list[_DeploymentFile] = []
    dtypes: Annotated[list[_DtypesFile], Field(min_length=1)] = [_DtypesFile()]
    policies: list[_PolicyFile] = [_PolicyFile(name="default")]
    workloads: Annotated[list[_WorkloadFile], Field(min_length=1)]
    slo: _SloFile
    search: _SearchFile = _SearchFile()
    prices: dict[str, _PriceFile] = {}


def _deployments(f: _SpecFile) -> tuple[ChipSplit, ...]:
    if f.deployments and f.sweep.chips:
        raise ConfigError("sweep.chips and [[deployments]]: give one or the other")
    if f.deployments:
        return tuple(
            ChipSplit(
                d.chips, d.tensor_parallel or d.chips // d.pipeline_parallel, d.pipeline_parallel
            )
            for d in f.deployments
        )
    return tuple(ChipSplit(c, c) for c in (f.sweep.chips or [1]))


_KNOBS = (
    "scheduler",
    "block_size",
    "max_num_batched_tokens",
    "max_num_seqs",
    "long_prefill_token_threshold",
    "enable_prefix_caching",
    "num_speculative_tokens",
)


def _policy_variants(p: _PolicyFile) -> list[Policy]:
    """One ``Policy`` per combination of the knobs given as lists; each variant's name says
    the knobs that vary (``chunked[max_num_batched_tokens=512]``)."""
    values = {k: getattr(p, k) for k in _KNOBS}
    axes = {k: v for k, v in values.items() if isinstance(v, list)}
    fixed = {k: v for k, v in values.items() if k not in axes}
    variants = []
    for combo in itertools.product(*axes.values()):
        chosen = dict(zip(axes, combo, strict=True))
        tag = ",".join(f"{k}={v}" for k, v in chosen.items())
        name = f"{p.name}[{tag}]" if tag else p.name
        variants.append(Policy(name=name, **fixed, **chosen))
    return variants


def _lengths(value: int | tuple[int, int] | None, field: str, name: str) -> Lengths:
    """``N`` tokens, or ``[low, high]``: every integer between with equal chances."""
    if value is None:
        raise ConfigError(f"workload '{name}': needs prompt_tokens and output_tokens ({field})")
    return Lengths.between(value, value) if isinstance(value, int) else Lengths.between(*value)


def _workload(w: _WorkloadFile, base: Path) -> WorkloadSpec:
    trace = str((base / w.trace).resolve()) if w.trace is not None else None
    if trace is None and w.arrival not in (None, Arrival.POISSON, Arrival.UNIFORM, Arrival.OFFLINE):
        raise ConfigError(
            f"workload '{w.name}': field arrival: poisson, uniform or offline (or a trace)"
        )
    if trace is not None and w.arrival not in (None, Arrival.TRACE):
        raise ConfigError(f"workload '{w.name}': a trace workload needs `trace`, only it")
    synthetic = (
        {}
        if trace
        else {
            "prompt": _lengths(w.prompt_tokens, "prompt_tokens", w.name),
            "output": _lengths(w.output_tokens, "output_tokens", w.name),
        }
    )
    return WorkloadSpec(
        name=w.name,
        arrival=Arrival.TRACE if trace else (w.arrival or Arrival.POISSON),
        num_requests=w.num_requests,
        trace_path=trace,
        skip=w.skip,
        duration_s=w.duration_s,
        max_requests=w.max_requests,
        **synthetic,  # type: ignore[arg-type]
    )


def _check_unique(spec: SweepSpec) -> None:
    """Two equal values on an axis would be one configuration twice (one key in the store)."""
    axes: dict[str, tuple[Any, ...]] = {
        "sweep.models": spec.models,
        "sweep.accelerators": spec.accelerators,
        "deployments": spec.deployments,
        "policies.name": tuple(p.name for p in spec.policies),
        "workloads.name": tuple(w.name for w in spec.workloads),
        "dtypes": tuple(t.dtypes for t in spec.dtypes),
    }
    for where, values in axes.items():
        seen = set()
        for v in values:
            if v in seen:
                raise ConfigError(f"{where}: {v} appears twice")
            seen.add(v)


def _check_prices(spec: SweepSpec) -> None:
    if spec.objective is not Objective.GOODPUT_PER_DOLLAR:
        return
    for acc in spec.accelerators:
        if spec.prices.get(acc, Price()).usd_per_chip_hour is None:
            raise ConfigError(
                f"prices.{acc}.usd_per_chip_hour: needed by objective goodput_per_dollar"
            )


def spec_from_dict(data: Mapping[str, Any], base: Path = Path()) -> SweepSpec:
    """Build a spec from parsed TOML; relative trace paths are resolved against ``base``.

    Raises:
        ConfigError: a field is missing, unknown or out of range (the message names it).
    """
    try:
        f = _SpecFile.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"sweep spec: {validation_message(e)}") from None
    spec = SweepSpec(
        name=f.sweep.name,
        models=tuple(f.sweep.models),
        accelerators=tuple(f.sweep.accelerators),
        deployments=_deployments(f),
        policies=tuple(v for p in f.policies for v in _policy_variants(p)),
        workloads=tuple(_workload(w, base) for w in f.workloads),
        slo=Slo(f.slo.ttft_s, f.slo.tpot_s, f.slo.percentile),
        objective=f.sweep.objective,
        prices={k: Price(v.usd_per_chip_hour, v.watts_per_chip) for k, v in f.prices.items()},
        search=SearchSettings(**f.search.model_dump()),
        seed=f.sweep.seed,
        dtypes=tuple(DataTypes(t.weight, t.kv, t.act) for t in f.dtypes),
        mode=f.sweep.mode,
    )
    _check_unique(spec)
    _check_prices(spec)
    return spec


def load_spec(path: str | Path) -> SweepSpec:
    """Read a sweep spec from a TOML file.

    Raises:
        ConfigError: the file is missing, is not TOML (the message gives the line), or a field
            is wrong.
    """
    path = Path(path)
    data = parse_toml(read_text(path, "sweep spec"), f"sweep spec {path}")
    try:
        return spec_from_dict(data, path.parent)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def with_overrides(spec: SweepSpec, **axes: Any) -> SweepSpec:
    """The spec with some fields replaced (CLI flags); ``None`` values are ignored."""
    changes = {k: v for k, v in axes.items() if v is not None}
    if "seed" in changes:
        check_int("seed", changes["seed"], 0, MAX_SEED)
    new = replace(spec, **changes)
    _check_unique(new)
    _check_prices(new)
    return new


def load_workload(path: str | Path, duration_s: float) -> WorkloadSpec:
    """One workload from a TOML file's ``[workload]`` table, in the form of a sweep spec's
    ``[[workloads]]`` entry (its trace path relative to the file); ``duration_s`` of arrivals
    per run unless it sets ``num_requests`` or ``duration_s`` itself.

    Raises:
        ConfigError: the file is missing, is not TOML, or a field is wrong (named).
    """
    path = Path(path)
    data = parse_toml(read_text(path, "workload file"), f"workload file {path}")
    table = data.get("workload")
    if not isinstance(table, dict):
        raise ConfigError(f"workload file {path}: needs a [workload] table")
    table = {"name": path.stem, **table}
    if "num_requests" not in table and "duration_s" not in table:
        table["duration_s"] = duration_s
    try:
        w = _WorkloadFile.model_validate(table)
    except ValidationError as e:
        raise ConfigError(f"workload file {path}: [workload] {validation_message(e)}") from None
    return _workload(w, path.parent)
