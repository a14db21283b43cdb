"""guidellm's command line with the start race of its Poisson profile closed.

guidellm 0.8's ``AsyncPoissonStrategy.init_processes_start`` sets the event that wakes the
workers before it writes the shared arrival clock's start; a worker that wakes first adds its
exponential gaps to the clock's initial -1.0 s (the Unix epoch), so every request is due at
once: a burst of all of them, reported as a "root dispatch delay" of about 1.8e9 s. That
happened on two of three rates of a quiet run. The patch below writes the clock first, then
sets the event, and changes nothing else. Run as ``python -m ridgeline.lab.guidellm_main run
--scenario ...`` (``lab.loadgen.run_guidellm``).
"""

from __future__ import annotations

import sys
from typing import Any


def close_start_race() -> None:
    """Make the Poisson strategy write its clock's start before it wakes the workers."""
    from guidellm.scheduler import strategies

    base = strategies.ThroughputStrategy.init_processes_start

    def init_processes_start(self: Any, start_time: float) -> None:
        with self._offset.get_lock():
            self._offset.value = start_time
        base(self, start_time)

    strategies.AsyncPoissonStrategy.init_processes_start = init_processes_start  # type: ignore[method-assign]


def main() -> Any:
    close_start_race()
    from guidellm.__main__ import cli

    sys.argv[0] = "guidellm"
    return cli()


if __name__ == "__main__":
    sys.exit(main())
