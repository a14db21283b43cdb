"""Write the course notebooks (notebooks/*.ipynb) from the cells below, without outputs.

    python tools/make_notebooks.py

One notebook per module of "Memory Systems in Dataflow Architectures" (IBM, on Coursera), plus
the lab. Each computes, simulates or measures what its module teaches with ridgeline's API, at
sizes that run in a minute or less; ``tests/repo/test_notebooks.py`` executes them all headless.
Edit the cells here, not the .ipynb files, and rerun the script.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parent.parent / "notebooks"
SETUP = "%matplotlib inline\nimport numpy as np\nimport pandas as pd\nimport ridgeline as rl\nfrom ridgeline.report import plots"

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}

NOTEBOOKS["01_memory_problem"] = [
    (
        "md",
        """# Module 1 — The memory problem

> Five questions for analyzing the memory system of any accelerator, and two numbers for deciding
> which resource limits a workload: the **ridge point** of the hardware and the **arithmetic
> intensity** of the workload. Compute both for decode on an H100, first for the weights alone
> and then with the KV cache included.

Ridge point = peak FLOP/s ÷ bandwidth of the level the operands come from. Arithmetic intensity =
FLOPs ÷ bytes moved at that level (Williams, Waterman and Patterson, "Roofline", CACM 2009).""",
    ),
    ("code", SETUP),
    (
        "code",
        """h100 = rl.get_accelerator("h100-sxm")
m = rl.get_model("llama-3.1-8b")
w = rl.Workload(rl.Phase.DECODE, batch=1, context_len=4096)
rl.five_questions(m, h100, w)   # 1. how much, 2. how fast, 3. who decides, 4. ridge, 5. scarce""",
    ),
    (
        "code",
        """peak = h100.peak(rl.DType.BF16)
bw = h100.device_bandwidth_bytes_per_s
print(f"ridge point = {peak:.4g} FLOP/s / {bw:.4g} B/s = {peak / bw:.1f} FLOP/B")
assert abs(h100.ridge_point() - peak / bw) < 1e-9""",
    ),
    (
        "md",
        """Decode of one token reads every weight once and does two FLOPs (a multiply-add) per weight
per sequence: at batch 1 and bf16 (2 bytes per weight) its intensity is about 1 FLOP/B. The KV
cache adds bytes but almost no FLOPs, so counting it pushes decode further below the ridge.""",
    ),
    (
        "code",
        """di = rl.decode_intensity(m, h100, batch=1, context=4096)
print(f"weights only: {di.weights_only:.3f} FLOP/B; with the KV cache: {di.with_kv:.3f} FLOP/B; "
      f"ridge {di.ridge_point:.0f} FLOP/B")
assert di.with_kv < di.weights_only < di.ridge_point""",
    ),
    (
        "code",
        """rows = []
for batch in (1, 8, 64, 256):
    d = rl.decode_intensity(m, h100, batch=batch, context=4096)
    rows.append({"batch": batch, "weights only": d.weights_only, "with KV": d.with_kv})
pd.DataFrame(rows)""",
    ),
    (
        "code",
        """plots.decode_sweep_plot(m, h100, (1, 8, 64, 256), np.logspace(7, 17, 40, base=2))""",
    ),
]

