"""Building the engine's C++ kernels once per environment, keyed by what the binary depends on.

The sources live in ``engine/csrc`` (package data) and compile into one extension module with
torch's ``cpp_extension.load`` (ninja, a unit per source, in parallel). Where it goes::

    <root>/<target>-<key[:16]>/            the build: objects, ninja file, the module
    <root>/<target>-<key[:16]>/built.json  written last: the build finished (what, how long)
    <root>/<target>-<key[:16]>.lock        the build lock (build_lock.py), held while compiling

``key`` = sha256 of the sources and headers, the compile flags, torch's version, the Python ABI,
the compiler's version line and, for ``-march=native``, the CPU it targets (vendor, family,
model and feature flags from /proc/cpuinfo): a binary never meets a CPU it was not built for,
and a changed source gets a new directory without a hand-bumped name. ``root`` belongs to one
environment: ``$RIDGELINE_KERNEL_DIR``, else ``<sys.prefix>/var/ridgeline-kernels`` (a venv's
own folder), else ``~/.cache/ridgeline/kernels/<hash of sys.prefix>``; so two environments or
checkouts never rebuild each other's kernels.

Targets: ``native`` (-march=native: AVX-512 paths where the CPU has them) and ``portable``
(-march=x86-64-v3 on x86-64, AVX2 + FMA and no AVX-512; none elsewhere), which CI builds and
tests too, so the paths without AVX-512 are checked on every machine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from types import ModuleType

from ridgeline.engine.build_lock import LockOwner, build_lock
from ridgeline.errors import ConfigError, RidgelineError
from ridgeline.processes import run_group
from ridgeline.specs.inputs import check_real
from ridgeline.specs.limits import MAX_SECONDS

CSRC = Path(__file__).with_name("csrc")
SOURCES = (
    "paged_attention.cpp",
    "panel_gemm.cpp",
    "fused_ops.cpp",
    "fused_layer.cpp",
    "bindings.cpp",
)
BASE_FLAGS = ("-O3", "-std=c++17", "-ffast-math", "-fopenmp")  # OpenMP: at::parallel_for
LD_FLAGS = ("-fopenmp",)
DIR_ENV = "RIDGELINE_KERNEL_DIR"
LOCK_TIMEOUT_ENV = "RIDGELINE_KERNEL_LOCK_TIMEOUT_S"
DEFAULT_LOCK_TIMEOUT_S = 1800.0  # a cold build: ~2 min of CPU a target, 11 min wall seen at load 15
MARKER = "built.json"

Progress = Callable[[str], None]


class KernelBuildError(RidgelineError):
    """The kernels could not be built (no compiler, a compile error); the message says where."""


class KernelTarget(StrEnum):
    """Which CPU a build targets."""

    NATIVE = "native"
    PORTABLE = "portable"

    @staticmethod
    def parse(value: str | KernelTarget) -> KernelTarget:
        try:
            return KernelTarget(value)
        except ValueError:
            raise ConfigError(f"field kernels: native or portable, got '{value}'") from None


def target_flags(target: KernelTarget) -> tuple[str, ...]:
    """The ``-march`` flags of a target on this machine's architecture."""
    if target is KernelTarget.NATIVE:
        return ("-march=native",)
    return ("-march=x86-64-v3",) if platform.machine() in ("x86_64", "AMD64") else ()


@cache
def cpu_signature() -> str:
    """What ``-march=native`` resolves from: the first CPU's vendor, family, model and flags."""
    wanted = (
        "vendor_id",
        "cpu family",
        "model",
        "flags",
        "features",
        "cpu implementer",
        "cpu part",
    )
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name in wanted and name not in fields:
                flags = name in ("flags", "features")
                fields[name] = " ".join(sorted(value.split())) if flags else value.strip()
    except OSError:
        pass
    return json.dumps({"machine": platform.machine(), **fields}, sort_keys=True)


@cache
def compiler_version() -> str:
    """The first line of ``$CXX --version`` (torch's compiler), or why there is none."""
    cxx = os.environ.get("CXX", "c++")
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cxx}: {type(e).__name__}"
    return (out.stdout.splitlines() or [""])[0]


def default_root() -> Path:
    """This environment's kernel folder (see the module docstring)."""
    if os.environ.get(DIR_ENV):
        path = Path(os.environ[DIR_ENV])
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{DIR_ENV}: {path} is not a directory")
        return path
    prefix = Path(sys.prefix)
    if os.access(prefix, os.W_OK):
        return prefix / "var" / "ridgeline-kernels"
    tag = hashlib.sha256(str(prefix.resolve()).encode()).hexdigest()[:12]
    return Path.home() / ".cache" / "ridgeline" / "kernels" / tag


