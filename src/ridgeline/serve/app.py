"""The HTTP face: OpenAI-compatible routes over an ``EngineLoop``. No scheduling happens here.

    POST /v1/completions        prompt as token ids, or text with a tokenizer; SSE with stream
    POST /v1/chat/completions   messages through the tokenizer's chat template; SSE with stream
    GET  /v1/models             the served model
    GET  /health                200 while the engine thread runs, 503 otherwise (no key needed)
    GET  /metrics               Prometheus text format (serve.metrics)

A request passes the API key (``guard.ApiKey``, when one is set) and the body limit
(``guard.read_body``); then a worker thread parses it strictly (``protocol.parse_body``),
tokenises it and checks it against the model (``prepare``), so a large prompt never holds the
event loop; then it is submitted to the engine thread and the handler awaits that request's
events, never a step. Errors follow OpenAI's shape (``errors``): 400 naming the field
(``param``) for a bad body, 401 without the key, 404 for another model, 413 past the body
limit, 429 when the waiting queue is full, 503 when the engine is not running. A client that
disconnects, streaming or not, has its request aborted, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from ridgeline.engine.sampling import SamplingParams
from ridgeline.errors import RidgelineError
from ridgeline.serve import errors
from ridgeline.serve.engine_loop import EngineLoop, TokenEvent
from ridgeline.serve.errors import INVALID, HttpError, bad_request
from ridgeline.serve.guard import ApiKey, read_body
from ridgeline.serve.metrics import CONTENT_TYPE, ServeMetrics
from ridgeline.serve.protocol import (
    ChatBody,
    CompletionBody,
    Ids,
    chat_choice,
    completion_choice,
    parse_body,
    usage,
)
from ridgeline.serve.text import Detokenizer, TextCodec
from ridgeline.serving.request import FinishReason

DEFAULT_MAX_BODY_BYTES = 4 * 2**20  # a 128k-token prompt as ids is under 1 MiB of JSON


@dataclass(frozen=True, slots=True)
class Limits:
    """What a request may ask: tokens per request (the model's and the KV pool's), ids."""

    max_model_len: int
    pool_tokens: int
    vocab_size: int

    @property
    def most_tokens(self) -> int:
        """Prompt plus output tokens of one request."""
        return min(self.max_model_len, self.pool_tokens)


@dataclass(frozen=True, slots=True)
class Access:
    """Who may call, and how much one request may send.

    Attributes:
        api_key: the Bearer key every route but ``/health`` needs (None: none).
        max_body_bytes: the largest request body read (413 past it).
    """

    api_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


@dataclass(frozen=True, slots=True)
class Served:
    """What the routes need: the engine thread, text handling, the model's name and limits."""

    engine: EngineLoop
    codec: TextCodec
    model: str
    limits: Limits
    metrics: ServeMetrics
    access: Access = field(default_factory=Access)


@dataclass(frozen=True, slots=True)
class Job:
    """A request ready for the engine: parsed, tokenised and checked."""

    ids: list[int]
    params: SamplingParams
    stream: bool
    include_usage: bool


