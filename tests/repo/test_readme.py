"""Every command of README.md and docs/*.md runs, in a fresh-clone-like setting, and prints
what the document shows (``tools/doc_commands.py`` says what counts as a command and how output
is compared; ``python tools/refresh_docs.py`` rewrites the documents' outputs after a change).

Each document runs in its own copy of the files git tracks (the shipped data only), with a home
directory of its own (no user hardware files) and nothing downloaded; its commands run in order,
as a reader would type them, and may write only under ``out/`` (and that home directory).
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ridgeline.sim import native

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tools"))
from doc_commands import (  # noqa: E402
    FENCE,
    REPO,
    SERVERS,
    Clone,
    Command,
    blocks,
    commands,
    docs,
    mismatch,
    written_outside,
)

REFRESH = "python tools/refresh_docs.py"
LANGUAGES = {"console", "python", "text", "toml", "json"}
# a usage synopsis names what to fill in: [--option], FILE, DIR, NAME, ...
PLACEHOLDER = r"\[|\.\.\.|\b[A-Z][A-Z_]*\b"
ALL = [cmd for doc in docs() for cmd in commands(doc)]
SKIPPED = pytest.skip.Exception


def _param(cmd: Command) -> object:
    marks = [pytest.mark.slow] + ([pytest.mark.torch] if cmd.needs_torch else [])
    return pytest.param(cmd, id=cmd.where, marks=marks)


def test_the_extractor_finds_commands_outputs_and_scripts(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "intro\n"
        "```console\n$ ridgeline hw list   # the catalog\nname\n\n$ ridgeline kv \\\n"
        "    --context 8\nerror: no\n```\n"
        "```console measured\n$ python bench.py\n1.5 s\n```\n"
        "```python\nx = 1\n```\n```text\nridgeline kv --model NAME\n```\n"
    )
    import doc_commands

    saved = doc_commands.REPO
    doc_commands.REPO = tmp_path
    try:
        found = commands(doc)
    finally:
        doc_commands.REPO = saved
    assert [(c.text, c.output, c.line, c.output_lines) for c in found[:3]] == [
        ("ridgeline hw list", ("name",), 3, (3, 4)),
        ("ridgeline kv --context 8", ("error: no",), 6, (7, 8)),
        ("python bench.py", ("1.5 s",), 11, (11, 12)),
    ]
    assert found[1].expects_error and found[2].measured and not found[0].measured
    assert found[3].python and found[3].text == "python -c 'x = 1\n'"
    assert len(found) == 4  # the text block's synopsis is no command


def test_every_fence_says_its_language_and_commands_sit_in_console_blocks() -> None:
    bad = []
    for doc in docs():
        for info, body, line in blocks(doc):
            lang = (info.split() or [""])[0]
            where = f"{doc.relative_to(REPO)}:{line}"
            if lang not in LANGUAGES:
                bad.append(f"{where}: fence language {lang!r} (one of {sorted(LANGUAGES)})")
            if lang in ("console", "python"):
                continue
            for text in body.splitlines():
                runnable = text.startswith(("$ ", "ridgeline ", "python "))
                if runnable and (text.startswith("$ ") or not re.search(PLACEHOLDER, text)):
                    bad.append(
                        f"{where}: {text.strip()[:60]!r} is a command outside a console block"
                    )
    assert not bad, "\n".join(bad)


def test_the_docs_have_commands_to_check() -> None:
    by_doc = {c.doc for c in ALL}
    assert len(ALL) > 60 and {"README.md", "docs/analytic.md", "docs/tiling.md"} <= by_doc
    assert FENCE.pattern and SERVERS  # the runner's tables are in doc_commands


@pytest.fixture(scope="session")
def clones() -> Iterator[dict[str, Clone]]:
    made: dict[str, Clone] = {}
    yield made
    for clone in made.values():  # servers of a document whose last command did not run
        clone.stop_servers()


def _clone(clones: dict[str, Clone], doc: str, factory: pytest.TempPathFactory) -> Clone:
    if doc not in clones:
        clones[doc] = Clone.make(factory.mktemp(doc.replace("/", "_")))
    return clones[doc]


def _check(cmd: Command, clone: Clone) -> None:
    if cmd.needs_torch:
        pytest.importorskip("torch", reason="the command needs the torch extra")
    if cmd.needs_native and native.decide() != "compiled":
        pytest.skip("its figures are the compiled fast mode's; build it with make native")
    server = next((k for k in SERVERS if cmd.text.startswith(k)), None)
    if server is not None:
        pytest.importorskip(SERVERS[server][0], reason=f"{server} needs its extra")
    before = clone.snapshot()
    outcome = clone.run(cmd)
    outside = written_outside(before, clone.snapshot())
    assert not outside, f"{cmd.where}: `{cmd.text}` wrote outside out/: {outside}"
    why = mismatch(cmd, outcome)
    assert why is None, f"{cmd.where}: `{cmd.text}`: {why}\n(after a deliberate change: {REFRESH})"


@pytest.mark.parametrize("cmd", [_param(c) for c in ALL])
def test_doc_command_runs_in_a_fresh_clone(
    cmd: Command, clones: dict[str, Clone], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A command may need the ones before it (files written to out/, a server started in the
    # background): every earlier command of its document that has not been tried runs first.
    # A command is tried once: when it fails its own test says so, the later ones go on.
    clone = _clone(clones, cmd.doc, tmp_path_factory)
    mine = [c for c in ALL if c.doc == cmd.doc]
    for i, earlier in enumerate(mine):
        if i in clone.done:
            continue
        clone.done.add(i)
        try:
            if earlier is cmd:
                _check(cmd, clone)
                return
            with contextlib.suppress(AssertionError, subprocess.TimeoutExpired, SKIPPED):
                _check(earlier, clone)
        finally:
            if i + 1 == len(mine):
                clone.stop_servers()


def test_every_image_the_docs_show_is_drawn_by_a_command() -> None:
    """docs/figures/ are redrawn by ``make figures`` (tools/docs_figures.sh: each a command of
    the docs, its output directed there); docs/explorer/ are the browser tests' screenshots
    (``make screenshots``)."""
    drawn = (REPO / "tools" / "docs_figures.sh").read_text()
    drawn += (REPO / "src" / "ridgeline" / "cli" / "simulate_cmds.py").read_text()  # --plot DIR
    shot = next((REPO / "tests").rglob("test_web_browser.py")).read_text()
    missing = []
    for doc in docs():
        for folder, name in re.findall(
            r"\]\((?:docs/)?(figures|explorer)/([\w.-]+\.png)\)", doc.read_text()
        ):
            if name not in (drawn if folder == "figures" else shot):
                missing.append(f"{doc.name}: {folder}/{name}")
    assert not missing, "images no command draws: " + ", ".join(missing)


DEMOS = {"export", "transcript", "attempts"}  # the sections tools/quiz_demo.py regenerates


@pytest.mark.slow
def test_the_recorded_transcripts_are_the_current_output() -> None:
    """``console transcript`` blocks are not run command by command (a pseudo-terminal session,
    answer sheets filled between commands): each sits in a ``<!-- demo:NAME -->`` section of
    docs/quiz.md that ``tools/quiz_demo.py`` regenerates, and ``--check`` holds every such
    section to a fresh run (in a temporary directory)."""
    # regression: the sections had gone stale (other questions drawn) and no test said so
    for doc in docs():
        text = doc.read_text()
        for m in FENCE.finditer(text):
            if "transcript" not in m.group(1).split()[1:]:
                continue
            before = text[: m.start()]
            opened, closed = before.rfind("<!-- demo:"), before.rfind("<!-- /demo:")
            name = before[opened:].removeprefix("<!-- demo:").split(" ", 1)[0]
            assert doc.name == "quiz.md" and opened > closed and name in DEMOS, doc.name
    tool = [sys.executable, str(REPO / "tools" / "quiz_demo.py"), "--check"]
    done = subprocess.run(tool, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
