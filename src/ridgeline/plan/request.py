"""What a plan is asked: a model, its traffic and rate, latency targets, which accelerators, and
the limits and prices the answer must respect."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ridgeline.data import trace_path
from ridgeline.defaults import DEFAULT_PROBE_REQUESTS, DEFAULT_PROBE_S, DEFAULT_SIMULATED
from ridgeline.errors import ConfigError
from ridgeline.plan.bound import Targets
from ridgeline.specs import Accelerator, ModelSpec
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.inputs import check_int, check_real, parse_toml, read_text
from ridgeline.specs.limits import MAX_CHIPS, MAX_CONTEXT, MAX_RATE_PER_S, MAX_SEED
from ridgeline.sweep.spec import load_workload
from ridgeline.sweep.workload import Arrival, Lengths, WorkloadSpec

DEFAULT_TOP = 3  # layouts shown per accelerator
MAX_TOP = 100
MAX_USD_PER_HOUR = 1e6


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """A plan's question (``plan.search.run_plan`` answers it).

    Attributes:
        model: a catalog name, a config.json path, or a spec.
        workload: lengths and arrival process of the traffic (``duration_s`` of arrivals per
            simulation); its rate is replaced by each probe's.
        rate_rps: the rate the deployment must carry.
        targets: TTFT and TPOT at a percentile.
        accelerators: the accelerators searched (catalog names or specs).
        max_chips: most chips of the whole deployment.
        prices: dollars per chip-hour by accelerator name (no built-in prices).
        weight_dtypes: weight formats searched (``None``: each chip's native ones).
        kv_dtypes: KV formats searched (``None``: 16 bits, and fp8 where the chip has it).
        mode: calibrated (``predict``'s default) or the ideal roofline.
        top: layouts shown per accelerator.
        simulated: layouts simulated per accelerator.
        seed: the workload's and the simulations' seed.
    """

    model: str | ModelSpec
    workload: WorkloadSpec
    rate_rps: float
    targets: Targets
    accelerators: tuple[str | Accelerator, ...]
    max_chips: int = MAX_CHIPS
    prices: Mapping[str, float] = field(default_factory=dict)
    weight_dtypes: tuple[DType, ...] | None = None
    kv_dtypes: tuple[DType, ...] | None = None
    mode: CostMode = CostMode.CALIBRATED
    top: int = DEFAULT_TOP
    simulated: int = DEFAULT_SIMULATED
    seed: int = 0

    def __post_init__(self) -> None:
        check_real("rate", self.rate_rps, 0, MAX_RATE_PER_S, low_open=True)
        check_int("max_chips", self.max_chips, 1, MAX_CHIPS)
        check_int("top", self.top, 1, MAX_TOP)
        check_int("simulated", self.simulated, 1, MAX_TOP)
        check_int("seed", self.seed, 0, MAX_SEED)
        if not self.accelerators:
            raise ConfigError("field hw: name at least one accelerator")
        for name, usd in self.prices.items():
            check_real(f"price {name}", usd, 0, MAX_USD_PER_HOUR, low_open=True)


def load_prices(path: str | Path) -> dict[str, float]:
    """Hourly prices per chip from a TOML file, in the sweep spec's form::

        [prices.h100-sxm]
        usd_per_chip_hour = 2.5

    Raises:
        ConfigError: the file is missing, is not TOML, or a price is missing or not positive.
    """
    data = parse_toml(read_text(Path(path), "price file"), f"price file {path}")
    table = data.get("prices")
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"price file {path}: needs a [prices.<accelerator>] table")
    out = {}
    for name, entry in table.items():
        usd = entry.get("usd_per_chip_hour") if isinstance(entry, dict) else None
        if isinstance(usd, bool) or not isinstance(usd, int | float):
            raise ConfigError(f"price file {path}: prices.{name}.usd_per_chip_hour: a number")
        out[name] = check_real(
            f"prices.{name}.usd_per_chip_hour", float(usd), 0, MAX_USD_PER_HOUR, low_open=True
        )
    return out


@dataclass(frozen=True, slots=True)
class WorkloadChoice:
    """Where a plan's traffic comes from: fixed lengths, a trace, or a workload file, one of
    them; ``duration_s`` of arrivals per simulation, at most ``max_requests``."""

    isl: int | None = None
    osl: int | None = None
    trace: str | None = None
    workload_file: str | None = None
    duration_s: float = DEFAULT_PROBE_S
    max_requests: int = DEFAULT_PROBE_REQUESTS

    def spec(self) -> WorkloadSpec:
        """The workload (Poisson arrivals of fixed lengths, a re-timed trace, or the file's).

        Raises:
            ConfigError: none or several sources given, or a bad length, file or trace.
        """
        fixed = self.isl is not None or self.osl is not None
        given = [fixed, self.trace is not None, self.workload_file is not None]
        if sum(given) != 1:
            raise ConfigError("field workload: give --isl and --osl, --trace or --workload (one)")
        if self.workload_file is not None:
            return load_workload(self.workload_file, self.duration_s)
        if self.trace is not None:
            path = str(trace_path(self.trace))
            return WorkloadSpec(
                num_requests=None,
                arrival=Arrival.TRACE,
                trace_path=path,
                name=Path(path).stem,
                duration_s=self.duration_s,
                max_requests=self.max_requests,
            )
        if self.isl is None or self.osl is None:
            raise ConfigError("field isl/osl: give both --isl and --osl")
        check_int("isl", self.isl, 1, MAX_CONTEXT)
        check_int("osl", self.osl, 1, MAX_CONTEXT)
        return WorkloadSpec(
            num_requests=None,
            prompt=Lengths.between(self.isl, self.isl),
            output=Lengths.between(self.osl, self.osl),
            name=f"isl{self.isl}-osl{self.osl}",
            duration_s=self.duration_s,
            max_requests=self.max_requests,
        )
