"""Compiled copies of the fast mode's hot modules, and the guard that keeps stale ones out.

The fast mode (``sim.fast``, ``sim.stretch``, ``sim.lines``, ``sim.step_log``) spends its time
in per-event Python: attribute reads, small lists, calls. mypyc (part of mypy) compiles those
modules, unchanged, to C extensions beside their sources; Python then imports the extension
instead of the ``.py``. The source stays the one definition: the same tests run on either,
``RIDGELINE_NATIVE=0`` forces the interpreted modules, and a build records the digest of the
sources it compiled (``_native.json``) so that an edited source never runs as an old binary.

    ridgeline native build     # about 1.5 minutes of one core; make test does it
    ridgeline native status    # compiled, interpreted, or stale
    ridgeline native clean

Without a C compiler or mypy (an install without the ``dev`` extra) nothing is built and the
interpreted modules run: the same results, about twice the time (docs/serving.md).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ridgeline.errors import ConfigError

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

# (hashlib, json, tempfile and the build runner are imported where used: ``guard`` runs on every
# import of ridgeline.sim and should cost nothing where no build exists)

PACKAGE = "ridgeline.sim"
PACKAGE_DIR = Path(__file__).resolve().parent
# built in one mypyc run (one type check sees them all), each its own extension
MODULES = ("lines", "step_log", "stretch", "fast")
MANIFEST = "_native.json"
DISABLE_ENV = "RIDGELINE_NATIVE"  # "0": the interpreted modules even where compiled ones exist

# mypyc's build, run in a child process (it runs mypy, then gcc, through setuptools); paths
# relative to the source root so that module names are ridgeline.sim.*
_BUILD = """
import sys
from mypyc.build import mypycify
from setuptools import setup
out, *paths = sys.argv[1:]
mods = mypycify(["--ignore-missing-imports", "--cache-dir", out, *paths], opt_level="3", separate=True, target_dir=out)
setup(name="ridgeline-sim-native", ext_modules=mods,
      script_args=["-q", "build_ext", "--inplace", "--build-temp", out, "--build-lib", out])
"""


def digest(package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 of the compiled modules' sources and this interpreter's version."""
    import hashlib

    h = hashlib.sha256(sys.version.encode())
    for name in MODULES:
        h.update(name.encode() + b"\0" + (package_dir / f"{name}.py").read_bytes())
    return h.hexdigest()


def compiled_files(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The extension files a build left beside the sources (any Python version's)."""
    return sorted(
        p
        for name in MODULES
        for pattern in (f"{name}.*.so", f"{name}__mypyc.*.so", f"{name}.*.pyd")
        for p in package_dir.glob(pattern)
    )


def _built_digest(package_dir: Path) -> str | None:
    import json

    try:
        return str(json.loads((package_dir / MANIFEST).read_text())["digest"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class _SourceFinder:
    """A meta path finder: the listed modules from their ``.py`` files, ahead of any extension
    beside them."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


NOT_BUILT = "interpreted: not built"


def decide(package_dir: Path = PACKAGE_DIR) -> str:
    """Whether ``MODULES`` load compiled ("compiled") or why not ("interpreted: ...").

    Raises:
        ConfigError: ``$RIDGELINE_NATIVE`` other than 0 or 1 (``off`` or ``false`` would have
            been ignored without a word, the compiled modules running).
    """
    flag = os.environ.get(DISABLE_ENV, "").strip()
    if flag not in ("", "0", "1"):
        raise ConfigError(
            f"{DISABLE_ENV}: 0 (the interpreted modules) or 1 (compiled ones where built), "
            f"got '{flag}'"
        )
    if not compiled_files(package_dir):
        return NOT_BUILT
    if flag == "0":
        return f"interpreted: {DISABLE_ENV}=0"
    if _built_digest(package_dir) != digest(package_dir):
        return "interpreted: the build is older than the sources (rebuild it)"
    return "compiled"


def guard(package_dir: Path = PACKAGE_DIR, package: str = PACKAGE) -> str:
    """Before any of ``MODULES`` is imported: keep compiled copies out when they are stale or
    disabled (``RIDGELINE_NATIVE=0``); returns ``decide``'s answer."""
    why = decide(package_dir)
    if why in ("compiled", NOT_BUILT):  # nothing to keep out
        return why
    sources = {f"{package}.{m}": package_dir / f"{m}.py" for m in MODULES}
    if not any(isinstance(f, _SourceFinder) and f.sources == sources for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder(sources))
    return why


def mode() -> str:
    """ "compiled" when the fast mode runs compiled modules, else "interpreted"."""
    from ridgeline.sim import fast

    return "interpreted" if str(fast.__file__).endswith(".py") else "compiled"


def clean(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Remove the compiled files and the manifest; the paths removed."""
    gone = compiled_files(package_dir)
    manifest = package_dir / MANIFEST
    if manifest.exists():
        gone.append(manifest)
    for p in gone:
        p.unlink()
    return gone


def build(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Compile ``MODULES`` with mypyc beside their sources and record their digest; the
    extension files written. Raises ConfigError when mypyc or the compiler fails."""
    import json
    import tempfile

    from ridgeline.processes import run_group

    if importlib.util.find_spec("mypyc") is None:
        raise ConfigError("native build: mypyc is missing (pip install 'ridgeline[dev]')")
    clean(package_dir)
    root = package_dir.parents[len(PACKAGE.split(".")) - 1]  # the folder holding ridgeline/
    paths = [str((package_dir / f"{m}.py").relative_to(root)) for m in MODULES]
    source_digest = digest(package_dir)
    with tempfile.TemporaryDirectory(prefix="ridgeline-native-") as out:
        done = run_group(  # in a session of its own: killing this process kills the compilers
            [sys.executable, "-c", _BUILD, out, *paths],
            cwd=root,
            # no fused multiply-adds: the compiled floats must round as Python's do
            env={**os.environ, "CFLAGS": "-ffp-contract=off " + os.environ.get("CFLAGS", "")},
        )
    if done.returncode != 0:
        clean(package_dir)
        tail = done.stdout.strip().splitlines()[-5:]
        raise ConfigError("native build: mypyc failed: " + " | ".join(tail))
    (package_dir / MANIFEST).write_text(json.dumps({"digest": source_digest}) + "\n")
    return compiled_files(package_dir)