NOTEBOOKS["02_prefill_decode"] = [
    (
        "md",
        """# Module 2 — Prefill and decode

> Prefill processes the whole prompt at once and is usually limited by compute. Decode produces
> one token at a time and is usually limited by memory bandwidth. Place both on a roofline,
> compare the ridge points of five accelerators, and work out what one decode step reads on
> Spyre.""",
    ),
    ("code", SETUP),
    (
        "code",
        """m, h100 = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")
prefill = rl.step_cost(m, h100, rl.Workload(rl.Phase.PREFILL, batch=1, context_len=2048))
decode = rl.step_cost(m, h100, rl.Workload(rl.Phase.DECODE, batch=1, context_len=2048))
for c in (prefill, decode):
    print(f"{c.workload.phase.value:8} intensity {c.arithmetic_intensity:8.1f} FLOP/B -> {c.bound.value}-bound, {c.step_time_s * 1e3:.2f} ms")
assert prefill.bound is rl.Bound.COMPUTE and decode.bound is rl.Bound.MEMORY""",
    ),
    ("code", """plots.roofline_plot([prefill, decode], [h100], "llama-3.1-8b on h100-sxm")"""),
    ("code", """decode   # a step shows its per-operator table"""),
    ("md", "The ridge points of the five architectures, against their device memory:"),
    (
        "code",
        """five = [rl.get_accelerator(n) for n in rl.DEFAULT_ACCELERATORS]
pd.DataFrame([{"accelerator": a.name, "device memory": a.device_level,
               "ridge (FLOP/B)": a.ridge_point()} for a in five])""",
    ),
    ("md", "What one decode step reads on IBM Spyre, and how long each level takes to deliver it:"),
    (
        "code",
        """spyre = rl.get_accelerator("ibm-spyre")
reads = rl.decode_reads(m, spyre, batch=1, context=4096)
print(f"weights {reads.weight_bytes / 1e9:.2f} GB, KV {reads.kv_bytes / 1e9:.3f} GB, "
      f"activations {reads.activation_bytes / 1e6:.1f} MB")
pd.DataFrame([{"level": t.level, "time (ms)": t.time_s * 1e3, "fits": t.fits} for t in reads.per_level])""",
    ),
]

NOTEBOOKS["03_who_decides"] = [
    (
        "md",
        """# Module 3 — Who decides where data lives

> On some accelerators the hardware decides what to keep close to the compute units. On others
> the compiler decides. Most machines, including GPUs, split the work between the two. The jobs a
> compiler must take on when there is no hardware cache: tiling, allocation, explicit transfers,
> double buffering, synchronisation.

Every memory level of the catalog says who manages it: `hardware` (a cache), `kernel` (software
managed by kernel code: CUDA shared memory, AMD LDS), `compiler` (static placement: registers,
TPU VMEM, Spyre LX, Groq SRAM) or `runtime` (an allocator: vLLM's block manager in HBM).

TPU VMEM is `compiler`-managed even under a Pallas kernel: XLA places every buffer and emits the
HBM↔VMEM DMAs, and a Pallas kernel only declares its tiles (`BlockSpec`), from which the
Pallas/Mosaic compiler emits the double-buffered DMA pipeline.

The first three are the course's **three kinds of local memory**: a hardware-managed cache, a
software-managed scratchpad, and compiler-managed local memory (`ManagedBy.local_memory`).
A runtime-managed level is device or host memory, not local to the compute.""",
    ),
    ("code", SETUP),
    (
        "code",
        """rows = []
for name in rl.DEFAULT_ACCELERATORS:
    for lvl in rl.get_accelerator(name).levels:
        kind = lvl.managed_by.local_memory
        rows.append({"accelerator": name, "level": lvl.name, "scope": lvl.scope.value,
                     "bytes": lvl.total_capacity_bytes, "managed by": lvl.managed_by.value,
                     "kind of local memory": kind.value if kind else "(device or host memory)"})
pd.DataFrame(rows)""",
    ),
    (
        "md",
        """Without a cache, the compiler writes the program that moves every byte. `compile_schedule`
does what such a compiler does for one decode step on Spyre: tiles each operator for one core's
scratchpad, plans double-buffered loads and stores, and simulates the timeline.""",
    ),
    (
        "code",
        """from ridgeline.analytic import dataflow
from ridgeline.report import tiling_plots

m, spyre = rl.get_model("llama-3.1-8b"), rl.get_accelerator("ibm-spyre")
s = dataflow.compile_schedule(m, spyre, rl.Workload(rl.Phase.DECODE, batch=1, context_len=1024))
print(f"compiled step {s.time_s * 1e3:.2f} ms against a roofline of {s.roofline_time_s * 1e3:.2f} ms")
tiling_plots.timeline_plot(s)""",
    ),
    (
        "md",
        """One KV cache, one orchestrator per architecture: the managers on the KV's path from where it
lives to where it is computed on (`Accelerator.orchestrator`, the label `orchestrate`,
`kv-manage`, the report and the quiz all use). On Spyre the runtime (vLLM-Spyre) places each
sequence's KV in LPDDR5, and during a step only instructions the compiler emitted move it into LX.""",
    ),
    (
        "code",
        """from ridgeline.analytic.orchestrate import orchestrate

five = [rl.get_accelerator(n) for n in rl.DEFAULT_ACCELERATORS]
print("; ".join(f"{a.name}: {a.orchestrator} ({' -> '.join(l.name for l in a.kv_path)})" for a in five))
gpu, tpu = five[0], five[1]
rep = orchestrate(m, 1, 4096, gpu, tpu, spyre)
pd.DataFrame([{"accelerator": r.accelerator, "orchestrator": r.orchestrator, "KV lives in": r.kv_home,
               "binding level": r.binding, "time (us)": r.time_s * 1e6} for r in rep.rows])""",
    ),
]

