"""Running the server: the settings checked, the engine, its thread, the app, and uvicorn.

Every setting is checked before the engine is built (building can compile kernels for
minutes): numbers in range, the model and the directories readable, the host resolvable and the
port free. Listening beyond the loopback interface without an API key is allowed, with a
warning (``exposure_warning``).

Ctrl-C or SIGTERM drains: uvicorn stops accepting connections and waits up to ``drain_s`` for
the requests in flight (the engine thread keeps stepping for them); what is still open then is
cancelled, which aborts those requests, and the engine thread stops last. ``serve`` returns the
number of requests the drain cut short (0 after a clean drain: the CLI then exits 0).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline.engine.kernel_build import check_environment
from ridgeline.engine.kv_cache import cache_shape
from ridgeline.engine.llm import LLM, EngineConfig, kv_budget_bytes, set_threads, torch_dtype
from ridgeline.errors import ConfigError
from ridgeline.processes import sigterm_as_ctrl_c
from ridgeline.serve.app import DEFAULT_MAX_BODY_BYTES, Access, Limits, Served, create_app
from ridgeline.serve.engine_loop import EngineLoop
from ridgeline.serve.metrics import ServeMetrics
from ridgeline.serve.text import TextCodec
from ridgeline.specs import get_model
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_SECONDS

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000  # the port OpenAI-compatible servers (vLLM, SGLang) listen on by default
API_KEY_ENV = "RIDGELINE_API_KEY"
MAX_THREADS = 1024
MAX_WAITING = 1_000_000
MAX_BODY_BYTES = 2**30


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
        drain_s: how long Ctrl-C or SIGTERM waits for requests in flight.
        engine: further ``EngineConfig`` fields (block_size, max_num_seqs, kv_budget_bytes...).
        access: the API key and the body limit.
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
    access: Access = field(default_factory=Access)


def check_api_key(key: str | None, where: str = f"--api-key / {API_KEY_ENV}") -> str | None:
    """``key`` if it can travel in an ``Authorization`` header: printable ASCII, no spaces.

    Raises:
        ConfigError: an empty key, or one with other characters.
    """
    if key is None:
        return None
    if not key or not all("!" <= c <= "~" for c in key):
        raise ConfigError(f"{where}: an API key is printable ASCII without spaces, and not empty")
    return key


def _directory(value: str | None, name: str) -> None:
    if value is not None and not Path(value).is_dir():
        raise ConfigError(f"option --{name}: {value} is not a directory")


def listen_check(host: str, port: int) -> None:
    """The host resolves and the port is free (bound and released at once, as uvicorn will)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as e:
        raise ConfigError(f"option --host: cannot resolve '{host}' ({e})") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            raise ConfigError(
                f"option --port: cannot listen on {host}:{port} ({e.strerror})"
            ) from None


def _kv_pool(config: EngineConfig, model: str) -> None:
    """The KV budget holds one block of the model (the engine finds out only after building
    the model and compiling its kernels, minutes on a cold build)."""
    if config.num_blocks is not None:
        return
    spec = get_model(model)
    budget = kv_budget_bytes(spec, config, None)  # serve sizes the pool without an accelerator
    cache_shape(spec, config.block_size, budget, torch_dtype(config.dtype))


def check_settings(settings: ServeSettings) -> None:
    """Every setting, before anything is built (the module docstring).

    Raises:
        ConfigError: the first setting at fault, named.
    """
    check_int("threads", settings.threads, 1, MAX_THREADS)
    check_int("max_waiting", settings.max_waiting, 0, MAX_WAITING)
    check_int("port", settings.port, 1, 65535)
    check_real("drain_s", settings.drain_s, 0, MAX_SECONDS)
    check_int("max_body_bytes", settings.access.max_body_bytes, 1, MAX_BODY_BYTES)
    check_api_key(settings.access.api_key)
    config = EngineConfig(**settings.engine)  # its own checks, named, before any compile
    check_environment()  # the kernel build's variables, read when kernels build
    _kv_pool(config, settings.model)
    _directory(settings.weights, "weights")
    _directory(settings.tokenizer, "tokenizer")
    listen_check(settings.host, settings.port)


def _loopback_only(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def exposure_warning(host: str, port: int, api_key: str | None) -> str | None:
    """A warning when the server listens beyond this machine without a key, else None."""
    if api_key is not None or _loopback_only(host):
        return None
    return (
        f"warning: listening on {host}:{port}, beyond this machine, with no API key: anyone who "
        f"can reach it can use the engine (set {API_KEY_ENV} or --api-key)"
    )


def build(settings: ServeSettings) -> Served:
    """The engine and everything the routes need; its thread is not started yet."""
    set_threads(settings.threads)
    llm = LLM(
        settings.model, weights=settings.weights, tokenizer=settings.tokenizer, **settings.engine
    )
    return served_by(llm, settings.max_waiting, settings.access)


def served_by(llm: LLM, max_waiting: int, access: Access | None = None) -> Served:
    """What the routes need around an existing engine (its thread not started)."""
    metrics = ServeMetrics()
    engine = EngineLoop(llm, max_waiting, metrics)
    limits = Limits(llm.max_model_len, llm.num_blocks * llm.config.block_size, llm.spec.vocab_size)
    codec = TextCodec(llm.tokenizer)
    return Served(engine, codec, llm.spec.name, limits, metrics, access or Access())


def serve(settings: ServeSettings) -> int:
    """Serve until interrupted, then drain (see the module docstring); the requests cut."""
    import uvicorn

    with sigterm_as_ctrl_c():
        served = build(settings)
        served.engine.start()
        config = uvicorn.Config(
            create_app(served),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            timeout_graceful_shutdown=settings.drain_s,  # type: ignore[arg-type]
        )
        try:
            uvicorn.Server(config).run()
        except KeyboardInterrupt:  # uvicorn re-raises the signal it drained on: it is done
            pass
        finally:
            cut = served.engine.stop()
    return cut


__all__ = ["DEFAULT_MAX_BODY_BYTES", "ServeSettings", "check_settings", "serve"]