@dataclass(frozen=True, slots=True)
class BuildPlan:
    """One build: its target, flags, sources, key, and where it lives."""

    target: KernelTarget
    flags: tuple[str, ...]
    sources: tuple[Path, ...]
    key: str
    root: Path

    @property
    def name(self) -> str:
        """The module name: unique per key, so builds never meet in ``sys.modules``."""
        return f"ridgeline_kernels_{self.target.value}_{self.key[:12]}"

    @property
    def directory(self) -> Path:
        return self.root / f"{self.target.value}-{self.key[:16]}"

    @property
    def lock_path(self) -> Path:
        return self.root / f"{self.target.value}-{self.key[:16]}.lock"

    @property
    def module_path(self) -> Path:
        return self.directory / f"{self.name}.so"

    @property
    def marker(self) -> Path:
        return self.directory / MARKER


def build_key(files: Sequence[Path], flags: Sequence[str], target: KernelTarget) -> str:
    """sha256 over everything the binary depends on (see the module docstring)."""
    import torch

    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.name):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    parts = [
        " ".join(flags),
        torch.__version__,
        f"{sys.implementation.cache_tag}{sys.abiflags}",
        compiler_version(),
        cpu_signature() if target is KernelTarget.NATIVE else platform.machine(),
    ]
    h.update("\0".join(parts).encode())
    return h.hexdigest()


def plan(
    target: KernelTarget | str = KernelTarget.NATIVE, root: Path | None = None, csrc: Path = CSRC
) -> BuildPlan:
    """The build of ``target`` from the sources in ``csrc`` (every ``.cpp`` and ``.h`` there)."""
    kind = KernelTarget.parse(target)
    flags = (*BASE_FLAGS, *target_flags(kind))
    sources = tuple(sorted(csrc.glob("*.cpp")))
    if not sources:
        raise KernelBuildError(f"no C++ sources in {csrc}")
    key = build_key([*sources, *sorted(csrc.glob("*.h"))], flags, kind)
    return BuildPlan(kind, flags, sources, key, root or default_root())


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What ``ensure_built`` did: compiled now (``compiled``) or found the build done."""

    plan: BuildPlan
    compiled: bool
    seconds: float
    cleared: LockOwner | None = None  # the owner of a build that died unfinished, cleared

    def summary(self) -> dict[str, object]:
        p = self.plan
        done = json.loads(p.marker.read_text()) if p.marker.exists() else {}
        return {
            "target": p.target.value,
            "module": p.name,
            "directory": str(p.directory),
            "key": p.key,
            "flags": list(p.flags),
            "sources": [s.name for s in p.sources],
            "compiled_now": self.compiled,
            "build_seconds": done.get("seconds", self.seconds),
            "avx512": done.get("avx512"),
            "cleared_stale_lock_of_pid": None if self.cleared is None else self.cleared.pid,
        }


def resolve_lock_timeout_s(timeout_s: float | None = None) -> float:
    """The bound on a wait for another build: ``timeout_s``, else ``$RIDGELINE_KERNEL_LOCK_
    TIMEOUT_S``, else ``DEFAULT_LOCK_TIMEOUT_S``; the variable is checked as the option is.

    Raises:
        ConfigError: not a number, NaN, an infinity, negative or past ``MAX_SECONDS``
            (a NaN bound made the bounded wait endless).
    """
    if timeout_s is not None:
        return check_real("lock_timeout_s", timeout_s, 0, MAX_SECONDS)
    text = os.environ.get(LOCK_TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{LOCK_TIMEOUT_ENV}: a number of seconds, got '{text}'") from None
    if not 0 <= value <= MAX_SECONDS:  # NaN fails both comparisons
        raise ConfigError(f"{LOCK_TIMEOUT_ENV}: seconds in 0..{MAX_SECONDS:g}, got '{text}'")
    return value


def check_environment() -> None:
    """The build's variables checked as flags are, before a command starts long work or
    prints that it has: ``$RIDGELINE_KERNEL_DIR`` (a folder, where it exists) and
    ``$RIDGELINE_KERNEL_LOCK_TIMEOUT_S``.

    Raises:
        ConfigError: naming the variable.
    """
    default_root()
    resolve_lock_timeout_s()


def _watch(p: BuildPlan, progress: Progress, stop: threading.Event) -> None:
    """Report each compiled unit as its object file appears (ninja writes them as it goes)."""
    seen = 0
    while not stop.wait(0.5):
        done = len(list(p.directory.glob("*.o")))
        if done > seen:
            seen = done
            progress(f"compiled {done}/{len(p.sources)} units")


# The build, in a process of its own: torch's ``cpp_extension.load`` (ninja, one compiler per
# unit) with the plan's arguments as JSON.
_BUILD = r"""
import json, sys
from torch.utils.cpp_extension import load
a = json.loads(sys.argv[1])
load(name=a["name"], sources=a["sources"], extra_cflags=a["cflags"], extra_ldflags=a["ldflags"],
     extra_include_paths=a["include"], build_directory=a["directory"], verbose=False)