NOTEBOOKS["04_five_architectures"] = [
    (
        "md",
        """# Module 4 — Five architectures compared

> The five questions from module 1 are applied to GPU, TPU, Cerebras, Groq and Spyre. Compare
> their memory hierarchies, capacity and bandwidth, and identify the resource that is scarce on
> each machine.""",
    ),
    ("code", SETUP),
    (
        "code",
        """m = rl.get_model("llama-3.1-8b")
w = rl.Workload(rl.Phase.DECODE, batch=1, context_len=4096)
rows = []
for name in rl.DEFAULT_ACCELERATORS:
    acc = rl.get_accelerator(name)
    ans = rl.five_questions(m, acc, w)
    rows.append({"accelerator": name, "usable / installed (GB)":
                 f"{acc.device_capacity_bytes / 1e9:.4g} / {acc.device_installed_bytes / 1e9:.4g}",
                 "bandwidth (TB/s)": acc.device_bandwidth_bytes_per_s / 1e12,
                 "ridge (FLOP/B)": acc.ridge_point(), "scarce on the roofline": ans.roofline.text,
                 "expected to bind (one chip)": ans.expected.text})
pd.DataFrame(rows)""",
    ),
    (
        "md",
        """Question 5 has two answers, both from `analytic.binding`: on the roofline (intensity against
the ridge point, what the course computes) and expected (the calibrated model's largest share
of the step). They differ where fixed latency dominates: on the wafer, the roofline says
compute, the calibrated model says the per-layer latency of the fabric.

Each architecture on the smallest deployment of its chips that holds the model and its KV
(what binds there, expected):""",
    ),
    (
        "code",
        """cmp = rl.compare(m)
cmp""",
    ),
    ("code", """plots.compare_plot(cmp)"""),
    (
        "code",
        """for row in cmp.rows:
    print("-", row.binds)""",
    ),
]

NOTEBOOKS["05_tiling_layout"] = [
    (
        "md",
        """# Module 5 — Tiling and layout

> Tiling decides how much data fits on chip and how often it is reused. Size matmul tiles against
> the scratchpad of one Spyre core and measure how tile size changes arithmetic intensity. Data
> layout, memory banks, access order and alignment affect bandwidth. FlashAttention applies the
> same tiling ideas to attention.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from ridgeline.analytic import flash, layout, tiling
from ridgeline.report import tiling_plots

spyre, h100 = rl.get_accelerator("ibm-spyre"), rl.get_accelerator("h100-sxm")
mm = tiling.Matmul(1, 4096, 14336)          # one decode token through llama-3.1-8b's up projection
cmp = tiling.compare_tiles((spyre, h100), mm)
for rep in cmp.reports:
    b = rep.best
    print(f"{rep.scratchpad.name}: best tile {b.tile.tm}x{b.tile.tk}x{b.tile.tn}, intensity {b.intensity:.3g} FLOP/B, "
          f"ridge {rep.curve.ridge_point:.3g}: {rep.curve.reason}")""",
    ),
    (
        "code",
        """prefill = tiling.compare_tiles((spyre, h100), tiling.Matmul(2048, 4096, 14336))
tiling_plots.intensity_plot([(r.scratchpad.name, r.curve) for r in prefill.reports], "[2048 x 4096]·[4096 x 14336] bf16")""",
    ),
    (
        "md",
        "Layout: a strided walk over 2-byte elements uses only part of each 128-byte stick it loads:",
    ),
    (
        "code",
        """pd.DataFrame([{"stride (elements)": s, "useful fraction": layout.strided_efficiency(s, 2, 128)}
              for s in (1, 2, 4, 16, 64, 128)])""",
    ),
    (
        "md",
        "FlashAttention: standard attention writes the N×N score matrix to HBM; tiled attention reads K and V once per block of queries (Dao et al., NeurIPS 2022):",
    ),
    (
        "code",
        """m = rl.get_model("llama-3.1-8b")
table = flash.flash_for_model(m.name, m.head_dim, m.num_heads, (h100, spyre), 8192)
tiling_plots.flash_plot(table)""",
    ),
]

