"""Compiled shapes cost time: each step of a compiled-schedule machine priced at its shape.

On IBM Spyre (and a TPU under XLA) a step runs programs compiled ahead of time for fixed shapes,
so a step pays for the shape, not for the tokens in it::

    decode    (B, T)       B = smallest compiled batch >= sequences decoding,
                           T = smallest sequence bucket >= the longest context of the batch
    verify    (B, W, T)    speculative decoding: W = k + 1 tokens per sequence, every sequence
    prefill   (1, C, T)    one chunk of C tokens of one sequence (the last chunk padded),
                           T >= the chunk's last position

    step time = decode or verify program + one prefill program per chunk
                + copies of cached prefixes into their slots + tier transfers (+ a recompile)

Each program is priced by the same model as ``ridgeline schedule``: the compiled, simulated
schedule of ``analytic.dataflow`` (Spyre: cores, LX, ring), or the Pallas pipeline of
``analytic.pallas`` on a TPU; prices are cached per shape. A shape outside the compiled set (a
context past the last bucket) is refused at admission by the ``static`` policy, or, with
``recompile``, compiled on demand: the step that first needs it pays ``compile_s_per_program``.

The cost model also keeps what padding costs: bytes and time of the compiled programs against the
roofline of the same steps without padding (``StepCostModel``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ridgeline.analytic import kv_bytes_per_token
from ridgeline.analytic.calibrated import fixed_step_seconds, kernel_counts
from ridgeline.analytic.dataflow import Bucket, ScheduleOptions, compile_schedule
from ridgeline.analytic.pallas import tpu_step
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.roofline import step_cost
from ridgeline.analytic.workload import Phase, Workload
from ridgeline.errors import ConfigError
from ridgeline.serving.executor import ScheduledBatch, ScheduledRequest
from ridgeline.serving.policies import PolicyKind, StaticOptions
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim.executor import CostModelExecutor, StepCostModel
from ridgeline.specs import Accelerator, ModelSpec


def is_compiled_schedule(acc: Accelerator) -> bool:
    """Machines whose steps run programs compiled for fixed shapes, priced here: Spyre-like
    dataflow cards and TPUs (a compiler- or kernel-managed scratchpad above device memory)."""
    return acc.kind in ("dataflow", "tpu")


def pow2_ladder(top: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``top`` (``top`` itself last): compiled batch sizes."""
    out, b = [], 1
    while b < top:
        out.append(b)
        b *= 2
    return (*out, top)


class PriceCache:
    """Program prices shared by the runs of one model on one accelerator (an explicit cache:
    pricing a shape compiles and simulates its whole schedule)."""

    __slots__ = ("prices",)

    def __init__(self) -> None:
        self.prices: dict[tuple[object, ...], ProgramCost] = {}


@dataclass(frozen=True, slots=True)
class CompiledShapes:
    """The shapes compiled ahead of time, and what happens outside them.

    Attributes:
        batch_sizes: compiled decode batch sizes, ascending (the last = the slots).
        seq_buckets: compiled sequence buckets (tokens), ascending.
        chunk_tokens: tokens of the compiled prefill program (one sequence per program).
        verify_width: tokens per sequence of the verify program (k + 1; 0: no speculation).
        recompile: compile a missing bucket on demand (else the policy refuses the request).
        compile_s_per_program: what one compilation costs the step that needs it.
        prefix_copy: a cached prefix is copied into the request's slot (else read in place).
        prices: a price cache shared with other runs of the same model and accelerator.
    """

    batch_sizes: tuple[int, ...]
    seq_buckets: tuple[int, ...]
    chunk_tokens: int = 512
    verify_width: int = 0
    recompile: bool = False
    compile_s_per_program: float = 20.0
    prefix_copy: bool = False
    prices: PriceCache | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.batch_sizes or not self.seq_buckets or self.chunk_tokens < 1:
            raise ConfigError("field compiled: needs batch sizes, buckets and a chunk >= 1")
        if list(self.batch_sizes) != sorted(self.batch_sizes) or self.batch_sizes[0] < 1:
            raise ConfigError(f"field batch_sizes: must ascend from >= 1, got {self.batch_sizes}")
        if list(self.seq_buckets) != sorted(self.seq_buckets) or self.seq_buckets[0] < 1:
            raise ConfigError(f"field seq_buckets: must ascend from >= 1, got {self.seq_buckets}")

    @property
    def programs_per_bucket(self) -> int:
        return len(self.batch_sizes) + 1 + (1 if self.verify_width else 0)

    @property
    def num_programs(self) -> int:
        return self.programs_per_bucket * len(self.seq_buckets)


