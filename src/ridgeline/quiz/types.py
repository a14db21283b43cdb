"""What a quiz question is: its module, its kind, the givens shown, the computed answer, the
classic mistakes it targets and the worked solution shown after grading."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

# A learner's response once parsed: a number, a choice key, or a sequence of keys/options.
Response = float | str | tuple[str, ...]


class Module(IntEnum):
    """The seven modules of the course the quiz covers ("Memory Systems in Dataflow Architectures",
    IBM on Coursera; docs/quiz.md maps them)."""

    RIDGE = 1
    ROOFLINE = 2
    MANAGERS = 3
    ARCHITECTURES = 4
    TILING = 5
    KV_SIZING = 6
    KV_RUNTIME = 7

    @property
    def title(self) -> str:
        return _TITLES[self]


_TITLES = {
    Module.RIDGE: "Ridge points and arithmetic intensity",
    Module.ROOFLINE: "Prefill and decode on the roofline",
    Module.MANAGERS: "Who manages on-chip memory",
    Module.ARCHITECTURES: "Memory across five accelerators",
    Module.TILING: "Tiling and layout",
    Module.KV_SIZING: "KV-cache sizing",
    Module.KV_RUNTIME: "KV management at runtime",
}


class Kind(StrEnum):
    """How a question is answered."""

    NUMERIC = "numeric"  # a number, graded with a relative tolerance
    CHOICE = "choice"  # one key among the choices
    ORDER = "order"  # the items' keys, in order
    MATCH = "match"  # one option per item, in the items' order


class Mistake(StrEnum):
    """The classic mistakes that distractors and traps are built from."""

    KV_ALL_QUERY_HEADS = "counted the KV cache for every query head instead of the KV heads"
    GIB_FOR_GB = "divided by 2^30 (GiB) where the unit is GB (1e9 bytes)"
    GB_FOR_GIB = "divided by 1e9 (GB) where the unit is GiB (2^30 bytes)"
    WEIGHTS_ONLY = "used the weights-only intensity where the KV cache dominates the bytes"
    SPARSE_PEAK = "used the 2:4-sparse peak (twice the dense one) for a dense workload"
    KV_WITHOUT_V = "counted only K (or only V): the cache holds both"
    KV_TWICE = "counted the KV cache twice per step (read and written back)"
    RAW_CAPACITY = "used the raw capacity, ignoring the reserved part"
    SINGLE_BUFFER = "forgot that double buffering holds two copies of each streamed tile"
    NO_ALIGNMENT = "ignored the alignment constraint on the tile size"
    COMPULSORY_ONLY = "counted each operand once, ignoring the re-loads of tiled operands"
    BYTES_FOR_ELEMENTS = "used bytes where the formula takes elements"
    STRIDE_AS_DEGREE = "took the stride itself as the conflict degree"
    PARTIAL_BLOCK_SHARED = "shared the partial last block of the prefix (only full blocks are)"
    ALL_REQUESTS_SAVE = "saved the prefix for every request (the first one still stores it)"
    LINEAR_ACCEPTANCE = "took 1 + k·α tokens per step (acceptance stops at the first rejection)"
    PEAK_ORDER = "ranked by peak FLOP/s instead of the ridge point"
    CACHE_FOR_SCRATCHPAD = "took a software-managed scratchpad for a hardware cache"
    WEIGHTS_NOT_KV = "ignored the KV cache when sizing memory"
    WRONG_RESOURCE = "named a resource that is not the binding one"
    DECODE_ALWAYS_MEMORY = "assumed every step is bandwidth-bound whatever its batch"
    NO_COMPUTE_ROOF = "took intensity × bandwidth without capping it at the compute peak"
    NO_MEMORY_ROOF = "took the compute peak for a step that waits on memory"
    TOKENS_NOT_BLOCKS = "counted tokens where the allocator hands out whole blocks"
    NO_CEIL = "rounded down where a partly filled block still takes a whole block"
    IGNORED_BATCH = "forgot that each weight read serves every sequence of the batch"
    WRONG_MANAGER = "confused who decides what lives in that level"
    REMAINING_NOT_SAVED = "gave the size that remains instead of the size saved"
    WASTE_OVER_USEFUL = "divided the idle slot-steps by the useful ones instead of by all of them"
    WHOLE_PROMPT_GAP = "took the whole prompt's prefill as the gap, as without chunking"
    NO_DECODE_IN_GAP = "counted the prefill chunk but not the decode work of the same step"
    FORGOT_LATENCY = "left out the link's fixed latency"
    CONTEXT_PADDING_ONLY = "padded the context to its bucket but not the batch to its slots"
    RUNTIME_FORM = "took the GPU runtime's form of the technique for a compiled-schedule machine"


@dataclass(frozen=True, slots=True)
class Given:
    """One given shown beside the question, calculator-friendly (full number and unit)."""

    label: str
    value: str


@dataclass(frozen=True, slots=True)
class Choice:
    """One option of a multiple-choice question, or a trap value of a numeric one.

    ``mistake`` is ``None`` for the correct choice and names the classic mistake otherwise;
    ``value`` is the number behind a numeric option (``None`` for a categorical one).
    """

    key: str
    text: str
    value: float | None = None
    mistake: Mistake | None = None


@dataclass(frozen=True, slots=True)
class Question:
    """One parametric question with its computed answer.

    Attributes:
        generator: name of the generator that drew it.
        params: the drawn parameters, machine-readable (what a program needs to answer).
        answer: the number (NUMERIC), the correct key (CHOICE), the items' keys in order (ORDER)
            or the option for each item in the items' order (MATCH).
        rel_tol: relative tolerance of a NUMERIC answer (0 = exact); for CHOICE, the separation
            every distractor keeps from the answer.
        choices: CHOICE: the options shown. NUMERIC: hidden traps (classic wrong answers) used
            to explain a wrong response.
        items: ORDER: ``key: label`` texts to rank; MATCH: the items to match.
        options: MATCH: what each item is matched to.
    """

    generator: str
    module: Module
    kind: Kind
    prompt: str
    givens: tuple[Given, ...]
    params: Mapping[str, Any]
    answer: Response
    solution: str
    unit: str = ""
    rel_tol: float = 0.0
    choices: tuple[Choice, ...] = ()
    items: tuple[str, ...] = ()
    item_keys: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    @property
    def correct_choice(self) -> Choice | None:
        """The correct option of a CHOICE question."""
        for c in self.choices:
            if c.mistake is None and c.key == self.answer:
                return c
        return None

    @property
    def expected(self) -> str:
        """The answer as a person reads it."""
        if self.kind is Kind.NUMERIC:
            assert isinstance(self.answer, float)
            return f"{self.answer:.6g} {self.unit}".strip()
        if self.kind is Kind.CHOICE:
            c = self.correct_choice
            return f"{self.answer} ({c.text})" if c else str(self.answer)
        assert isinstance(self.answer, tuple)
        return ", ".join(self.answer)
