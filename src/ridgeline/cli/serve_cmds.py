"""``ridgeline serve``: the engine behind an OpenAI-compatible HTTP API on the loopback interface.

torch, fastapi, uvicorn and prometheus_client are imported when the command runs, so the rest
of the CLI starts without them. Every option (and ``RIDGELINE_API_KEY``) is checked before the
engine is built (``serve.server.check_settings``): building can compile kernels for minutes.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ridgeline.cli.common import ModelOpt, err_console
from ridgeline.cli.engine_cmds import TokenizerOpt, WeightsOpt
from ridgeline.cli.options import grouped
from ridgeline.defaults import DEFAULT_ENGINE_MODEL
from ridgeline.errors import RidgelineError

if TYPE_CHECKING:
    from ridgeline.serve.server import ServeSettings

SERVE_PACKAGES = ("torch", "fastapi", "uvicorn", "prometheus_client")
API_KEY_ENV = "RIDGELINE_API_KEY"
_E, _H = "Engine", "HTTP"


def _opt(*names: str, help: str, panel: str, **kw: Any) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=panel, **kw)


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """The engine behind the server."""

    max_num_seqs: Annotated[int, _opt(min=1, help="requests running at once", panel=_E)] = 32
    max_num_batched_tokens: Annotated[
        int,
        _opt(
            "--max-num-batched-tokens",
            "--max-num-tokens",
            min=1,
            help="token budget per step",
            panel=_E,
        ),
    ] = 512
    block_size: Annotated[int, _opt(min=1, help="tokens per KV block", panel=_E)] = 16
    kv_gib: Annotated[
        float,
        _opt(help="KV cache budget in GiB (2^30 bytes), in place of the memory rule", panel=_E),
    ] = 0.5
    threads: Annotated[
        int | None, _opt(min=1, help="torch threads (default: all cores but one)", panel=_E)
    ] = None
    seed: Annotated[int, _opt(help="random weights and unseeded sampling", panel=_E)] = 0
    kernels: Annotated[str, _opt(help="native or portable kernel build", panel=_E)] = "native"

    def config(self) -> dict[str, Any]:
        """The ``EngineConfig`` fields these options set."""
        return {
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "block_size": self.block_size,
            "kv_budget_bytes": self.kv_gib * 2**30,
            "seed": self.seed,
            "kernels": self.kernels,
        }


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """Where the server listens, who may call it, and how it drains."""

    host: Annotated[str, _opt(help="interface (loopback by default)", panel=_H)] = "127.0.0.1"
    port: Annotated[int, _opt(min=1, max=65535, help="TCP port", panel=_H)] = 8000
    max_waiting: Annotated[
        int, _opt(min=0, help="requests queued beyond the running ones (then 429)", panel=_H)
    ] = 64
    drain_s: Annotated[
        float, _opt(min=0.0, help="Ctrl-C or SIGTERM waits this long for requests", panel=_H)
    ] = 30.0
    api_key: Annotated[
        str | None,
        _opt(
            envvar=API_KEY_ENV,
            show_envvar=True,
            help="Bearer key every route but /health needs (prefer the variable: argv is public)",
            panel=_H,
        ),
    ] = None
    max_body_mib: Annotated[
        int, _opt(min=1, max=1024, help="largest request body read, MiB (then 413)", panel=_H)
    ] = 4


@grouped(EngineOptions, HttpOptions)
def serve_cmd(
    model: ModelOpt = DEFAULT_ENGINE_MODEL,
    weights: WeightsOpt = None,
    tokenizer: TokenizerOpt = None,
    *,
    engine: EngineOptions,
    http: HttpOptions,
) -> None:
    """Serve the real engine behind an OpenAI-compatible HTTP API.

    /v1/completions (token ids, or text with --tokenizer), /v1/chat/completions (with a chat
    template), streaming, /v1/models, /health, /metrics. Ctrl-C or SIGTERM drains the requests
    in flight, then exits 0.

    \b
    Example:
      ridgeline serve --model distilgpt2 --port 8000
    """
    missing = [p for p in SERVE_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        raise RidgelineError(
            f"ridgeline serve needs {', '.join(missing)}: pip install 'ridgeline[torch,serve]'"
        )
    from ridgeline.serve.server import check_settings, serve
    from ridgeline.serve.server import exposure_warning as exposed

    settings = _settings(model, weights, tokenizer, engine, http)
    key = settings.access.api_key
    check_settings(settings)
    warning = exposed(http.host, http.port, key)
    if warning is not None:
        err_console.print(warning, highlight=False, markup=False, soft_wrap=True)  # one line
    err_console.print(
        f"ridgeline serve: {model} on http://{http.host}:{http.port}/v1 (Ctrl-C drains)"
    )
    cut = serve(settings)
    if cut:
        err_console.print(
            f"ridgeline serve: the drain cut {cut} request(s) short ({http.drain_s} s)"
        )
        raise typer.Exit(1)


def _settings(
    model: str,
    weights: str | None,
    tokenizer: str | None,
    engine: EngineOptions,
    http: HttpOptions,
) -> ServeSettings:
    """The server's settings from the command line and the environment."""
    from ridgeline.serve.app import Access
    from ridgeline.serve.server import ServeSettings, default_threads

    threads = default_threads() if engine.threads is None else engine.threads
    # NOTE: the parser reads an empty variable as unset; an empty key is refused here instead
    key = http.api_key if http.api_key is not None else os.environ.get(API_KEY_ENV)
    return ServeSettings(
        model,
        weights,
        tokenizer,
        http.host,
        http.port,
        http.max_waiting,
        threads,
        http.drain_s,
        engine.config(),
        Access(key, http.max_body_mib * 2**20),
    )
