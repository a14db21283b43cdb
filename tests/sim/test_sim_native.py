"""The fast mode compiled (``sim.native``): the guard that keeps a stale or disabled build out,
and the compiled modules giving the interpreted ones' results exactly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import (
    LengthDist,
    Lengths,
    RequestSpec,
    SimConfig,
    WorkloadSpec,
    generate,
    native,
    simulate,
)
from ridgeline.specs import get_accelerator, get_model


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the compiled modules' sources, as a build leaves them (an extension beside)."""
    for name in native.MODULES:
        shutil.copy(native.PACKAGE_DIR / f"{name}.py", tmp_path / f"{name}.py")
    (tmp_path / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    return tmp_path


def _manifest(package: Path, digest: str) -> None:
    (package / native.MANIFEST).write_text(json.dumps({"digest": digest}))


def test_no_extension_means_interpreted(tmp_path: Path) -> None:
    assert native.decide(tmp_path) == "interpreted: not built"
    assert native.compiled_files(tmp_path) == []


def test_a_build_of_these_sources_is_used(package: Path) -> None:
    _manifest(package, native.digest(package))
    assert native.decide(package) == "compiled"


@pytest.mark.parametrize("manifest", [None, "0" * 64])
def test_an_edited_source_keeps_its_old_build_out(
    package: Path, manifest: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression guard: an edited ``.py`` beside its old extension must run as written."""
    if manifest is not None:
        _manifest(package, manifest)
    before = list(sys.meta_path)
    monkeypatch.setattr(sys, "meta_path", before.copy())
    assert native.guard(package, "scratch_sim").startswith("interpreted: the build is older")
    finder = sys.meta_path[0]
    spec = finder.find_spec("scratch_sim.fast", None)
    assert spec is not None and spec.origin == str(package / "fast.py")
    assert finder.find_spec("scratch_sim.loop", None) is None  # only the compiled modules
    native.guard(package, "scratch_sim")
    assert len(sys.meta_path) == len(before) + 1  # once, however often it is asked


def test_the_environment_can_turn_a_fresh_build_off(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _manifest(package, native.digest(package))
    monkeypatch.setenv(native.DISABLE_ENV, "0")
    assert native.decide(package) == f"interpreted: {native.DISABLE_ENV}=0"


@pytest.mark.parametrize("value", ["off", "false", "2", "yes"])
def test_a_switch_other_than_0_or_1_is_refused(
    package: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Regression: only "0" was read, so RIDGELINE_NATIVE=off ran the compiled modules without
    a word; the variable is checked as a flag is, built or not."""
    monkeypatch.setenv(native.DISABLE_ENV, value)
    with pytest.raises(ConfigError, match=f"RIDGELINE_NATIVE: 0 .* or 1 .*got '{value}'"):
        native.decide(package)
    _manifest(package, native.digest(package))
    with pytest.raises(ConfigError, match="RIDGELINE_NATIVE"):
        native.decide(package)
    monkeypatch.setenv(native.DISABLE_ENV, "1")
    assert native.decide(package) == "compiled"


def test_the_digest_covers_every_compiled_source(package: Path) -> None:
    first = native.digest(package)
    for name in native.MODULES:
        path = package / f"{name}.py"
        text = path.read_text()
        path.write_text(text + "\n")
        assert native.digest(package) != first, name
        path.write_text(text)
    assert native.digest(package) == first


def test_clean_removes_the_build_and_its_manifest(package: Path) -> None:
    _manifest(package, native.digest(package))
    assert {p.name for p in native.clean(package)} == {
        "fast.cpython-311-x86_64-linux-gnu.so",
        native.MANIFEST,
    }
    assert native.decide(package) == "interpreted: not built"


def _configs() -> list[SimConfig]:
    """Runs that cross the fast mode's branches: chunked prompts, completions inside stretches,
    a pool too small for the load (preemptions), and the reserving, priority and static
    policies."""
    sched = SchedulerConfig(max_num_batched_tokens=1024)
    a100 = Pricing.ideal(get_accelerator("a100-80gb"))
    base = SimConfig(get_model("llama-2-7b"), a100, sched, num_blocks=900)
    return [
        replace(base, scheduler=replace(sched, policy=policy))
        for policy in (
            PolicyKind.FCFS,
            PolicyKind.CONTIGUOUS,
            PolicyKind.PRIORITY,
            PolicyKind.STATIC,
        )
    ]


def _workload() -> list[RequestSpec]:
    spec = WorkloadSpec(
        num_requests=300,
        rate_per_s=40.0,
        seed=3,
        prompt=Lengths(LengthDist.LOGNORMAL, 900, sigma=0.9),
        output=Lengths(LengthDist.LOGNORMAL, 150, sigma=0.9),
    )
    return generate(spec)


def numbers() -> dict[str, object]:
    """What the runs of ``_configs`` measured, every float as it came out."""
    workload = _workload()
    out: dict[str, object] = {"mode": native.mode()}
    for cfg in _configs():
        r = simulate(cfg, workload)
        out[cfg.scheduler.policy.value] = [
            r.num_steps,
            r.num_preemptions,
            r.kv_peak_frac,
            r.itl_s.p99,
            r.mean_running,
            [(q.ttft_s, q.tpot_s, q.e2e_s) for q in r.requests],
        ]
    return out


@pytest.mark.slow
def test_compiled_and_interpreted_give_the_same_numbers() -> None:
    if native.decide() != "compiled":
        pytest.skip(f"no current build here ({native.decide()}): ridgeline native build")
    script = (
        f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        "import test_sim_native as t; print(json.dumps(t.numbers()))"
    )
    interpreted = json.loads(
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, native.DISABLE_ENV: "0"},
        ).stdout
    )
    compiled = json.loads(json.dumps(numbers()))
    assert (compiled.pop("mode"), interpreted.pop("mode")) == ("compiled", "interpreted")
    assert compiled == interpreted  # the floats through JSON: bit for bit


def test_the_comparison_reaches_preemptions_and_chunks() -> None:
    """The comparison above means something: the runs preempt and chunk prompts."""
    got = numbers()
    assert got["fcfs"][1] > 0  # type: ignore[index]
    budget = _configs()[0].scheduler.max_num_batched_tokens
    assert sum(r.prompt_len > budget for r in _workload()) > 10