"""


def _compile(p: BuildPlan, progress: Progress) -> ModuleType:
    """Compile in a child process group (``processes.run_group``): interrupting or killing
    this process kills the compilers too. The module is imported here once built."""
    args = {
        "name": p.name,
        "sources": [str(s) for s in p.sources],
        "cflags": list(p.flags),
        "ldflags": list(LD_FLAGS),
        "include": [str(p.sources[0].parent)],
        "directory": str(p.directory),
    }
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(p, progress, stop), daemon=True)
    watcher.start()
    try:
        done = run_group([sys.executable, "-c", _BUILD, json.dumps(args)])
    finally:
        stop.set()
        watcher.join()
    if done.returncode != 0:  # the compiler's output is long: keep it in a file, say where
        log = p.directory / "build.log"
        log.write_text(done.stdout)
        raise KernelBuildError(
            f"kernel build {p.name} failed (exit {done.returncode}); compiler output in {log}"
        )
    return import_built(p)


def _fresh_build(p: BuildPlan, progress: Progress) -> float:
    """Compile into an empty directory and write the marker last; returns the seconds."""
    shutil.rmtree(p.directory, ignore_errors=True)  # a dead build's objects, torch's baton
    p.directory.mkdir(parents=True)
    progress(f"compiling {len(p.sources)} units ({' '.join(p.flags)}) into {p.directory}")
    start = time.perf_counter()
    module = _compile(p, progress)
    seconds = time.perf_counter() - start
    record = {
        "module": p.name,
        "target": p.target.value,
        "flags": list(p.flags),
        "key": p.key,
        "seconds": round(seconds, 1),
        "avx512": bool(module.has_avx512()),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    p.marker.write_text(json.dumps(record, indent=2))
    progress(f"built {p.name} in {seconds:.0f} s")
    return seconds


def ensure_built(
    p: BuildPlan, progress: Progress | None = None, lock_timeout_s: float | None = None
) -> BuildResult:
    """Build ``p`` unless it is built; wait (bounded) for another process building it.

    Raises:
        ConfigError: a lock timeout (or ``$RIDGELINE_KERNEL_LOCK_TIMEOUT_S``) out of range.
        BuildLockTimeout: a live build held the lock past the bound.
        KernelBuildError: the compiler failed.
    """
    say = progress or _stderr
    timeout_s = resolve_lock_timeout_s(lock_timeout_s)  # checked even when nothing is built
    if p.marker.exists():
        return BuildResult(p, False, 0.0)

    def waiting(owner: LockOwner | None) -> None:
        who = owner.describe() if owner else "another process"
        say(f"waiting for the kernel build of {who} (lock {p.lock_path})")

    with build_lock(p.lock_path, timeout_s, waiting) as previous:
        if p.marker.exists():  # built by the process we waited for
            return BuildResult(p, False, 0.0)
        cleared = previous if previous is not None and not previous.alive() else None
        if cleared is not None:
            say(f"clearing the unfinished build of pid {cleared.pid} (it is gone)")
        return BuildResult(p, True, _fresh_build(p, say), cleared)


def _stderr(message: str) -> None:
    print(f"ridgeline kernels: {message}", file=sys.stderr, flush=True)


def import_built(p: BuildPlan) -> ModuleType:
    """The built module (imported once per process)."""
    import torch  # noqa: F401  (libtorch's symbols, before the extension loads)

    if p.name in sys.modules:
        return sys.modules[p.name]
    spec = importlib.util.spec_from_file_location(p.name, p.module_path)
    if spec is None or spec.loader is None:
        raise KernelBuildError(f"cannot import {p.module_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[p.name] = module
    return module
