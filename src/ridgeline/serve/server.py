"""Running the server: the engine, its thread, the app, and uvicorn on the loopback interface.

Ctrl-C drains: uvicorn stops accepting connections and waits up to ``drain_s`` for the requests
in flight (the engine thread keeps stepping for them); what is still open then is cancelled,
which aborts those requests, and the engine thread stops last.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ridgeline.engine.llm import LLM, set_threads
from ridgeline.serve.app import Limits, Served, create_app
from ridgeline.serve.engine_loop import EngineLoop
from ridgeline.serve.metrics import ServeMetrics
from ridgeline.serve.text import TextCodec

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000  # the port OpenAI-compatible servers (vLLM, SGLang) listen on by default


def default_threads() -> int:
    """torch threads for the engine: all cores but one, which the HTTP side keeps."""
    return max(1, (os.cpu_count() or 1) - 1)


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """What ``ridgeline serve`` runs.

    Attributes:
        model: catalog name or config.json path (or directory).
        weights: local safetensors directory (None: seeded random weights).
        tokenizer: local tokenizer directory (None: token ids only, no chat).
        host, port: where to listen (loopback by default).
        max_waiting: requests that may wait beyond the running ones before 429.
        threads: torch intra-op threads of the engine step.
        drain_s: how long Ctrl-C waits for requests in flight.
        engine: further ``EngineConfig`` fields (block_size, max_num_seqs, kv_budget_bytes...).
    """

    model: str
    weights: str | None = None
    tokenizer: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_waiting: int = 64
    threads: int = field(default_factory=default_threads)
    drain_s: float = 30.0
    engine: dict[str, Any] = field(default_factory=dict)


def build(settings: ServeSettings) -> Served:
    """The engine and everything the routes need; its thread is not started yet."""
    set_threads(settings.threads)
    llm = LLM(settings.model, weights=settings.weights, tokenizer=settings.tokenizer,
              **settings.engine)  # fmt: skip
    return served_by(llm, settings.max_waiting)


def served_by(llm: LLM, max_waiting: int) -> Served:
    """What the routes need around an existing engine (its thread not started)."""
    metrics = ServeMetrics()
    engine = EngineLoop(llm, max_waiting, metrics)
    limits = Limits(llm.max_model_len, llm.num_blocks * llm.config.block_size, llm.spec.vocab_size)
    return Served(engine, TextCodec(llm.tokenizer), llm.spec.name, limits, metrics)


def serve(settings: ServeSettings) -> None:
    """Serve until interrupted, then drain (see the module docstring)."""
    import uvicorn

    served = build(settings)
    served.engine.start()
    try:
        uvicorn.run(
            create_app(served), host=settings.host, port=settings.port, log_level="warning",
            timeout_graceful_shutdown=int(settings.drain_s),
        )  # fmt: skip
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it drained on: it is done
        pass
    finally:
        served.engine.stop()
