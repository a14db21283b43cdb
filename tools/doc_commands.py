"""The commands of README.md and docs/*.md, how to run them as a reader would, and how their
output compares with what the docs show. Shared by ``tests/repo/test_readme.py`` (which checks) and
``tools/refresh_docs.py`` (which rewrites the docs' outputs in place).

What counts as a command, in a fenced block:

- ``console``: each ``$ `` line is a command (a trailing ``\\`` continues it on the next line, a
  trailing ``  # comment`` is dropped); the lines after it, up to the next ``$ ``, are its output,
  exactly as it prints it (stdout; or its one-line ``error: ...`` on stderr, and exit code 2,
  when the output shown is that line). A command ending in ``&`` starts in the background (a
  server), is waited for until it answers, and is stopped after the document's last command;
  the commands and scripts after it reach it at the port it was given.
- ``console measured``: the same, but the output holds measured figures (times, loads): numbers
  are free, the words around them must match. That is the tolerance for timings.
- ``python``: the block runs as a script (``python -c``); its output is not compared.
- ``console transcript``: a recorded session that a tool regenerates (``tools/quiz_demo.py``
  writes the ones between ``<!-- demo:NAME -->`` markers in docs/quiz.md); not run here.
- ``text``, ``toml``, ``json``: no commands (usage synopses with placeholders, diagrams, listings,
  file formats).

Commands run in order, per document, in a fresh-clone copy of the repository (the files git
tracks) with a home directory of its own, and may write only under ``out/`` (and that home).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
TIMEOUT_S = 900
SERVER_WAIT_S = 600  # ``serve`` loads a model and may build its kernels first
# Commands that need the torch extra (the engine, the lab, the server).
TORCH_COMMANDS = ("ridgeline generate", "ridgeline bench engine", "ridgeline lab ")
TORCH_COMMANDS += ("ridgeline engine", "ridgeline serve", "ridgeline report --model distilgpt2")
# Commands that serve until stopped: the extra each needs and a path that answers once it is up.
SERVERS = {
    "ridgeline explore": ("fastapi", "/api/models"),
    "ridgeline serve": ("prometheus_client", "/health"),
}
# Commands whose documented figures are the simulator's compiled fast mode (``make native``).
NATIVE_COMMANDS = ("python benchmarks/simulate.py",)
NUMBER = re.compile(r"\d[\d,]*(\.\d+)?(e[-+]?\d+)?")
WRITABLE = ("out", "home")  # where a command may write, relative to the clone


def docs() -> list[Path]:
    """README.md and every page of docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@dataclass(frozen=True, slots=True)
class Command:
    """One command of a document, where it is and what the document shows it printing.

    ``output`` spans document lines ``output_lines`` (0-based, end exclusive), so a refresh can
    rewrite them; for a python block it is empty and not compared."""

    doc: str  # relative to the repository
    block: int  # which fenced block of the document
    line: int  # 1-based line of the command
    text: str
    output: tuple[str, ...]
    output_lines: tuple[int, int]
    measured: bool = False
    python: bool = False

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def background(self) -> bool:
        return self.text.endswith("&")

    @property
    def needs_torch(self) -> bool:
        # the engine; a spec the lab measured; a client of the engine's server
        needs = ("ridgeline.engine", "--hw measured", "from openai import")
        return self.text.startswith(TORCH_COMMANDS) or any(n in self.text for n in needs)

    @property
    def needs_native(self) -> bool:
        return self.text.startswith(NATIVE_COMMANDS)

    @property
    def expects_error(self) -> bool:
        return bool(self.output) and self.output[0].startswith("error:")


def _strip_comment(line: str) -> str:
    return re.sub(r"\s+#\s.*$|\s+#$", "", line).rstrip()


def _console(doc: str, block: int, first_line: int, body: str, measured: bool) -> list[Command]:
    """The commands of one console block whose body starts on document line ``first_line``."""
    lines = body.splitlines()
    out: list[Command] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        start, text = i, _strip_comment(lines[i][2:])
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + _strip_comment(lines[i].strip())
        j = i + 1
        while j < len(lines) and not lines[j].startswith("$ "):
            j += 1
        shown = [ln.rstrip() for ln in lines[i + 1 : j]]
        while shown and not shown[-1]:
            shown.pop()
        span = (first_line + i + 1, first_line + i + 1 + len(shown))
        out.append(
            Command(doc, block, first_line + start + 1, text.strip(), tuple(shown), span, measured)
        )
        i = j
    return out


def commands(path: Path) -> list[Command]:
    """Every command of one document, in order."""
    text = path.read_text()
    doc = str(path.relative_to(REPO))
    found: list[Command] = []
    for block, m in enumerate(FENCE.finditer(text)):
        info, body = m.group(1).split(), m.group(2)
        first_line = text[: m.start(2)].count("\n")  # 0-based line of the body's first line
        lang = info[0] if info else ""
        if lang == "console" and "transcript" not in info[1:]:
            found += _console(doc, block, first_line, body, "measured" in info[1:])
        elif lang == "python":
            script = "python -c " + shlex.quote(body)
            found.append(Command(doc, block, first_line, script, (), (0, 0), python=True))
    return found


def blocks(path: Path) -> Iterator[tuple[str, str, int]]:
    """(info string, body, 1-based line of the fence) of every fenced block of a document."""
    text = path.read_text()
    for m in FENCE.finditer(text):
        yield m.group(1), m.group(2), text[: m.start()].count("\n") + 1


