"""Engine benchmark: decode step time of ridgeline's paged engine, transformers with its dynamic
and static caches, and the roofline prediction, side by side in one process; then a mixed
serving workload, continuous batching against transformers ``generate`` in static batches.

    python benchmarks/engine.py                 # the full grid and the 64-request workload
    python benchmarks/engine.py --quick         # a reduced run to check that it works

Method (reference/lab.md): fp32, one thread (``torch.set_num_threads(1)``), random weights (timing
does not depend on values), the same weights in both engines. Each point fills a KV cache of
``context`` tokens per sequence with random keys/values (no prefill: it would cost minutes and
does not change a decode step), runs ``--warmup`` decode steps, then reports the median of
``--steps`` steps (wall time). The engine runs ``--repeats`` passes over each model's grid, and
a point's ratio is the median over the passes of step ÷ the roofline of probes run just before
that step (each pass's ratio is printed on the right): the machine is shared, its read bandwidth
drifts between 22 and 34 GB/s over minutes, and a probe minutes away from the step it divides
would measure another machine. transformers runs once per point. The roofline is per operator
max(bytes ÷ bandwidth, FLOPs ÷ matmul peak) at fp32 (``bench.roofline_ms``), with this
machine's one-thread read bandwidth (the faster of torch sum and the engine's one-row panel GEMV
over 1 GiB) and fp32 matmul rate (2048³). Each probe runs five times and
the roofline takes their median, the statistic of the step time it divides: the best pass
against a median step would count the neighbour's noise as the engine's gap. The ratio on the
probes' best passes is printed beside it, and so is the bytes-only bound (at batch 16 the weight
GEMMs are bound by the peak, not the bytes). The glibc allocator settings change
transformers' dynamic-cache timings by up to 2× (lab.md §3), so the ``MALLOC_*`` environment is
printed with the load average.

Targets: ridgeline ≤ 1.3 × roofline at every point; ≥ 2× faster than transformers'
dynamic cache at batch 16 × context 1024; ≥ 2× the tokens/s of static batches on the workload.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ridgeline.engine import bench
from ridgeline.engine.bench import Timing, timed
from ridgeline.engine.fused_layer import load_fused_layer
from ridgeline.engine.fused_ops import load_fused_ops
from ridgeline.engine.llm import LLM
from ridgeline.engine.model import CausalLM
from ridgeline.engine.packing import Layout, pack_linears, resolve
from ridgeline.engine.paged_kernel import load_paged_kernel
from ridgeline.engine.panel_gemm import load_panel_gemm
from ridgeline.engine.sampling import SamplingParams
from ridgeline.engine.weights import to_hf_state
from ridgeline.specs import ModelSpec, get_model, parse_config

BLOCK_SIZE = 16
LLAMA_350M = {  # Llama-shaped, ~374 M parameters, GQA 16:4 (Llama-3's ratio)
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 2816,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
}


@dataclass(frozen=True, slots=True)
class Machine:
    """The probes before one point, as the median of their five passes (the statistic of the engine's
    step time) and as the best pass: read bandwidth (the faster of sum and the panel GEMV),
    sum's alone, and the fp32 matmul rate."""

    bw: float
    sum_bw: float
    peak: float
    bw_best: float
    peak_best: float


@dataclass(frozen=True, slots=True)
class Run:
    """The engine at one point in one pass, with the rooflines of the probes just before it."""

    step: Timing
    machine: Machine
    roofline_ms: float
    bytes_ms: float
    roofline_sum_ms: float  # the same roofline on torch sum's bandwidth alone
    roofline_best_ms: float  # on the probes' best passes

    @property
    def ratio(self) -> float:
        return self.step.wall_ms / self.roofline_ms


@dataclass(frozen=True, slots=True)
class Point:
    model: str
    batch: int
    context: int
    runs: tuple[Run, ...]  # one per repetition, each against its own probes
    hf_dynamic: Timing | None
    hf_static: Timing | None

    def median(self, value: Callable[[Run], float]) -> float:
        return statistics.median(value(r) for r in self.runs)

    @property
    def ratio(self) -> float:
        """The median over repetitions of step ÷ roofline (each on its own repetition's probe)."""
        return self.median(lambda r: r.ratio)


def load_average() -> str:
    one, five, fifteen = bench.load_average()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def malloc_env() -> str:
    found = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    return ", ".join(f"{k}={v}" for k, v in sorted(found.items())) or "glibc defaults"


# ---- transformers ------------------------------------------------------------------------------