@dataclass(frozen=True, slots=True)
class ProgramCost:
    """One compiled program: its padded workload, time and the bytes it reads."""

    workload: Workload
    time_s: float
    read_bytes: float
    kv_read_bytes: float


@dataclass(frozen=True, slots=True)
class CompiledStats:
    """What compiled shapes cost over a run.

    ``time_ratio`` = Σ compiled step time ÷ Σ roofline time of the same steps unpadded;
    ``kv_ratio`` = KV bytes the programs read ÷ KV bytes of the real contexts.
    """

    programs: int
    recompiles: int
    compile_s: float
    steps: int
    compiled_time_s: float
    unpadded_time_s: float
    kv_read_bytes: float
    useful_kv_read_bytes: float
    prefix_copy_bytes: float
    shapes_used: int

    @property
    def time_ratio(self) -> float:
        return self.compiled_time_s / self.unpadded_time_s if self.unpadded_time_s else 1.0

    @property
    def kv_ratio(self) -> float:
        return self.kv_read_bytes / self.useful_kv_read_bytes if self.useful_kv_read_bytes else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "programs": self.programs,
            "recompiles": self.recompiles,
            "compile_s": self.compile_s,
            "steps": self.steps,
            "compiled_time_s": self.compiled_time_s,
            "unpadded_time_s": self.unpadded_time_s,
            "time_ratio": self.time_ratio,
            "kv_read_bytes": self.kv_read_bytes,
            "useful_kv_read_bytes": self.useful_kv_read_bytes,
            "kv_ratio": self.kv_ratio,
            "prefix_copy_bytes": self.prefix_copy_bytes,
            "shapes_used": self.shapes_used,
        }


@dataclass(slots=True)
class _Tally:
    recompiles: int = 0
    compile_s: float = 0.0
    steps: int = 0
    compiled_s: float = 0.0
    unpadded_s: float = 0.0
    kv: float = 0.0
    useful_kv: float = 0.0
    copy_bytes: float = 0.0


@dataclass(frozen=True, slots=True)
class _Step:
    """One priced step, before it is tallied."""

    time_s: float
    unpadded_s: float
    kv: float
    useful_kv: float
    copy_bytes: float
    new_buckets: tuple[int, ...]
    compile_s: float


@dataclass(frozen=True, slots=True)
class Row:
    """One sequence's share of a step: new tokens on ``prior`` cached ones, ``drafts`` of
    them speculative."""

    new: int
    prior: int
    drafts: int = 0

    @property
    def decoding(self) -> bool:
        return self.new == 1 or self.drafts > 0


