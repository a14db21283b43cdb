"""``ridgeline serve``: the engine behind an OpenAI-compatible HTTP API on the loopback interface.

torch, fastapi, uvicorn and prometheus_client are imported when the command runs, so the rest
of the CLI starts without them.
"""

from __future__ import annotations

import importlib.util
from typing import Annotated

import typer

from ridgeline.cli.common import ModelOpt, err_console
from ridgeline.cli.engine_cmds import TokenizerOpt, WeightsOpt
from ridgeline.defaults import DEFAULT_ENGINE_MODEL
from ridgeline.errors import RidgelineError

SERVE_PACKAGES = ("torch", "fastapi", "uvicorn", "prometheus_client")


def serve_cmd(
    model: ModelOpt = DEFAULT_ENGINE_MODEL,
    weights: WeightsOpt = None,
    tokenizer: TokenizerOpt = None,
    host: Annotated[str, typer.Option(help="interface (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = 8000,
    max_num_seqs: Annotated[int, typer.Option(min=1, help="requests running at once")] = 32,
    max_waiting: Annotated[
        int, typer.Option(min=0, help="requests queued beyond the running ones (then 429)")
    ] = 64,
    max_num_tokens: Annotated[int, typer.Option(min=1, help="token budget per step")] = 512,
    block_size: Annotated[int, typer.Option(min=1, help="tokens per KV block")] = 16,
    kv_gib: Annotated[
        float,
        typer.Option(
            help="KV cache budget in GiB (2^30 bytes), in place of the memory rule (vLLM's --kv-cache-memory-bytes)"
        ),
    ] = 0.5,
    threads: Annotated[
        int | None, typer.Option(help="torch threads (default: all cores but one)")
    ] = None,
    seed: Annotated[int, typer.Option(help="random weights and unseeded sampling")] = 0,
    kernels: Annotated[str, typer.Option(help="native or portable kernel build")] = "native",
    drain_s: Annotated[float, typer.Option(help="Ctrl-C waits this long for requests")] = 30.0,
) -> None:
    """Serve the real engine behind an OpenAI-compatible HTTP API.

    /v1/completions (token ids, or text with --tokenizer), /v1/chat/completions (with a chat
    template), streaming, /v1/models, /health, /metrics. Ctrl-C drains the requests in
    flight."""
    missing = [p for p in SERVE_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        raise RidgelineError(
            f"ridgeline serve needs {', '.join(missing)}: pip install 'ridgeline[torch,serve]'"
        )
    from ridgeline.serve.server import ServeSettings, default_threads, serve

    engine = {
        "max_num_seqs": max_num_seqs, "max_num_tokens": max_num_tokens, "block_size": block_size,
        "kv_budget_bytes": kv_gib * 2**30, "seed": seed, "kernels": kernels,
    }  # fmt: skip
    settings = ServeSettings(
        model, weights, tokenizer, host, port, max_waiting, threads or default_threads(),
        drain_s, engine,
    )  # fmt: skip
    err_console.print(f"ridgeline serve: {model} on http://{host}:{port}/v1 (Ctrl-C drains)")
    serve(settings)
