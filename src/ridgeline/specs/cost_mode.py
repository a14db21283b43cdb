"""Which kind of figure a speed is: the ideal roofline or the calibrated expectation.

Apart from ``specs.calibration`` (whose file models cost start-up) so that a command's
``--help``, which offers the choice, loads no calibration.
"""

from __future__ import annotations

from enum import StrEnum


class CostMode(StrEnum):
    """Which kind of figure a speed is."""

    IDEAL = "ideal"  # the roofline: datasheet peaks, no latencies (what the course teaches)
    CALIBRATED = "calibrated"  # the roofline with the family's calibration terms
