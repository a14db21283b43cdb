"""Calibration: the named physical terms that turn the ideal roofline into an expected time.

The ideal roofline (course module 2) assumes every byte moves at the datasheet bandwidth, every
FLOP at the dense peak, and nothing else takes time. Real machines reach less. ridgeline's
calibrated mode keeps the same per-operator FLOPs and bytes and adds a few terms, each a number
with a source, shared by every accelerator of a family (an NVIDIA GPU generation behaves like
another: same kernels, same launch path):

============================  ===============================================================
term                          what it models
============================  ===============================================================
``bandwidth_efficiency``      achievable fraction of the device level's bandwidth (MBU) when
                              streaming weights and activations
``kv_bandwidth_efficiency``   the same for the KV cache, read by the attention kernel in scattered
                              blocks (paged attention), often well below streaming
``compute_efficiency``        achievable fraction of the dense peak on large 16-bit GEMMs (MFU)
``fp8_compute_efficiency``    the same for 8-bit GEMMs (fp8, int8 W8A8) against the 8-bit peak
``fp4_compute_efficiency``    the same for 4-bit GEMMs (fp4 W4A4) against the 4-bit peak
``weight_only_compute_...``   the same for GEMMs of int8/int4 weights dequantised to 16 bits
``attention_compute_...``     the same for fused prefill attention (FlashAttention-style
                              kernels, in the activations' 16-bit format)
``moe_compute_efficiency``    the same for grouped MoE expert GEMMs (many small GEMMs, one per
                              expert, plus the token permutation around them)
``moe_bandwidth_efficiency``  the fraction of bandwidth the experts' weights stream at (never
                              above ``bandwidth_efficiency``)
``quantised_gemm_latency_s``  fixed time each 8- or 4-bit GEMM adds to a step beyond a 16-bit
                              one (quantising its input in a kernel of its own, the scales in
                              its epilogue); 0 for an engine that fuses the quantisation into
                              the kernel before the GEMM
``gemm_latency_s``            fixed time of each GEMM kernel beyond its roofline time (launch,
                              ramp-up and tail, under CUDA graphs)
``attention_latency_s``       the same for each attention kernel
``kernel_latency_s``          the same for each elementwise kernel (norms, activation functions,
                              gathers, MoE token permutations)
``gemm_tile_rows``            rows of the matrix unit: a GEMM of M rows costs ceil(M/t)·t rows
``overlap``                   how far an operator's memory traffic hides under its compute: 1 is
                              the roofline's max(compute, memory) (a GPU's or systolic array's
                              asynchronous copies), 0 their sum (one CPU core that stalls on the
                              weight stream between FMAs)
``kv_overlap``                how far an operator's KV-cache traffic hides under its compute: 1
                              the roofline's, 0 none (a mixed step's decode attention reads the
                              cache in kernels of their own, beside the prompt's attention)
``layer_latency_s``           fixed time each layer adds to a step beyond its kernels' own: syncs
                              and host work on a GPU, the per-layer latency of a pipeline laid across a fabric on a
                              spatial machine
``step_latency_s``            fixed time per step (host scheduling, sampling)
``sequence_latency_s``        host time per running sequence per step (its scheduling, input
                              preparation, sampling and output handling on the CPU)
``link_efficiency``           achievable fraction of the chip-to-chip link bandwidth
``collective_latency_s``      fixed time per collective beyond the per-hop latency
``stage_latency_s``           fixed time per pipeline-stage crossing (wafer to wafer, chip hop)
============================  ===============================================================

Each term's value comes from the family file (``data/calibration/<family>.toml``), where it is
either sourced or marked ``fitted`` with the dataset rows it was fitted on; an accelerator file
may override sourced terms in its own ``[calibration]`` table (``gemm_tile_rows`` usually).
``Calibration()`` with every default is the ideal machine: calibrated time equals the roofline.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ridgeline.errors import ConfigError, UnknownNameError

# CostMode is re-exported: the cost model imports it from here
from ridgeline.specs.cost_mode import CostMode as CostMode


class Term(StrEnum):
    """The calibration terms (see the module docstring)."""

    BANDWIDTH_EFFICIENCY = "bandwidth_efficiency"
    KV_BANDWIDTH_EFFICIENCY = "kv_bandwidth_efficiency"
    COMPUTE_EFFICIENCY = "compute_efficiency"
    MOE_BANDWIDTH_EFFICIENCY = "moe_bandwidth_efficiency"
    GEMM_TILE_ROWS = "gemm_tile_rows"
    LAYER_LATENCY_S = "layer_latency_s"
    STEP_LATENCY_S = "step_latency_s"
    SEQUENCE_LATENCY_S = "sequence_latency_s"
    LINK_EFFICIENCY = "link_efficiency"
    COLLECTIVE_LATENCY_S = "collective_latency_s"
    STAGE_LATENCY_S = "stage_latency_s"
    OVERLAP = "overlap"
    FP8_COMPUTE_EFFICIENCY = "fp8_compute_efficiency"
    FP4_COMPUTE_EFFICIENCY = "fp4_compute_efficiency"
    WEIGHT_ONLY_COMPUTE_EFFICIENCY = "weight_only_compute_efficiency"
    ATTENTION_COMPUTE_EFFICIENCY = "attention_compute_efficiency"
    MOE_COMPUTE_EFFICIENCY = "moe_compute_efficiency"
    QUANTISED_GEMM_LATENCY_S = "quantised_gemm_latency_s"
    GEMM_LATENCY_S = "gemm_latency_s"
    ATTENTION_LATENCY_S = "attention_latency_s"
    KERNEL_LATENCY_S = "kernel_latency_s"
    KV_OVERLAP = "kv_overlap"


COMPUTE_TERMS = (
    Term.COMPUTE_EFFICIENCY,
    Term.FP8_COMPUTE_EFFICIENCY,
    Term.FP4_COMPUTE_EFFICIENCY,
    Term.WEIGHT_ONLY_COMPUTE_EFFICIENCY,
    Term.ATTENTION_COMPUTE_EFFICIENCY,
    Term.MOE_COMPUTE_EFFICIENCY,
)
EFFICIENCY_TERMS = (
    Term.BANDWIDTH_EFFICIENCY,
    Term.KV_BANDWIDTH_EFFICIENCY,
    Term.MOE_BANDWIDTH_EFFICIENCY,
    Term.LINK_EFFICIENCY,
    *COMPUTE_TERMS,
)
FITTED_PREFIX = "fitted"
# A term is fitted only where at least this many published rows constrain it (a row constrains
# a term when its prediction moves by at least ``MIN_ELASTICITY`` of the term's relative change).
MIN_CONSTRAINING_ROWS = 8
MIN_ELASTICITY = 0.05


@dataclass(frozen=True, slots=True)
class Calibration:
    """The calibration terms of one accelerator (defaults: the ideal machine).

    Attributes:
        family: the family whose file the terms come from (``ideal`` for the defaults).
        sources: source per term name: ``[Sxx]``, ``estimate: ...`` or ``fitted on rows: ...``.
    """

    family: str = "ideal"
    bandwidth_efficiency: float = 1.0
    kv_bandwidth_efficiency: float = 1.0
    compute_efficiency: float = 1.0
    moe_bandwidth_efficiency: float = 1.0
    gemm_tile_rows: int = 1
    layer_latency_s: float = 0.0
    step_latency_s: float = 0.0
    sequence_latency_s: float = 0.0
    link_efficiency: float = 1.0
    collective_latency_s: float = 0.0
    stage_latency_s: float = 0.0
    overlap: float = 1.0
    # None: as ``compute_efficiency`` (a family that does not tell its GEMM kinds apart)
    fp8_compute_efficiency: float | None = None
    fp4_compute_efficiency: float | None = None
    weight_only_compute_efficiency: float | None = None
    attention_compute_efficiency: float | None = None
    moe_compute_efficiency: float | None = None
    quantised_gemm_latency_s: float = 0.0
    gemm_latency_s: float = 0.0
    attention_latency_s: float = 0.0
    kernel_latency_s: float = 0.0
    kv_overlap: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for term in EFFICIENCY_TERMS:
            value = self.value(term)
            if not 0.0 < value <= 1.0:
                raise ConfigError(f"calibration {self.family}: field {term}: must be in (0, 1]")
        latencies = (
            Term.LAYER_LATENCY_S,
            Term.STEP_LATENCY_S,
            Term.SEQUENCE_LATENCY_S,
            Term.COLLECTIVE_LATENCY_S,
            Term.QUANTISED_GEMM_LATENCY_S,
            Term.GEMM_LATENCY_S,
            Term.ATTENTION_LATENCY_S,
            Term.KERNEL_LATENCY_S,
        )
        for term in latencies:
            if getattr(self, term.value) < 0:
                raise ConfigError(f"calibration {self.family}: field {term}: must be >= 0")
        if self.stage_latency_s < 0:
            raise ConfigError(f"calibration {self.family}: field stage_latency_s: must be >= 0")
        if self.gemm_tile_rows < 1:
            raise ConfigError(f"calibration {self.family}: field gemm_tile_rows: must be >= 1")
        for term in (Term.OVERLAP, Term.KV_OVERLAP):
            if not 0.0 <= getattr(self, term.value) <= 1.0:
                raise ConfigError(f"calibration {self.family}: field {term}: must be in [0, 1]")
        if self.overlap < 1.0 and self.gemm_tile_rows > 1:
            # tile padding stretches compute alone; a partly serial op would pad its bytes too
            raise ConfigError(
                f"calibration {self.family}: field overlap: below 1 needs gemm_tile_rows = 1"
            )

    def value(self, term: Term) -> float:
        """The term's value (a compute efficiency left unset is ``compute_efficiency``)."""
        v = getattr(self, term.value)
        return float(self.compute_efficiency if v is None else v)

    def with_values(self, values: Mapping[Term, float], source: str | None = None) -> Calibration:
        """A copy with ``values`` set (and, if given, their source replaced by ``source``)."""
        changes: dict[str, Any] = {
            t.value: (int(round(v)) if t is Term.GEMM_TILE_ROWS else float(v))
            for t, v in values.items()
        }
        sources = dict(self.sources)
        if source is not None:
            sources.update({t.value: source for t in values})
        return dataclasses.replace(self, sources=sources, **changes)

    @property
    def fitted_terms(self) -> tuple[Term, ...]:
        """Terms whose source says they were fitted on dataset rows."""
        return tuple(t for t in Term if self.sources.get(t.value, "").startswith(FITTED_PREFIX))

    @property
    def estimated_terms(self) -> tuple[Term, ...]:
        """Terms that rest on an estimate rather than a source or a fit."""
        return tuple(t for t in Term if self.sources.get(t.value, "").startswith("estimate"))


