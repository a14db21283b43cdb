"""Every command of the README runs, in a fresh-clone-like setting: a copy of the files git
tracks (the shipped data only), a home directory of its own (no user hardware files), nothing
downloaded.

A ``console`` block's commands are its ``$ `` lines (a trailing ``# comment`` is dropped); a
``python`` block runs as a script. Commands run in order in one directory, as a reader would
type them. ``make`` targets are checked with ``make -n`` (running ``make test`` inside the
tests would recurse); ``ridgeline explore`` and ``ridgeline serve`` serve until stopped, so
each is started on a free port, asked for a page, and stopped.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BIN = Path(sys.executable).parent
TORCH_COMMANDS = ("ridgeline generate", "ridgeline bench engine", "ridgeline lab ")
TORCH_COMMANDS += ("ridgeline engine", "ridgeline serve")
TIMEOUT_S = 900
SKIPPED = pytest.skip.Exception

pytestmark = pytest.mark.slow


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def commands(text: str) -> list[str]:
    """Every ``$ `` command of the console blocks and every python block, in order."""
    out = []
    for lang, body in blocks(text):
        if lang == "console":
            out += [re.sub(r"\s+#.*$", "", line[2:]).strip() for line in body.splitlines()
                    if line.startswith("$ ")]  # fmt: skip
        elif lang == "python":
            out.append("python -c " + shlex.quote(body))
    return out


def test_the_extractor_finds_commands_and_scripts() -> None:
    text = "```console\n$ ridgeline hw list   # the catalog\nout\n```\n```python\nx = 1\n```\n"
    assert commands(text) == ["ridgeline hw list", "python -c 'x = 1\n'"]


@dataclass
class Clone:
    """A fresh-clone-like copy of the repository and the README commands already run in it."""

    root: Path
    done: set[int] = field(default_factory=set)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Clone:
    """The tracked files of the repository, copied as a fresh clone would have them."""
    root = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        src = REPO / name.decode()
        if src.is_file():
            dst = root / name.decode()
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    (root / "home").mkdir()
    return Clone(root)


def _env(clone: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIDGELINE_")}
    env.update(HOME=str(clone / "home"), XDG_CONFIG_HOME=str(clone / "home" / ".config"))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return env


SERVERS = {  # command -> (the extra it needs, a path that answers 200 once it is up)
    "ridgeline explore": ("fastapi", "/api/models"),
    "ridgeline serve": ("prometheus_client", "/health"),
}


def _server(cmd: str, clone: Path) -> None:
    """Start a server command on a free port, wait until it answers, stop it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    probe = next(path for prefix, (_, path) in SERVERS.items() if cmd.startswith(prefix))
    args = [*shlex.split(re.sub(r"--port \d+", f"--port {port}", cmd))]
    proc = subprocess.Popen(args, cwd=clone, env=_env(clone), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600  # serve loads a model and its kernels first
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe}", timeout=5) as r:
                    assert r.status == 200
                    return
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the explorer did not answer"
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _run(cmd: str, clone: Path) -> None:
    if cmd.startswith(TORCH_COMMANDS) or "ridgeline.engine" in cmd:
        pytest.importorskip("torch", reason="the command needs the torch extra")
    if cmd.startswith("make "):
        args = ["make", "-n", *shlex.split(cmd)[1:]]
    elif server := next((k for k in SERVERS if cmd.startswith(k)), None):
        pytest.importorskip(SERVERS[server][0], reason=f"{server} needs its extra")
        return _server(cmd, clone)
    else:
        args = shlex.split(cmd)
        if args[0] == "python":
            args[0] = sys.executable
    done = subprocess.run(
        args, cwd=clone, env=_env(clone), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


README_COMMANDS = commands(README.read_text())


def test_the_readme_has_commands_to_check() -> None:
    assert len(README_COMMANDS) > 20


@pytest.mark.parametrize("index", range(len(README_COMMANDS)))
def test_readme_command_runs_in_a_fresh_clone(index: int, clone: Clone) -> None:
    # Commands depend on the ones before them (files written to out/): run every earlier one
    # that has not been tried yet, then this one. A command is tried once: when it fails, its
    # own test reports it and the later ones do not run it again.
    for i in range(index + 1):
        if i not in clone.done:
            clone.done.add(i)
            if i == index:
                _run(README_COMMANDS[i], clone.root)
            else:  # a failure is reported by that command's own test
                with contextlib.suppress(AssertionError, subprocess.TimeoutExpired, SKIPPED):
                    _run(README_COMMANDS[i], clone.root)