NOTEBOOKS["06_kv_sizing"] = [
    (
        "md",
        """# Module 6 — Sizing the KV cache

> The KV cache stores the keys and values of every earlier token. Its size is the product of six
> numbers: layers, batch size, context length, KV heads, head dimension and bytes per element.
> Compute it, find the context at which it becomes larger than the weights, and see how four
> techniques reduce it.

KV bytes = 2 × layers × batch × context × kv_heads × head_dim × bytes (Pope et al., MLSys 2023).""",
    ),
    ("code", SETUP),
    (
        "code",
        """m = rl.get_model("llama-3.1-8b")
layers, kv_heads, head_dim, bytes_per = m.num_layers, m.num_kv_heads, m.head_dim, 2
by_hand = 2 * layers * kv_heads * head_dim * bytes_per
print(f"2 x {layers} x {kv_heads} x {head_dim} x {bytes_per} = {by_hand:,} B per token")
assert by_hand == rl.kv_bytes_per_token(m)""",
    ),
    (
        "code",
        """cross = rl.crossover_context(m)
print(f"the KV of one sequence passes the {rl.weights_bytes(m) / 1e9:.1f} GB of weights at {cross:,} tokens")""",
    ),
    ("code", """rl.kv_summary(m, batch=8, context=32768, target=rl.get_accelerator("h100-sxm"))"""),
    ("code", """plots.kv_plot(m, acc=rl.get_accelerator("h100-sxm"))"""),
    (
        "code",
        """techs = rl.techniques(m, batch=8, context=32768)
plots.techniques_plot(techs, "llama-3.1-8b: KV at batch 8, 32,768 tokens")""",
    ),
]

