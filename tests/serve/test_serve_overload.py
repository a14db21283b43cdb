"""Overload: at three times the rate the server sustains, every request is answered — completed,
or refused with 429 — none hangs, and the requests held in memory stay within the bound
(``max_num_seqs + max_waiting``), as do the KV pool and the process's resident memory."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

from serve_support import running, serve_llm, tiny_llm  # noqa: E402

pytestmark = pytest.mark.torch
BODY = {"prompt": list(range(1, 17)), "max_tokens": 32, "ignore_eos": True, "temperature": 0}
RUNNING, WAITING = 4, 4


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def _closed_loop_rate(url: str, n: int) -> float:
    """Requests per second with ``RUNNING`` clients back to back: what the server sustains."""
    async with httpx.AsyncClient(timeout=60) as client:
        start = time.perf_counter()

        async def worker(k: int) -> None:
            for _ in range(k):
                r = await client.post(f"{url}/completions", json=BODY)
                assert r.status_code == 200

        await asyncio.gather(*(worker(n // RUNNING) for _ in range(RUNNING)))
        return n // RUNNING * RUNNING / (time.perf_counter() - start)


async def _open_loop(url: str, rate: float, n: int) -> list[int]:
    """``n`` requests at ``rate`` per second whatever the answers; their status codes."""
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None)) as client:

        async def one(delay: float) -> int:
            await asyncio.sleep(delay)
            r = await client.post(f"{url}/completions", json=BODY)
            if r.status_code == 200:
                assert r.json()["usage"]["completion_tokens"] == BODY["max_tokens"]
            return r.status_code

        return list(await asyncio.gather(*(one(i / rate) for i in range(n))))


def test_three_times_the_sustained_rate_is_answered_and_bounded() -> None:
    served = serve_llm(tiny_llm(None, hidden=256, layers=8, max_num_seqs=RUNNING), WAITING)
    engine, pool = served.engine, served.engine.llm.scheduler.kv.pool
    peak: dict[str, Any] = {"in_system": 0, "blocks": 0, "rss": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            peak["in_system"] = max(peak["in_system"], engine.state.in_system)
            peak["blocks"] = max(peak["blocks"], pool.num_used)
            peak["rss"] = max(peak["rss"], _rss_bytes())

    with running(served) as url:
        sustained = asyncio.run(_closed_loop_rate(url, 12))
        rss_before = _rss_bytes()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.perf_counter()
        codes = asyncio.run(_open_loop(url, 3 * sustained, 60))
        elapsed = time.perf_counter() - start
        stop.set()
        sampler.join()
        assert set(codes) <= {200, 429}, codes
        assert codes.count(200) >= 8 and codes.count(429) >= 1, (codes, sustained)
        assert peak["in_system"] <= engine.capacity == RUNNING + WAITING
        assert peak["blocks"] <= pool.num_blocks
        assert peak["rss"] - rss_before < 200 * 2**20
        assert elapsed < 60  # none hung
        assert engine.state.in_system == 0 and pool.num_used == 0
        assert served.metrics.refused._value.get() == codes.count(429)