def hf_model(spec: ModelSpec, ours: CausalLM) -> Any:
    """transformers' model of ``spec`` holding ``ours``'s weights (sdpa attention)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if spec.family == "gpt2":
        cfg: Any = GPT2Config(
            vocab_size=spec.vocab_size,
            n_embd=spec.hidden_size,
            n_layer=spec.num_layers,
            n_head=spec.num_heads,
            n_positions=spec.max_position_embeddings,
            attn_implementation="sdpa",
        )
        model: Any = GPT2LMHeadModel(cfg)
    else:
        cfg = LlamaConfig(**{**LLAMA_350M, "attn_implementation": "sdpa"})
        model = LlamaForCausalLM(cfg)
    model.load_state_dict(to_hf_state(ours), strict=False)
    return model.eval()


def _random_kv(
    spec: ModelSpec, batch: int, context: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    dims = (batch, spec.num_kv_heads, context, spec.head_dim)  # [B, kv_heads, T, d]
    return [(torch.randn(dims), torch.randn(dims)) for _ in range(spec.num_layers)]


def hf_decode(
    model: Any, spec: ModelSpec, batch: int, context: int, static: bool, n: int
) -> Callable:
    """A step function: transformers' forward of one token per sequence, then the argmax."""
    from transformers import DynamicCache, StaticCache

    kv = _random_kv(spec, batch, context)
    if static:
        cache: Any = StaticCache(config=model.config, max_cache_len=context + n + 1)
        for layer, (k, v) in enumerate(kv):
            cache.update(k, v, layer, cache_kwargs={"cache_position": torch.arange(context)})
    else:
        cache = DynamicCache(config=model.config)
        for layer, (k, v) in enumerate(kv):
            cache.update(k, v, layer)
    del kv
    ids = torch.ones(batch, 1, dtype=torch.long)

    def step(i: int) -> None:
        extra = {"cache_position": torch.tensor([context + i])} if static else {}
        with torch.inference_mode():
            out = model(ids, cache=cache, logits_to_keep=1, **extra)
            out.logits[:, -1].argmax(-1)

    return step


# ---- the grid ----------------------------------------------------------------------------------


def build(name: str) -> tuple[ModelSpec, CausalLM]:
    spec = parse_config(LLAMA_350M, "llama-350m") if name == "llama-350m" else get_model(name)
    model = bench.bench_model(spec)
    return model.spec, model


def probe(args: argparse.Namespace, reads_probe: bench.ReadProbe) -> Machine:
    """This repetition's bandwidth and peak (or the given bandwidth)."""
    reads = reads_probe.rates()
    flops = bench.matmul_rates_flops_per_s()
    bw, best = bench.fastest(reads, statistics.median), bench.fastest(reads, max)
    sum_bw = statistics.median(reads["sum/4k"])
    if args.bandwidth_gbs:
        bw = sum_bw = best = args.bandwidth_gbs * 1e9
    m = Machine(bw, sum_bw, statistics.median(flops), best, max(flops))
    return m


def grid(args: argparse.Namespace, kernel: Any) -> list[Point]:
    """Per model: ``--repeats`` passes over the grid, each after its own probes (the machine
    drifts between passes); then transformers once per point."""
    points = []
    reads = bench.ReadProbe(panel=load_panel_gemm())  # one set of probe buffers for the run
    for name in args.models:
        spec, ours = build(name)
        theirs = hf_model(spec, ours) if not args.no_hf else None  # before packing renames
        panel = load_panel_gemm()
        pack_linears(ours, resolve(Layout(args.pack), torch.float32, panel), panel)
        ours.fused_ops = None if args.no_fused else load_fused_ops()
        fused = ours.fused_ops is not None and not args.no_fused_layer
        ours.use_fused_layer(load_fused_layer() if fused else None)
        cells = [(b, t) for b in args.batches for t in args.contexts]
        runs: dict[tuple[int, int], list[Run]] = {c: [] for c in cells}
        for rep in range(args.repeats):
            print(f"{name}, pass {rep + 1} of {args.repeats}; {load_average()}", flush=True)
            for b, t in cells:  # the probes just before each point: the machine drifts
                m = probe(args, reads)
                runs[b, t].append(engine_run(args, spec, ours, kernel, b, t, m))
        for b, t in cells:
            dyn, sta = hf_runs(args, spec, theirs, b, t)
            points.append(Point(spec.name, b, t, tuple(runs[b, t]), dyn, sta))
            print(row(points[-1]), flush=True)
        del ours, theirs
        gc.collect()
    return points


def engine_run(
    args: argparse.Namespace,
    spec: ModelSpec,
    ours: CausalLM,
    kernel: Any,
    batch: int,
    context: int,
    m: Machine,
) -> Run:
    n = args.warmup + args.steps
    with torch.inference_mode():
        step = timed(bench.decode_step(ours, kernel, batch, context, n), args.warmup, args.steps)
    gc.collect()
    return Run(
        step,
        m,
        bench.roofline_ms(spec, batch, context, m.bw, m.peak),
        bench.bytes_ms(spec, batch, context, m.bw),
        bench.roofline_ms(spec, batch, context, m.sum_bw, m.peak),
        bench.roofline_ms(spec, batch, context, m.bw_best, m.peak_best),
    )