class CompiledStepCost:
    """Step times of one model on a compiled-schedule accelerator, at compiled shapes.

    Args:
        model: the model.
        pricing: one chip of the accelerator (Spyre-like: dataflow schedule; TPU: Pallas
            pipeline), the data types, and the mode: programs stream device memory at the
            calibration's ``bandwidth_efficiency`` and each step pays its fixed latencies
            (``analytic.calibrated.fixed_step_seconds``; none on the ideal roofline).
        shapes: the compiled shapes.
    """

    def __init__(self, model: ModelSpec, pricing: Pricing, shapes: CompiledShapes) -> None:
        acc = pricing.accelerator
        if not is_compiled_schedule(acc):
            raise ConfigError(f"{acc.name}: not a compiled-schedule accelerator ({acc.kind})")
        self.model, self.acc, self.shapes = model, acc, shapes
        self.pricing = pricing
        self.dtypes = pricing.dtypes
        cal = pricing.calibration
        self.bandwidth_efficiency = cal.bandwidth_efficiency
        self.fixed_s = float(
            fixed_step_seconds(model.num_layers, cal, kernels=kernel_counts(model, self.dtypes))
        )
        self.buckets = list(shapes.seq_buckets)
        self.roofline = StepCostModel(model, pricing)
        self.kv_per_token = kv_bytes_per_token(model, self.dtypes.kv)
        self._prices = (shapes.prices or PriceCache()).prices
        self._key = (model.name, acc.name, self.dtypes, self.bandwidth_efficiency)
        self._used: set[tuple[Phase, int, int, int]] = set()
        self._tally = _Tally()
        self._pending: list[_Step] = []

    # ---- shapes and prices -------------------------------------------------------------------

    def bucket(self, tokens: int, compiled: list[int] | None = None) -> int:
        """The compiled sequence bucket holding ``tokens`` (in ``compiled``, default: the
        buckets compiled so far); a miss adds one to ``compiled`` (recompile: the next power
        of two) or is an error (the policy should have refused the request)."""
        buckets = self.buckets if compiled is None else compiled
        i = bisect.bisect_left(buckets, tokens)
        if i < len(buckets):
            return buckets[i]
        if not self.shapes.recompile:
            raise ConfigError(
                f"field seq_buckets: no compiled bucket holds {tokens} tokens "
                f"(largest {buckets[-1]}); refuse such requests or allow recompilation"
            )
        new = 1 << max(0, (tokens - 1).bit_length())
        buckets.append(new)
        return new

    def batch_size(self, seqs: int) -> int:
        """The smallest compiled batch holding ``seqs`` sequences."""
        sizes = self.shapes.batch_sizes
        i = bisect.bisect_left(sizes, seqs)
        if i == len(sizes):
            raise ConfigError(f"field batch_sizes: {seqs} sequences exceed {sizes[-1]} slots")
        return sizes[i]

    def price(self, phase: Phase, batch: int, context: int, new: int = 1) -> ProgramCost:
        """The program of shape (batch, new tokens, context bucket), cached."""
        shape = (phase, batch, context, new)
        self._used.add(shape)
        key = (*self._key, *shape)
        hit = self._prices.get(key)
        if hit is None:
            hit = self._prices[key] = self._price(shape)
        return hit

    def _price(self, key: tuple[Phase, int, int, int]) -> ProgramCost:
        phase, batch, context, new = key
        prompt = new if phase is Phase.PREFILL else None
        w = Workload(phase, batch, context, prompt, self.dtypes)
        eff = self.bandwidth_efficiency
        if self.acc.kind == "tpu":
            time_s = tpu_step(self.model, self.acc, w, bandwidth_efficiency=eff).time_s
        else:
            opts = ScheduleOptions(keep_events=False, bandwidth_efficiency=eff)
            time_s = compile_schedule(self.model, self.acc, w, Bucket(batch, context), opts).time_s
        cost = step_cost(self.model, self.acc, w)
        return ProgramCost(w, time_s, cost.bytes_read, cost.kv_read_bytes)

    # ---- steps -------------------------------------------------------------------------------

    def programs(self, rows: Sequence[Row], compiled: list[int]) -> list[ProgramCost]:
        """The programs one step runs: one decode (or verify) program for the decoding rows,
        one prefill program per chunk of each prefilling row (buckets from ``compiled``)."""
        out = []
        dec = [r for r in rows if r.decoding]
        if dec:
            batch = self.batch_size(len(dec))
            width = self.shapes.verify_width if any(r.drafts for r in dec) else 1
            if width > 1:
                bucket = self.bucket(max(r.prior for r in dec) + width, compiled)
                out.append(self.price(Phase.PREFILL, batch, bucket, width))
            else:
                longest = max(r.prior + r.new for r in dec)
                out.append(self.price(Phase.DECODE, batch, self.bucket(longest, compiled)))
        chunk = self.shapes.chunk_tokens
        for r in rows:
            if r.decoding:
                continue
            end = r.prior + r.new
            for start in range(r.prior, end, chunk):
                bucket = self.bucket(min(start + chunk, end), compiled)
                out.append(self.price(Phase.PREFILL, 1, max(bucket, chunk), chunk))
        return out

    def _measure(self, rows: Sequence[Row], copy_tokens: int, compiled: list[int]) -> _Step:
        """One step's time (programs, prefix copies, recompiles, overhead) and padding."""
        known = len(compiled)
        progs = self.programs(rows, compiled)
        fresh = tuple(compiled[known:])
        copy_bytes = 2.0 * copy_tokens * self.kv_per_token  # read the prefix, write the slot
        compile_s = len(fresh) * self.shapes.programs_per_bucket * self.shapes.compile_s_per_program
        bw = self.acc.device_bandwidth_bytes_per_s * self.bandwidth_efficiency
        time_s = sum(p.time_s for p in progs) + copy_bytes / bw + compile_s
        return _Step(
            time_s=time_s + self.fixed_s,
            unpadded_s=self.roofline.step_time_s([r.new for r in rows], [r.prior for r in rows]),
            kv=sum(p.kv_read_bytes for p in progs),
            useful_kv=self.kv_per_token * sum(r.prior + r.new for r in rows),
            copy_bytes=copy_bytes,
            new_buckets=fresh,
            compile_s=compile_s,
        )

    def _commit(self, step: _Step) -> None:
        t = self._tally
        t.steps += 1
        t.compiled_s += step.time_s
        t.unpadded_s += step.unpadded_s
        t.kv += step.kv
        t.useful_kv += step.useful_kv
        t.copy_bytes += step.copy_bytes
        t.compile_s += step.compile_s
        t.recompiles += len(step.new_buckets) * self.shapes.programs_per_bucket
        for b in step.new_buckets:
            if b not in self.buckets:
                bisect.insort(self.buckets, b)

    def step_rows(self, rows: Sequence[Row], copy_tokens: int = 0) -> float:
        """Time of one step, its padding and recompiles tallied."""
        step = self._measure(rows, copy_tokens, list(self.buckets))
        self._commit(step)
        return step.time_s

    def step_time_s(self, new: Sequence[int], prior: Sequence[int]) -> float:
        """``StepCostModel``'s interface: rows of one token decode, longer rows prefill."""
        return self.step_rows([Row(n, p) for n, p in zip(new, prior, strict=True)])

    def decode_run_s(self, prior: Sequence[int], k: int) -> np.ndarray:
        """Times of ``k`` consecutive decode steps of the same sequences (the bucket can change
        as the contexts grow). Nothing is tallied until ``keep_run`` says how many ran."""
        compiled = list(self.buckets)
        self._pending = [
            self._measure([Row(1, p + j) for p in prior], 0, compiled) for j in range(k)
        ]
        return np.array([s.time_s for s in self._pending], dtype=float)

    def keep_run(self, steps: int) -> None:
        """Tally the first ``steps`` steps of the last ``decode_run_s`` (the event loop stops a
        run at the next event)."""
        for step in self._pending[:steps]:
            self._commit(step)
        self._pending = []

    def stats(self) -> CompiledStats:
        """What the run's compiled shapes cost so far."""
        t = self._tally
        return CompiledStats(
            programs=self.shapes.num_programs,
            recompiles=t.recompiles,
            compile_s=t.compile_s,
            steps=t.steps,
            compiled_time_s=t.compiled_s,
            unpadded_time_s=t.unpadded_s,
            kv_read_bytes=t.kv,
            useful_kv_read_bytes=t.useful_kv,
            prefix_copy_bytes=t.copy_bytes,
            shapes_used=len(self._used),
        )


