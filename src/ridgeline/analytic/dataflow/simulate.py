"""Simulation of one operator's per-core program: an in-order DMA queue, a ring lane and a
compute engine, with ``buffers``-deep buffering."""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.analytic.dataflow.program import Core, Instr, Kind, OpProgram


@dataclass(frozen=True, slots=True)
class Event:
    """A busy interval of one lane (``dma``, ``ring``, ``compute``) within one layer's op."""

    lane: str
    start_s: float
    end_s: float
    label: str


@dataclass(frozen=True, slots=True)
class OpRun:
    """One operator's simulated run on one core for one layer (all layers alike)."""

    program: OpProgram
    time_s: float
    dma_busy_s: float
    compute_busy_s: float
    ring_busy_s: float
    events: tuple[Event, ...]


def _transfer_s(ins: tuple[Instr, ...], kind: Kind, rate: float) -> float:
    return sum(i.size_bytes for i in ins if i.kind is kind) / rate


def simulate_op(prog: OpProgram, core: Core, keep_events: bool = False) -> OpRun:
    """Timeline of one operator on one core with ``buffers``-deep buffering.

    One in-order DMA queue: the load of tile i+1 is issued before the store of tile i, and a
    load waits until the compute that last used its buffer has finished. Ring transfers run
    on their own lane. Compute i waits for its loads, its ring data and compute i−1.
    """
    nb = _buffers(prog)
    rate = core.flops_per_s * prog.array_util
    dma = ring = comp = 0.0
    comp_end: list[float] = []
    pending_store: tuple[float, float] | None = None  # (ready_s, duration_s)
    busy = {"dma": 0.0, "ring": 0.0, "compute": 0.0}
    events: list[Event] = []

    def note(lane: str, start: float, dur: float, label: str) -> float:
        busy[lane] += dur
        if keep_events and dur > 0:
            events.append(Event(lane, start, start + dur, label))
        return start + dur

    for i, s in enumerate(prog.steps):
        free = comp_end[i - nb] if i >= nb else 0.0
        load_s = _transfer_s(s.loads, Kind.LOAD, core.dram_bytes_per_s)
        loaded = note("dma", max(dma, free), load_s, f"load {i}")
        dma = loaded
        if pending_store is not None:
            dma = note("dma", max(dma, pending_store[0]), pending_store[1], f"store {i - 1}")
        ring_s = _transfer_s(s.loads, Kind.RING, core.ring_bytes_per_s)
        ring = note("ring", max(ring, free), ring_s, f"ring {i}")
        start = max(loaded, ring, comp)
        comp = note("compute", start, s.compute.flops / rate, f"compute {i}")
        comp_end.append(comp)
        pending_store = (comp, _transfer_s(s.stores, Kind.STORE, core.dram_bytes_per_s))
    if pending_store is not None:
        dma = note("dma", max(dma, pending_store[0]), pending_store[1], "store last")
    end = max(dma, ring, comp)
    return OpRun(prog, end, busy["dma"], busy["compute"], busy["ring"], tuple(events))


def _buffers(prog: OpProgram) -> int:
    if prog.plan is not None:
        return prog.plan.buffers
    return max(1, sum(1 for b in prog.buffers if b.name.startswith("in[")))