IDEAL = Calibration()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Term(_Strict):
    value: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    source: Annotated[str, Field(min_length=1)]


class _TermsFile(_Strict):
    bandwidth_efficiency: _Term | None = None
    kv_bandwidth_efficiency: _Term | None = None
    compute_efficiency: _Term | None = None
    moe_bandwidth_efficiency: _Term | None = None
    gemm_tile_rows: _Term | None = None
    layer_latency_s: _Term | None = None
    step_latency_s: _Term | None = None
    sequence_latency_s: _Term | None = None
    link_efficiency: _Term | None = None
    collective_latency_s: _Term | None = None
    stage_latency_s: _Term | None = None
    overlap: _Term | None = None
    fp8_compute_efficiency: _Term | None = None
    fp4_compute_efficiency: _Term | None = None
    weight_only_compute_efficiency: _Term | None = None
    attention_compute_efficiency: _Term | None = None
    moe_compute_efficiency: _Term | None = None
    quantised_gemm_latency_s: _Term | None = None
    gemm_latency_s: _Term | None = None
    attention_latency_s: _Term | None = None
    kernel_latency_s: _Term | None = None
    kv_overlap: _Term | None = None


class CalibrationTable(_TermsFile):
    """An accelerator file's ``[calibration]`` table: its family and sourced overrides."""

    family: Annotated[str, Field(min_length=1)]