@dataclass(slots=True)
class PrefixCopies:
    """Which requests have been seen, to charge a prefix copy on a request's first step."""

    enabled: bool
    seen: set[str] = field(default_factory=set)

    def tokens(self, batch: ScheduledBatch) -> int:
        """Cached-prefix tokens copied into slots this step: a request first seen with tokens
        already computed found them in the prefix cache."""
        out = 0
        for r in batch.requests:
            if r.request_id not in self.seen:
                self.seen.add(r.request_id)
                out += r.start_position if self.enabled else 0
        return out


def rows_of(batch: ScheduledBatch) -> list[Row]:
    """The rows of a scheduled batch."""
    return [_row(r) for r in batch.requests]


def _row(r: ScheduledRequest) -> Row:
    return Row(len(r.token_ids), r.start_position, r.num_draft_tokens)


class CompiledExecutor(CostModelExecutor):
    """A ``CostModelExecutor`` whose target steps run at compiled shapes (and pay the copy of a
    cached prefix into a request's slot when ``copies`` is enabled)."""

    def __init__(self, cost: CompiledStepCost, copies: PrefixCopies, **kwargs: Any) -> None:
        super().__init__(cost, **kwargs)
        self.compiled = cost
        self.copies = copies

    def step_time_s(self, batch: ScheduledBatch) -> float:
        return self.compiled.step_rows(rows_of(batch), self.copies.tokens(batch))


def static_scheduler(
    sched: SchedulerConfig, shapes: CompiledShapes, chunked: bool = False
) -> SchedulerConfig:
    """``sched`` running the ``static`` policy on ``shapes``: the buckets, the slots (the
    largest compiled batch), whole prompts or chunks of the compiled prefill size. Whole
    prompts raise the step's token budget to ``max_model_len``; chunks keep the scheduler's
    budget (at least one chunk), so a step prefills one chunk beside its decodes, as chunked
    prefill bounds a decode's stall (Sarathi-Serve, OSDI 2024)."""
    chunk = shapes.chunk_tokens if chunked else 0
    budget = (
        max(sched.max_num_batched_tokens, chunk)
        if chunked
        else max(sched.max_num_batched_tokens, sched.max_model_len)
    )
    return replace(
        sched,
        policy=PolicyKind.STATIC,
        static_buckets=shapes.seq_buckets,
        static_slots=shapes.batch_sizes[-1],
        static=StaticOptions(chunk, shapes.recompile, shapes.prefix_copy),
        enable_chunked_prefill=chunked,
        long_prefill_token_threshold=chunk,
        max_num_batched_tokens=budget,
    )
