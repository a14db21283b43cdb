"""The fast mode's KV blocks with prefix caching: the scheduler's own ``BlockPool``, driven the
way stepping drives it, with three economies it cannot observe.

``sim.fast`` keeps the decode group's state in counters; with prefix caching the pool's state
also decides what later requests find (which free blocks still hold a prefix, in which order
they are evicted), so every allocation, hit, hash and free goes through ``BlockPool`` in the
order stepping makes them (``KVCacheManager``'s rules: a hit takes a reference on its blocks,
reviving free cached ones; new blocks come uncached first, then by eviction; a table is freed
tail first, full blocks cached, the partial one not)::

    admission   find (longest run of cached block identities, at least one token left)
                -> touch the hit, allocate the rest            (CachedBlocks.admit)
    a step      prompt blocks the step filled get their identities     (cache)
    group       blocks the members cross into are taken in bulk         (take_spare)
    leaving     a member's grown blocks join its table                  (tie)
    finish      full blocks hashed, table freed tail first              (release)

The economies:

- **Identities.** A block's identity is an int interned from (the previous block's identity,
  its tokens as runs of consecutive ids): equal exactly when the token prefixes are, like the
  chained hashes of ``serving.prefix`` (``BlockIds``), at a fraction of hashing the tokens.
- **Bulk.** The decode group's blocks are allocated at the steps they are needed (so they evict
  what stepping evicts, in its order) but handed to their requests only when those leave the
  group; a block's id is never observed, only the pool's counts and cached identities are.
- **Late hashes.** Blocks holding output tokens are hashed when their request releases them
  (stepping hashes them as they fill): no other request can match them (``covers`` in
  ``sim.fast`` keeps workloads whose prompts repeat outputs out), and a request cannot find
  its own blocks while it holds them. A finished request's are hashed with a placeholder of
  its own; a preempted one's with their real identities, which its readmission looks up.
  Once back, such a request recomputes blocks whose old copies may still hold their hashes
  (a new copy is mapped only if the old one was evicted before it filled), so its blocks are
  hashed as they fill (``outputs``), and ``sim.fast`` runs its steps explicitly.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING

from ridgeline.serving.block_pool import BlockPool, KVBlock
from ridgeline.serving.eviction import make_eviction
from ridgeline.sim.workload import RequestSpec, Tokens

if TYPE_CHECKING:
    from ridgeline.sim.fast import _FastInstance
    from ridgeline.sim.loop import SimConfig


class BlockIds:
    """Interned identities of full blocks: (previous identity, tokens) -> int (module doc)."""

    __slots__ = ("block_size", "_ids")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._ids: dict[tuple[int, object], int] = {}

    def extend(self, sigs: list[int], tokens: Sequence[int], upto: int) -> None:
        """Extend ``sigs`` (the identities of the leading full blocks of ``tokens``) to
        ``upto`` blocks."""
        bs, ids = self.block_size, self._ids
        parent = sigs[-1] if sigs else -1
        for b in range(len(sigs), upto):
            key = (parent, _content(tokens, b * bs, (b + 1) * bs))
            parent = ids.get(key, -2)
            if parent == -2:
                parent = ids[key] = len(ids)
            sigs.append(parent)


def _content(tokens: Sequence[int], lo: int, hi: int) -> object:
    """Tokens ``lo:hi`` in a form equal exactly when the tokens are."""
    if isinstance(tokens, Tokens):
        runs = tokens.runs(lo, hi)
        if runs is not None:
            return runs
    return tuple(tokens[lo:hi])


class CachedBlocks:
    """Block tables of the fast mode's requests (in the log's order) over a ``BlockPool`` with
    prefix caching (module docstring).

    Args:
        pool: the instance's pool (empty).
        specs: the requests, in the log's order.
    """

    def __init__(self, pool: BlockPool, specs: Sequence[RequestSpec]) -> None:
        self.pool = pool
        self.bs = pool.block_size
        self.specs = specs
        n = len(specs)
        self.tables: list[list[KVBlock]] = [[] for _ in range(n)]
        self.hashed = [0] * n  # leading table blocks that carry their identity
        self.sigs: list[list[int]] = [[] for _ in range(n)]  # identities, as far as computed
        self.spare: list[KVBlock] = []  # taken for the decode group, not yet tied to a member
        self.ids = BlockIds(self.bs)
        self._placeholder = -1  # placeholder hashes count down, below every identity

    @property
    def free(self) -> int:
        return self.pool.num_free

    @property
    def used(self) -> int:
        return self.pool.num_used

    def _tokens(self, i: int, num_tokens: int) -> Sequence[int]:
        spec = self.specs[i]
        if num_tokens <= spec.prompt_len:
            return spec.prompt
        out = spec.output
        if isinstance(spec.prompt, Tokens) and isinstance(out, range):
            return spec.prompt + Tokens([out])
        return tuple(spec.prompt) + tuple(out)

    def _sig(self, i: int, b: int, num_tokens: int) -> int:
        sigs = self.sigs[i]
        if b >= len(sigs):
            self.ids.extend(sigs, self._tokens(i, num_tokens), b + 1)
        return sigs[b]

    def find(self, i: int, num_tokens: int) -> list[KVBlock]:
        """The longest cached prefix of request ``i`` holding ``num_tokens`` tokens, leaving at
        least one to compute (``KVCacheManager.find_prefix`` on the device)."""
        hit: list[KVBlock] = []
        lookup = self.pool.lookup
        for b in range((num_tokens - 1) // self.bs):
            block = lookup(self._sig(i, b, num_tokens))
            if block is None:
                break
            hit.append(block)
        return hit

    def admit(self, i: int, hit: list[KVBlock], new: int) -> None:
        """Request ``i`` (no table) takes the ``hit`` blocks and ``new`` fresh ones."""
        self.pool.touch(hit)
        table = self.tables[i] = list(hit)
        self.hashed[i] = len(hit)
        if new > 0:
            got = self.pool.allocate(new)
            assert got is not None, "the caller checked the free blocks"
            table += got

    def grow(self, i: int, n: int) -> None:
        """``n`` fresh blocks at the end of request ``i``'s table."""
        got = self.pool.allocate(n)
        assert got is not None, "the caller checked the free blocks"
        self.tables[i] += got

    def take_spare(self, n: int) -> None:
        """``n`` blocks for the decode group's members (``tie`` hands them out)."""
        if n:
            got = self.pool.allocate(n)
            assert got is not None, "the caller checked the free blocks"
            self.spare += got

    def tie(self, i: int, held: int) -> None:
        """Request ``i`` leaves the decode group holding ``held`` blocks: its table takes the
        blocks it grew into from the spare ones."""
        grown = held - len(self.tables[i])
        if grown > 0:
            self.tables[i] += self.spare[-grown:]
            del self.spare[-grown:]

    def cache(self, i: int, computed: int, outputs: bool) -> bool:
        """Give request ``i``'s full blocks, up to ``computed`` tokens, their identity
        (``KVCacheManager.cache_full_blocks``): its prompt's, and those with outputs only when
        ``outputs`` (a request preempted before; the others' wait: module docstring).
        Whether any block got one: a waiting request may now find a longer prefix."""
        spec = self.specs[i]
        full = (computed if outputs else min(computed, spec.prompt_len)) // self.bs
        table, start = self.tables[i], self.hashed[i]
        end = min(full, len(table))
        for b in range(start, end):
            self.pool.cache(table[b], self._sig(i, b, computed))
        self.hashed[i] = max(start, end)
        return end > start

    def release(self, i: int, computed: int, returning: bool) -> int:
        """Free request ``i``'s table tail first, its full blocks hashed first: with their
        identities when it will be back (preempted), placeholders when it is done. Returns
        the blocks that became free."""
        table, before = self.tables[i], self.pool.num_free
        full = min(computed // self.bs, len(table))
        for b in range(self.hashed[i], full):
            if returning:
                h = self._sig(i, b, computed)
            else:
                h, self._placeholder = self._placeholder, self._placeholder - 1
            self.pool.cache(table[b], h)
        self.pool.free(table[::-1])
        self.tables[i], self.hashed[i] = [], 0
        return self.pool.num_free - before


def outputs_reused(workload: Sequence[RequestSpec]) -> bool:
    """Whether a prompt may repeat some request's outputs (multi-turn conversations): then
    blocks holding outputs can be found by other requests, which the late hashes above do not
    allow. Prompts that are not ``Tokens`` or outputs that are not ranges are assumed to."""
    spans = []
    for r in workload:
        if not isinstance(r.output, range) or not isinstance(r.prompt, Tokens):
            return True
        if len(r.output):
            spans.append((r.output.start, r.output.stop))
    spans.sort()
    starts = [a for a, _ in spans]
    reach = list(accumulate((b for _, b in spans), max))  # furthest end among the first k
    for r in workload:
        for part in r.prompt.parts:  # type: ignore[attr-defined]
            k = bisect_left(starts, part.stop)  # spans starting before the part ends
            if k and reach[k - 1] > part.start:
                return True
    return False


# ---- the fast mode's block operations, with or without prefix caching (``sim.fast``) ----------


def cached_blocks(
    cfg: SimConfig, num_blocks: int, specs: Sequence[RequestSpec]
) -> CachedBlocks | None:
    """The fast mode's blocks under ``cfg`` with prefix caching (None without)."""
    if not cfg.prefix_caching:
        return None
    return CachedBlocks(BlockPool(num_blocks, cfg.block_size, make_eviction(cfg.eviction)), specs)


def no_returning(inst: _FastInstance) -> bool:
    """Whether no running request was preempted before (or there is no prefix caching): one
    that was recomputes blocks its first turn hashed, whose new copies take the hash or not as
    the old copies were evicted at that very step, so its blocks are hashed as they fill
    (``CachedBlocks.cache`` with ``outputs``), in ``sim.fast``'s general steps."""
    return inst.cache is None or not any(inst.npre[i] for i in inst.running)


def free_table(inst: _FastInstance, i: int, at: int, returning: bool) -> None:
    """Release request ``i``'s blocks (its explicit values are current): with prefix caching
    its full blocks stay cached, with their identities when it is ``returning``."""
    cache = inst.cache
    if cache is None:
        inst.steps.event(at, -inst.held[i], inst.comp[i])
        inst.free += inst.held[i]
    else:
        freed = cache.release(i, inst.comp[i], returning)
        inst.steps.event(at, -freed, inst.comp[i], -inst.held[i])
        inst.free = cache.free
    inst.held[i] = 0


def take_admitted(inst: _FastInstance, i: int, hit: list[KVBlock], need: int, at: int) -> None:
    """Request ``i`` is admitted with the cached ``hit`` blocks and ``need`` new ones."""
    cache = inst.cache
    if cache is None:
        inst.held[i] += need
        inst.free -= need
        inst.steps.event(at, need)
        return
    used = cache.used
    cache.admit(i, hit, need)
    inst.held[i] = len(cache.tables[i])
    inst.free = cache.free
    cached = len(hit) * inst.bs
    inst.comp[i] += cached  # the hit's tokens count as computed (Scheduler._admit_one)
    inst.steps.event(at, cache.used - used, -cached, need + len(hit))


def cache_prompt(inst: _FastInstance, i: int) -> None:
    """Request ``i``'s newly full prompt blocks join the prefix cache (and those with outputs
    if it was preempted: ``no_returning``): a request blocked on memory may now
    find more of its prompt there, so admission is tried again (stepping tries every step)."""
    cache = inst.cache
    if cache is not None and cache.cache(i, inst.comp[i], inst.npre[i] > 0):
        inst.blocked = False


def cache_last_prompts(inst: _FastInstance) -> None:
    """Members that just computed their prompt's last token: its full blocks join the prefix
    cache, as stepping caches them after the step (before anything it frees)."""
    cache = inst.cache
    if cache is None:
        return
    for i in inst.last_prompt:
        c = inst.cbase[i] + inst.D
        if inst.tight[i]:
            cache.tie(i, -(-c // inst.bs))
        if cache.cache(i, c, False):
            inst.blocked = False
    inst.last_prompt = []


def take_group(
    inst: _FastInstance,
    blocks: list[int],
    finished: Sequence[tuple[int, int]] = (),
    ends: Sequence[float] = (),
    at: int = 0,
) -> None:
    """The decode group takes ``blocks[j]`` blocks at its j-th step; ``finished`` members
    (steps they still took, request; ``ends``: the steps' ends, the first at step ``at``) free
    theirs after their last step. With prefix caching the takes and frees interleave as
    stepping makes them, unless no take can evict a cached block."""
    cache = inst.cache
    if cache is None or cache.pool.num_uncached_free >= sum(blocks):
        if cache is None:
            inst.free -= sum(blocks)
        else:
            cache.take_spare(sum(blocks))
            inst.free = cache.free
        for r, i in _by_step(inst, finished):
            inst.finish_member(i, inst.D - len(ends) + r, ends[r - 1], at + r - 1)
        return
    taken = 0
    for r, i in _by_step(inst, finished):
        cache.take_spare(sum(blocks[taken:r]))
        taken = max(taken, r)
        inst.free = cache.free
        inst.finish_member(i, inst.D - len(ends) + r, ends[r - 1], at + r - 1)
    cache.take_spare(sum(blocks[taken:]))
    inst.free = cache.free


def _by_step(inst: _FastInstance, finished: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``finished`` by step, and in running order within one (the order stepping frees them:
    with prefix caching, the cache's LRU order)."""
    if inst.cache is None or len(finished) < 2:
        return list(finished)
    pos = {i: k for k, i in enumerate(inst.running)}
    return sorted(finished, key=lambda x: (x[0], pos[x[1]]))
