"""A compiled step as text and as a timeline: one core's program listing, and the operators in
execution order."""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.analytic.dataflow.program import Kind, OpProgram
from ridgeline.analytic.dataflow.schedule import Schedule
from ridgeline.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Segment:
    """One operator instance on the step's timeline (layer ``layer``, or -1 outside layers)."""

    name: str
    layer: int
    start_s: float
    end_s: float


def program_of(s: Schedule, name: str) -> OpProgram:
    """The per-core program of the operator called ``name``."""
    for r in s.runs:
        if r.program.name == name:
            return r.program
    names = ", ".join(r.program.name for r in s.runs)
    raise ConfigError(f"field program: no operator '{name}' (has {names})")


def listing(prog: OpProgram, max_steps: int = 8) -> tuple[str, ...]:
    """The first ``max_steps`` steps of a core's program as text, one instruction a line::

    step 0  load   weight    24.6 KB -> LX 0x00c00
    """
    lines = [
        f"{prog.name} x{prog.count} layers, {len(prog.steps)} steps per layer, buffers: "
        + ", ".join(f"{b.name}@0x{b.addr:05x}+{b.size_bytes}" for b in prog.buffers)
    ]
    for i, st in enumerate(prog.steps[:max_steps]):
        for ins in (*st.loads, st.compute, *st.stores):
            what = (
                f"{ins.flops:,.0f} FLOP" if ins.kind is Kind.COMPUTE else f"{ins.size_bytes:,.0f} B"
            )
            again = " (re-load)" if ins.reload else ""
            cat = "" if ins.kind is Kind.COMPUTE else ins.category.value
            lines.append(
                f"step {i:<4d} {ins.kind.value:8s}{cat:8s}{what:>16s} LX 0x{ins.addr:05x}{again}"
            )
    if len(prog.steps) > max_steps:
        lines.append(f"... {len(prog.steps) - max_steps} more steps")
    return tuple(lines)


def step_timeline(s: Schedule) -> tuple[Segment, ...]:
    """Operators in execution order: ops outside the layers (count 1) before and after the
    layer loop, per-layer ops repeated ``count`` times inside it."""
    runs = list(s.runs)
    first = next((i for i, r in enumerate(runs) if r.program.count > 1), len(runs))
    last = max((i for i, r in enumerate(runs) if r.program.count > 1), default=first - 1)
    out: list[Segment] = []
    t = 0.0
    for r in runs[:first]:
        out.append(Segment(r.program.name, -1, t, t + r.time_s))
        t += r.time_s
    for layer in range(s.layers):
        for r in runs[first : last + 1]:
            if layer < r.program.count:
                out.append(Segment(r.program.name, layer, t, t + r.time_s))
                t += r.time_s
    for r in runs[last + 1 :]:
        out.append(Segment(r.program.name, -1, t, t + r.time_s))
        t += r.time_s
    return tuple(out)
