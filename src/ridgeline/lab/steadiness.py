"""Was the machine quiet while the lab measured it? Three signs that it was not:

- the 1-minute load average exceeded the cores at the start or the end (other processes were
  runnable: a timed thread may wait, and memory bandwidth is shared even when it does not);
- the DRAM read, repeated at the end of the calibration, differs from the first reading by more
  than ``MAX_SPREAD`` (the machine changed under the measurement);
- reading with every thread was slower than with one (``MIN_SCALING``): the other cores were busy.

A calibration with any of them is flagged, never silently written: ``lab calibrate`` warns on
stderr, the spec files carry the reasons in their notes and sources, and the lab report shows
them. The numbers are kept (a busy machine is a machine too), but they are not a quiet machine's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAX_SPREAD = 1.25  # a repeated reading 25% off the first: not the same machine state
MIN_SCALING = 0.8  # all threads reading at under 80% of one thread's rate: others are running


@dataclass(frozen=True, slots=True)
class Steadiness:
    """The load and a repeated probe around one calibration.

    Attributes:
        cores: logical CPUs.
        load_start, load_end: 1-minute load averages (None where the OS gives none).
        probe_threads: threads of the repeated probe (the most the calibration used).
        first_bytes_per_s: the DRAM read at the largest size, as the calibration measured it.
        again_bytes_per_s: the same read, measured again at the end.
        one_thread_bytes_per_s: the DRAM read at one thread (None when only one count ran).
    """

    cores: int
    load_start: float | None
    load_end: float | None
    probe_threads: int
    first_bytes_per_s: float
    again_bytes_per_s: float
    one_thread_bytes_per_s: float | None = None

    @property
    def spread(self) -> float:
        """The larger reading ÷ the smaller one (1 = the same)."""
        hi = max(self.first_bytes_per_s, self.again_bytes_per_s)
        lo = min(self.first_bytes_per_s, self.again_bytes_per_s)
        return hi / lo if lo > 0 else float("inf")

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the calibration is not a quiet machine's (empty when it is)."""
        out = []
        loads = [x for x in (self.load_start, self.load_end) if x is not None]
        if loads and max(loads) > self.cores:
            out.append(f"load average {max(loads):.1f} on {self.cores} cores: other processes ran")
        if self.spread > MAX_SPREAD:
            out.append(
                f"the DRAM read repeated at the end gave {self.again_bytes_per_s / 1e9:.3g} GB/s "
                f"against {self.first_bytes_per_s / 1e9:.3g} GB/s ({self.spread:.2f}x apart)"
            )
        one = self.one_thread_bytes_per_s
        if (
            one is not None
            and self.probe_threads > 1
            and self.first_bytes_per_s < MIN_SCALING * one
        ):
            out.append(
                f"{self.probe_threads} threads read {self.first_bytes_per_s / 1e9:.3g} GB/s, "
                f"less than one thread's {one / 1e9:.3g} GB/s: the other cores were busy"
            )
        return tuple(out)

    @property
    def steady(self) -> bool:
        return not self.reasons

    def warning(self) -> str:
        """One line for a user: what was wrong and what to do (empty when steady)."""
        if self.steady:
            return ""
        return (
            "measured under load: "
            + "; ".join(self.reasons)
            + ". The figures are kept and flagged; calibrate again on a quiet machine."
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(spread=self.spread, steady=self.steady, reasons=list(self.reasons))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Steadiness:
        return cls(
            cores=d["cores"],
            load_start=d["load_start"],
            load_end=d["load_end"],
            probe_threads=d["probe_threads"],
            first_bytes_per_s=d["first_bytes_per_s"],
            again_bytes_per_s=d["again_bytes_per_s"],
            one_thread_bytes_per_s=d.get("one_thread_bytes_per_s"),
        )