NOTEBOOKS["07_kv_runtime"] = [
    (
        "md",
        """# Module 7 — Managing KV at runtime

> When a model serves many users, the size and lifetime of each request's KV cache are known only
> at runtime: continuous batching, PagedAttention, prefix caching, chunked prefill and
> disaggregation, KV tiering, speculative decoding — on a GPU, then on a dataflow accelerator
> with a compiled schedule.

The serving simulator runs the same scheduler and block pool as the real engine, with each step
priced by the analytic cost model.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from ridgeline.report import serving_plots
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import LengthDist, Lengths, SimConfig, WorkloadSpec, generate
from ridgeline.sim.variants import compare

m, a100 = rl.get_model("llama-2-7b"), rl.get_accelerator("a100-80gb")
workload = generate(WorkloadSpec(num_requests=150, rate_per_s=4, num_prefixes=4, prefix_len=512,
                                 prompt=Lengths(LengthDist.LOGNORMAL, 512, hi=2048),
                                 output=Lengths(LengthDist.LOGNORMAL, 128, hi=512), seed=0))
pricing = rl.Pricing.of(a100)  # calibrated: the expected step times (rl.Pricing.ideal: the roofline)
base = SimConfig(m, pricing, SchedulerConfig(max_model_len=4096))
results = compare(base, workload, ["paged", "contiguous", "static", "prefix", "spec"]).results
pd.DataFrame([{"config": r.label, "TTFT p50 (ms)": r.ttft_s.p50 * 1e3, "TPOT p50 (ms)": r.tpot_s.p50 * 1e3,
               "KV peak": r.kv_peak_frac, "unused allocated": r.unused_allocated_frac,
               "prefix hit": r.prefix_hit_rate} for r in results])""",
    ),
    (
        "md",
        "Reserving the longest request up front (contiguous) wastes what paged blocks keep; prefix caching skips the shared system prompts; speculation shortens TPOT:",
    ),
    (
        "code",
        """paged, contiguous, static, prefix, spec = results
assert paged.unused_allocated_frac < contiguous.unused_allocated_frac
assert prefix.ttft_s.p50 < paged.ttft_s.p50 and spec.tpot_s.p50 < paged.tpot_s.p50
serving_plots.kv_timeline_plot(results, pricing.label)""",
    ),
    ("code", """serving_plots.latency_cdf_plot(results, pricing.label)"""),
    (
        "md",
        """Chunked prefill is judged where it matters: long prompts arriving among running decodes
(`sim.kv_lessons.stall_trace`). Prefilling a long prompt whole stalls every running decode
for the whole prefill; chunks bound the stall to one chunk's step. The stalls are a few
percent of the gaps, so the statistic is the longest gap a decode sees and p99.9, not p99:""",
    ),
    (
        "code",
        """from ridgeline.sim.kv_lessons import stall_trace

stalls = compare(base, stall_trace(4096), ["no-chunk", "paged"]).results
pd.DataFrame([{"config": "whole prompts" if r.label == "no-chunk" else "512-token chunks",
               "longest stall (ms)": r.itl_tail.max_s * 1e3, "ITL p99.9 (ms)": r.itl_tail.p999_s * 1e3,
               "ITL p99 (ms)": r.itl_s.p99 * 1e3, "ITL p50 (ms)": r.itl_s.p50 * 1e3} for r in stalls])""",
    ),
    (
        "code",
        """whole, chunked = stalls
assert chunked.itl_tail.max_s < whole.itl_tail.max_s""",
    ),
    (
        "md",
        "On Spyre the compiler fixes batch slots and sequence buckets ahead of time (the `static` policy); the padding is reserved memory:",
    ),
    (
        "code",
        """spyre_base = SimConfig(rl.get_model("llama-3.1-8b"), rl.Pricing.of(rl.get_accelerator("ibm-spyre")), SchedulerConfig(max_model_len=4096))
spyre = compare(spyre_base, workload[:60], ["paged", "static"]).results
spyre[1]""",
    ),
]

