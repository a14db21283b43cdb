"""Regenerate the real outputs quoted in docs/quiz.md (between ``<!-- demo:NAME -->`` and
``<!-- /demo:NAME -->`` markers): an exported quiz's first five questions with their answers,
a scripted interactive run, and the attempt limit at work.

    .venv/bin/python tools/quiz_demo.py          # rewrite them
    .venv/bin/python tools/quiz_demo.py --check  # say which differ, exit 1 (tests/quiz runs it)

The learner's answers come from the "library learner" of tests/quiz/test_quiz_learners.py; three
of them are computed with a classic mistake instead, so the run shows worked solutions.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
# the learner lives beside the quiz tests, wherever the test tree keeps them
sys.path.insert(0, str(next((ROOT / "tests").rglob("test_quiz_learners.py")).parent))
sys.path.insert(0, str(ROOT / "tools"))

from drive_quiz import drive  # noqa: E402

from ridgeline.quiz import Question, draw_quiz  # noqa: E402
from ridgeline.quiz.session import attempt_seed  # noqa: E402
from test_quiz_learners import LIBRARY, MISTAKES, _targets, as_typed  # noqa: E402

EXPORT_SEED = 7
NUM_MISTAKES = 3


def typed(q: Question, mistaken: bool) -> str:
    fn = LIBRARY[q.generator]
    if mistaken:
        fn = next(f for (g, m), f in MISTAKES.items() if g == q.generator and m in _targets(q))
    answer = as_typed(q, fn(q, dict(q.params)))
    return answer if isinstance(answer, str) else ",".join(answer)


def learner_answers(seed: int) -> tuple[list[str], list[int]]:
    """Right answers, except the first few targeted questions past the fifth."""
    answers, wrong = [], []
    for i, q in enumerate(draw_quiz(seed).questions, start=1):
        can_err = any(g == q.generator and m in _targets(q) for g, m in MISTAKES)
        mistaken = can_err and i > 5 and len(wrong) < NUM_MISTAKES
        wrong += [i] if mistaken else []
        answers.append(typed(q, mistaken))
    return answers, wrong


def sh(command: str, cwd: Path) -> str:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    out = subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return f"$ {command}\n{out.stdout}".rstrip()


def export_section(tmp: Path) -> str:
    sh(f"ridgeline quiz export --seed {EXPORT_SEED} --out .", tmp)
    quiz_md = (tmp / f"quiz-{EXPORT_SEED}.md").read_text()
    first5 = quiz_md[quiz_md.index("### 1.") : quiz_md.index("### 6.")].replace("### ", "#### ")
    key = (tmp / f"quiz-{EXPORT_SEED}-key.md").read_text().split("\n\n")[1:6]
    return f"{first5.rstrip()}\n\n### Their answers (from `quiz-{EXPORT_SEED}-key.md`)\n\n" + (
        "\n\n".join(key)
    )


def transcript_section(tmp: Path) -> str:
    answers, wrong = learner_answers(attempt_seed("ada", 1))
    exe = str(Path(sys.executable).parent / "ridgeline")
    session = drive([exe, "quiz", "start", "--user", "ada", "--db", str(tmp / "demo.db")], answers)
    status = sh("ridgeline quiz status --user ada --db demo.db", tmp)
    return (
        f"Questions answered with a classic mistake: {', '.join(map(str, wrong))}.\n\n"
        f"```console transcript\n$ python tools/drive_quiz.py --user ada --db demo.db answers.txt\n"
        f"{session.decode().rstrip()}\n{status}\n```"
    )


def fill(tmp: Path, name: str, num_right: int) -> None:
    """Answer the first ``num_right`` questions of the sheet ``quiz export --user`` wrote."""
    seed = int(next(tmp.glob("quiz-*-answers.json")).name.split("-")[1])
    right = [
        as_typed(q, LIBRARY[q.generator](q, dict(q.params))) for q in draw_quiz(seed).questions
    ]
    sheet = {"seed": seed, "answers": right[:num_right] + [None] * (len(right) - num_right)}
    (tmp / f"{name}.json").write_text(json.dumps(sheet))
    for p in tmp.glob("quiz-*"):
        p.unlink()


def attempts_section(tmp: Path) -> str:
    """Three attempts on the learner's own quizzes (no question repeated), the highest
    counting, and a fourth refused, with or without a fresh --db."""
    tmp = tmp / "bo"
    tmp.mkdir()
    steps = []
    for name, n in (("s10", 10), ("s19", 19), ("s15", 15)):
        out = sh("ridgeline quiz export --user bo --out . | tail -1", tmp)
        fill(tmp, name, n)
        steps += [
            out,
            sh(
                f"ridgeline quiz start --user bo --db class.db --answers {name}.json | tail -1", tmp
            ),
        ]
    steps += [
        sh('ridgeline quiz start --user bo --db fresh.db --answers s19.json; echo "exit $?"', tmp),
        sh("ridgeline quiz status --user bo --db class.db", tmp),
    ]
    return "```console transcript\n" + "\n".join(steps) + "\n```"


# A submission time in a status table, and what the docs show instead (same width).
SUBMITTED = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00")
SUBMITTED_AS = "(time of submission, UTC)"


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    doc_path = ROOT / "docs" / "quiz.md"
    doc = shown = doc_path.read_text()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        os.environ["RIDGELINE_QUIZ_HOME"] = str(tmp / "home")  # a learner's own ledger
        sections = {
            "export": export_section(tmp),
            "transcript": transcript_section(tmp),
            "attempts": attempts_section(tmp),
        }
    for name, text in sections.items():
        text = SUBMITTED.sub(SUBMITTED_AS, text)  # the docs show no clock times
        pattern = re.compile(rf"(<!-- demo:{name} -->\n).*?(\n<!-- /demo:{name} -->)", re.S)
        doc, n = pattern.subn(lambda m, t=text: m.group(1) + t + m.group(2), doc)
        assert n == 1, f"marker demo:{name} missing in {doc_path}"
    if not check:
        doc_path.write_text(doc)
        return 0
    stale = [name for name in sections if _section(doc, name) != _section(shown, name)]
    for name in stale:
        print(
            f"docs/quiz.md: demo:{name} differs from a fresh run (python tools/quiz_demo.py):",
            file=sys.stderr,
        )
        diff = difflib.unified_diff(
            _section(shown, name).splitlines(), _section(doc, name).splitlines(), lineterm=""
        )
        print("\n".join(list(diff)[2:]), file=sys.stderr)
    return 1 if stale else 0


def _section(doc: str, name: str) -> str:
    return doc.partition(f"<!-- demo:{name} -->")[2].partition(f"<!-- /demo:{name} -->")[0]


if __name__ == "__main__":
    sys.exit(main())
