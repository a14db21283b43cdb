"""The explorer under abuse: concurrent requests with huge uploaded configs, some abandoned by
their clients, while a client keeps asking for a cheap page; then SIGTERM.

Baseline in the same run: the server idle (its memory, and the cheap GET's latency before any
load). Printed: every request's status and time against its deadline, the cheap GET's worst and
p99 latency under load, peak memory of the server and its workers over idle, and how long
SIGTERM took to stop it all::

    python benchmarks/explorer_load.py                 # 20 requests, as the acceptance asks
    python benchmarks/explorer_load.py --requests 8    # lighter
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

DEADLINE_S = 20.0  # ridgeline.web.app.REQUEST_TIME_LIMIT_S
CHEAP = "/api/accelerators"


def _llama() -> dict:
    text = resources.files("ridgeline.data").joinpath("models", "llama-3.1-8b.json").read_text()
    return dict(json.loads(text))


def abusive_bodies() -> list[tuple[str, dict]]:
    """(endpoint, body): a 1,000,000-layer config, configs at the library's bounds
    (refused by the cost estimate or run), and large ones the estimate lets through."""
    llama = _llama()
    million = {**llama, "num_hidden_layers": 1_000_000}
    bounded = {
        **llama,
        "num_hidden_layers": 1000,
        "hidden_size": 131072,
        "num_attention_heads": 128,
        "num_key_value_heads": 8,
        "intermediate_size": 500_000,
    }
    large = {**llama, "num_hidden_layers": 160}
    return [
        ("/api/kv", {"config": million}),
        ("/api/compare", {"config": million}),
        ("/api/compare", {"config": bounded}),
        ("/api/schedule", {"config": bounded}),
        ("/api/kv", {"config": bounded, "batch": 1_000_000, "context": 10_000_000}),
        ("/api/roofline", {"config": bounded}),
        ("/api/compare", {"config": large}),
        ("/api/questions", {"config": bounded}),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            kb = next(
                int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")
            )
            total += kb * 1024
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except (OSError, StopIteration):
            continue
        todo += [int(c) for c in children]
    return total


def descendants(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def get(url: str, timeout: float = 10.0) -> tuple[int, float]:
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    return status, time.perf_counter() - t0


def post(url: str, body: dict, timeout: float) -> tuple[int | str, float, str]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"content-type": "application/json"})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status, time.perf_counter() - t0, ""
    except urllib.error.HTTPError as e:
        detail = json.loads(e.read() or b"{}").get("detail") or [{}]
        return e.code, time.perf_counter() - t0, str(detail[0].get("msg", ""))[:90]
    except (TimeoutError, urllib.error.URLError):
        return "abandoned", time.perf_counter() - t0, "client gave up"


@dataclass
class Watch:
    """What the watcher threads saw while the load ran."""

    get_s: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


def _watch(base: str, pid: int, w: Watch) -> None:
    while not w.stop.is_set():
        w.get_s.append(get(base + CHEAP)[1])
        w.rss.append(tree_rss_bytes(pid))
        time.sleep(0.05)


def start_server(port: int) -> subprocess.Popen[bytes]:
    code = "from ridgeline.cli import main; main()"
    cmd = [sys.executable, "-c", code, "explore", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            get(base + CHEAP, timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the explorer did not start")


def run(num_requests: int, abandon: int) -> dict:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server(port)
    post(base + "/api/kv", {}, timeout=120)  # the workers start: idle is a warm server
    time.sleep(1.0)
    idle_rss = tree_rss_bytes(proc.pid)
    idle_get = statistics.median(get(base + CHEAP)[1] for _ in range(20))
    bodies = abusive_bodies()
    jobs = [
        (bodies[i % len(bodies)], 0.5 if i < abandon else DEADLINE_S + 10)
        for i in range(num_requests)
    ]
    results: list[tuple[str, int | str, float, str]] = [("", "", 0.0, "")] * len(jobs)

    def one(i: int) -> None:
        (path, body), timeout = jobs[i]
        results[i] = (path, *post(base + path, body, timeout))

    w = Watch()
    watcher = threading.Thread(target=_watch, args=(base, proc.pid, w))
    watcher.start()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load_s = time.perf_counter() - t0
    time.sleep(2.0)  # abandoned work is killed within a poll; memory comes back
    w.stop.set()
    watcher.join()
    settled_rss = tree_rss_bytes(proc.pid)
    children = descendants(proc.pid)
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    stop_s = time.perf_counter() - t0
    # the workers get SIGTERM from the pool as the server drains; give them the acceptance's 5 s
    left = [c for c in children if _alive(c)]
    while left and time.perf_counter() - t0 < 5.0:
        time.sleep(0.05)
        left = [c for c in left if _alive(c)]
    workers_s = time.perf_counter() - t0
    return {
        "results": results,
        "load_s": load_s,
        "idle_rss": idle_rss,
        "peak_rss": max(w.rss or [idle_rss]),
        "settled_rss": settled_rss,
        "idle_get_s": idle_get,
        "max_get_s": max(w.get_s or [0.0]),
        "p99_get_s": sorted(w.get_s)[int(0.99 * (len(w.get_s) - 1))] if w.get_s else 0.0,
        "gets": len(w.get_s),
        "sigterm_s": stop_s,
        "workers_gone_s": workers_s,
        "children_left": left,
    }


def report(r: dict) -> None:
    for path, status, secs, msg in r["results"]:
        print(f"{path:14s} {status!s:9s} {secs:6.2f} s  {msg}")
    worst = max(secs for _, _, secs, _ in r["results"])
    print(
        f"{len(r['results'])} requests in {r['load_s']:.1f} s; slowest answer {worst:.2f} s "
        f"(deadline {DEADLINE_S:g} s)"
    )
    print(
        f"cheap GET {CHEAP}: idle median {r['idle_get_s'] * 1e3:.1f} ms; under load max "
        f"{r['max_get_s'] * 1e3:.1f} ms, p99 {r['p99_get_s'] * 1e3:.1f} ms over {r['gets']} "
        f"GETs"
    )
    print(
        f"memory (server + workers): idle {r['idle_rss'] / 2**20:.0f} MiB, peak "
        f"{r['peak_rss'] / 2**20:.0f} MiB = {r['peak_rss'] / r['idle_rss']:.2f}x idle, after "
        f"{r['settled_rss'] / 2**20:.0f} MiB"
    )
    print(
        f"SIGTERM: server stopped in {r['sigterm_s']:.2f} s, its workers gone after "
        f"{r['workers_gone_s']:.2f} s; worker processes left at 5 s: "
        f"{len(r['children_left'])}; load average {os.getloadavg()[0]:.2f}"
    )


def _alive(pid: int) -> bool:
    """Running (a zombie awaiting its reaper counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--abandon", type=int, default=4, help="clients that give up at 0.5 s")
    args = parser.parse_args()
    report(run(args.requests, args.abandon))


if __name__ == "__main__":
    main()
