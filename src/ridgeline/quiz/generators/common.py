"""What every generator shares: number formatting for the givens, option shuffling, and the
choice builder that keeps every distractor clear of the answer."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

from ridgeline.analytic.questions import memory_needed_bytes
from ridgeline.analytic.workload import Phase, Workload
from ridgeline.quiz.types import Choice, Given, Mistake
from ridgeline.specs.catalog import FIVE_ARCHITECTURES, get_accelerator
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.hf_config import get_model
from ridgeline.specs.model import ModelSpec
from ridgeline.specs.params import param_counts

T = TypeVar("T")
KEYS = "ABCDEFGH"

# 7–8B models: one accelerator holds them, so single-chip questions stay physical.
SMALL_GQA_MODELS = ("llama-3.1-8b", "qwen2.5-7b")
# Catalog models whose KV heads differ from their query heads and that have no sliding window:
# the KV questions need the "all query heads" mistake to give a different number.
GQA_MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "mixtral-8x7b")
DENSE_MODELS = ("llama-3.1-8b", "llama-2-7b", "mistral-7b", "qwen2.5-7b")
# 2:4 structured sparsity doubles the datasheet peak of NVIDIA and AMD GPUs; catalog peaks are
# dense (NVIDIA H100 datasheet: the "with sparsity" figures are twice the dense ones).
SPARSE_SPEEDUP = 2.0

# One per architecture of the course (``specs.catalog.FIVE_ARCHITECTURES``).
FIVE = FIVE_ARCHITECTURES


def sparse_givens(acc: Accelerator) -> list[tuple[str, str]]:
    """The datasheet's sparse headline, shown beside the dense peak on GPUs (a trap)."""
    if acc.kind != "gpu":
        return []
    return [
        ("datasheet headline, 2:4 sparse", sci(SPARSE_SPEEDUP * acc.peak(DType.BF16), "FLOP/s"))
    ]


def sci(x: float, unit: str = "") -> str:
    """A calculator-friendly number: four significant digits, scientific past 1e5."""
    text = f"{x:.4e}" if abs(x) >= 1e5 or (x != 0 and abs(x) < 1e-3) else f"{x:.6g}"
    return f"{text} {unit}".strip()


def exact(x: float, unit: str = "") -> str:
    """An integer with thousands separators."""
    return f"{int(x):,} {unit}".strip()


def seqs(n: int) -> str:
    """``1 sequence``, ``8 sequences``."""
    return f"{n} sequence" if n == 1 else f"{n} sequences"


def pick(rng: random.Random, seq: Sequence[T]) -> T:
    """A uniformly drawn element of ``seq``."""
    return seq[rng.randrange(len(seq))]


def far(a: float, b: float, rel_tol: float) -> bool:
    """True when ``b`` is outside ``a``'s relative tolerance (and so graded differently)."""
    return abs(a - b) > rel_tol * abs(a)


def numeric_choices(
    rng: random.Random,
    answer: float,
    traps: Sequence[tuple[Mistake, float]],
    fmt: Callable[[float], str],
    rel_tol: float,
) -> tuple[tuple[Choice, ...], str]:
    """Options for a multiple-choice number: the answer and the classic mistakes, shuffled.

    Traps within 2× the tolerance of the answer or of another option are dropped, so every
    distractor is clearly wrong and no two options read alike.

    Returns:
        The options (keyed A, B, ...) and the key of the correct one.
    """
    kept: list[tuple[Mistake | None, float]] = [(None, answer)]
    for mistake, value in traps:
        if all(far(v, value, 2 * rel_tol) and far(value, v, 2 * rel_tol) for _, v in kept):
            kept.append((mistake, value))
    assert len(kept) >= 3, f"too few distinct distractors for {answer}"
    rng.shuffle(kept)
    choices = tuple(
        Choice(KEYS[i], fmt(value), value, mistake) for i, (mistake, value) in enumerate(kept)
    )
    key = next(c.key for c in choices if c.mistake is None)
    return choices, key


def label_choices(
    rng: random.Random, correct: str, wrong: Sequence[tuple[Mistake, str]]
) -> tuple[tuple[Choice, ...], str]:
    """Options for a categorical question: the correct label and the wrong ones, shuffled."""
    kept: list[tuple[Mistake | None, str]] = [(None, correct)]
    kept += [(m, text) for m, text in wrong if text != correct]
    rng.shuffle(kept)
    choices = tuple(Choice(KEYS[i], text, None, m) for i, (m, text) in enumerate(kept))
    key = next(c.key for c in choices if c.mistake is None)
    return choices, key


def traps(
    answer: float, candidates: Sequence[tuple[Mistake, float]], rel_tol: float, fmt: Callable
) -> tuple[Choice, ...]:
    """Hidden wrong answers of a numeric question, kept only when graded wrong."""
    floor = max(rel_tol, 1e-9)
    out = [(m, v) for m, v in candidates if far(answer, v, floor)]
    return tuple(Choice(KEYS[i], fmt(v), v, m) for i, (m, v) in enumerate(out))


def matmul_params(m: ModelSpec) -> int:
    """Parameters a decode token multiplies by: everything but the embedding table (which is
    gathered, one row per token); a tied lm_head still multiplies the full matrix."""
    p = param_counts(m)
    return p.total - p.embedding - p.positions + (p.embedding if m.tied_embeddings else 0)


def model_givens(m: ModelSpec) -> list[tuple[str, str]]:
    """The shapes a KV or intensity calculation needs."""
    return [
        ("model", m.name),
        ("layers", str(m.num_layers)),
        ("query heads", str(m.num_heads)),
        ("KV heads", str(m.num_kv_heads)),
        ("head dim", str(m.head_dim)),
    ]


def fits(model: str, accelerator: str, phase: Phase, batch: int, tokens: int) -> bool:
    """Whether weights + KV of the step fit one accelerator's device memory: questions about a
    single chip only draw workloads that one chip can hold."""
    m, acc = get_model(model), get_accelerator(accelerator)
    need = memory_needed_bytes(m, Workload(phase, batch, tokens))
    return bool(need <= acc.device_capacity_bytes)


def givens(pairs: Sequence[tuple[str, str]]) -> tuple[Given, ...]:
    """The givens of a question from (label, value) pairs."""
    return tuple(Given(label, value) for label, value in pairs)
