"""The option groups of ``ridgeline simulate`` (``cli.options.grouped``): workload, serving,
cost model, speculative decoding and KV topology, SLOs, output. Each group maps its options
to the library's configuration with one method; the rules live in the library
(``step_token_budget``, ``workload_of_kind``, ``parse_tiers``, ``parse_disagg``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from ridgeline.cli.common import mode_of, writable_dir
from ridgeline.errors import ConfigError
from ridgeline.serving.eviction import EvictionKind
from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.scheduler import PreemptionMode
from ridgeline.sim.kinds import Questions, WorkloadKind
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_BYTES_PER_S, MAX_CONTEXT, MAX_REQUESTS, MAX_SECONDS

if TYPE_CHECKING:  # loaded when a command runs, not for its --help (start-up)
    from ridgeline.analytic.pricing import Pricing
    from ridgeline.serving.spec_decode import SpecDecodeConfig
    from ridgeline.sim import SLO, RequestSpec
    from ridgeline.sim.engines import ServingSetup
    from ridgeline.sim.static_variants import ShapeOptions
    from ridgeline.specs.hardware import Accelerator


def _opt(name: str, help: str, panel: str) -> typer.models.OptionInfo:
    return typer.Option(name, help=help, rich_help_panel=panel)


_W, _S, _C, _T, _O = "Workload", "Serving", "Cost model", "Speculation and KV topology", "Output"
DEFAULT_REQUESTS = 1000
_X = "Compiled shapes (Spyre, TPU)"


def _variant_names(text: str | None) -> str | None:
    if text is not None and not any(c.strip() for c in text.split(",")):
        raise typer.BadParameter(f"no variant named in {text!r}")
    return text


@dataclass(frozen=True, slots=True)
class WorkloadOptions:
    """What arrives: a synthetic workload or the first lines of a trace."""

    workload: Annotated[WorkloadKind, _opt("--workload", "synthetic workload kind", _W)] = (
        WorkloadKind.POISSON
    )
    rate: Annotated[float, _opt("--rate", "arrivals per second", _W)] = 4.0
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests",
            "-n",
            help="requests (default 1000; a trace or profile: all, or its first N)",
            rich_help_panel=_W,
        ),
    ] = None
    prompt: Annotated[str, _opt("--prompt", "prompt lengths DIST:MEAN[:P]", _W)] = "lognormal:1000"
    output: Annotated[str, _opt("--output", "output lengths DIST:MEAN[:P]", _W)] = "lognormal:200"
    cv: Annotated[float, _opt("--cv", "gamma arrivals: coefficient of variation", _W)] = 2.0
    prefixes: Annotated[int, _opt("--prefixes", "shared system prompts", _W)] = 0
    prefix_len: Annotated[int, _opt("--prefix-len", "tokens per system prompt", _W)] = 0
    turns: Annotated[int, _opt("--turns", "turns per conversation", _W)] = 1
    trace: Annotated[
        str | None,
        _opt(
            "--trace",
            "JSONL or CSV trace, or a shipped sample: splitwise_conv, splitwise_code, vidur_conv_4qps_1k",
            _W,
        ),
    ] = None
    profile: Annotated[
        str | None,
        _opt(
            "--profile", "inference-perf profile (JSON or YAML): stages, shared-prefix groups", _W
        ),
    ] = None
    questions: Annotated[
        Questions,
        _opt("--questions", "profile prompts: cycled as inference-perf sends them, or unique", _W),
    ] = Questions.CYCLED
    concurrency: Annotated[
        int | None,
        _opt(
            "--concurrency",
            "a closed loop of N clients: each sends its next request when its last ends",
            _W,
        ),
    ] = None
    seed: Annotated[int, _opt("--seed", "workload and acceptance seed", _W)] = 0

    def __post_init__(self) -> None:  # None is "all" (a trace or profile) or the default
        if self.requests is not None:
            check_int("requests", self.requests, 1, MAX_REQUESTS)

    def requests_to_serve(self) -> list[RequestSpec]:
        """The requests: a trace's (all of them, or its first ``requests`` lines), an
        inference-perf profile's, or the synthetic workload's (its options are checked either
        way: a bad ``--rate`` beside ``--trace`` is refused, not ignored)."""
        from ridgeline.data import trace_path
        from ridgeline.sim import WorkloadSpec, generate, load_trace, parse_lengths
        from ridgeline.sim.inference_perf import load_profile, profile_requests
        from ridgeline.sim.presets import workload_of_kind

        if self.trace and self.profile:
            raise ConfigError("--trace and --profile: give one workload")
        spec = WorkloadSpec(
            num_requests=self.requests or DEFAULT_REQUESTS,
            rate_per_s=self.rate,
            cv=self.cv,
            prompt=parse_lengths(self.prompt, 512),
            output=parse_lengths(self.output, 128),
            num_prefixes=self.prefixes,
            prefix_len=self.prefix_len,
            turns=self.turns,
            seed=self.seed,
        )
        if self.trace:
            return load_trace(trace_path(self.trace), limit=self.requests)
        if self.profile:
            reqs = profile_requests(load_profile(self.profile), self.seed, self.questions)
            return reqs[: self.requests] if self.requests else reqs
        return generate(workload_of_kind(self.workload, spec))


@dataclass(frozen=True, slots=True)
class ServingOptions:
    """Which engine serves, how it schedules and where the KV lives (unset: the engine's)."""

    engine: Annotated[str, _opt("--engine", "engine profile: generic, vllm, trtllm", _S)] = (
        "generic"
    )
    policy: Annotated[PolicyKind | None, _opt("--policy", "queue order and admission", _S)] = None
    prefix_caching: Annotated[
        bool | None,
        typer.Option(
            "--prefix-caching/--no-prefix-caching", help="reuse cached prefixes", rich_help_panel=_S
        ),
    ] = None
    chunk: Annotated[int | None, _opt("--chunk", "token budget per step; 0: no chunking", _S)] = (
        None
    )
    max_seqs: Annotated[int | None, _opt("--max-seqs", "most running requests", _S)] = None
    max_model_len: Annotated[
        int, _opt("--max-model-len", "longest request (0: the model's context)", _S)
    ] = 0
    block_size: Annotated[int | None, _opt("--block-size", "tokens per KV block", _S)] = None
    eviction: Annotated[EvictionKind, _opt("--eviction", "cached-block eviction", _S)] = (
        EvictionKind.LRU
    )
    memory_utilization: Annotated[
        float | None,
        _opt(
            "--memory-utilization",
            "fraction of each chip's memory for weights, reserve and KV "
            "(vLLM's gpu_memory_utilization; default: the engine's)",
            _S,
        ),
    ] = None
    kv_blocks: Annotated[
        int | None, _opt("--kv-blocks", "KV blocks of the pool (as the engine logged them)", _S)
    ] = None
    cpu_kv_blocks: Annotated[
        int, _opt("--cpu-kv-blocks", "KV blocks offloaded to host memory (vLLM CPU offload)", _S)
    ] = 0
    preemption: Annotated[PreemptionMode | None, _opt("--preemption", "recompute or swap", _S)] = (
        None
    )

    def __post_init__(self) -> None:  # None: the engine's; 0: no chunking
        if self.chunk is not None:
            check_int("max_num_batched_tokens", self.chunk, 0, MAX_CONTEXT)

    def setup(self) -> ServingSetup:
        """The overrides of the engine profile's scheduling (``sim.engines``)."""
        from ridgeline.sim.engines import ServingSetup

        return ServingSetup(
            max_num_batched_tokens=self.chunk or None,
            max_num_seqs=self.max_seqs,
            max_model_len=self.max_model_len or None,
            num_blocks=self.kv_blocks,
            cpu_kv_blocks=self.cpu_kv_blocks,
            prefix_caching=self.prefix_caching,
            memory_utilization=self.memory_utilization,
            chunked_prefill=None if self.chunk is None else self.chunk > 0,
            policy=self.policy,
            preemption=self.preemption,
            block_size=self.block_size,
        )


@dataclass(frozen=True, slots=True)
class CostOptions:
    """How steps are priced (``analytic.pricing``): the calibrated expectation (default) or the
    ideal roofline, optionally scaled by the user's efficiencies; on which deployment of the
    accelerator; at which data types."""

    ideal: Annotated[
        bool,
        _opt(
            "--ideal",
            "price on the ideal roofline (datasheet peaks, no latencies) "
            "instead of the calibrated expectation",
            _C,
        ),
    ] = False
    bw_eff: Annotated[float, _opt("--bw-eff", "with --ideal: fraction of peak bandwidth", _C)] = 1.0
    compute_eff: Annotated[
        float, _opt("--compute-eff", "with --ideal: fraction of peak FLOP/s", _C)
    ] = 1.0
    overhead: Annotated[float, _opt("--overhead", "with --ideal: fixed seconds per step", _C)] = 0.0
    tp: Annotated[int, _opt("--tp", "tensor-parallel chips per instance", _C)] = 1
    pp: Annotated[int, _opt("--pp", "pipeline stages per instance", _C)] = 1
    ep: Annotated[int, _opt("--ep", "expert-parallel chips (the tensor-parallel group's)", _C)] = 1
    weight_dtype: Annotated[str, _opt("--weight-dtype", "bf16, fp16, fp8, int8, int4, fp4", _C)] = (
        "bf16"
    )
    kv_dtype: Annotated[
        str | None,
        _opt("--kv-dtype", "KV format (default: fp8 with fp8/fp4 weights, else bf16)", _C),
    ] = None

    def pricing(self, acc: Accelerator) -> Pricing:
        """The one pricing of the run (``Pricing.of``; efficiencies need ``--ideal``)."""
        from ridgeline.analytic.deployment import Deployment
        from ridgeline.analytic.pricing import Efficiency, Pricing
        from ridgeline.analytic.workload import Dtypes
        from ridgeline.specs.dtypes import DType

        kv = DType.parse(self.kv_dtype) if self.kv_dtype else None
        dt = Dtypes.serving(DType.parse(self.weight_dtype), kv)
        eff = Efficiency(self.bw_eff, self.compute_eff, self.overhead)
        dep = Deployment(acc, self.tp, self.pp, expert_parallel=self.ep)
        return Pricing.of(dep, mode_of(self.ideal), dt, eff)


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    """Speculative decoding, KV tiers below the device, prefill/decode disaggregation."""

    spec_k: Annotated[int, _opt("--spec-k", "draft tokens per step (0: off)", _T)] = 0
    spec_accept: Annotated[
        float,
        typer.Option(
            "--spec-accept", min=0.0, max=1.0, help="draft acceptance rate", rich_help_panel=_T
        ),
    ] = 0.7
    spec_draft: Annotated[str | None, _opt("--spec-draft", "draft model (cost)", _T)] = None
    tiers: Annotated[str | None, _opt("--tiers", "host | NAME:BYTES:BW[:LAT],...", _T)] = None
    disagg: Annotated[str | None, _opt("--disagg", "P:D prefill:decode instances", _T)] = None
    link_bw: Annotated[float, _opt("--link-bw", "disagg link bytes/s", _T)] = 50e9
    link_latency: Annotated[float, _opt("--link-latency", "disagg link latency s", _T)] = 1e-3

    def __post_init__(self) -> None:  # checked with or without --disagg (else ignored)
        check_real("link_bw", self.link_bw, 0, MAX_BYTES_PER_S, low_open=True)
        check_real("link_latency", self.link_latency, 0, MAX_SECONDS)

    def spec(self) -> SpecDecodeConfig | None:
        from ridgeline.serving.spec_decode import SpecDecodeConfig

        return SpecDecodeConfig(self.spec_k, self.spec_accept) if self.spec_k else None


@dataclass(frozen=True, slots=True)
class ShapeGroupOptions:
    """The compiled shapes of a compiled-schedule accelerator: prefill chunk, compile cost."""

    prefill_chunk: Annotated[int, _opt("--prefill-chunk", "compiled prefill tokens", _X)] = 512
    compile_s: Annotated[float, _opt("--compile-s", "seconds to compile a program", _X)] = 20.0
    compile_budget: Annotated[
        float, _opt("--compile-budget", "compile seconds the deployment affords", _X)
    ] = 1200.0
    recompile: Annotated[
        bool, _opt("--recompile", "compile a missing bucket instead of refusing", _X)
    ] = False

    def __post_init__(self) -> None:  # checked on every accelerator (else ignored off Spyre/TPU)
        check_int("prefill_chunk", self.prefill_chunk, 1, MAX_CONTEXT)
        check_real("compile_s", self.compile_s, 0, MAX_SECONDS, low_open=True)
        check_real("compile_budget", self.compile_budget, 0, MAX_SECONDS)

    def shape_options(self) -> ShapeOptions:
        from ridgeline.sim.buckets import CompileBudget
        from ridgeline.sim.static_variants import ShapeOptions

        budget = CompileBudget(self.compile_s, self.compile_budget)
        return ShapeOptions(budget, self.prefill_chunk, recompile=self.recompile)


@dataclass(frozen=True, slots=True)
class OutputOptions:
    """Goodput SLOs, the variants compared, and what is written."""

    slo_ttft: Annotated[float, _opt("--slo-ttft", "TTFT SLO (s) for goodput", _O)] = 2.0
    slo_tpot: Annotated[float, _opt("--slo-tpot", "TPOT SLO (s) for goodput", _O)] = 0.1
    configs: Annotated[
        str | None,
        typer.Option(
            "--configs",
            help="compare: variants (default: by accelerator)",
            callback=_variant_names,
            rich_help_panel=_O,
        ),
    ] = None
    json_out: Annotated[
        bool, _opt("--json", "print JSON (stable schema) instead of tables", _O)
    ] = False
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot",
            help="write KV-use and latency-CDF PNGs here",
            callback=writable_dir,
            rich_help_panel=_O,
        ),
    ] = None

    def slo(self) -> SLO:
        from ridgeline.sim import SLO

        return SLO(self.slo_ttft, self.slo_tpot)

    def variants(self, hw: Accelerator) -> list[str]:
        """The named variants, or the default set of ``hw``'s kind (the compiled-shape
        techniques on a compiled-schedule accelerator)."""
        from ridgeline.sim.compiled import is_compiled_schedule
        from ridgeline.sim.static_variants import COMPILED_DEFAULT
        from ridgeline.sim.variants import DEFAULT_VARIANTS

        if self.configs is None:
            return list(COMPILED_DEFAULT if is_compiled_schedule(hw) else DEFAULT_VARIANTS)
        return [c.strip() for c in self.configs.split(",") if c.strip()]