def hf_runs(
    args: argparse.Namespace, spec: ModelSpec, theirs: Any, batch: int, context: int
) -> tuple[Timing | None, Timing | None]:
    if theirs is None:
        return None, None
    n = args.warmup + args.steps
    dyn = timed(hf_decode(theirs, spec, batch, context, False, n), args.warmup, args.steps)
    gc.collect()
    sta = timed(hf_decode(theirs, spec, batch, context, True, n), args.warmup, args.steps)
    gc.collect()
    return dyn, sta


HEADER = (
    f"{'model':<12}{'B':>4}{'T':>6} {'GB/s':>5} {'roof ms':>8} {'bytes ms':>8} {'ridge ms':>9} {'HF dyn':>8}"
    f" {'HF stat':>8} | {'ridge/roof':>10} {'(best)':>7} {'(sum)':>6} {'dyn/ridge':>9}"
    f" {'stat/ridge':>10} | ridge/roof per pass"
)
NAN = Timing(float("nan"), float("nan"))


def row(p: Point) -> str:
    dyn, sta = p.hf_dynamic or NAN, p.hf_static or NAN
    wall = p.median(lambda r: r.step.wall_ms)
    spread = "/".join(f"{r.ratio:.2f}" for r in p.runs)
    return (
        f"{p.model:<12}{p.batch:>4}{p.context:>6} {p.median(lambda r: r.machine.bw) / 1e9:>5.1f} "
        f"{p.median(lambda r: r.roofline_ms):>8.1f} "
        f"{p.median(lambda r: r.bytes_ms):>8.1f} {wall:>9.1f} {dyn.wall_ms:>8.1f} "
        f"{sta.wall_ms:>8.1f} | {p.ratio:>10.2f} "
        f"{p.median(lambda r: r.step.wall_ms / r.roofline_best_ms):>7.2f} "
        f"{p.median(lambda r: r.step.wall_ms / r.roofline_sum_ms):>6.2f} "
        f"{dyn.wall_ms / wall:>9.2f} {sta.wall_ms / wall:>10.2f} | {spread}"
    )


def verdict(points: list[Point]) -> None:
    worst = max(points, key=lambda p: p.ratio)
    print(
        f"\nworst ridgeline/roofline (median over {len(worst.runs)} passes of step ÷ roofline on "
        f"the probes' medians): {worst.ratio:.2f} at "
        f"{worst.model} B{worst.batch} T{worst.context} "
        f"(target <= 1.3: {'met' if worst.ratio <= 1.3 else 'NOT met'})"
    )
    met = sum(p.ratio <= 1.3 for p in points)
    print(f"points within 1.3x: {met} of {len(points)}")
    on_best = [p.median(lambda r: r.step.wall_ms / r.roofline_best_ms) for p in points]
    print(
        f"against the probes' best passes instead: worst {max(on_best):.2f}, "
        f"{sum(x <= 1.3 for x in on_best)} of {len(points)} within 1.3x"
    )
    on_sum = max(p.median(lambda r: r.step.wall_ms / r.roofline_sum_ms) for p in points)
    print(f"worst against the roofline on torch sum's bandwidth alone: {on_sum:.2f}")
    for p in points:
        if p.batch == 16 and p.context == 1024 and p.hf_dynamic:
            speedup = p.hf_dynamic.wall_ms / p.median(lambda r: r.step.wall_ms)
            ok = "met" if speedup >= 2 else "NOT met"
            print(
                f"{p.model} B16 T1024: HF dynamic / ridgeline = {speedup:.2f} (target >= 2: {ok})"
            )


# ---- mixed workload ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    prompt: list[int]
    output_len: int
    arrival_s: float