class _FamilyFile(_Strict):
    family: Annotated[str, Field(min_length=1)]
    description: str = ""
    fit: list[Term] = []
    terms: _TermsFile
    priors: _TermsFile = _TermsFile()
    references: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Family:
    """A calibration family: its terms, the terms the fit may move, and their priors.

    ``priors`` hold sourced or estimated values for the fitted terms: what a fit starts from,
    and what stands where the family's rows are all left out (leave-one-source-out).
    """

    name: str
    description: str
    calibration: Calibration
    fit: tuple[Term, ...]
    priors: Calibration
    references: Mapping[str, str] = field(default_factory=dict)


def _terms(f: _TermsFile) -> dict[Term, tuple[float, str]]:
    out = {}
    for term in Term:
        t = getattr(f, term.value)
        if t is not None:
            out[term] = (t.value, t.source)
    return out


def _build(family: str, terms: Mapping[Term, tuple[float, str]]) -> Calibration:
    cal = Calibration(family=family).with_values({t: v for t, (v, _) in terms.items()})
    return dataclasses.replace(cal, sources={t.value: s for t, (_, s) in terms.items()})


def parse_family(data: dict[str, Any], where: str) -> Family:
    """Validate a family file; raises ``ConfigError`` naming the field."""
    try:
        f = _FamilyFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{where}: field {loc}: {err['msg']}") from None
    terms, priors = _terms(f.terms), _terms(f.priors)
    for term in f.fit:
        if term not in priors:
            raise ConfigError(f"{where}: field priors.{term}: a fitted term needs a prior")
    return Family(
        name=f.family,
        description=f.description,
        calibration=_build(f.family, terms),
        fit=tuple(f.fit),
        priors=_build(f.family, {**terms, **priors}),
        references=dict(f.references),
    )


