"""Builds that leave no process behind: a command (a compiler and all it starts) runs in a process
group of its own, under a small reaper, so that however the caller ends the group ends too.

::

    caller (ridgeline)            its own session/group
    ──────────────────            ──────────────────────────────────────────────
    run_group(cmd) ──Popen──▶     reaper (python -c REAPER)  ──▶  cmd ─▶ ninja ─▶ cc1plus ...

- an exception in the caller while it waits (Ctrl-C's ``KeyboardInterrupt``, or SIGTERM where
  the caller turns it into one) kills the group: ``os.killpg``;
- the caller killed outright (SIGKILL, or SIGTERM's default action): the kernel sends the reaper
  SIGTERM (Linux ``PR_SET_PDEATHSIG``, "parent death signal"), and the reaper kills its group.

``sigterm_as_ctrl_c`` makes SIGTERM raise ``KeyboardInterrupt`` for a while, so a caller's
``finally`` runs on ``kill`` as on Ctrl-C.

Without the group, ``kill`` on a build left its compiler processes running as orphans (they are
in the caller's group only when a terminal sends the signal to the whole foreground group).

Layer rule: a leaf; the standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

# The reaper: die with the caller (prctl option 1 is PR_SET_PDEATHSIG), kill the group on
# SIGTERM or SIGINT, otherwise run the command and exit with its status.
REAPER = r"""
import ctypes, os, signal, subprocess, sys
def end(*_):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGINT, end)
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    end()
sys.exit(subprocess.call(sys.argv[2:]))
"""


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc``'s process group (``proc`` leads it) and reap ``proc``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_group(
    cmd: Sequence[str], cwd: str | Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` to the end in a process group of its own (the module docstring); its exit
    status and its stdout and stderr together, as text.

    The group is killed if this call is interrupted (any exception, ``KeyboardInterrupt``
    included), and by the reaper if this process dies.
    """
    full = [sys.executable, "-c", REAPER, str(os.getpid()), *cmd]
    proc = subprocess.Popen(
        full, cwd=cwd, env=None if env is None else dict(env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate()
    except BaseException:
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, "")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` in the main thread for the ``with`` body, as Ctrl-C
    does, so ``finally`` blocks run (a build's group is killed, a child server stopped) instead
    of the process ending where it stands. Elsewhere than the main thread: no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
