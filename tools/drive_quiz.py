"""Drive `ridgeline quiz start` through a pseudo-terminal, typing one answer per prompt, and
print the session as a person would see it (answers echoed after each prompt).

Used to make the transcript in docs/quiz.md:

    python tools/drive_quiz.py --user ada --db /tmp/demo.db answers.txt > transcript.txt

where answers.txt holds one answer per line, in question order.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import subprocess
import sys

PROMPT = b"Your answer: "


def drive(command: list[str], answers: list[str], timeout_s: float = 30.0) -> bytes:
    """Run ``command`` on a pty; each time it prints the prompt, type the next answer."""
    main_fd, child_fd = pty.openpty()
    # an 80 x 25 terminal whatever the caller's environment: Rich takes the size from COLUMNS
    # only when LINES is set too, and falls back to 80 x 25 on a dumb terminal otherwise
    env = dict(os.environ, NO_COLOR="1", TERM="dumb", COLUMNS="80", LINES="25")
    proc = subprocess.Popen(command, stdin=child_fd, stdout=child_fd, stderr=child_fd, env=env)
    os.close(child_fd)
    seen, pending = b"", list(answers)
    while True:
        ready, _, _ = select.select([main_fd], [], [], timeout_s)
        if not ready:
            break
        try:
            chunk = os.read(main_fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
        if seen.endswith(PROMPT) and pending:
            os.write(main_fd, pending.pop(0).encode() + b"\n")
    proc.wait(timeout=timeout_s)
    os.close(main_fd)
    return seen.replace(b"\r\n", b"\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--user", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("answers", help="file with one answer per line")
    args = parser.parse_args()
    with open(args.answers) as f:
        answers = [line.rstrip("\n") for line in f]
    command = ["ridgeline", "quiz", "start", "--user", args.user, "--db", args.db]
    sys.stdout.write(drive(command, answers).decode())


if __name__ == "__main__":
    main()