# ---- running -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tracked_files(root: Path) -> Iterator[Path]:
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if p.is_file() and rel.parts[0] not in WRITABLE and "__pycache__" not in rel.parts:
            yield rel


@dataclass
class Clone:
    """A fresh-clone copy of the repository in which one document's commands run in order."""

    root: Path
    done: set[int] = field(default_factory=set)
    ports: dict[str, str] = field(default_factory=dict)  # documented port -> the one in use
    servers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def make(cls, where: Path) -> Clone:
        """The files git tracks, copied into ``where`` (a fresh clone has no build outputs)."""
        tracked = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout.split(b"\0")
        for name in filter(None, tracked):
            src = REPO / name.decode()
            if src.is_file():
                dst = where / name.decode()
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        (where / "home").mkdir()
        return cls(where)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIDGELINE_")}
        home = self.root / "home"
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), MPLBACKEND="Agg")
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        env.pop("COLUMNS", None)  # piped output is never wrapped; a terminal's width must not leak
        return env

    def snapshot(self) -> dict[Path, tuple[int, int]]:
        """Size and modification time of every file outside ``out/`` and ``home/``."""
        stats = {p: (self.root / p).stat() for p in _tracked_files(self.root)}
        return {p: (s.st_size, s.st_mtime_ns) for p, s in stats.items()}

    def _with_ports(self, text: str) -> str:
        for old, new in self.ports.items():
            text = re.sub(rf"(--port |localhost:|127\.0\.0\.1:){old}\b", rf"\g<1>{new}", text)
        return text

    def run(self, cmd: Command) -> Outcome:
        """Run one command as a reader would type it (``make`` targets only printed: running
        ``make test`` inside the tests would recurse)."""
        text = cmd.text
        if text.startswith("make "):
            text = "make -n " + text[5:]
        server = next((k for k in SERVERS if text.startswith(k)), None)
        if server is not None or cmd.background:
            return self._serve(cmd, server)
        if cmd.python:
            args = [sys.executable, "-c", self._with_ports(shlex.split(text)[2])]
        else:
            args = ["bash", "-c", self._with_ports(text)]
        done = subprocess.run(
            args, cwd=self.root, env=self.env(), capture_output=True, text=True, timeout=TIMEOUT_S
        )
        return Outcome(done.returncode, done.stdout, done.stderr)

    def _serve(self, cmd: Command, server: str | None) -> Outcome:
        """Start a server on a free port and wait until it answers; stop it at once unless the
        command runs it in the background (then it stops at the end of its block)."""
        text = cmd.text.removesuffix("&").strip()
        documented = re.search(r"--port (\d+)", text)
        port = str(_free_port())
        if documented:
            self.ports[documented.group(1)] = port
            text = text.replace(documented.group(0), f"--port {port}")
        else:
            text += f" --port {port}"
        probe = SERVERS[server][1] if server else "/"
        proc = subprocess.Popen(
            shlex.split(text),
            cwd=self.root,
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._wait(proc, f"http://127.0.0.1:{port}{probe}")
        if cmd.background:
            self.servers.append(proc)
        else:
            _stop(proc)
        return Outcome(0, "", "")

    def _wait(self, proc: subprocess.Popen[bytes], url: str) -> None:
        deadline = time.monotonic() + SERVER_WAIT_S
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise AssertionError(f"the server exited ({proc.returncode}): {err[-2000:]}")
            if time.monotonic() > deadline:
                _stop(proc)
                raise AssertionError(f"no answer from {url} in {SERVER_WAIT_S} s")
            time.sleep(0.5)

    def stop_servers(self) -> None:
        """Stop the servers the document started in the background."""
        for proc in self.servers:
            _stop(proc)
        self.servers.clear()
        self.ports.clear()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---- comparing -----------------------------------------------------------------------------


def shown(cmd: Command, outcome: Outcome) -> tuple[str, ...]:
    """What the document should show for ``outcome``: its stdout, or the error line (stderr)
    where the command is documented to fail."""
    text = outcome.stderr if cmd.expects_error else outcome.stdout
    lines = [ln.rstrip() for ln in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return tuple(lines)


def _masked(lines: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(re.sub(r"\s+", " ", NUMBER.sub("#", ln)) for ln in lines)


def mismatch(cmd: Command, outcome: Outcome) -> str | None:
    """Why ``outcome`` is not what ``cmd``'s document shows, or None."""
    expected_rc = 2 if cmd.expects_error else 0
    if outcome.returncode != expected_rc:
        tail = (outcome.stdout[-1500:] + "\n" + outcome.stderr[-1500:]).strip()
        return f"exit code {outcome.returncode}, expected {expected_rc}:\n{tail}"
    if cmd.python or not cmd.output:
        return None
    want, got = cmd.output, shown(cmd, outcome)
    if cmd.measured:
        want, got = _masked(want), _masked(got)
    if want == got:
        return None
    diff = [f"- {w}\n+ {g}" for w, g in zip(want, got, strict=False) if w != g][:5]
    if len(want) != len(got):
        diff.append(f"({len(want)} lines shown, {len(got)} printed)")
    return "the output differs from the document:\n" + "\n".join(diff)


Snapshot = dict[Path, tuple[int, int]]


def written_outside(before: Snapshot, after: Snapshot) -> list[str]:
    """Files a command created, changed or removed outside ``out/`` and the home directory."""
    changed = {p for p in before.keys() & after.keys() if before[p] != after[p]}
    return sorted(str(p) for p in (before.keys() ^ after.keys()) | changed)
