"""Docs describe the current state for a reader who was not there: no clock times, no commit
hashes, no accounts of earlier runs of work, and no reference that points outside the
repository (cite the primary public source instead). Checked over README.md, docs/, the
notebooks and every docstring and comment of src/; the catalog's source strings are checked for
outside references (their [references] may cite a public repository at a commit)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
SRC = REPO / "src" / "ridgeline"

CLOCK = re.compile(r"\b\d{1,2}:\d{2}(:\d{2})? ?UTC\b|\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
# 7 to 40 hex digits with both a digit and a letter, after "commit"/"since"/"at" or in a table
HASH = re.compile(
    r"(\bcommits?\b|\bsince\b|\bat\b|\bon\b|\||`)\s*`?(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
)
EARLIER = re.compile(
    r"\b(last time|runs? ago|earlier run|previous run|superseded|the last (two|three|four|\d+) "
    r"runs|this session|as of today|this issue|issue \d+)\b",
    re.IGNORECASE,
)
# the repository has no issue tracker: "issue 17" or "the issue's workload" points nowhere (an
# upstream project's tracker, "NVIDIA/nccl issue #1453", is a public source and passes)
TRACKER = re.compile(r"\b(the issue(?:'s)?|issues? #?\d+)\b", re.IGNORECASE)
UPSTREAM = re.compile(r"\b[\w.-]+/[\w.-]+ $")  # "owner/name " just before the match
# a catalog source tag ("[S26]") means something only beside the catalog's [references]
SOURCE_TAG = re.compile(r"\[S\d+\]")
OUTSIDE = re.compile(
    r"\.\./shared|shared/(reference|traces)|\breference/[a-z]+\.md|/work/|\b(hardware|course)\.md\b"
)


def _texts() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    files += sorted((REPO / "notebooks").glob("*.ipynb"))
    files += sorted(SRC.rglob("*.py")) + sorted((SRC / "data").rglob("*.toml"))
    files += sorted((SRC / "data").rglob("*.md")) + sorted((REPO / "docs").rglob("*.toml"))
    return [f for f in files if f.is_file()]


def findings(path: Path, root: Path = REPO) -> list[str]:
    """``file:line: what: text`` for every clock time, commit hash, earlier-run account and
    outside reference in ``path``."""
    out = []
    checks = (("clock time", CLOCK), ("commit hash", HASH), ("earlier run", EARLIER))
    checks += (("outside reference", OUTSIDE),)
    if path.suffix == ".md":  # pages name their sources; tags resolve only in the catalog
        checks += (("bare source tag", SOURCE_TAG),)
    if path.suffix == ".toml":  # catalog data: its [references] cite sources at a version
        checks = (("outside reference", OUTSIDE),)
    for i, line in enumerate(path.read_text().splitlines(), 1):
        for what, pattern in checks:
            if m := pattern.search(line):
                out.append(f"{path.relative_to(root)}:{i}: {what}: {m.group(0)!r}")
        if path.suffix != ".toml" and (m := _tracker(line)):
            out.append(f"{path.relative_to(root)}:{i}: tracker reference: {m.group(0)!r}")
    return out


def _tracker(line: str) -> re.Match[str] | None:
    """The first reference to an issue of a tracker the repository does not have."""
    return next((m for m in TRACKER.finditer(line) if not UPSTREAM.search(line[: m.start()])), None)


@pytest.mark.slow
def test_docs_readme_and_docstrings_describe_the_current_state() -> None:
    found = [f for path in _texts() for f in findings(path)]
    assert found == []


def test_tests_tools_and_benchmarks_cite_no_issue_tracker() -> None:
    """The code outside src/ too: its docstrings and comments say what a test holds, not which
    ticket asked for it (this module's own cases excepted)."""
    files = [p for tree in ("tests", "tools", "benchmarks") for p in (REPO / tree).rglob("*.py")]
    found = [
        f"{path.relative_to(REPO)}:{i}: {m.group(0)!r}"
        for path in sorted(files)
        if path.name != Path(__file__).name
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if (m := _tracker(line))
    ]
    assert found == []


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("the benchmark (03:11 UTC) on the final commit", "clock time"),
        ("measured 2025-01-02T10:00 on this machine", "clock time"),
        ("MHA goes to paged_rows_mha4 since 57a31e9", "commit hash"),
        ("| 5d94f2f | 1.23 |", "commit hash"),
        ("as two runs ago, the kernel wins", "earlier run"),
        ("Earlier run (superseded)", "earlier run"),
        ("see ../shared/reference/course.md", "outside reference"),
        ("facts in reference/serving.md §3.1", "outside reference"),
        ("as hardware.md estimates", "outside reference"),
        ("four wafers, as Cerebras reports [S26]", "bare source tag"),
        ("this issue added array_dim", "earlier run"),
        ("the fp8 rows (Issue #28): within 3 points", "tracker reference"),
        ("The issue's workload: 4 system prompts", "tracker reference"),
    ],
)
def test_the_checks_catch_what_they_are_for(tmp_path: Path, line: str, what: str) -> None:
    path = tmp_path / "page.md"
    path.write_text(f"fine line\n{line}\n")
    assert [f.split(": ")[1] for f in findings(path, tmp_path)] == [what]


def test_ordinary_text_passes(tmp_path: Path) -> None:
    path = tmp_path / "page.md"
    path.write_text(
        "ratio 2:1 of prefill to decode; block ids 0-15; 13.6 GB moved; 1e-3 s; colour cafe\n"
        "a 128-B stick; the sweep at 4 QPS; Dao et al. 2022 (https://arxiv.org/abs/2205.14135)\n"
        "NCCL plans ~25 us (NVIDIA/nccl issue #1453); the program in issue order\n"
    )
    assert findings(path, tmp_path) == []


def test_every_link_inside_the_repository_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = [
        f"{page.name}: {target}"
        for page in pages
        for target in re.findall(r"\]\(([^)#\s]+)\)", page.read_text())
        if not target.startswith(("http://", "https://")) and not (page.parent / target).exists()
    ]
    assert broken == []
