"""Ctrl-C and SIGTERM drain: ``ridgeline serve`` (a real process) finishes the request in
flight, then exits 0 (SIGTERM exited 143 after a clean drain: uvicorn re-raises the signal it
drained on, and its default action killed the process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

from serve_support import free_port  # noqa: E402

pytestmark = pytest.mark.torch

CONFIG = {  # a Llama slow enough on one thread that 120 tokens take seconds
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 320,
    "hidden_size": 256,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 384,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}


def _wait_healthy(base: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "server died"
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server did not come up")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_finishes_the_request_in_flight_and_exits_0(
    tmp_path: Path, sig: signal.Signals
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    port = free_port()
    cmd = [
        str(Path(sys.executable).with_name("ridgeline")),
        "serve",
        "--model",
        str(config),
        "--port",
        str(port),
        "--threads",
        "1",
        "--drain-s",
        "60",
    ]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env=os.environ | {"COLUMNS": "200"}
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, proc, 120)
        body = {"prompt": [5, 6, 7], "max_tokens": 120, "stream": True, "ignore_eos": True}
        got: dict[str, list] = {"ids": [], "finish": []}
        first = threading.Event()

        def stream() -> None:
            with httpx.stream("POST", f"{base}/v1/completions", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        choice = json.loads(line[6:])["choices"][0]
                        got["ids"] += choice["token_ids"]
                        got["finish"].append(choice["finish_reason"])
                        first.set()

        reader = threading.Thread(target=stream)
        reader.start()
        assert first.wait(60)
        proc.send_signal(sig)
        reader.join(60)
        assert len(got["ids"]) == 120 and got["finish"][-1] == "length"
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
