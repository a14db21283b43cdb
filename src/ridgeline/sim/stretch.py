"""The fast mode's stretches of plain decode: every member of the decode group owes one token
and nothing can be admitted, so the steps up to the next arrival are priced at once::

    members   ████████████████████          step j: B_j members, S_j cached tokens
              ██████████████                B_j = B − (members finished by j)
              ████████████████████████      S_j = S − (their tokens at the start) + j·B_j
    steps     |0|1|2|3|4|5|6|7|8|9|...      ends: t + time_0 + time_1 + ... (one at a time)

With an empty waiting queue a completion changes only B_j and S_j, so one vector of step times
(``StepCostModel.decode_segment_ends``) runs through completions up to the step in flight at the
next arrival. Blocks: a member takes one at the steps where D ≡ its key (mod block size), so
a step's new blocks are the histogram of keys rotated to D, less the finished members' keys.
The span stops before a step the free blocks might not fund, counting every member's crossings
and none of the blocks completions free (so it never runs short), and the next step preempts
as stepping would.

Without that closed form (a cost model of its own, sliding windows, MoE), or while requests
wait for a completion to make room, a stretch goes one segment of the same members at a time
(``decode_run_s``), stopping after the completion.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from itertools import accumulate
from typing import TYPE_CHECKING

from ridgeline.sim.fast_cache import take_group
from ridgeline.sim.lines import Horizon

if TYPE_CHECKING:
    from ridgeline.sim.fast import _FastInstance

_MAX_SPAN = 8192  # steps priced in one vector (bounds its memory)


def stretch(inst: _FastInstance, now: float, horizon: Horizon) -> float:
    """Group steps from ``now`` until the step where ``horizon`` stops (the step in flight at
    the next arrival, or with async scheduling the one after), through completions while
    nothing can be admitted; returns the end of the last step."""
    t = now
    while True:
        if inst.closed_forms is not None and not inst.waiting_len:
            k = fundable(inst, _span(inst, t, horizon))
            if k > 0:
                t = _through_completions(inst, t, horizon, k)
                if horizon.reached(inst.steps.last_start, t) or not inst.running:
                    return t
                continue
        else:
            k_done = inst.fins[0][0] - inst.D  # steps until the next completion
            k = fundable(inst, k_done)
            if k > 0:
                t, more = _segment(inst, t, horizon, k, k_done)
                if more:
                    continue
                return t
        end = inst.general_step(t)  # the next step needs a block the pool lacks: preempt
        assert end is not None
        return end


def _segment(
    inst: _FastInstance, t: float, horizon: Horizon, k: int, k_done: int
) -> tuple[float, bool]:
    """Up to ``k`` steps of the same members; the end, and whether the stretch goes on."""
    run, d, cbase = inst.running, inst.D, inst.cbase
    times = inst.cost.decode_run_s([cbase[i] + d for i in run], k).tolist()
    # step ends added one at a time from t, as stepping adds them: acc[j + 1] ends step j
    acc = list(accumulate(times, initial=t))
    m = min(k, horizon.steps(acc))
    t = _apply_segment(inst, len(run), acc[: m + 1])
    if horizon.reached(acc[m - 1], t) or m < k_done or not inst.running:
        return t, False
    # a completion that makes room for a waiting request: the next step admits it
    return t, inst.sched.plain_decode_next(len(inst.running), inst.waiting_len, inst.blocked)


def _span(inst: _FastInstance, t: float, horizon: Horizon) -> int:
    """Steps worth pricing at once: past ``horizon`` at the last decode step's pace (steps
    slow as contexts grow and members join, hence the margin), or to the last completion when
    nothing arrives."""
    if horizon.at == float("inf"):
        return min(_MAX_SPAN, max(f for f, _ in inst.fins) - inst.D)
    if inst.pace <= 0:
        return _MAX_SPAN
    return min(_MAX_SPAN, int((horizon.at - t) / inst.pace * 1.1) + 3 + horizon.lagged)


def fundable(inst: _FastInstance, k: int) -> int:
    """How many of the next ``k`` group steps the free blocks fund entirely (every member
    crossing, no blocks freed)."""
    tight, bs, free = inst.num_tight, inst.bs, inst.free
    if not tight or free >= tight * ((k - 1) // bs + 1):  # one block per bs steps at most
        return k
    s = inst.D % bs
    rot = inst.hist[s:] + inst.hist[:s]  # blocks taken at steps 0, 1, ..., bs - 1
    cycles, left = divmod(free, tight)  # whole cycles of bs steps, then part of one
    within = bisect_left(list(accumulate(rot)), left + 1)  # the step that runs short
    return min(k, cycles * bs + within)


def _through_completions(inst: _FastInstance, t: float, horizon: Horizon, k: int) -> float:
    """Up to ``k`` funded steps with an empty waiting queue, members finishing on the way."""
    d, fins, cbase = inst.D, inst.fins, inst.cbase
    done: list[tuple[int, int]] = []  # (steps it still takes, request), in finishing order
    while fins and fins[0][0] - d <= k:
        f, i = heapq.heappop(fins)
        done.append((f - d, i))
    if not fins:
        k = min(k, done[-1][0])
    # step j: b members holding s + j·b tokens, s = Σ (cbase + d) over them
    segments: list[tuple[int, int, int]] = []  # (members, tokens at its first step, steps)
    b, s, j0 = len(inst.running), inst.gsum + len(inst.running) * d, 0
    for r, i in [*done, (k, -1)]:
        if r > j0:
            segments.append((b, s + j0 * b, r - j0))
            j0 = r
        if i >= 0:
            b, s = b - 1, s - cbase[i] - d
    assert inst.closed_forms is not None
    priced = inst.closed_forms.decode_segment_ends(segments, t, horizon)
    assert priced is not None
    ends, inst.pace = priced  # ends[j] ends step j: up to the one in flight at the horizon
    m = len(ends)
    for r, i in done:
        if r > m:  # still decoding when the horizon comes
            heapq.heappush(fins, (r + d, i))
    finished = [x for x in done if x[0] <= m]
    at = len(inst.steps.end)
    blocks = _blocks(inst, m, finished)
    _record(inst, t, ends, _members(inst, segments, at, m, b), blocks)
    take_group(inst, blocks, finished, ends, at)  # and the finished members leave
    return ends[-1]


def _members(
    inst: _FastInstance, segments: list[tuple[int, int, int]], at: int, m: int, final: int
) -> list[int]:
    """The members at each of the first ``m`` steps of ``segments`` (from step ``at``); logs
    the requests running after each: a segment's members after the step before it, and
    after the last step those of the step that would come next (``final`` past the end)."""
    members: list[int] = []
    after = final
    for b, _, n in segments:
        if len(members) == m:  # this segment starts at step m
            after = b
            break
        if members:
            inst.steps.running_after(at + len(members) - 1, b)
        take = min(n, m - len(members))
        members += [b] * take
        if take < n:  # step m is in this segment
            after = b
            break
    inst.steps.running_after(at + m - 1, after)
    return members


def _blocks(inst: _FastInstance, m: int, finished: list[tuple[int, int]]) -> list[int]:
    """Blocks the members take at each of ``m`` steps, the finished ones only while they run."""
    if not inst.num_tight:
        return [0] * m
    bs, d = inst.bs, inst.D
    s = d % bs
    blocks = ((inst.hist[s:] + inst.hist[:s]) * (m // bs + 1))[:m]
    for r, i in finished:
        if inst.tight[i]:
            for j in range(r + (inst.key[i] - d - r) % bs, m, bs):
                blocks[j] -= 1
    return blocks


def _record(
    inst: _FastInstance, start: float, ends: list[float], tokens: list[int], blocks: list[int]
) -> None:
    """Log the group steps from ``start`` to ``ends[-1]``, step j ending at ends[j], with
    ``tokens`` members each (the caller logs the requests running after them, and has the
    group take its ``blocks``: ``sim.fast_cache.take_group``)."""
    m = len(ends)
    inst.steps.extend(start, ends, tokens, blocks, tokens[0] - len(inst.stale))
    inst.stale_gaps(ends[0])
    decoded = sum(tokens)
    inst.log.decode_tokens += decoded
    inst.log.decode_seq_steps += decoded
    inst.D += m
    inst.num_steps += m
    inst.last_end = ends[-1]


def _apply_segment(inst: _FastInstance, members: int, acc: list[float]) -> float:
    """Apply ``len(acc) − 1`` steps of the same ``members`` (step j from acc[j] to acc[j + 1])."""
    m, bs = len(acc) - 1, inst.bs
    at, ends = len(inst.steps.end), acc[1:]
    if inst.num_tight:
        s = inst.D % bs
        rot = inst.hist[s:] + inst.hist[:s]
        blocks = (rot * (m // bs + 1))[:m]
    else:
        blocks = [0] * m
    _record(inst, acc[0], ends, [members] * m, blocks)
    take_group(inst, blocks)
    inst.finish_members(ends[-1], at + m - 1)
    inst.steps.running_after(at + m - 1, len(inst.running))
    return ends[-1]
