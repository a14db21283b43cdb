"""Serving-engine profiles: how an engine schedules and what its host adds to every step, as data.

A profile is data over the one scheduler (``serving.Scheduler``), not a scheduler of its own
(docs/design.md, "Glossary": engine profile): its admission rule (a policy name), limits and their
defaults, chunked prefill, prefix caching, preemption, the KV block size and memory share, the
batch sizes its CUDA graphs cover, and the host work the cost model adds to a step:

======================  =========================================================================
term                    what it models
======================  =========================================================================
``step_s``              host time per step not hidden behind the GPU (scheduling, input
                        preparation, sampling, output handling)
``sequence_s``          host time per scheduled sequence per step (the same work, per request)
``request_s``           fixed time per request outside the engine core: the API server's
                        parsing and tokenisation and the first streamed chunk; it delays a
                        request's arrival at the scheduler, so TTFT and end-to-end latency carry it
``eager_layer_s``       time per layer a step pays when it does not run under a full CUDA graph
                        (a step with a prompt chunk runs piecewise graphs with attention outside
                        them; a batch beyond the largest captured size runs eagerly)
======================  =========================================================================

An engine's own kernels may reach other fractions of the hardware than the runs the
accelerator family was fitted on (TensorRT-LLM, gpt-fast): a profile's ``[kernels]`` table
states calibration terms (``specs.calibration.Term``: ``bandwidth_efficiency``,
``layer_latency_s``...) that stand in for the family's when steps run on this engine.

Each number in ``data/engines/<name>.toml`` carries a source: a line of the engine's code or
documentation, an estimate with its reasoning, or ``fitted on ...`` with the runs it was fitted
on (never the runs a check holds it to).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.specs.calibration import Calibration, Term
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.inputs import parse_toml, validation_message

GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class HostWork:
    """What the engine's host adds to a step and to a request (module docstring)."""

    step_s: float = 0.0
    sequence_s: float = 0.0
    request_s: float = 0.0
    eager_layer_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Limits:
    """Default ``max_num_batched_tokens`` and ``max_num_seqs`` on devices of at least
    ``min_device_bytes`` whose name contains none of ``exclude``."""

    max_num_batched_tokens: int
    max_num_seqs: int
    min_device_bytes: float = 0.0
    exclude: tuple[str, ...] = ()

    def applies(self, acc: Accelerator) -> bool:
        name = acc.name.lower()
        return acc.device_capacity_bytes >= self.min_device_bytes and not any(
            x in name for x in self.exclude
        )


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """A serving engine's scheduling rules and host costs (module docstring).

    Attributes:
        name: ``vllm``, ``trtllm``, ``generic``.
        policy: the admission rule, a ``serving.policies.PolicyKind`` name (``fcfs``: blocks on
            demand, preemption when they run out; ``reserve``: prompt and every output token
            reserved at admission, never evicted).
        preemption: ``recompute`` or ``swap``.
        chunked_prefill: prompts split over steps under the token budget.
        prefix_caching: cached prefix blocks reused across requests.
        async_scheduling: the next step scheduled as a step starts (``serving.lookahead``).
        block_size: tokens per KV block.
        memory_utilization: share of device memory for weights, activations and KV (vLLM's
            gpu_memory_utilization; None: the runtime's, ``analytic.memory``).
        limits: default limits, the first that applies to the device.
        long_prefill_token_threshold: cap on one prompt chunk (0: the budget).
        graph_batch_per_seq, graph_batch_cap: the largest batch a CUDA graph covers is
            min(graph_batch_per_seq x max_num_seqs, graph_batch_cap) (0: no graphs).
        host: host work per step, sequence and request.
        kernels: calibration terms of the engine's own kernels (module docstring).
        sources: source per field name (``kernels.<term>`` for the kernels).
    """

    name: str
    description: str
    policy: str
    preemption: str
    chunked_prefill: bool
    prefix_caching: bool
    block_size: int
    memory_utilization: float | None
    limits: tuple[Limits, ...]
    long_prefill_token_threshold: int = 0
    async_scheduling: bool = False
    graph_batch_per_seq: int = 0
    graph_batch_cap: int = 0
    host: HostWork = HostWork()
    kernels: Mapping[Term, float] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)

    def default_limits(self, acc: Accelerator) -> Limits:
        """The engine's default limits on ``acc`` (the first entry that applies)."""
        for lim in self.limits:
            if lim.applies(acc):
                return lim
        return self.limits[-1]

    def graph_max_batch(self, max_num_seqs: int) -> int:
        """The largest decode batch a full CUDA graph covers (0: none)."""
        return min(self.graph_batch_per_seq * max_num_seqs, self.graph_batch_cap)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Number(_Strict):
    value: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    source: Annotated[str, Field(min_length=1)]


