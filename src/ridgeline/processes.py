"""Builds that leave no process behind: a command (a compiler and all it starts) runs in a session
of its own, under a small reaper, so that however the caller ends, the build ends too.

::

    caller (ridgeline)            a session of its own
    ──────────────────            ──────────────────────────────────────────────
    run_group(cmd) ──Popen──▶     reaper (python -c REAPER)  ──▶  cmd ─▶ ninja ─▶ cc1plus ...

- an exception in the caller while it waits (Ctrl-C's ``KeyboardInterrupt``, or SIGTERM where
  the caller turns it into one): the caller sends the reaper SIGTERM;
- the caller killed outright (SIGKILL, or SIGTERM's default action): the kernel sends the reaper
  SIGTERM (Linux ``PR_SET_PDEATHSIG``, "parent death signal");
- on SIGTERM the reaper kills every process of its session (it leads a new one), then itself.
  The session rather than the group, because ninja puts each compiler it starts in a process
  group of its own.

``sigterm_as_ctrl_c`` makes SIGTERM raise ``KeyboardInterrupt`` for a while, so a caller's
``finally`` runs on ``kill`` as on Ctrl-C.

Without this, ``kill`` on a build left its compiler processes running as orphans (a terminal's
Ctrl-C reaches the whole foreground group; ``kill PID`` reaches one process).

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
from typing import IO

# The reaper: die with the caller (prctl option 1 is PR_SET_PDEATHSIG); on SIGTERM or SIGINT
# kill every process of its session, then itself; otherwise run the command and exit with its
# status. The session, not the group: ninja starts each compiler in a process group of its own.
REAPER = r"""
import ctypes, os, signal, subprocess, sys, time
def session():
    me, sid, found = os.getpid(), os.getsid(0), []
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        if entry.isdigit() and int(entry) != me and int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry))
    return found
def end(*_):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for _ in range(100):
        try:
            pids = session()
        except OSError:
            break
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
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
KILL_WAIT_S = 10.0  # how long the reaper gets to sweep its session before its group is killed


def kill_group(proc: subprocess.Popen[str]) -> None:
    """Have the reaper ``proc`` kill its session (SIGTERM), then SIGKILL its group if it has
    not ended within ``KILL_WAIT_S``; reap it."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start_group(
    cmd: Sequence[str],
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    output: IO[str] | int = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """Start ``cmd`` in a session of its own under the reaper (the module docstring); its
    stdout and stderr go to ``output``. End it with ``kill_group``."""
    full = [sys.executable, "-c", REAPER, str(os.getpid()), *cmd]
    return subprocess.Popen(
        full,
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )


def run_group(
    cmd: Sequence[str],
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    output: IO[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` to the end in a session of its own (``start_group``); its exit status, and
    its stdout and stderr together as text (empty when they went to ``output``).

    Everything it started is killed if this call is interrupted (any exception,
    ``KeyboardInterrupt`` included), and by the reaper if this process dies.
    """
    proc = start_group(cmd, cwd, env, subprocess.PIPE if output is None else output)
    try:
        out, _ = proc.communicate()
    except BaseException:
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out or "", "")


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
