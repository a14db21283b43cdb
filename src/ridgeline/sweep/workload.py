"""Workloads of a sweep: where request lengths come from (a trace or a distribution) and how
arrivals are laid out at the rate a capacity probe asks for.

A workload is materialized once (``load_table``: the trace read, or the lengths drawn) and then
re-timed per probe (``at_rate``), so a trace is read and shipped to workers once per sweep.

How many requests a probe has: a fixed ``num_requests``, or ``duration_s`` seconds of arrivals
(ceil(rate × duration_s) requests, at most ``max_requests``). A fixed count hides overload at
high rates — a finite burst drains, and may drain within the SLOs — whereas at a fixed duration an
overload by a factor ρ leaves a backlog of (ρ − 1) × duration_s seconds of work, which the TTFT
SLO sees.

Re-timing a trace keeps its burstiness: arrivals are scaled by ``native rate / asked rate``,
where the native rate is (n − 1) / (t_last − t_first) over the window used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ridgeline.errors import ConfigError
from ridgeline.sim.traces import trace_columns
from ridgeline.sim.workload import Arrival, Lengths, WorkloadSpec

__all__ = [
    "Arrival",
    "Lengths",
    "RequestTable",
    "Requests",
    "WorkloadSpec",
    "at_rate",
    "load_table",
    "read_trace",
]


@dataclass(frozen=True, slots=True)
class RequestTable:
    """A workload's requests before timing: lengths, and the trace's own arrivals (if any)."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    trace_arrival_s: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Requests:
    """The requests of one probe, in arrival order, at ``rate_rps``."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    rate_rps: float

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)


def read_trace(path: str | Path, skip: int = 0, limit: int | None = None) -> RequestTable:
    """The lengths and arrival times of a trace (``sim.traces``, the simulator's reader).

    Raises:
        ConfigError: the file is missing, a line is malformed (the message names the file,
            line and field), or fewer than 2 requests are left after ``skip``.
    """
    arrival, prompt, output = trace_columns(path, skip, limit)
    if len(arrival) < 2:
        raise ConfigError(f"trace {path}: fewer than 2 requests after skipping {skip}")
    return RequestTable(prompt, output, arrival)


def load_table(spec: WorkloadSpec, seed: int) -> RequestTable:
    """Materialize a workload once: read its trace window, or draw its lengths with ``seed``."""
    n = spec.table_size
    if spec.trace_path is not None:
        table = read_trace(spec.trace_path, spec.skip, n)
        if spec.num_requests is not None and len(table.prompt_tokens) < n:
            raise ConfigError(
                f"workload '{spec.name}': trace {spec.trace_path} has only "
                f"{len(table.prompt_tokens)} requests after skip={spec.skip}, num_requests={n}"
            )
        return table
    rng = np.random.default_rng(seed)
    prompts = spec.prompt.sample(rng, n)
    return RequestTable(prompts, spec.output.sample(rng, n))


def at_rate(
    table: RequestTable,
    arrival: Arrival,
    rate_rps: float,
    seed: int,
    num_requests: int | None = None,
) -> Requests:
    """Lay the first ``num_requests`` of the table (all by default) out in time at ``rate_rps``.

    Poisson gaps come from ``np.random.default_rng(seed)``, so a probe is a pure function of
    (table, rate, seed) and gives the same requests on every machine.
    """
    n = len(table.prompt_tokens) if num_requests is None else num_requests
    assert 2 <= n <= len(table.prompt_tokens)
    if arrival is Arrival.TRACE:
        assert table.trace_arrival_s is not None
        t = table.trace_arrival_s[:n] - table.trace_arrival_s[0]
        native_rps = (n - 1) / t[-1] if t[-1] > 0 else rate_rps
        times = t * (native_rps / rate_rps)
    elif arrival is Arrival.UNIFORM:
        times = np.arange(n, dtype=np.float64) / rate_rps
    elif arrival is Arrival.OFFLINE:  # every request at t = 0: the probe's rate changes nothing
        times = np.zeros(n)
    else:
        gaps = np.random.default_rng(seed).exponential(1.0 / rate_rps, n)
        times = np.cumsum(gaps) - gaps[0]
    return Requests(times, table.prompt_tokens[:n], table.output_tokens[:n], rate_rps)
