"""Ring collectives and pipeline sends over an accelerator's chip-to-chip links.

Ring all-reduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", JPDC 69(2), 2009): 2(n-1) steps; each chip sends 2(n-1)/n x M bytes;
time = 2(n-1) x hop latency + 2(n-1)/n x M / egress bandwidth. A ring all-gather is half of it:
(n-1) steps, (n-1)/n x M bytes per chip. Through a switch (or direct links to every peer) every chip reaches every other in one hop, so a
small all-reduce runs one-shot instead: each chip reads the n-1 other chips' messages and
reduces them itself, one hop and (n-1) x M bytes (TensorRT-LLM's ONESHOT all-reduce strategy,
vLLM's custom all-reduce); an all-reduce takes whichever of the two is faster at the link's
datasheet rates, as those engines choose by message size. Calibrated, a collective also pays a fixed
``collective_latency_s`` and moves bytes at ``link_efficiency`` of the egress bandwidth
(``analytic.calibrated``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.specs.calibration import IDEAL, Calibration
from ridgeline.specs.hardware import Interconnect, Topology

_ONE_HOP = (Topology.SWITCH, Topology.FULLY_CONNECTED)  # every peer one hop away


@dataclass(frozen=True, slots=True)
class LinkTerms:
    """Link time split by the calibration term each part scales with, so that
    ``seconds(cal)`` = hop_s + collectives x collective_latency_s + transfer_s / link_efficiency
    + crossings x stage_latency_s (``analytic.calibrated``)."""

    hop_s: float = 0.0  # hops x per-hop latency
    collectives: float = 0.0  # collectives paid (each its fixed latency)
    transfer_s: float = 0.0  # bytes / egress bandwidth at the full link rate
    crossings: float = 0.0  # pipeline-stage crossings

    def seconds(self, cal: Calibration = IDEAL) -> float:
        return (
            self.hop_s
            + self.collectives * cal.collective_latency_s
            + self.transfer_s / cal.link_efficiency
            + self.crossings * cal.stage_latency_s
        )

    def scaled(self, n: float) -> LinkTerms:
        return LinkTerms(
            self.hop_s * n, self.collectives * n, self.transfer_s * n, self.crossings * n
        )

    def __add__(self, other: LinkTerms) -> LinkTerms:
        return LinkTerms(
            self.hop_s + other.hop_s,
            self.collectives + other.collectives,
            self.transfer_s + other.transfer_s,
            self.crossings + other.crossings,
        )


@dataclass(frozen=True, slots=True)
class Collective:
    """One ring collective over ``chips`` chips of a message of ``message_bytes`` (per chip)."""

    chips: int
    message_bytes: float
    bytes_sent_per_chip: float
    steps: int
    terms: LinkTerms
    time_s: float

    @property
    def bytes_sent(self) -> float:
        """Bytes on the links, all chips of the ring together."""
        return self.chips * self.bytes_sent_per_chip


def _ring(
    chips: int, steps: int, message_bytes: float, link: Interconnect | None, cal: Calibration
) -> Collective:
    sent = steps / chips * message_bytes
    terms = collective_terms(steps, sent, link)
    return Collective(chips, message_bytes, sent, steps, terms, terms.seconds(cal))


def ring_allreduce(
    chips: int, message_bytes: float, link: Interconnect | None, cal: Calibration = IDEAL
) -> Collective:
    """Ring all-reduce (Patarasuk & Yuan 2009): 2(n-1) steps, 2(n-1)/n x M bytes sent per chip,
    time 2(n-1) x latency + 2(n-1)/n x M / egress bandwidth; through a switch, one-shot when
    that is faster (module docstring). Free on one chip."""
    ring = _ring(chips, 2 * (chips - 1), message_bytes, link, cal)
    if chips == 1 or link is None or link.topology not in _ONE_HOP:
        return ring
    sent = (chips - 1) * message_bytes
    terms = collective_terms(1, sent, link)
    if terms.seconds() >= ring.terms.seconds():
        return ring
    return Collective(chips, message_bytes, sent, 1, terms, terms.seconds(cal))


def ring_allgather(
    chips: int, message_bytes: float, link: Interconnect | None, cal: Calibration = IDEAL
) -> Collective:
    """Ring all-gather of a ``message_bytes`` result (Patarasuk & Yuan 2009): n-1 steps,
    (n-1)/n x M bytes sent per chip."""
    return _ring(chips, chips - 1, message_bytes, link, cal)


def collective_terms(hops: int, sent_bytes: float, link: Interconnect | None) -> LinkTerms:
    """hops x hop latency, one collective's fixed latency, bytes / egress; nothing on one chip."""
    if hops == 0:
        return LinkTerms()
    assert link is not None, "validated by check_deployment"
    return LinkTerms(hops * link.latency_s, 1.0, sent_bytes / link.egress_bandwidth_bytes_per_s)


def send_terms(sent_bytes: float, link: Interconnect | None) -> LinkTerms:
    """One pipeline-stage crossing: a hop, the stage latency, bytes / egress."""
    assert link is not None, "validated by check_deployment"
    return LinkTerms(link.latency_s, 0.0, sent_bytes / link.egress_bandwidth_bytes_per_s, 1.0)
