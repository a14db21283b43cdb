"""A build run through ``processes.run_group`` leaves nothing behind, however its caller ends:
an exception or Ctrl-C in the caller, SIGTERM (turned into Ctrl-C by ``sigterm_as_ctrl_c``),
or SIGKILL (the reaper's parent-death signal). Regression: killing ``lab serve-check`` during
its kernel build left ``cc1plus`` processes running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ridgeline.processes import run_group

# A caller that runs a "build" whose grandchild sleeps and writes its pid, then waits on it.
CALLER = """
import sys
from ridgeline.processes import run_group, sigterm_as_ctrl_c
with sigterm_as_ctrl_c():
    try:
        run_group(["sh", "-c", "sleep 300 & echo $! > " + sys.argv[1] + "; wait"])
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that is not there counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    pidfile = tmp_path / "sleep.pid"
    env = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, str(pidfile)], env=env, stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert caller.poll() is None and time.monotonic() < deadline, "the build did not start"
        time.sleep(0.02)
    return caller, int(pidfile.read_text())


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


def test_the_status_and_output_come_back(tmp_path: Path) -> None:
    done = run_group(["sh", "-c", "echo built; echo warned >&2; exit 3"])
    assert done.returncode == 3 and done.stdout == "built\nwarned\n"
    here = run_group(["sh", "-c", 'pwd; echo "$FLAG"'], cwd=tmp_path, env={"FLAG": "-O0"})
    assert here.returncode == 0 and here.stdout == f"{tmp_path}\n-O0\n"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"]
)
def test_a_killed_caller_leaves_no_build_process(tmp_path: Path, sig: signal.Signals) -> None:
    caller, grandchild = _start(tmp_path)
    assert _alive(grandchild)
    caller.send_signal(sig)
    out, _ = caller.communicate(timeout=30)
    if sig is not signal.SIGKILL:
        assert out == "interrupted\n" and caller.returncode == 0
    assert _gone_within(grandchild, 10), f"pid {grandchild} outlived its build's caller"
