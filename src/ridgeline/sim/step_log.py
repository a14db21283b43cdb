"""The fast mode's record of every step: a few numbers a step, KV use summed once at the end.

A step appends its end, tokens computed and the blocks decoding requests took; its start, how
many requests share its inter-token gap and the requests running after it are kept only where
they differ from the previous step's end, its token count and the previous step's running
count (a run of decode steps changes none of them); admissions, chunks, preemptions and
completions add sparse events (step index, blocks added, computed tokens removed).
``arrays`` then gives the KV use after every step exactly as the step-by-step loop samples it
— used blocks are a running sum of blocks added, allocated-but-unused slots are used × block
size minus the running sum of computed tokens — and the inter-token gaps of decode steps, each
with the number of requests that saw it.
"""

from __future__ import annotations

import numpy as np

from ridgeline.sim.metrics import StepSamples


class StepLog:
    """Per-step records — end, tokens computed and blocks added — with what rarely changes
    kept sparse: a step's start where it is not the previous step's end (the instance was
    idle), its gap weight where it is not its token count, and the requests running after
    it where that changed; plus events (step index, blocks added, computed tokens removed,
    and, where prefix caching shares blocks, slots that requests' tables gained beyond the
    blocks the pool gave)."""

    __slots__ = (
        "end",
        "tokens",
        "blocks",
        "ev_at",
        "ev_blocks",
        "ev_comp",
        "idle_at",
        "idle_start",
        "w_at",
        "w_val",
        "run_at",
        "run_val",
        "sh_at",
        "sh_blocks",
    )

    def __init__(self) -> None:
        self.end: list[float] = []
        self.tokens: list[int] = []
        self.blocks: list[int] = []
        self.ev_at: list[int] = []
        self.ev_blocks: list[int] = []
        self.ev_comp: list[int] = []
        self.idle_at: list[int] = []  # steps that did not start at the previous step's end
        self.idle_start: list[float] = []
        self.w_at: list[int] = []  # steps whose gap weight is not their token count
        self.w_val: list[int] = []
        self.run_at: list[int] = []  # run_val[i] requests ran after steps run_at[i], ... (to
        self.run_val: list[int] = []  # the next change)
        self.sh_at: list[int] = []  # table blocks held beyond the pool's used ones (shared)
        self.sh_blocks: list[int] = []

    def event(self, at: int, blocks: int, removed: int = 0, held: int | None = None) -> None:
        """At step ``at``: the pool's used blocks change by ``blocks``, the running requests'
        computed tokens fall by ``removed``, and their tables' blocks change by ``held``
        (default: ``blocks``; it differs where a prefix hit shares blocks in use, or a freed
        table leaves shared ones in use)."""
        self.ev_at.append(at)
        self.ev_blocks.append(blocks)
        self.ev_comp.append(removed)
        if held is not None and held != blocks:
            self.sh_at.append(at)
            self.sh_blocks.append(held - blocks)

    def add(self, start: float, end: float, tokens: int, blocks: int, gap_w: int) -> None:
        """One step (``running_after`` gives its running count once it is applied)."""
        self._starts(start)
        at = len(self.end)
        self.end.append(end)
        self.tokens.append(tokens)
        self.blocks.append(blocks)
        if gap_w != tokens:
            self.w_at.append(at)
            self.w_val.append(gap_w)

    def extend(
        self,
        start: float,
        ends: list[float],
        tokens: list[int],
        blocks: list[int],
        first_gap_w: int,
    ) -> None:
        """Consecutive steps from ``start`` (each starts at the previous one's end), the first
        with gap weight ``first_gap_w`` and the others their token count."""
        self._starts(start)
        if first_gap_w != tokens[0]:
            self.w_at.append(len(self.end))
            self.w_val.append(first_gap_w)
        self.end += ends
        self.tokens += tokens
        self.blocks += blocks

    @property
    def last_start(self) -> float:
        """When the last step started (0 before any)."""
        g = len(self.end)
        if g and self.idle_at and self.idle_at[-1] == g - 1:
            return self.idle_start[-1]
        return self.end[-2] if g > 1 else 0.0

    def _starts(self, start: float) -> None:
        if not self.end or start != self.end[-1]:
            self.idle_at.append(len(self.end))
            self.idle_start.append(start)

    def running_after(self, at: int, running: int) -> None:
        """``running`` requests run after step ``at`` and every later one until told again."""
        if self.run_at and self.run_at[-1] == at:
            self.run_val[-1] = running
        elif not self.run_val or self.run_val[-1] != running:
            self.run_at.append(at)
            self.run_val.append(running)

    def arrays(
        self, num_blocks: int, block_size: int
    ) -> tuple[StepSamples, tuple[np.ndarray, np.ndarray]]:
        """KV use after every step (as the step-by-step loop samples it), and the inter-token
        gaps shared by several requests (end of a step − end of the previous one) with how
        many requests saw each."""
        # in place where it can be: every new array of this size is fresh pages to fault in
        g = len(self.end)
        end = column(self.end, float)
        start = np.empty(g)
        start[1:] = end[:-1]
        start[column(self.idle_at, np.int64)] = column(self.idle_start, float)
        at = column(self.ev_at, np.int64)
        used = column(self.blocks, np.int64)
        np.add.at(used, at, column(self.ev_blocks, np.int64))
        np.cumsum(used, out=used)
        tokens = column(self.tokens, np.int64)
        w = tokens.astype(float)  # the gap weights, before tokens become the computed count
        w[column(self.w_at, np.int64)] = column(self.w_val, np.int64)
        np.subtract.at(tokens, at, column(self.ev_comp, np.int64))
        computed = np.cumsum(tokens, out=tokens)
        held = used.copy()  # the tables' blocks: every holder counts a shared block
        if self.sh_at:
            shared = np.zeros(g, dtype=np.int64)
            np.add.at(shared, column(self.sh_at, np.int64), column(self.sh_blocks, np.int64))
            held += np.cumsum(shared)
        unused = held * block_size
        unused -= computed
        lasting = np.diff(column(self.run_at, np.int64), append=g)  # steps each value holds
        samples = StepSamples(
            start,
            end - start,
            used / num_blocks,
            unused / (num_blocks * block_size),
            np.repeat(column(self.run_val, np.int64), lasting).astype(float),
        )
        keep = np.flatnonzero(w[1:] > 0) + 1
        return samples, (end[keep] - end[keep - 1], w[keep])