def workload(n: int, max_prompt: int, max_output: int, gap_s: float, vocab: int) -> list[Job]:
    """Varied lengths (uniform), Poisson arrivals with mean gap ``gap_s``; seeded."""
    rng = random.Random(0)
    jobs, t = [], 0.0
    for _ in range(n):
        plen = rng.randint(max(max_prompt // 16, 1), max_prompt)
        prompt = [rng.randrange(vocab) for _ in range(plen)]
        jobs.append(Job(prompt, rng.randint(max(max_output // 8, 1), max_output), t))
        t += rng.expovariate(1 / gap_s)
    return jobs


def run_ridgeline(jobs: list[Job], args: argparse.Namespace) -> tuple[float, int]:
    """Continuous batching on the engine clock: (makespan s, output tokens)."""
    llm = LLM(
        "distilgpt2",
        block_size=BLOCK_SIZE,
        max_num_batched_tokens=args.max_num_tokens,
        max_num_seqs=args.max_num_seqs,
        prefix_caching=True,
    )
    params = [SamplingParams(max_output_tokens=j.output_len) for j in jobs]
    outs = llm.generate([j.prompt for j in jobs], params, [j.arrival_s for j in jobs])
    return llm.clock_s, sum(len(o.token_ids) for o in outs)


def run_static(jobs: list[Job], model: Any, batch: int) -> tuple[float, int]:
    """transformers ``generate`` in arrival-ordered static batches (left-padded); a batch starts
    when its last request has arrived and the previous batch is done; it runs until its longest
    output. (makespan s, useful output tokens)."""
    clock, useful = 0.0, 0
    for i in range(0, len(jobs), batch):
        group = jobs[i : i + batch]
        clock = max(clock, max(j.arrival_s for j in group))
        width = max(len(j.prompt) for j in group)
        ids = torch.tensor([[0] * (width - len(j.prompt)) + j.prompt for j in group])
        mask = torch.tensor([[0] * (width - len(j.prompt)) + [1] * len(j.prompt) for j in group])
        new = max(j.output_len for j in group)
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=0,
            )
        clock += time.perf_counter() - t0
        useful += sum(j.output_len for j in group)
    return clock, useful


def mixed(args: argparse.Namespace) -> None:
    spec, ours = build("distilgpt2")
    theirs = hf_model(spec, ours)
    del ours
    jobs = workload(args.requests, args.max_prompt, args.max_output, args.gap_s, spec.vocab_size)
    print(
        f"\nmixed workload: {len(jobs)} requests, prompts <= {args.max_prompt}, outputs <= "
        f"{args.max_output}, mean arrival gap {args.gap_s * 1e3:.0f} ms; {load_average()}"
    )
    span_r, tok_r = run_ridgeline(jobs, args)
    print(
        f"ridgeline continuous batching : {tok_r} tokens in {span_r:.1f} s = {tok_r / span_r:.1f} tok/s"
    )
    span_h, tok_h = run_static(jobs, theirs, args.static_batch)
    print(
        f"transformers static batches {args.static_batch:>2}: {tok_h} tokens in {span_h:.1f} s = "
        f"{tok_h / span_h:.1f} tok/s"
    )
    gain = (tok_r / span_r) / (tok_h / span_h)
    print(f"ratio {gain:.2f} (target >= 2: {'met' if gain >= 2 else 'NOT met'}); {load_average()}")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", nargs="+", default=["distilgpt2", "llama-350m"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 4, 16])
    p.add_argument("--contexts", nargs="+", type=int, default=[128, 512, 1024])
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=7)
    # five: at three, one point's two noisy passes out of three set its median (02:12 UTC run)
    p.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="passes over each model's grid, each with its own probes",
    )
    p.add_argument("--no-hf", action="store_true", help="ridgeline and roofline only")
    p.add_argument(
        "--pack",
        choices=[x.value for x in Layout],
        default="auto",
        help="weight layout (packing.Layout; off: plain F.linear)",
    )
    p.add_argument("--no-fused", action="store_true", help="torch's elementwise ops")
    p.add_argument("--no-fused-layer", action="store_true", help="the layers in Python")
    p.add_argument("--bandwidth-gbs", type=float, help="roofline bandwidth (default: measured)")
    p.add_argument("--skip-grid", action="store_true")
    p.add_argument("--skip-mixed", action="store_true")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--max-prompt", type=int, default=512)
    p.add_argument("--max-output", type=int, default=128)
    p.add_argument("--gap-s", type=float, default=0.05)
    p.add_argument("--static-batch", type=int, default=16)
    p.add_argument("--max-num-tokens", type=int, default=512)
    p.add_argument("--max-num-seqs", type=int, default=32)
    p.add_argument("--quick", action="store_true", help="a reduced run: fewer points and requests")
    args = p.parse_args()
    if args.quick:
        args.models, args.contexts, args.steps, args.repeats = ["distilgpt2"], [128, 1024], 4, 1
        args.requests, args.max_prompt, args.max_output = 16, 256, 48
    return args


def main() -> None:
    args = parse()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, fp32; {malloc_env()}; {load_average()}")
    kernel = load_paged_kernel()
    print(f"paged kernel: {'compiled' if kernel else 'unavailable (gather path)'}")
    if not args.skip_grid:
        print(f"\n{HEADER}")
        points = grid(args, kernel)
        verdict(points)
        print(load_average())
    if not args.skip_mixed:
        mixed(args)


if __name__ == "__main__":
    main()
