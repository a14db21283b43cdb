"""One answer per concept of the course, whichever face asks: the catalog, the CLI (JSON), the
notebooks' source, the quiz and the report's sections.

Three questions: who manages each memory level (course module 3), which resource binds a step
(modules 1, 2 and 4), and who orchestrates each architecture's KV cache (the three-orchestrator
video and module 7). Each is asked of every face and the answers are compared with the one
source of truth the library keeps (``MemoryLevel.managed_by``, ``analytic.binding``,
``Accelerator.orchestrator``).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ridgeline import analytic as an
from ridgeline.analytic.binding import Resource
from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.quiz import draw_quiz
from ridgeline.quiz.generators import m3_managers, m4_architectures, m7_costs
from ridgeline.report.build import ReportContext, _compare_section, _questions_section
from ridgeline.report.kv_manage_section import kv_manage_tables
from ridgeline.report.tiling_section import FLASH_HW, _orchestrate_part
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim.kv_manage import KVManageOptions, kv_manage
from ridgeline.sim.workload import RequestSpec
from ridgeline.specs import ManagedBy, get_accelerator, get_model
from ridgeline.specs.catalog import FIVE_ARCHITECTURES, accelerator_names
from ridgeline.specs.kv_practice import Provider

ROOT = Path(__file__).resolve().parent.parent.parent
NOTEBOOKS = ROOT / "notebooks"
MODEL = "llama-3.1-8b"
runner = CliRunner()

# What the notebooks' and docs' prose names, and the catalog level it means.
EXAMPLES = {
    "CUDA shared memory": ("h100-sxm", "smem"),
    "AMD LDS": ("mi300x", "lds"),
    "TPU VMEM": ("tpu-v5e", "vmem"),
    "Spyre LX": ("ibm-spyre", "lx"),
    "Groq SRAM": ("groq-lpu", "sram"),
    "registers": ("h100-sxm", "registers"),
}
# Orchestrator labels that contradict the catalog's (``Accelerator.orchestrator``).
STALE_LABELS = ("compiler only", "compiler alone", "compiler + kernels")


def cli_json(*args: str) -> Any:
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def notebook_text(name: str) -> str:
    nb = json.loads(next(NOTEBOOKS.glob(f"{name}*.ipynb")).read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"])


def ctx(hw: str) -> ReportContext:
    return ReportContext(get_model(MODEL), Pricing.expected(get_accelerator(hw)), Path("."))


@cache
def kv_report() -> Any:
    """kv-manage on a tiny trace (the section's tables and the CLI's JSON come from it)."""
    trace = [RequestSpec(f"r{i}", 0.5 * i, list(range(64)), list(range(8))) for i in range(3)]
    sched = SchedulerConfig(max_num_batched_tokens=512, max_model_len=1024)
    return kv_manage(get_model(MODEL), trace, KVManageOptions(sched))


# ---- who manages each memory level --------------------------------------------------------


@pytest.mark.parametrize("name", FIVE_ARCHITECTURES)
def test_who_manages_each_level_agrees_in_catalog_cli_and_report(name: str) -> None:
    acc = get_accelerator(name)
    truth = {lvl.name: lvl.managed_by.value for lvl in acc.levels}
    shown = cli_json("hw", "show", name)
    assert {lvl["name"]: lvl["managed_by"] for lvl in shown["levels"]} == truth
    kinds = {lvl["name"]: lvl["local_memory"] for lvl in shown["levels"]}
    for lvl in acc.levels:
        kind = lvl.managed_by.local_memory
        assert kinds[lvl.name] == (None if kind is None else kind.value)
    asked = cli_json("questions", "--hw", name, "-m", MODEL)
    assert {lvl["name"]: lvl["managed_by"] for lvl in asked["levels"]} == truth
    section = _questions_section(ctx(name))
    rows = section.tables[0].rows
    assert {r[0].split(" (")[0]: r[3] for r in rows} == truth


def test_who_manages_agrees_in_the_quiz() -> None:
    rng = random.Random(0)
    for name in accelerator_names():
        for lvl in get_accelerator(name).levels:
            if lvl.managed_by is ManagedBy.RUNTIME:
                continue
            q = m3_managers.who_manages_q(rng, name, lvl.name)
            right = next(c for c in q.choices if c.key == q.answer)
            assert right.text == m3_managers.MANAGER_TEXT[lvl.managed_by]
            assert f"managed by {lvl.managed_by.value}" in q.solution
    # TPU VMEM: the compiler, and its worked solution says so rather than "kernels manage it"
    q = m3_managers.who_manages_q(rng, "tpu-v5e", "vmem")
    assert "compiler-managed" in q.solution and "manage it explicitly" not in q.solution
    pairs = (("tpu-v5e", "vmem"), ("h100-sxm", "smem"), ("ibm-spyre", "lx"), ("h100-sxm", "l2"))
    match = m3_managers.match_managers_q(rng, pairs)
    assert match.answer == ("compiler", "kernel", "compiler", "hardware")


def test_the_notebooks_name_each_manager_as_the_catalog_does() -> None:
    text = notebook_text("03")
    groups = dict(re.findall(r"`(hardware|kernel|compiler|runtime)` \(([^)]*)\)", text))
    assert set(groups) == {m.value for m in ManagedBy}
    named = 0
    for example, (acc, level) in EXAMPLES.items():
        for manager, prose in groups.items():
            if example in prose:
                assert get_accelerator(acc).level(level).managed_by.value == manager, example
                named += 1
    assert named >= 5  # CUDA shared memory, AMD LDS, TPU VMEM, Spyre LX, Groq SRAM at least
    assert "three kinds of local memory" in text and ".local_memory" in text


# ---- which resource binds a step ------------------------------------------------------------


@pytest.mark.parametrize("name", FIVE_ARCHITECTURES)
def test_what_binds_agrees_in_library_cli_quiz_and_report(name: str) -> None:
    m, acc = get_model(MODEL), get_accelerator(name)
    ans = an.five_questions(m, acc, an.Workload(an.Phase.DECODE, 1, 4096))
    asked = cli_json("questions", "--hw", name, "-m", MODEL)
    assert (asked["roofline"]["text"], asked["expected"]["text"]) == (
        ans.roofline.text,
        ans.expected.text,
    )
    q = m4_architectures.scarce_q(random.Random(0), name, MODEL, 1, 4096)
    right = next(c for c in q.choices if c.key == q.answer)
    assert right.text == m4_architectures.RESOURCE_TEXT[ans.scarce]
    assert f"expects {ans.expected.text} to bind" in q.solution
    paragraph = _questions_section(ctx(name)).paragraphs[0]
    assert ans.roofline.text in paragraph and ans.expected.text in paragraph
    # a model that fits one chip: compare's deployment is that chip, and its verdict is the same
    row = next(r for r in cli_json("compare", "-m", MODEL, "--hw", name)["rows"])
    if row["deployment"] is not None and row["deployment"]["chips"] == 1:
        assert row["verdict"]["text"] == ans.expected.text
        assert row["binds"].split(": ")[1].startswith(f"{ans.expected.text} binds (expected)")


@pytest.mark.slow  # over a second: the report's compare section draws its figure
def test_the_report_and_the_cli_compare_give_the_same_verdicts() -> None:
    out = Path("/tmp/ridgeline-consistency")
    section = _compare_section(replace(ctx("h100-sxm"), out_dir=out))
    cli = cli_json("compare", "-m", MODEL)
    report_rows = {r["accelerator"]: r["verdict"]["text"] for r in section.data["rows"]}
    assert report_rows == {r["accelerator"]: r["verdict"]["text"] for r in cli["rows"]}
    table = {row[0]: row[6] for row in section.tables[0].rows}
    assert table == report_rows


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b"])
def test_decode_at_batch_one_is_never_compute_bound_on_the_five(model: str) -> None:
    """The course: low-batch decode waits on bytes. At batch 1 the expected verdict is a
    bandwidth, the links or fixed latency on every architecture, never compute (tpu-v5e used to
    read compute from an efficiency fitted on batches of 48 to 256 applied to the padding of a
    1-row GEMM)."""
    for row in an.compare(get_model(model)).rows:
        assert row.verdict.resource is not Resource.COMPUTE, row.binds
        if row.accelerator.name in ("h100-sxm", "tpu-v5e", "ibm-spyre"):
            assert row.verdict.resource is Resource.BANDWIDTH, row.binds


def test_the_notebooks_take_their_verdicts_from_the_library() -> None:
    text = notebook_text("04")
    assert "ans.roofline.text" in text and "ans.expected.text" in text and "row.binds" in text
    assert '"scarce"' not in text  # one verdict alone, unlabelled, would read as the only one


# ---- who orchestrates each architecture's KV cache -------------------------------------------


@pytest.mark.slow  # over a second: kv-manage simulates each technique on the five
def test_orchestrators_agree_in_catalog_cli_and_report() -> None:
    truth = {n: get_accelerator(n).orchestrator for n in FIVE_ARCHITECTURES}
    assert truth == {
        "h100-sxm": "runtime + kernels",
        "tpu-v5e": "runtime + compiler",
        "cerebras-wse3": "compiler",
        "groq-lpu": "compiler",
        "ibm-spyre": "runtime + compiler",
    }
    for name in FIVE_ARCHITECTURES:
        assert cli_json("hw", "show", name)["orchestrator"] == truth[name]
    orch = cli_json("orchestrate", "-m", MODEL)
    assert {r["accelerator"]: r["orchestrator"] for r in orch["rows"]} == {
        n: truth[n] for n in ("h100-sxm", "tpu-v5e", "ibm-spyre")
    }
    rep = kv_report()
    assert {r.accelerator: r.orchestrator for r in rep.rows} == truth
    arch_table, _ = kv_manage_tables(rep)
    assert {row[0]: row[2] for row in arch_table.rows} == truth
    table, data = _orchestrate_part(ctx("h100-sxm"))
    assert {r["accelerator"]: r["orchestrator"] for r in data["rows"]} == {
        n: truth[n] for n in ("h100-sxm", "tpu-v5e", "ibm-spyre")
    }
    # one TPU in every table of the report: the five architectures' (no v6e beside a v5e)
    assert [r["accelerator"] for r in data["rows"]][1] == "tpu-v5e" and "tpu-v5e" in FLASH_HW


@pytest.mark.slow  # over a second: kv-manage simulates each technique on the five
def test_the_allocator_is_part_of_the_orchestrator() -> None:
    """kv-manage's "allocates KV" (data/kv_management.toml) never names a layer the catalog's
    orchestrator leaves out."""
    for row in kv_report().rows:
        assert set(row.allocator.value.split(" + ")) <= set(row.orchestrator.split(" + "))


def test_the_notebook_prints_the_orchestrator_the_library_keeps() -> None:
    """Notebook 03 reads each label from the library (the catalog's and kv-manage's rows), and
    its prose names Spyre's as the catalog does."""
    text = notebook_text("03")
    assert "a.orchestrator" in text and "r.orchestrator" in text
    assert "runtime (vLLM-Spyre) places each" in text and "the compiler emitted" in text
    assert get_accelerator("ibm-spyre").orchestrator == "runtime + compiler"


