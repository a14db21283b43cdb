"""Loading accelerators from catalog files (TOML, one per accelerator, a source on every number).

The shipped catalog lives in ``ridgeline/data/hardware``; a user adds an accelerator with a file of
the same form and passes its path wherever a name is accepted (``--hw path/to/mychip.toml``), or
drops it into the user hardware directory (``user_hardware_dir``), where a name not in the shipped
catalog is looked up next: ``ridgeline lab calibrate`` writes ``measured.toml`` there.
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# The five architectures compared (defined in ``defaults``, light), re-exported for the faces.
from ridgeline.defaults import DATAFLOW, FIVE_ARCHITECTURES, GPU, LPU, TPU, WAFER  # noqa: F401
from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.specs.calibration import CalibrationTable, accelerator_calibration
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import (
    Accelerator,
    Interconnect,
    ManagedBy,
    MemoryLevel,
    Parallelism,
    Scope,
    Topology,
)
from ridgeline.specs.inputs import Whole, parse_toml, read_text, validation_message
from ridgeline.specs.limits import MAX_COUNT, MAX_FLOPS_PER_S


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Sourced(_Strict):
    """A number with its source tag (``[S6]``, or ``estimate: <derivation>``): finite, > 0 and
    within ``specs.limits`` (an infinite bandwidth would make every step compute-bound)."""

    value: Annotated[float, Field(gt=0, le=MAX_FLOPS_PER_S, allow_inf_nan=False)]
    source: Annotated[str, Field(min_length=1)]


class _SourcedCount(_Sourced):
    """A sourced count (cores, links, chips, banks): a whole number >= 1."""

    value: Annotated[float, Field(ge=1, le=MAX_COUNT, allow_inf_nan=False), Whole]


class _LevelFile(_Strict):
    name: Annotated[str, Field(min_length=1)]
    managed_by: ManagedBy
    scope: Scope
    instances: Annotated[int, Field(ge=1, le=MAX_COUNT)] = 1
    capacity_bytes: _Sourced
    bandwidth_bytes_per_s: _Sourced | None = None
    usable_bytes: _Sourced | None = None
    granule_bytes: _Sourced | None = None
    banks: _SourcedCount | None = None
    bank_width_bytes: _Sourced | None = None
    note: str = ""


class _InterconnectFile(_Strict):
    kind: Annotated[str, Field(min_length=1)]
    topology: Topology
    parallelism: Parallelism
    links: _SourcedCount
    link_bandwidth_bytes_per_s: _Sourced
    egress_bandwidth_bytes_per_s: _Sourced
    latency_s: _Sourced
    domain_chips: _SourcedCount
    note: str = ""


_INTERCONNECT_NUMBERS = (
    "links",
    "link_bandwidth_bytes_per_s",
    "egress_bandwidth_bytes_per_s",
    "latency_s",
    "domain_chips",
)


class _AcceleratorFile(_Strict):
    name: Annotated[str, Field(min_length=1)]
    kind: Annotated[str, Field(min_length=1)]
    vendor: str
    description: str
    device_level: str
    cores: _SourcedCount
    core_name: str = "core"
    peak_flops_per_s: dict[str, _Sourced]
    levels: Annotated[list[_LevelFile], Field(min_length=1)]
    notes: list[str] = []
    references: dict[str, str] = {}
    interconnect: _InterconnectFile | None = None
    array_dim: _SourcedCount | None = None
    ring_bandwidth_bytes_per_s: _Sourced | None = None
    calibration: CalibrationTable | None = None

    @field_validator("peak_flops_per_s")
    @classmethod
    def _known_dtypes(cls, peaks: dict[str, _Sourced]) -> dict[str, _Sourced]:
        for key in peaks:
            try:
                DType.parse(key)
            except UnknownNameError as e:
                raise ValueError(str(e)) from None
        if not any(k in peaks for k in ("bf16", "fp16")):
            raise ValueError("needs a bf16 or fp16 peak")
        return peaks


_OPTIONAL_LEVEL_FIELDS = (
    "bandwidth_bytes_per_s",
    "usable_bytes",
    "granule_bytes",
    "banks",
    "bank_width_bytes",
)


def _value(x: _Sourced | None) -> float | None:
    return x.value if x is not None else None


def _to_level(f: _LevelFile) -> MemoryLevel:
    sources = {"capacity_bytes": f.capacity_bytes.source}
    for name in _OPTIONAL_LEVEL_FIELDS:
        sourced = getattr(f, name)
        if sourced is not None:
            sources[name] = sourced.source
    return MemoryLevel(
        name=f.name,
        capacity_bytes=f.capacity_bytes.value,
        managed_by=f.managed_by,
        scope=f.scope,
        instances=f.instances,
        bandwidth_bytes_per_s=f.bandwidth_bytes_per_s.value if f.bandwidth_bytes_per_s else None,
        usable_bytes=f.usable_bytes.value if f.usable_bytes else None,
        note=f.note,
        sources=sources,
        granule_bytes=_value(f.granule_bytes),
        banks=int(f.banks.value) if f.banks else None,
        bank_width_bytes=_value(f.bank_width_bytes),
    )


def _to_interconnect(f: _InterconnectFile) -> Interconnect:
    numbers = {name: getattr(f, name) for name in _INTERCONNECT_NUMBERS}
    return Interconnect(
        kind=f.kind,
        topology=f.topology,
        parallelism=f.parallelism,
        links=int(f.links.value),
        link_bandwidth_bytes_per_s=f.link_bandwidth_bytes_per_s.value,
        egress_bandwidth_bytes_per_s=f.egress_bandwidth_bytes_per_s.value,
        latency_s=f.latency_s.value,
        domain_chips=int(f.domain_chips.value),
        note=f.note,
        sources={name: sourced.source for name, sourced in numbers.items()},
    )


def _to_accelerator(f: _AcceleratorFile, where: str) -> Accelerator:
    names = [lvl.name for lvl in f.levels]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: field levels: duplicate level names {names}")
    if f.device_level not in names:
        raise ConfigError(f"{where}: field device_level: '{f.device_level}' is not one of {names}")
    device = f.levels[names.index(f.device_level)]
    if device.bandwidth_bytes_per_s is None:
        raise ConfigError(f"{where}: field levels.{f.device_level}.bandwidth_bytes_per_s: required")
    sources = {"cores": f.cores.source}
    sources.update({f"peak_flops_per_s.{k}": v.source for k, v in f.peak_flops_per_s.items()})
    link = None if f.interconnect is None else _to_interconnect(f.interconnect)
    if link is not None:
        sources.update({f"interconnect.{k}": v for k, v in link.sources.items()})
    for name in ("array_dim", "ring_bandwidth_bytes_per_s"):
        sourced = getattr(f, name)
        if sourced is not None:
            sources[name] = sourced.source
    return Accelerator(
        name=f.name,
        kind=f.kind,
        vendor=f.vendor,
        description=f.description,
        levels=tuple(_to_level(lvl) for lvl in f.levels),
        device_level=f.device_level,
        peak_flops_per_s={DType.parse(k): v.value for k, v in f.peak_flops_per_s.items()},
        cores=int(f.cores.value),
        core_name=f.core_name,
        sources=sources,
        references=dict(f.references),
        notes=tuple(f.notes),
        interconnect=link,
        array_dim=int(f.array_dim.value) if f.array_dim else None,
        ring_bandwidth_bytes_per_s=_value(f.ring_bandwidth_bytes_per_s),
        calibration=accelerator_calibration(f.calibration, where),
    )


def parse_accelerator(data: dict[str, Any], where: str = "<data>") -> Accelerator:
    """Validate a parsed catalog document and build the ``Accelerator``.

    Raises:
        ConfigError: naming the first bad field, e.g. ``levels.2.capacity_bytes.value``.
    """
    try:
        f = _AcceleratorFile.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{where}: {validation_message(e)}") from None
    return _to_accelerator(f, where)


def load_accelerator_file(path: str | Path) -> Accelerator:
    """Load one accelerator from a TOML file."""
    path = Path(path)
    return parse_accelerator(parse_toml(read_text(path), str(path)), str(path))


@cache
def _catalog() -> dict[str, Accelerator]:
    out: dict[str, Accelerator] = {}
    for entry in resources.files("ridgeline.data").joinpath("hardware").iterdir():
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text())
            acc = parse_accelerator(data, f"catalog/{entry.name}")
            out[acc.name] = acc
    return out


@cache
def _shipped(name: str) -> Accelerator | None:
    """One shipped accelerator read alone, when its file bears its name (all of them do): a
    run that names one chip parses one file, not the catalog. None: ask the catalog."""
    entry = resources.files("ridgeline.data").joinpath("hardware", f"{name}.toml")
    if "/" in name or not entry.is_file():
        return None
    acc = parse_accelerator(tomllib.loads(entry.read_text()), f"catalog/{entry.name}")
    return acc if acc.name == name else None


def accelerator_names() -> list[str]:
    """Names of the shipped accelerators, sorted."""
    return sorted(_catalog())


def user_hardware_dir() -> Path:
    """Where user accelerator files live: ``$RIDGELINE_HW_DIR``, else
    ``$XDG_CONFIG_HOME/ridgeline/hardware``, else ``~/.config/ridgeline/hardware``."""
    if os.environ.get("RIDGELINE_HW_DIR"):
        path = Path(os.environ["RIDGELINE_HW_DIR"])
        if path.exists() and not path.is_dir():  # else its files were silently not found
            raise ConfigError(f"RIDGELINE_HW_DIR: {path} is not a directory")
        return path
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ridgeline" / "hardware"


def get_accelerator(name_or_path: str | Accelerator) -> Accelerator:
    """A catalog accelerator by name (any case: ``H100-SXM`` is ``h100-sxm``), one from the user
    hardware directory (e.g. ``measured``, written by ``ridgeline lab calibrate``), or one loaded
    from a ``.toml`` path."""
    if isinstance(name_or_path, Accelerator):
        return name_or_path
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        return load_accelerator_file(name_or_path)
    name = name_or_path.lower()
    if _catalog.cache_info().currsize and name in _catalog():
        return _catalog()[name]  # the whole catalog is read already (hw list): no second parse
    shipped = _shipped(name)
    if shipped is not None:
        return shipped
    catalog = _catalog()
    if name in catalog:
        return catalog[name]
    user_dir = user_hardware_dir()
    for user_file in dict.fromkeys(user_dir / f"{n}.toml" for n in (name_or_path, name)):
        if user_file.is_file():
            return load_accelerator_file(user_file)
    if name.startswith("measured"):  # the lab's spec of this machine, not measured yet
        raise ConfigError(
            f"accelerator '{name_or_path}': no {user_dir / (name + '.toml')} yet; "
            "'ridgeline lab calibrate' measures this machine and writes it there"
        )
    raise UnknownNameError("accelerator", name_or_path, catalog)