class _Events:
    """One request's events, handed from the engine thread to this event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[TokenEvent] = asyncio.Queue()

    def sink(self, event: TokenEvent) -> None:
        with contextlib.suppress(RuntimeError):  # a closed event loop (shutdown): nobody listens
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)


def _params(s: Served, body: Any) -> SamplingParams:
    if body.model is not None and body.model != s.model:
        raise HttpError(
            404,
            f"field model: '{body.model}' is not served here (serving '{s.model}')",
            "model_not_found",
            "model",
        )
    try:
        return body.params(s.codec.eos_token_id)  # type: ignore[no-any-return]
    except RidgelineError as e:
        raise bad_request(e) from None


def _job(s: Served, body: Any, ids: list[int], params: SamplingParams) -> Job:
    """Check the ids against the room of one request (first: it is cheap) and the vocabulary."""
    need, most = len(ids) + params.max_output_tokens, s.limits.most_tokens
    if len(ids) >= most:  # no room left for one output token
        raise HttpError(
            400,
            f"field prompt: {len(ids):,} tokens, more than this server holds "
            f"({most - 1:,} with one to generate)",
            INVALID,
            "prompt",
        )
    bad = next((t for t in ids if not 0 <= t < s.limits.vocab_size), None)
    if bad is not None:
        raise HttpError(
            400,
            f"field prompt: token id {bad} outside the vocabulary ({s.limits.vocab_size})",
            INVALID,
            "prompt",
        )
    if need > most:
        raise HttpError(
            400,
            f"field max_tokens: prompt ({len(ids)}) + max_tokens ({params.max_output_tokens}) = "
            f"{need} tokens > {most} (max_model_len or KV pool)",
            INVALID,
            "max_tokens",
        )
    return Job(ids, params, body.streaming, body.include_usage)


def prepare(s: Served, raw: bytes, chat: bool) -> Job:
    """Parse, tokenise and check one request body (on a worker thread: it may take long).

    Raises:
        HttpError: 400 naming the field, or 404 for another model.
    """
    try:
        body: Any = parse_body(ChatBody if chat else CompletionBody, raw)
    except RidgelineError as e:
        raise bad_request(e) from None
    params = _params(s, body)
    try:
        if chat:
            ids = s.codec.chat([m.model_dump() for m in body.messages], s.limits.most_tokens)
        else:
            prompt = body.single_prompt()
            text = isinstance(prompt, str)
            ids = s.codec.encode(prompt, s.limits.most_tokens) if text else list(prompt)
    except RidgelineError as e:
        raise bad_request(e) from None
    return _job(s, body, ids, params)


def _submit(s: Served, ids: list[int], params: SamplingParams) -> tuple[int, _Events]:
    events = _Events(asyncio.get_running_loop())
    handle = s.engine.submit(tuple(ids), params, events.sink)
    if handle is None:
        s.metrics.refused.inc()
        if not s.engine.alive:
            raise HttpError(503, "the engine is not running", "service_unavailable")
        raise HttpError(
            429,
            f"server busy: {s.engine.capacity} requests in the system; retry later",
            "rate_limit_error",
        )
    return handle, events


def _failed(event: TokenEvent) -> HttpError | None:
    if event.finish_reason is FinishReason.REJECTED:
        return HttpError(400, f"field max_tokens: {event.error}", INVALID, "max_tokens")
    if event.finish_reason is FinishReason.ABORTED:
        return HttpError(503, f"request stopped: {event.error or 'aborted'}", "service_unavailable")
    return None


async def _until_disconnect(request: Request) -> None:
    """Return when the client has gone. The body is read by now, so the next ASGI message
    is the disconnect (or never comes, while the client waits)."""
    with contextlib.suppress(Exception):  # a server that raises instead of telling: gone too
        while (await request.receive())["type"] != "http.disconnect":
            pass


async def _collect(request: Request, s: Served, handle: int, events: _Events) -> TokenEvent:
    """Wait for the whole output; abort the request the moment the client leaves (a watcher
    task, so tokens arriving every step cannot keep the check from running)."""

    def gone(task: asyncio.Task[None]) -> None:
        if not task.cancelled():
            s.engine.abort(handle)

    watcher = asyncio.create_task(_until_disconnect(request))
    watcher.add_done_callback(gone)
    ids: list[int] = []
    try:
        while True:
            event = await events.queue.get()
            ids += event.token_ids
            if event.finish_reason is not None:
                break
    finally:
        watcher.cancel()
    error = _failed(event)
    if error is not None:
        raise error
    return TokenEvent(tuple(ids), event.finish_reason, None, event.num_cached_tokens)


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


async def _stream(
    s: Served, handle: int, events: _Events, chunk: Any, prompt_tokens: int, with_usage: bool
) -> AsyncIterator[str]:
    """Server-sent events: one chunk per engine event, usage if asked, then ``[DONE]``.
    ``chunk(text, ids, finish)`` shapes a chunk's payload."""
    detok, finished, n = Detokenizer(s.codec), False, 0
    try:
        while not finished:
            event = await events.queue.get()
            error = _failed(event) if event.finish_reason is not None else None
            if error is not None:
                finished = True
                yield _sse(error.body())
                break
            text = detok.push(event.token_ids)
            finished = event.finish_reason is not None
            text += detok.finish() if finished else ""
            n += len(event.token_ids)
            yield _sse(chunk(text, list(event.token_ids), event.finish_reason))
        if with_usage:
            yield _sse(chunk.usage(usage(prompt_tokens, n)))
        yield "data: [DONE]\n\n"
    finally:
        if not finished:  # the client went away mid-stream: free its blocks
            s.engine.abort(handle)


