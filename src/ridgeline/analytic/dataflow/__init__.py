"""The compiled schedule of one step on a scratchpad accelerator, and its simulated timeline.

On IBM Spyre the compiler, not a cache, moves every byte between device memory (LPDDR5) and
each core's scratchpad (LX), and every core runs the same program on its own tile (SPMD;
torch-spyre docs, "Dataflow Accelerator Architecture" and "Scratchpad (LX) optimization",
https://torch-spyre.readthedocs.io/en/latest/). This package does what such a compiler does for
one step of a model, at the level of detail a learner can check by hand:

1. takes the step's operators and their bytes from ``op_terms`` (one source of truth),
2. splits each operator across the cores (matmuls by output columns, attention over the KV
   cache by keys as in Flash-Decoding, everything else evenly),
3. tiles each core's share to the scratchpad (``tiling.best_tile`` for matmuls) and emits the
   per-core program — ``load``, ``ring``, ``compute``, ``store`` with sizes and scratchpad
   addresses — double-buffered so the next tile's load overlaps this tile's compute,
4. simulates it: one DMA queue per core at its share of device bandwidth (all cores stream at
   once, so each gets bandwidth ÷ cores), a compute engine at peak ÷ cores scaled by how much
   of the systolic array the tile fills, and the ring for inter-core traffic.

Per-core program of one double-buffered operator (buffers b0, b1)::

    DMA    | load t0→b0 | load t1→b1 | store t0 | load t2→b0 | store t1 | ...
    ring   | gather input (all-gather of the shared activation) |
    core   |            | compute t0 |          | compute t1 |          | ...

Bytes loaded from device memory equal the step's analytic bytes read (weights + KV +
activations, ``OpTerms.bytes_read``) plus the re-loads a plan declares (a matmul tile order
that streams an operand more than once, FlashAttention passes over Q/O in prefill).

Shapes are static: the schedule is compiled for a (batch, context) bucket, and a request that
does not fill the bucket pays for the padding.

The package follows those seams: ``program`` (instructions, buffers, a core's resources),
``compile`` (operators → per-core programs), ``simulate`` (one program's timeline),
``schedule`` (the whole step for a bucket) and ``render`` (listing, timeline segments).
"""

from ridgeline.analytic.dataflow.compile import compile_op, matmul_dims
from ridgeline.analytic.dataflow.program import (
    NO_RING_NOTE,
    Buffer,
    Category,
    Core,
    Instr,
    Kind,
    Lane,
    OpKind,
    OpProgram,
    Step,
    core_of,
)
from ridgeline.analytic.dataflow.render import Segment, listing, program_of, step_timeline
from ridgeline.analytic.dataflow.schedule import (
    Bucket,
    CategoryBytes,
    Gap,
    OpSummary,
    Schedule,
    ScheduleOptions,
    compile_schedule,
    default_bucket,
)
from ridgeline.analytic.dataflow.simulate import Event, OpRun, simulate_op

__all__ = [
    "NO_RING_NOTE",
    "Bucket",
    "Buffer",
    "Category",
    "CategoryBytes",
    "Core",
    "Event",
    "Gap",
    "Instr",
    "Kind",
    "Lane",
    "OpKind",
    "OpProgram",
    "OpRun",
    "OpSummary",
    "Schedule",
    "ScheduleOptions",
    "Segment",
    "Step",
    "compile_op",
    "compile_schedule",
    "core_of",
    "default_bucket",
    "listing",
    "matmul_dims",
    "program_of",
    "simulate_op",
    "step_timeline",
]
