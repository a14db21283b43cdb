"""The kernel build: a key that changes with what the binary depends on, a folder per
environment, a build killed mid-way that the next build clears, and a live lock waited on for a
bounded time, then one error line (exit 2 from the CLI) — never a silent hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from ridgeline.cli import app  # noqa: E402
from ridgeline.engine import kernel_build as kb  # noqa: E402
from ridgeline.engine.build_lock import BuildLockTimeout, build_lock, read_owner  # noqa: E402

pytestmark = pytest.mark.torch

# A module that compiles in seconds (torch/extension.h alone is most of it) at -O0.
TINY = r"""
#include <torch/extension.h>
int answer() { return 42; }
bool has_avx512() { return false; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("answer", &answer);
  m.def("has_avx512", &has_avx512);
}
"""
TINY_FLAGS = ("-O0", "-std=c++17")


def _tiny(tmp_path: Path) -> kb.BuildPlan:
    csrc = tmp_path / "csrc"
    csrc.mkdir(exist_ok=True)
    (csrc / "tiny.cpp").write_text(TINY)
    return replace(kb.plan("portable", tmp_path / "root", csrc), flags=TINY_FLAGS)


def test_the_key_follows_sources_flags_and_the_cpu(tmp_path: Path, monkeypatch) -> None:
    native, portable = kb.plan("native", tmp_path), kb.plan("portable", tmp_path)
    assert native.key != portable.key and native.directory != portable.directory
    assert "-march=native" in native.flags and not any("avx512" in f for f in portable.flags)
    other_env = kb.plan("native", tmp_path / "other")
    assert other_env.key == native.key and other_env.directory != native.directory
    monkeypatch.setattr(kb, "cpu_signature", lambda: "another cpu with avx512f")
    assert kb.plan("native", tmp_path).key != native.key  # -march=native meets no other CPU
    assert kb.plan("portable", tmp_path).key == portable.key  # x86-64-v3 runs on any of them
    monkeypatch.undo()
    p = _tiny(tmp_path)
    (p.sources[0].parent / "tiny.cpp").write_text(TINY + "// a changed source\n")
    assert kb.plan("portable", tmp_path / "root", p.sources[0].parent).key != p.key


def test_a_live_lock_is_waited_on_then_one_error(tmp_path: Path) -> None:
    p = _tiny(tmp_path)
    said: list[str] = []
    with build_lock(p.lock_path, 5, lambda owner: None):
        start = time.monotonic()
        with pytest.raises(BuildLockTimeout, match=f"locked by pid {os.getpid()}") as e:
            kb.ensure_built(p, said.append, lock_timeout_s=1.0)
        waited = time.monotonic() - start
    assert 1.0 <= waited < 5.0
    assert len(said) == 1 and said[0].startswith(
        f"waiting for the kernel build of pid {os.getpid()}"
    )
    assert "\n" not in str(e.value) and not p.marker.exists()


@pytest.mark.parametrize("bound", [float("nan"), float("inf"), -1.0])
def test_a_bound_that_is_no_bound_is_refused(tmp_path: Path, bound: float) -> None:
    """Regression: ``RIDGELINE_KERNEL_LOCK_TIMEOUT_S=nan`` made the bounded wait endless (no
    time is past a NaN deadline) and ``-1`` reported "waited -1 s"."""
    from ridgeline.errors import ConfigError

    with (
        pytest.raises(ConfigError, match="timeout_s"),
        build_lock(tmp_path / "x.lock", bound, lambda owner: None),
    ):
        pass
    with pytest.raises(ConfigError, match="lock_timeout_s"):
        kb.resolve_lock_timeout_s(bound)


def test_the_cli_exits_2_with_one_line_on_a_live_lock(tmp_path: Path) -> None:
    p = kb.plan("native", tmp_path)
    with build_lock(p.lock_path, 5, lambda owner: None):
        result = CliRunner().invoke(
            app, ["engine", "build", "--root", str(tmp_path), "--lock-timeout-s", "0.5"]
        )
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "locked by pid" in errors[0]
    assert result.stdout == ""


_CHILD = """
import json, sys
from dataclasses import replace
from pathlib import Path
from ridgeline.engine import kernel_build as kb
root, csrc, flags = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
kb.ensure_built(replace(kb.plan("portable", Path(root), Path(csrc)), flags=tuple(flags)))
"""


def _start_and_kill_a_build(p: kb.BuildPlan) -> int:
    """Start a build in a new process group, SIGKILL the group mid-compile; the child's pid."""
    args = [
        sys.executable,
        "-c",
        _CHILD,
        str(p.root),
        str(p.sources[0].parent),
        json.dumps(list(p.flags)),
    ]
    child = subprocess.Popen(args, start_new_session=True, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (p.directory / "build.ninja").exists():
        assert child.poll() is None and time.monotonic() < deadline, "the build did not start"
        time.sleep(0.05)
    time.sleep(1.0)  # the compiler is running: torch/extension.h alone takes seconds
    assert child.poll() is None, "the build ended before it could be killed"
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)
    return child.pid


@pytest.mark.slow
def test_a_build_killed_mid_way_is_cleared_by_the_next(tmp_path: Path) -> None:
    p = _tiny(tmp_path)
    dead = _start_and_kill_a_build(p)
    assert not p.marker.exists()
    assert (p.directory / "lock").exists()  # torch's baton: what used to hang every later load
    owner = read_owner(p.lock_path)
    assert owner is not None and owner.pid == dead and not owner.alive()
    said: list[str] = []
    result = kb.ensure_built(p, said.append, lock_timeout_s=5)
    assert result.compiled and result.cleared is not None and result.cleared.pid == dead
    assert said[0] == f"clearing the unfinished build of pid {dead} (it is gone)"
    assert kb.import_built(p).answer() == 42
    before = len(said)
    again = kb.ensure_built(p, said.append)  # built: nothing to do, nothing said
    assert not again.compiled and len(said) == before


def _processes_naming(text: str, compilers_only: bool = False) -> list[int]:
    """Live processes whose command line holds ``text`` (zombies excluded); with
    ``compilers_only``, not the Python ones (the build's own process and its reaper)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        python = cmdline.startswith(sys.executable)
        if text in cmdline and state != "Z" and not (compilers_only and python):
            found.append(int(proc.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_build_whose_caller_is_killed_leaves_no_compiler(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Regression: killing the process that builds (``lab serve-check``, ``serve``) left its
    ``cc1plus`` running; the build runs in a process group of its own that dies with it."""
    p = _tiny(tmp_path)
    args = [
        sys.executable,
        "-c",
        _CHILD,
        str(p.root),
        str(p.sources[0].parent),
        json.dumps(list(p.flags)),
    ]
    child = subprocess.Popen(args, stderr=subprocess.DEVNULL)  # the caller's group: not killed
    deadline = time.monotonic() + 120
    source = str(p.sources[0])
    while not _processes_naming(source, compilers_only=True):
        assert child.poll() is None and time.monotonic() < deadline, "no compiler started"
        time.sleep(0.05)
    child.send_signal(sig)  # the caller alone, as ``kill PID`` does
    child.wait(30)
    deadline = time.monotonic() + 15
    while _processes_naming(source) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_naming(source) == []
    assert not p.marker.exists()