class _Chunks:
    """Shapes streamed chunks of one response (completion or chat)."""

    def __init__(self, s: Served, ids: Ids, chat: bool) -> None:
        self.s, self.ids, self.chat, self.first = s, ids, chat, True
        self.object = "chat.completion.chunk" if chat else "text_completion"

    def _wrap(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.ids.id,
            "object": self.object,
            "created": self.ids.created,
            "model": self.s.model,
            "choices": choices,
        }

    def __call__(self, text: str, ids: list[int], finish: str | None) -> dict[str, Any]:
        if not self.chat:
            return self._wrap([completion_choice(text, ids, finish)])
        choice = chat_choice(text, ids, finish, delta=True)
        if not self.first:
            del choice["delta"]["role"]
        self.first = False
        return self._wrap([choice])

    def usage(self, used: dict[str, Any]) -> dict[str, Any]:
        return {**self._wrap([]), "usage": used}


async def _answer(request: Request, s: Served, job: Job, chat: bool) -> Any:
    handle, events = _submit(s, job.ids, job.params)
    rid = Ids("chatcmpl" if chat else "cmpl")
    n = len(job.ids)
    if job.stream:
        gen = _stream(s, handle, events, _Chunks(s, rid, chat), n, job.include_usage)
        return StreamingResponse(gen, media_type="text/event-stream")
    done = await _collect(request, s, handle, events)
    out, text = list(done.token_ids), s.codec.decode(done.token_ids)
    choice = (
        chat_choice(text, out, done.finish_reason, delta=False)
        if chat
        else completion_choice(text, out, done.finish_reason)
    )
    return {
        "id": rid.id,
        "object": "chat.completion" if chat else "text_completion",
        "created": rid.created,
        "model": s.model,
        "choices": [choice],
        "usage": usage(n, len(out), done.num_cached_tokens),
    }


async def _handle(request: Request, s: Served, chat: bool) -> Any:
    raw = await read_body(request, s.access.max_body_bytes)
    job = await run_in_threadpool(prepare, s, raw, chat)
    return await _answer(request, s, job, chat)


def _routes(app: FastAPI, s: Served) -> None:
    @app.get("/health")
    async def health() -> Response:
        ok = s.engine.alive
        return JSONResponse({"status": "ok" if ok else "stopped"}, status_code=200 if ok else 503)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": s.model,
            "object": "model",
            "created": 0,
            "owned_by": "ridgeline",
            "max_model_len": s.limits.max_model_len,
        }
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(s.metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await _handle(request, s, chat=False)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        return await _handle(request, s, chat=True)


def create_app(s: Served) -> FastAPI:
    """The app over a started ``EngineLoop`` (the caller starts and stops it). No OpenAPI page:
    the routes are OpenAI's, described in docs/serve.md, and their bodies are read by hand. A
    path with a trailing slash is a 404 in OpenAI's shape, not Starlette's bodiless 307."""
    app = FastAPI(
        title="ridgeline serve",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        redirect_slashes=False,
    )
    errors.install(app)
    _routes(app, s)
    if s.access.api_key is not None:
        app.add_middleware(ApiKey, key=s.access.api_key)
    return app
