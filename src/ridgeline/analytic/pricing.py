"""How every step is priced: one value each face builds once and passes down.

A ``Pricing`` holds the four things a step's time depends on besides its shape:

- the **mode**: ``calibrated`` (the default everywhere: the expected time, the roofline with the
  accelerator family's calibration terms, ``analytic.calibrated``) or ``ideal`` (the roofline the
  course teaches: datasheet peaks, no latencies);
- the **calibration**: the terms that mode prices with (the accelerator's in calibrated mode;
  the ideal machine, or the user's efficiencies, in ideal mode);
- the **deployment**: the chips and their tensor/pipeline split;
- the **data types** of weights, activations and the KV cache.

Faces (``simulate``, ``predict``, sweeps, the explorer, the report, ...) build it from their
options (``Pricing.of``: ``--ideal``, ``--hw``, ``--tp``/``--pp``, the dtype options) and every
cost model below them reads it: ``analytic.step_cost`` and ``deployment_cost``, the simulator's
``StepCostModel`` and ``DeploymentStepCost``, ``fidelity.predict``. Every output names it
(``label``, and ``to_dict()["mode"]`` in JSON).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ridgeline.analytic.calibrated import calibration_for
from ridgeline.analytic.deployment import Deployment
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import ConfigError
from ridgeline.specs.calibration import IDEAL, Calibration, CostMode
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.inputs import check_real
from ridgeline.specs.limits import MAX_SECONDS

EXPECTED_LABEL = "expected (calibrated)"
IDEAL_LABEL = "ideal roofline"
USER_FAMILY = "user"


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Fractions of peak reached (1.0 = ideal) and a fixed per-step overhead: the user's own
    scaling of the ideal roofline (``--bw-eff``, ``--compute-eff``, ``--overhead`` with
    ``--ideal``; the lab's fit of a measured engine).

    Published decode MBU is 0.5–0.85 of spec bandwidth: gpt-fast 68.5% on an A100
    (https://github.com/pytorch-labs/gpt-fast), vLLM and SGLang at most 50% and a megakernel 78%
    on an H100 (Hazy Research, "Look Ma, No Bubbles!", 2025).
    """

    bandwidth: float = 1.0
    compute: float = 1.0
    step_overhead_s: float = 0.0
    overlap: float = 1.0  # 1: the roofline's max(compute, memory); 0: their sum

    def __post_init__(self) -> None:
        for name in ("bandwidth", "compute"):
            check_real(f"{name}_efficiency", getattr(self, name), 0.0, 1.0, low_open=True)
        check_real("step_overhead_s", self.step_overhead_s, 0.0, MAX_SECONDS)
        check_real("overlap", self.overlap, 0.0, 1.0)

    @property
    def is_ideal(self) -> bool:
        return self == Efficiency()

    def calibration(self, acc: Accelerator, mode: CostMode = CostMode.IDEAL) -> Calibration:
        """The terms a cost in ``mode`` uses on ``acc`` (these efficiencies apply in ideal
        mode; calibrated mode takes the accelerator's own terms)."""
        return calibration_for(
            acc, mode, self.bandwidth, self.compute, self.step_overhead_s, self.overlap
        )


@dataclass(frozen=True, slots=True)
class Pricing:
    """The mode, calibration terms, deployment and data types every step is priced with (module
    docstring). Build it with ``Pricing.of`` (or ``ideal`` / ``expected``)."""

    deployment: Deployment
    mode: CostMode
    calibration: Calibration
    dtypes: Dtypes = Dtypes()

    @classmethod
    def of(
        cls,
        target: Accelerator | Deployment,
        mode: CostMode | str = CostMode.CALIBRATED,
        dtypes: Dtypes | None = None,
        efficiency: Efficiency | None = None,
    ) -> Pricing:
        """The pricing of ``target`` (an accelerator is one chip) in ``mode``.

        Raises:
            ConfigError: user efficiencies in calibrated mode (they scale the ideal roofline;
                calibrated mode uses the accelerator's own terms).
        """
        dep = target if isinstance(target, Deployment) else Deployment(target)
        m = CostMode(mode)
        eff = efficiency or Efficiency()
        if m is CostMode.CALIBRATED and not eff.is_ideal:
            raise ConfigError(
                "field mode: --bw-eff, --compute-eff and --overhead scale the ideal roofline; "
                "add --ideal (calibrated mode uses the accelerator's own terms)"
            )
        return cls(dep, m, eff.calibration(dep.accelerator, m), dtypes or Dtypes())

    @classmethod
    def ideal(cls, target: Accelerator | Deployment, dtypes: Dtypes | None = None) -> Pricing:
        """The ideal roofline on ``target``."""
        return cls.of(target, CostMode.IDEAL, dtypes)

    @classmethod
    def expected(cls, target: Accelerator | Deployment, dtypes: Dtypes | None = None) -> Pricing:
        """The calibrated expectation on ``target``."""
        return cls.of(target, CostMode.CALIBRATED, dtypes)

    @property
    def accelerator(self) -> Accelerator:
        return self.deployment.accelerator

    @property
    def is_ideal(self) -> bool:
        return self.mode is CostMode.IDEAL

    @property
    def label(self) -> str:
        """What kind of figure this prices: ``expected (calibrated)``, ``ideal roofline`` or
        ``ideal roofline (user efficiencies)``."""
        if not self.is_ideal:
            return EXPECTED_LABEL
        if self.calibration.family == USER_FAMILY:
            return f"{IDEAL_LABEL} (user efficiencies)"
        return IDEAL_LABEL

    def on(self, target: Accelerator | Deployment) -> Pricing:
        """The same mode, user efficiencies and data types on another deployment (calibrated
        mode takes the new accelerator's terms)."""
        dep = target if isinstance(target, Deployment) else Deployment(target)
        cal = dep.accelerator.calibration if not self.is_ideal else self.calibration
        return Pricing(dep, self.mode, cal, self.dtypes)

    def with_dtypes(self, dtypes: Dtypes) -> Pricing:
        return dataclasses.replace(self, dtypes=dtypes)

    def counterpart(self) -> Pricing:
        """The other mode on the same deployment and data types (what a table shows in
        brackets): the ideal roofline beside the expectation, or the expectation beside it."""
        if self.is_ideal:
            cal = self.accelerator.calibration
            return Pricing(self.deployment, CostMode.CALIBRATED, cal, self.dtypes)
        return Pricing(self.deployment, CostMode.IDEAL, IDEAL, self.dtypes)

    def workload(
        self, phase: Phase, batch: int, context: int, prompt: int | None = None
    ) -> Workload:
        """One step of this pricing's data types (what analytic costs take)."""
        return Workload(phase, batch, context, prompt, self.dtypes)

    def to_dict(self) -> dict[str, Any]:
        d = self.dtypes
        return {
            "mode": self.mode.value,
            "label": self.label,
            "calibration": self.calibration.family,
            "deployment": self.deployment.to_dict(),
            "dtypes": {"weight": d.weight.value, "act": d.act.value, "kv": d.kv.value},
        }


def parse_mode(ideal: bool) -> CostMode:
    """``--ideal`` as a mode."""
    return CostMode.IDEAL if ideal else CostMode.CALIBRATED