@cache
def _families() -> dict[str, Family]:
    out = {}
    for entry in resources.files("ridgeline.data").joinpath("calibration").iterdir():
        if entry.name.endswith(".toml"):
            fam = parse_family(tomllib.loads(entry.read_text()), f"calibration/{entry.name}")
            out[fam.name] = fam
    return out


def family_names() -> list[str]:
    return sorted(_families())


@cache
def _shipped_family(name: str) -> Family | None:
    """One family read alone, when its file bears its name (all of them do; None: read all)."""
    entry = resources.files("ridgeline.data").joinpath("calibration", f"{name}.toml")
    if "/" in name or not entry.is_file():
        return None
    fam = parse_family(tomllib.loads(entry.read_text()), f"calibration/{entry.name}")
    return fam if fam.name == name else None


def get_family(name: str) -> Family:
    """A calibration family by name."""
    shipped = _shipped_family(name)
    if shipped is not None:
        return shipped
    families = _families()
    if name not in families:
        raise UnknownNameError("calibration family", name, families)
    return families[name]


def accelerator_calibration(table: CalibrationTable | None, where: str) -> Calibration:
    """An accelerator's calibration: its family's terms with its own sourced overrides
    (the ideal machine when the file has no ``[calibration]`` table)."""
    if table is None:
        return IDEAL
    overrides = _terms(table)
    try:
        fam = get_family(table.family)
    except UnknownNameError as e:
        raise ConfigError(f"{where}: field calibration.family: {e}") from None
    base = {t: (fam.calibration.value(t), fam.calibration.sources.get(t.value, "")) for t in Term}
    base = {t: vs for t, vs in base.items() if vs[1]}
    return _build(fam.name, {**base, **overrides})
