"""Does one huge request stall the server? ``/health`` latency with and without a 10 MB request.

``ridgeline serve`` (distilgpt2's shape, random weights, the character tokenizer of
``lab serve-check``, one engine thread) runs as its own process, twice:

- with the default body limit (4 MiB): 10 MB requests are refused with 413 from their
  Content-Length; five are sent back to back while ``/health`` is probed; then bodies of token
  ids just under the limit (1.4 million ids), five back to back;
- with ``--max-body-mib 16``, so that the 10 MB body is read and parsed (on a worker thread):
  a 10 MB text prompt, refused from its length before tokenising (this is the request that held
  the event loop, and ``/health``, for 72 s while it was tokenised), five back to back; and a
  10 MB prompt of token ids (3.3 million), refused as longer than the model once parsed, one
  alone and three back to back. The JSON parser holds the GIL while it builds the ids (about
  0.1 s per MB here), which the event loop then waits for.

Each phase probes ``/health`` every ``--every-ms`` on one kept-alive connection, first alone
(the baseline, same server, same run), then beside the big request(s); it prints p50, p99 and
the worst probe of each, side by side, and their ratio. The acceptance line: p99 beside the
10 MB request under 100 ms.

Usage: python benchmarks/serve_health.py [--seconds 5] [--every-ms 10] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from ridgeline.lab.loadgen import char_tokenizer
from ridgeline.lab.serve_check import model_config
from ridgeline.processes import kill_group, start_group

BIG_BYTES = 10 * 10**6
PROBE_TIMEOUT_S = 120.0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(out: Path, max_body_mib: int | None) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "ridgeline",
        "serve",
        "--model",
        str(model_config(out)),
        "--tokenizer",
        str(char_tokenizer(out / "tokenizer")),
        "--threads",
        "1",
        "--port",
        str(port),
    ]
    if max_body_mib is not None:
        cmd += ["--max-body-mib", str(max_body_mib)]
    log = (out / f"server-{max_body_mib}.log").open("w")
    proc = start_group(cmd, output=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the server exited; see {log.name}"
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the server did not come up")


def _probe(base: str, seconds: float, every_s: float, busy: Callable[[], bool]) -> np.ndarray:
    """/health latencies (s) every ``every_s`` for ``seconds`` and while ``busy()``."""
    lat = []
    with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end or busy():
            start = time.perf_counter()
            assert client.get(f"{base}/health").status_code == 200
            lat.append(time.perf_counter() - start)
            time.sleep(max(0.0, every_s - (time.perf_counter() - start)))
    return np.array(lat)


def _ids(size: int) -> bytes:
    return b'{"prompt": [' + b"1, " * ((size - 15) // 3) + b"1]}"


TEXT = b'{"prompt": "' + b"a" * (BIG_BYTES - 14) + b'"}'
IDS = _ids(BIG_BYTES)
IDS_AT_LIMIT = _ids(4 * 2**20 - 64)  # just under the default limit


def _big(base: str, body: bytes, count: int, answers: list[str]) -> None:
    with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
        for _ in range(count):
            start = time.perf_counter()
            try:
                code = str(
                    client.post(
                        f"{base}/v1/completions",
                        content=body,
                        headers={"content-type": "application/json"},
                    ).status_code
                )
            except httpx.HTTPError as e:  # a 413 sent before the body was read can cut it
                code = type(e).__name__
            answers.append(f"{code} in {time.perf_counter() - start:.2f} s")


def _phase(
    base: str, args: argparse.Namespace, body: bytes, count: int
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    alone = _probe(base, args.seconds, args.every_ms / 1e3, lambda: False)
    answers: list[str] = []
    sender = threading.Thread(target=_big, args=(base, body, count, answers))
    sender.start()
    beside = _probe(base, args.seconds, args.every_ms / 1e3, sender.is_alive)
    sender.join()
    return alone, beside, answers


def _ms(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q) * 1e3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="probing per phase, at least")
    ap.add_argument("--every-ms", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=Path("out/serve-health"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    scenarios = {
        None: [
            ("10 MB text, default limit: 413", TEXT, 5),
            ("4 MiB of token ids (at the default limit): 400 once parsed", IDS_AT_LIMIT, 5),
        ],
        16: [
            ("10 MB text, --max-body-mib 16: 400 from its length", TEXT, 5),
            ("10 MB of token ids, --max-body-mib 16: 400 once parsed", IDS, 1),
            ("the same, three back to back", IDS, 3),
        ],
    }
    for limit, phases in scenarios.items():
        proc, base = _start(args.out, limit)
        try:
            rows += [(label, *_phase(base, args, body, n)) for label, body, n in phases]
        finally:
            kill_group(proc)
    print(f"# load average {os.getloadavg()}; /health every {args.every_ms:g} ms")
    print(
        "| big requests | answers | probes alone / beside | p50 ms alone | p50 ms beside "
        "| p99 ms alone | p99 ms beside | p99 ratio | max ms beside |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, alone, beside, answers in rows:
        print(
            f"| {label} | {', '.join(answers)} | {len(alone)} / {len(beside)} "
            f"| {_ms(alone, 50):.1f} | {_ms(beside, 50):.1f} | {_ms(alone, 99):.1f} "
            f"| {_ms(beside, 99):.1f} | {_ms(beside, 99) / _ms(alone, 99):.2f} "
            f"| {beside.max() * 1e3:.1f} |"
        )
    one = [_ms(beside, 99) for label, _, beside, answers in rows if len(answers) == 1]
    print(f"# p99 of /health beside one 10 MB request: {max(one):.1f} ms (target: under 100 ms)")


if __name__ == "__main__":
    main()
