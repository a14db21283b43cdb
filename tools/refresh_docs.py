"""Rewrite the outputs that README.md and docs/*.md show with what their commands print now.

    python tools/refresh_docs.py                 # every document
    python tools/refresh_docs.py docs/tiling.md  # one or more documents
    python tools/refresh_docs.py --check         # say what would change, write nothing
    python tools/refresh_docs.py --measured      # also measured blocks (times: this machine's)

Each document's commands run in order in a fresh-clone copy of the repository, exactly as
``tests/repo/test_readme.py`` runs them (``tools/doc_commands.py``), and the lines under each ``$ ``
command are replaced by its output (a command shown without output stays so). Run it after a change that moves a number the docs show
(another branch's pricing, a new column), then read the diff: it is the docs' review. A
``console measured`` block keeps its figures unless ``--measured`` is given, since they were
measured on a quiet machine. A command that fails, or needs the torch extra where torch is
missing, is reported and its output left as it was.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from doc_commands import REPO, Clone, Command, commands, docs, mismatch, shown

from ridgeline.sim import native

TORCH = importlib.util.find_spec("torch") is not None


def _outputs(path: Path, measured: bool) -> tuple[dict[Command, tuple[str, ...]], list[str]]:
    """The output each command of ``path`` prints now, and the commands that could not run."""
    new: dict[Command, tuple[str, ...]] = {}
    problems: list[str] = []
    cmds = commands(path)
    with tempfile.TemporaryDirectory() as tmp:
        clone = Clone.make(Path(tmp))
        for cmd in cmds:
            if cmd.needs_torch and not TORCH:
                problems.append(f"{cmd.where}: skipped (needs torch)")
                continue
            if cmd.needs_native and native.decide() != "compiled":
                problems.append(f"{cmd.where}: skipped (needs the compiled fast mode: make native)")
                continue
            print(f"{cmd.where}: {cmd.text[:90]}", file=sys.stderr, flush=True)
            try:
                outcome = clone.run(cmd)
            except (AssertionError, subprocess.TimeoutExpired) as e:
                problems.append(f"{cmd.where}: {e}")
                continue
            rc = 2 if cmd.expects_error else 0
            if outcome.returncode != rc:
                problems.append(f"{cmd.where}: {mismatch(cmd, outcome)}")
            elif cmd.output and (measured or not cmd.measured):
                new[cmd] = shown(cmd, outcome)
        clone.stop_servers()
    return new, problems


def refresh(path: Path, check: bool, measured: bool) -> tuple[int, list[str]]:
    """Rewrite ``path``'s outputs; the number of commands whose output changed, and problems."""
    new, problems = _outputs(path, measured)
    lines = path.read_text().split("\n")
    changed = 0
    # from the bottom up, so that earlier spans keep their line numbers
    for cmd in sorted(new, key=lambda c: -c.output_lines[0]):
        if new[cmd] == cmd.output:
            continue
        changed += 1
        start, end = cmd.output_lines
        lines[start:end] = list(new[cmd])
    if changed and not check:
        path.write_text("\n".join(lines))
    return changed, problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("docs", nargs="*", type=Path, help="documents (default: all)")
    parser.add_argument("--check", action="store_true", help="write nothing, say what changes")
    parser.add_argument("--measured", action="store_true", help="refresh measured blocks too")
    opts = parser.parse_args()
    paths = [p.resolve() for p in opts.docs] or docs()
    failed = False
    for path in paths:
        changed, problems = refresh(path, opts.check, opts.measured)
        verb = "would change" if opts.check else "changed"
        print(f"{path.relative_to(REPO)}: {verb} {changed} output(s)")
        for p in problems:
            print(f"  {p}")
        failed |= bool(problems) or (opts.check and changed > 0)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
