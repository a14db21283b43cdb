"""Module 3, who decides where data lives: hardware caches, kernel- and compiler-managed
scratchpads, runtime allocators — read from ``managed_by`` on every level of the catalog."""

from __future__ import annotations

import random

from ridgeline.quiz.generators.common import KEYS, givens, label_choices, pick
from ridgeline.quiz.types import Kind, Mistake, Module, Question
from ridgeline.specs import ManagedBy, get_accelerator
from ridgeline.specs.catalog import accelerator_names

MANAGER_TEXT = {
    ManagedBy.HARDWARE: "hardware (a cache decides on every access)",
    ManagedBy.KERNEL: "kernel code (a software-managed scratchpad)",
    ManagedBy.COMPILER: "the compiler (whole-program static placement)",
    ManagedBy.RUNTIME: "the runtime (an allocator at run time)",
}


def _all_levels() -> list[tuple[str, str]]:
    """Every (accelerator, level) pair of the catalog."""
    return [(a, lvl.name) for a in accelerator_names() for lvl in get_accelerator(a).levels]


def _manager(accelerator: str, level: str) -> ManagedBy:
    return get_accelerator(accelerator).level(level).managed_by


def match_managers_q(rng: random.Random, pairs: tuple[tuple[str, str], ...]) -> Question:
    """Match each memory level to who manages it."""
    del rng
    answer = tuple(_manager(a, lvl).value for a, lvl in pairs)
    lines = []
    for a, lvl in pairs:
        level = get_accelerator(a).level(lvl)
        lines.append((f"{a} {lvl}", f"{level.scope.value}-level, {level.capacity_bytes:,.0f} B"))
    notes = [f"{a} {lvl}: {get_accelerator(a).level(lvl).note}" for a, lvl in pairs]
    return Question(
        generator="match_managers",
        module=Module.MANAGERS,
        kind=Kind.MATCH,
        prompt=(
            "Match each memory level to who decides what lives in it: hardware, kernel, "
            "compiler or runtime. Answer with one word per level, in order, e.g. "
            "hardware,kernel,compiler,runtime."
        ),
        givens=givens(lines),
        params={"levels": [list(p) for p in pairs]},
        answer=answer,
        items=tuple(f"{a} {lvl}" for a, lvl in pairs),
        item_keys=tuple(KEYS[: len(pairs)]),
        options=tuple(m.value for m in ManagedBy),
        solution="; ".join(notes),
    )


def match_managers(rng: random.Random) -> Question:
    """Draw four levels from the catalog covering at least three managers."""
    levels = _all_levels()
    while True:
        pairs = tuple(rng.sample(levels, 4))
        if len({_manager(a, lvl) for a, lvl in pairs}) >= 3:
            return match_managers_q(rng, pairs)


def who_manages_q(rng: random.Random, accelerator: str, level: str) -> Question:
    """Who decides what lives in one level (multiple choice)."""
    lvl = get_accelerator(accelerator).level(level)
    right = lvl.managed_by
    wrong = [
        (
            Mistake.CACHE_FOR_SCRATCHPAD if m is ManagedBy.HARDWARE else Mistake.WRONG_MANAGER,
            MANAGER_TEXT[m],
        )
        for m in ManagedBy
        if m is not right
    ]
    choices, key = label_choices(rng, MANAGER_TEXT[right], wrong)
    return Question(
        generator="who_manages",
        module=Module.MANAGERS,
        kind=Kind.CHOICE,
        prompt=f"On the {accelerator}, who decides what lives in the {level} level?",
        givens=givens(
            [
                ("accelerator", accelerator),
                ("level", f"{level} ({lvl.scope.value}-level, {lvl.capacity_bytes:,.0f} B)"),
            ]
        ),
        params={"accelerator": accelerator, "level": level},
        answer=key,
        choices=choices,
        solution=f"{accelerator} {level} is managed by {right.value}: {lvl.note}",
    )


def who_manages(rng: random.Random) -> Question:
    # Favour the on-chip levels the course is about: scratchpads and caches.
    """Draw one on-chip level (not a runtime-managed one) of any accelerator."""
    on_chip = [(a, lvl) for a, lvl in _all_levels() if _manager(a, lvl) is not ManagedBy.RUNTIME]
    a, lvl = pick(rng, on_chip)
    return who_manages_q(rng, a, lvl)


def _has_cache(accelerator: str) -> bool:
    return any(lvl.managed_by is ManagedBy.HARDWARE for lvl in get_accelerator(accelerator).levels)


def no_cache_q(rng: random.Random, cacheless: str, cached: tuple[str, ...]) -> Question:
    """Which accelerator has no hardware-managed cache anywhere in its hierarchy?"""
    choices, key = label_choices(
        rng, cacheless, [(Mistake.CACHE_FOR_SCRATCHPAD, name) for name in cached]
    )
    return Question(
        generator="no_cache",
        module=Module.MANAGERS,
        kind=Kind.CHOICE,
        prompt=(
            "Which of these accelerators has no hardware-managed cache in its memory hierarchy, "
            "so that software (compiler or kernels) must place every byte on chip?"
        ),
        givens=givens([("candidates", ", ".join(c.text for c in choices))]),
        params={"candidates": [c.text for c in choices]},
        answer=key,
        choices=choices,
        solution=(
            f"{cacheless}: "
            + ", ".join(
                f"{lvl.name} = {lvl.managed_by.value}" for lvl in get_accelerator(cacheless).levels
            )
            + ". The others keep at least one hardware cache: "
            + "; ".join(
                f"{n} "
                + ", ".join(
                    lvl.name
                    for lvl in get_accelerator(n).levels
                    if lvl.managed_by is ManagedBy.HARDWARE
                )
                for n in cached
            )
            + "."
        ),
    )


def no_cache(rng: random.Random) -> Question:
    """Draw one accelerator without a hardware cache and three with one."""
    names = accelerator_names()
    cacheless = pick(rng, [n for n in names if not _has_cache(n)])
    cached = tuple(rng.sample([n for n in names if _has_cache(n)], 3))
    return no_cache_q(rng, cacheless, cached)