def column(values: list[float] | list[int], dtype: type) -> np.ndarray:
    """A list of Python numbers of ``dtype`` as a 1-d array (one pass where ``np.array``
    makes two; converting while reading would be slower than ``astype`` after)."""
    return np.fromiter(values, dtype, len(values))


class StepRecorder:
    """The step-by-step loop's KV samples after every step, in lists until the run ends."""

    __slots__ = ("start", "dur", "used", "unused", "running")

    def __init__(self) -> None:
        self.start: list[float] = []
        self.dur: list[float] = []
        self.used: list[float] = []
        self.unused: list[float] = []
        self.running: list[float] = []

    def add(self, t: float, dur: float, used: float, unused: float, running: int) -> None:
        self.start.append(t)
        self.dur.append(dur)
        self.used.append(used)
        self.unused.append(unused)
        self.running.append(running)

    def extend(
        self, t: np.ndarray, dur: np.ndarray, used: np.ndarray, unused: np.ndarray, running: int
    ) -> None:
        """Samples of several steps with the same number of running requests."""
        self.start += t.tolist()
        self.dur += dur.tolist()
        self.used += used.tolist()
        self.unused += unused.tolist()
        self.running += [running] * len(t)

    def samples(self, interleaved: bool) -> StepSamples:
        """The samples; ``interleaved`` (several instances): in the order their steps ended,
        as stepping records them (a decode run records its steps when it starts)."""
        cols = [
            np.array(x, dtype=float)
            for x in (self.start, self.dur, self.used, self.unused, self.running)
        ]
        if interleaved:
            order = np.argsort(cols[0] + cols[1], kind="stable")
            cols = [c[order] for c in cols]
        return StepSamples(*cols)
