"""The fast mode's record of every step: a few numbers a step, KV use summed once at the end.

A step appends its start, end, tokens computed, the blocks decoding requests took, the requests
running after it and how many requests share its inter-token gap; admissions, chunks,
preemptions and completions add sparse events (step index, blocks added, computed tokens
removed). ``samples`` then gives the KV use after every step exactly as the step-by-step loop
samples it — used blocks are a running sum of blocks added, allocated-but-unused slots are
used × block size minus the running sum of computed tokens — and ``shared_gaps`` the
inter-token gaps of decode steps, each with the number of requests that saw it.
"""

from __future__ import annotations

import numpy as np

from ridgeline.sim.metrics import StepSamples


class StepLog:
    """Per-step records — start, end, tokens computed, blocks added, requests running after,
    and how many requests share the step's inter-token gap — plus sparse events (sample
    index, blocks added, computed tokens removed)."""

    __slots__ = ("start", "end", "tokens", "blocks", "running", "gap_w", "ev_at", "ev_blocks",
                 "ev_comp")  # fmt: skip

    def __init__(self) -> None:
        self.start: list[float] = []
        self.end: list[float] = []
        self.tokens: list[int] = []
        self.blocks: list[int] = []
        self.running: list[int] = []
        self.gap_w: list[int] = []
        self.ev_at: list[int] = []
        self.ev_blocks: list[int] = []
        self.ev_comp: list[int] = []

    def event(self, at: int, blocks: int, removed: int = 0) -> None:
        self.ev_at.append(at)
        self.ev_blocks.append(blocks)
        self.ev_comp.append(removed)

    def add(self, start: float, end: float, tokens: int, blocks: int, gap_w: int) -> None:
        """One step (its running count is appended after it is applied)."""
        self.start.append(start)
        self.end.append(end)
        self.tokens.append(tokens)
        self.blocks.append(blocks)
        self.gap_w.append(gap_w)

    def samples(self, num_blocks: int, block_size: int, end: np.ndarray) -> StepSamples:
        """KV use after every step (as the step-by-step loop samples it); ``end`` is
        ``self.end`` as an array (``column``)."""
        g = len(self.start)
        start = column(self.start, float)
        at = column(self.ev_at, np.int64)
        added = column(self.blocks, np.int64)
        used = np.cumsum(added + np.bincount(at, weights=self.ev_blocks, minlength=g))
        removed = np.bincount(at, weights=self.ev_comp, minlength=g)
        computed = np.cumsum(column(self.tokens, np.int64) - removed)
        slots = num_blocks * block_size
        return StepSamples(
            start,
            end - start,
            used / num_blocks,
            (used * block_size - computed) / slots,
            column(self.running, np.int64).astype(float),
        )

    def shared_gaps(self, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Inter-token gaps shared by several requests (end of a step − end of the previous
        one) and how many requests saw each; ``end`` is ``self.end`` as an array."""
        w = column(self.gap_w, np.int64).astype(float)
        keep = np.flatnonzero(w[1:] > 0) + 1
        return end[keep] - end[keep - 1], w[keep]


def column(values: list[float] | list[int], dtype: type) -> np.ndarray:
    """A list of Python numbers of ``dtype`` as a 1-d array (one pass where ``np.array``
    makes two; converting while reading would be slower than ``astype`` after)."""
    return np.fromiter(values, dtype, len(values))
