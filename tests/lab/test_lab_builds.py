"""The lab says what it compiles and how long, and a line every few seconds while it does
(``lab.builds``); torch-free: the builds are stand-ins."""

from __future__ import annotations

import time
from pathlib import Path

from ridgeline.engine.kernel_build import BuildPlan, KernelTarget
from ridgeline.lab.builds import CPU_S_PER_UNIT, Build, announcement, build_all, heartbeat


def fake(tmp_path: Path, units: int, built: bool) -> Build:
    sources = tuple(tmp_path / f"u{i}.cpp" for i in range(units))
    plan = BuildPlan(KernelTarget.NATIVE, ("-O3", "-march=native"), sources, "k" * 64, tmp_path)
    if built:
        plan.directory.mkdir(parents=True)
        plan.marker.write_text("{}")
    return Build("the test's probe", plan)


def test_the_announcement_names_what_where_and_about_how_long(tmp_path: Path) -> None:
    text = announcement(fake(tmp_path, 5, built=False))
    assert text.startswith("compiling the test's probe: 5 C++ unit(s), -O3 -march=native, into ")
    assert f"about {5 * CPU_S_PER_UNIT:.0f} s of CPU" in text and "once per environment" in text


def test_a_heartbeat_speaks_while_the_work_runs() -> None:
    said: list[str] = []
    with heartbeat(said.append, "compiling x", every_s=0.05):
        time.sleep(0.3)
    assert len(said) >= 2 and said[0].startswith("still compiling x (")
    n = len(said)
    time.sleep(0.15)
    assert len(said) == n  # silent once the block is over


def test_what_is_built_is_not_announced(tmp_path: Path) -> None:
    said: list[str] = []
    assert build_all(said.append, (fake(tmp_path, 1, built=True),)) == []
    assert said == []