class _Flag(_Strict):
    value: bool
    source: Annotated[str, Field(min_length=1)]


class _LimitsFile(_Strict):
    max_num_batched_tokens: Annotated[int, Field(ge=1)]
    max_num_seqs: Annotated[int, Field(ge=1)]
    min_device_gib: Annotated[float, Field(ge=0)] = 0.0
    exclude: list[str] = []
    source: Annotated[str, Field(min_length=1)]


class _HostFile(_Strict):
    step_s: _Number
    sequence_s: _Number
    request_s: _Number
    eager_layer_s: _Number


class _EngineFile(_Strict):
    name: Annotated[str, Field(min_length=1)]
    description: str
    policy: Annotated[str, Field(min_length=1)]
    preemption: Annotated[str, Field(min_length=1)]
    chunked_prefill: _Flag
    prefix_caching: _Flag
    block_size: _Number
    memory_utilization: _Number | None = None
    long_prefill_token_threshold: _Number | None = None
    async_scheduling: _Flag | None = None
    graph_batch_per_seq: _Number | None = None
    graph_batch_cap: _Number | None = None
    limits: Annotated[list[_LimitsFile], Field(min_length=1)]
    host: _HostFile
    kernels: dict[str, _Number] = {}


def _sourced(f: _EngineFile) -> dict[str, _Number | _Flag]:
    names = (
        "chunked_prefill",
        "prefix_caching",
        "block_size",
        "memory_utilization",
        "long_prefill_token_threshold",
        "async_scheduling",
        "graph_batch_per_seq",
        "graph_batch_cap",
    )
    out: dict[str, _Number | _Flag] = {n: getattr(f, n) for n in names if getattr(f, n)}
    out.update({f"host.{n}": getattr(f.host, n) for n in HostWork.__dataclass_fields__})
    out.update({f"kernels.{n}": v for n, v in f.kernels.items()})
    return out


def _kernels(f: _EngineFile, where: str) -> dict[Term, float]:
    out = {}
    for name, number in f.kernels.items():
        try:
            out[Term(name)] = number.value
        except ValueError:
            raise ConfigError(f"{where}: field kernels.{name}: not a calibration term") from None
    try:
        Calibration().with_values(out)  # its bounds: efficiencies in (0, 1], latencies >= 0
    except ConfigError as e:
        raise ConfigError(f"{where}: field kernels: {e}") from None
    return out


def _int(x: _Number | None) -> int:
    return 0 if x is None else int(x.value)


def parse_engine(data: dict[str, Any], where: str) -> EngineProfile:
    """Validate an engine file; raises ``ConfigError`` naming the field."""
    try:
        f = _EngineFile.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{where}: {validation_message(e)}") from None
    if f.memory_utilization is not None and not 0 < f.memory_utilization.value <= 1:
        raise ConfigError(f"{where}: field memory_utilization: must be in (0, 1]")
    if _int(f.block_size) < 1:
        raise ConfigError(f"{where}: field block_size: must be >= 1")
    limits = tuple(
        Limits(x.max_num_batched_tokens, x.max_num_seqs, x.min_device_gib * GIB, tuple(x.exclude))
        for x in f.limits
    )
    host = HostWork(**{n: getattr(f.host, n).value for n in HostWork.__dataclass_fields__})
    return EngineProfile(
        name=f.name,
        description=f.description,
        policy=f.policy,
        preemption=f.preemption,
        chunked_prefill=f.chunked_prefill.value,
        prefix_caching=f.prefix_caching.value,
        block_size=_int(f.block_size),
        memory_utilization=f.memory_utilization.value if f.memory_utilization else None,
        limits=limits,
        long_prefill_token_threshold=_int(f.long_prefill_token_threshold),
        async_scheduling=f.async_scheduling is not None and f.async_scheduling.value,
        graph_batch_per_seq=_int(f.graph_batch_per_seq),
        graph_batch_cap=_int(f.graph_batch_cap),
        host=host,
        kernels=_kernels(f, where),
        sources={k: v.source for k, v in _sourced(f).items()},
    )


@cache
def _engine_files() -> dict[str, str]:
    root = resources.files("ridgeline.data").joinpath("engines")
    return {e.name[:-5]: e.read_text() for e in root.iterdir() if e.name.endswith(".toml")}


def engine_names() -> list[str]:
    """Names of the shipped engine profiles."""
    return sorted(_engine_files())


@cache
def get_engine(name: str) -> EngineProfile:
    """A shipped engine profile by name (``vllm``, ``trtllm``, ``generic``)."""
    files = _engine_files()
    if name not in files:
        raise UnknownNameError("engine", name, files)
    where = f"engines/{name}.toml"
    return parse_engine(parse_toml(files[name], where), where)
