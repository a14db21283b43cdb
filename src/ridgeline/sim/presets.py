"""Synthetic workload kinds by name, and the defaults each kind implies.

``poisson`` and ``gamma`` lay out independent requests (gamma: burstier, coefficient of
variation ``cv``); ``offline`` queues them all at t = 0, as vLLM's and TensorRT-LLM's throughput
benchmarks do (and ``predict`` by default); ``shared-prefix`` gives requests a few shared system prompts (8 of 1,024
tokens unless set), the case prefix caching is for (Zheng et al., "SGLang", NeurIPS 2024,
few-shot and system-prompt reuse); ``multi-turn`` makes conversations whose turns resend the
history (4 turns unless set), the case of chat serving (Patel et al., "Splitwise", ISCA 2024,
the conversation trace).
"""

from __future__ import annotations

from dataclasses import replace

from ridgeline.sim.kinds import WorkloadKind
from ridgeline.sim.workload import Arrival, WorkloadSpec

DEFAULT_PREFIXES = 8
DEFAULT_PREFIX_TOKENS = 1024
DEFAULT_TURNS = 4


def workload_of_kind(kind: WorkloadKind, spec: WorkloadSpec) -> WorkloadSpec:
    """``spec`` with the arrival process and the defaults that ``kind`` implies (explicit
    prefixes, prefix length and turns in ``spec`` are kept)."""
    arrival = {WorkloadKind.GAMMA: Arrival.GAMMA, WorkloadKind.OFFLINE: Arrival.OFFLINE}.get(
        kind, Arrival.POISSON
    )
    spec = replace(spec, arrival=arrival)
    if kind is WorkloadKind.SHARED_PREFIX and not spec.num_prefixes:
        spec = replace(
            spec, num_prefixes=DEFAULT_PREFIXES, prefix_len=spec.prefix_len or DEFAULT_PREFIX_TOKENS
        )
    if kind is WorkloadKind.MULTI_TURN and spec.turns < 2:
        spec = replace(spec, turns=DEFAULT_TURNS)
    return spec