NOTEBOOKS["08_lab_profiling"] = [
    (
        "md",
        """# Module 8 — Lab: profiling memory access patterns in LLMs

> Profile memory access during distilgpt2 generation using torch.profiler with memory tracking.
> Identify the memory-intensive operators and the peak allocation during decode, then measure
> effective bandwidth against an analytically known byte count to see why allocator activity is
> not bandwidth. Derive the KV-cache size formula, confirm it against measured memory, compare
> its cost under MHA, GQA and MQA, and size it for a scratchpad.

This notebook runs on a CPU with distilgpt2's configuration and random weights (nothing is
downloaded), at small sizes; `ridgeline lab` runs the full grid (see docs/lab.md). It needs the
torch extra.""",
    ),
    ("code", SETUP + "\nimport time\nimport torch"),
    (
        "code",
        """from ridgeline.lab.configs import raw_config
from ridgeline.lab.decode import measure_point
from ridgeline.lab.hf import build_model
from ridgeline.lab.points import PointConfig

torch.set_num_threads(1)
lm = build_model(raw_config("distilgpt2"), "distilgpt2")
points = {}
for batch in (1, 4):
    cfg = PointConfig(batch=batch, context=128, steps=4, warmup=1, memory_steps=1, profile_steps=1)
    points[batch] = measure_point(lm, cfg)
def mib(x):
    return None if x is None else x / 2**20

pd.DataFrame([{"batch": b, "median step (ms)": p.timing.median_s * 1e3, "KV (MiB)": mib(p.memory.kv_bytes),
               "heap rise in a step (MiB)": mib(p.memory.malloc_max_above_start_bytes),
               "resident peak rise in a step (MiB)": mib(p.memory.rss_peak_above_start_bytes)}
              for b, p in points.items()])""",
    ),
    (
        "md",
        """The two rises are those of one decode step over a cache that already exists. The heap rise
(glibc's in-use bytes after the step, `mallinfo2`) is what the step leaves allocated: one more
token of KV per sequence, batch × 36,864 B here (6 layers × K and V × 768 × 4 B of fp32), the
formula below; the step's temporaries are freed by then. The resident peak barely moves (often
0) because those bytes land in pages the allocator already holds: resident memory grows by whole
pages, and only when the allocator asks the system for more. `None` means this system does not
expose the figure (no `/proc/self/clear_refs`, or not glibc). The
KV cache's own growth shows in the peak as the context grows: `ridgeline lab kv` measures it in
a process of its own (a fresh cache filled in chunks, the slope of the resident peak per token
against the formula; docs/lab.md), where memory freed by earlier cells cannot hide it.""",
    ),
    (
        "md",
        "Effective bandwidth = the bytes one step must move (analytic: weights + KV + activations, fp32) ÷ the measured time, against what this machine's memory streams:",
    ),
    (
        "code",
        """x = torch.ones(64 * 2**20 // 4)
x.sum()
t0 = time.perf_counter(); x.sum(); read_s = time.perf_counter() - t0
stream = x.numel() * 4 / read_s
fp32 = rl.Dtypes(rl.DType.FP32, rl.DType.FP32, rl.DType.FP32)
for batch, p in points.items():
    step = rl.step_cost(lm.spec, rl.get_accelerator("xeon-spr"), rl.Workload(rl.Phase.DECODE, batch, 128, dtypes=fp32))
    eff = step.bytes / p.timing.median_s
    print(f"B={batch}: {step.bytes / 1e6:.0f} MB per step -> {eff / 1e9:.1f} GB/s effective; a plain read streams {stream / 1e9:.1f} GB/s")""",
    ),
    (
        "md",
        "The profiler's view: the top operators of a decode step and what the peak during decode is made of. Allocated bytes are not bytes moved:",
    ),
    (
        "code",
        """from ridgeline.lab.profile import run_profile

rep = run_profile(PointConfig(batch=4, context=128, profile_steps=2), trace_path=None)
c = rep.composition
print(f"peak {c.peak / 2**20:.1f} MiB = parameters {c.parameters / 2**20:.1f} + KV {c.kv_at_start / 2**20:.1f} + temporaries {c.temporaries / 2**20:.1f}")
print(f"allocated per step / moved per step = {rep.allocated_over_moved:.3f}")
pd.DataFrame([{"op": o.name, "self ms/step": o.self_s_per_step * 1e3, "share": o.share} for o in rep.summary.top_time[:8]])""",
    ),
    (
        "md",
        "The KV formula against the cache tensors (exact), MHA vs GQA vs MQA, and tokens of KV per Spyre scratchpad:",
    ),
    (
        "code",
        """from ridgeline.lab.kvlab import run_kv, variants

kv = run_kv(batch=2, context=256, decode_steps=1, set_mmap_threshold=False, models=variants())
assert all(c.exact for c in kv.checks)
pd.DataFrame([{"model": c.name, "KV heads": c.num_kv_heads, "formula (B)": c.formula_bytes,
               "cache tensors (B)": c.tensor_bytes, "decode (ms)": c.decode_median_s * 1e3} for c in kv.checks])""",
    ),
    (
        "code",
        """from ridgeline.report import lab_plots

lab_plots.kv_variants_plot(kv.to_dict()["checks"], batch=2, context=256)""",
    ),
    (
        "code",
        """pd.DataFrame([{"model": f.model, "tokens per layer and head": f.tokens_per_head,
               "per layer": f.tokens_per_layer, "whole model": f.tokens_all_layers} for f in kv.scratchpad])""",
    ),
]


def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """One notebook; cell ids are derived from the notebook's name and the cell's position, so
    rerunning the script rewrites only the cells that changed."""
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells
    ]
    for i, cell in enumerate(nb.cells):
        cell.id = hashlib.sha256(f"{name}/{i}".encode()).hexdigest()[:8]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        nbformat.write(build(name, cells), OUT / f"{name}.ipynb")
    print(f"wrote {len(NOTEBOOKS)} notebooks to {OUT}")


if __name__ == "__main__":
    main()
