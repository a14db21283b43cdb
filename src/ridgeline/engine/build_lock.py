"""A build lock that a dead owner cannot leave behind, and a bounded wait for a live one.

The lock is ``fcntl.flock`` on a file beside the build. The kernel releases an flock when its
owner exits, however it exits (SIGKILL, a crash, Ctrl-C mid-compile), so the lock is held
exactly while its owner lives. The file stays and holds the last owner's pid, host and start
time: a waiter names who it waits for, and the next owner learns that the previous build died
unfinished (its ``previous`` record), so it can clear what that build left.

torch's own JIT baton is a file whose existence is the lock: an interrupted first build left it
behind, and every later load slept on it forever at 0% CPU. The kernel build holds this lock
around torch's, so any baton it finds is stale by construction.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from ridgeline.errors import RidgelineError
from ridgeline.specs.inputs import check_real
from ridgeline.specs.limits import MAX_SECONDS

POLL_S = 0.2  # how often a waiter retries the lock


class BuildLockTimeout(RidgelineError):
    """A live build held the lock for longer than the caller would wait."""


@dataclass(frozen=True, slots=True)
class LockOwner:
    """Who took the lock last: process id, host name, and when (``time.time()``)."""

    pid: int
    host: str
    started_s: float

    @staticmethod
    def me() -> LockOwner:
        return LockOwner(os.getpid(), socket.gethostname(), time.time())

    def alive(self) -> bool:
        """Whether the owner still runs (on this host; another host's owner counts as alive)."""
        if self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process: it exists
            return True
        return True

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {time.time() - self.started_s:.0f} s ago"


def read_owner(path: Path) -> LockOwner | None:
    """The owner record in the lock file, or None (no file, empty, or unreadable)."""
    try:
        return LockOwner(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _wait(
    fd: int, path: Path, timeout_s: float, on_wait: Callable[[LockOwner | None], None]
) -> None:
    """Retry the lock until it is free or ``timeout_s`` passed (then raise)."""
    deadline = time.monotonic() + timeout_s
    told = False
    while not _try_lock(fd):
        owner = read_owner(path)
        if not told:
            on_wait(owner)
            told = True
        left = deadline - time.monotonic()
        if left <= 0:
            who = owner.describe() if owner else "an unknown process"
            raise BuildLockTimeout(
                f"the kernel build at {path} is locked by {who}; waited {timeout_s:g} s "
                f"(stop that process, or raise RIDGELINE_KERNEL_LOCK_TIMEOUT_S)"
            )
        time.sleep(min(POLL_S, left))


@contextlib.contextmanager
def build_lock(
    path: Path, timeout_s: float, on_wait: Callable[[LockOwner | None], None]
) -> Iterator[LockOwner | None]:
    """Hold the lock at ``path`` for the ``with`` body.

    Args:
        path: the lock file (created if missing, never deleted).
        timeout_s: longest wait for a live owner before ``BuildLockTimeout``.
        on_wait: called once, with the owner's record, when the lock is busy.

    Yields:
        The previous owner's record (None on the first use): a build that held the lock and
        did not finish left it there.
    """
    check_real("timeout_s", timeout_s, 0, MAX_SECONDS)  # a NaN bound would never be reached
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _wait(fd, path, timeout_s, on_wait)
        previous = read_owner(path)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(LockOwner.me())).encode(), 0)
        try:
            yield previous
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