@pytest.mark.slow  # over a second: kv-manage simulates each technique on the five
def test_what_a_technique_becomes_on_spyre_agrees_in_kv_manage_and_the_quiz() -> None:
    """Module 7, part 2: the quiz's right answer and worked solution for each technique on Spyre
    are kv-manage's row, and whoever provides it is part of Spyre's orchestrator."""
    spyre = next(r for r in kv_report().rows if r.accelerator == "ibm-spyre")
    for cost in spyre.techniques:
        q = m7_costs.spyre_technique_q(random.Random(0), cost.technique)
        right = next(c for c in q.choices if c.key == q.answer)
        assert right.text == cost.becomes, cost.technique
        assert f"provided by {cost.provider.value}: {cost.becomes}" in q.solution
        if cost.provider is not Provider.NOBODY:
            assert set(cost.provider.value.split(" + ")) <= set(spyre.orchestrator.split(" + "))


@pytest.mark.slow  # over a second: 30 quizzes drawn
def test_no_face_carries_a_stale_orchestrator_label() -> None:
    texts = {p.name: p.read_text() for p in NOTEBOOKS.glob("*.ipynb")}
    texts.update({p.name: p.read_text() for p in (ROOT / "docs").glob("*.md")})
    texts["README.md"] = (ROOT / "README.md").read_text()
    for seed in range(30):
        texts[f"quiz {seed}"] = "\n".join(
            f"{q.prompt}\n{q.solution}" for q in draw_quiz(seed).questions
        )
    for name, text in texts.items():
        for label in STALE_LABELS:
            assert label not in text, f"{name}: '{label}'"
