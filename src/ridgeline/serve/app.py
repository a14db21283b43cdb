"""The HTTP face: OpenAI-compatible routes over an ``EngineLoop``. No scheduling happens here.

    POST /v1/completions        prompt as token ids, or text with a tokenizer; SSE with stream
    POST /v1/chat/completions   messages through the tokenizer's chat template; SSE with stream
    GET  /v1/models             the served model
    GET  /health                200 while the engine thread runs, 503 otherwise
    GET  /metrics               Prometheus text format (serve.metrics)

Every handler validates, submits to the engine thread and awaits that request's events; it never
waits on a step. Errors follow OpenAI's shape: 400 naming the field (``param``) for a bad body,
404 for another model, 429 when the waiting queue is full, 503 when the engine is not running.
A client that disconnects has its request aborted, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ridgeline.engine.sampling import SamplingParams
from ridgeline.errors import RidgelineError
from ridgeline.serve.engine_loop import EngineLoop, TokenEvent
from ridgeline.serve.metrics import CONTENT_TYPE, ServeMetrics
from ridgeline.serve.protocol import (
    ChatBody,
    CompletionBody,
    Ids,
    chat_choice,
    completion_choice,
    error_body,
    usage,
)
from ridgeline.serve.text import Detokenizer, TextCodec

DISCONNECT_POLL_S = 0.25  # how often a non-streaming handler checks that its client is there
_FIELD = re.compile(r"^field ([\w.\[\]]+):")


class HttpError(Exception):
    """An answer other than 200, in OpenAI's error shape."""

    def __init__(self, status: int, message: str, kind: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def response(self) -> JSONResponse:
        headers = {"Retry-After": "1"} if self.status == 429 else None
        body = error_body(self.message, self.kind, self.param)
        return JSONResponse(body, status_code=self.status, headers=headers)


def bad_request(e: RidgelineError) -> HttpError:
    """A library error as a 400; ``param`` is the field its message names."""
    m = _FIELD.match(str(e))
    return HttpError(400, str(e), "invalid_request_error", m.group(1) if m else None)


@dataclass(frozen=True, slots=True)
class Limits:
    """What a request may ask: tokens per request (the model's and the KV pool's), ids."""

    max_model_len: int
    pool_tokens: int
    vocab_size: int


@dataclass(frozen=True, slots=True)
class Served:
    """What the routes need: the engine thread, text handling, the model's name and limits."""

    engine: EngineLoop
    codec: TextCodec
    model: str
    limits: Limits
    metrics: ServeMetrics


class _Events:
    """One request's events, handed from the engine thread to this event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[TokenEvent] = asyncio.Queue()

    def sink(self, event: TokenEvent) -> None:
        with contextlib.suppress(RuntimeError):  # a closed event loop (shutdown): nobody listens
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)


def _check(s: Served, body: Any, ids: list[int]) -> SamplingParams:
    if body.model is not None and body.model != s.model:
        raise HttpError(404, f"field model: '{body.model}' is not served here (serving '{s.model}')",
                        "model_not_found", "model")  # fmt: skip
    try:
        params = body.params(s.codec.eos_token_id)
    except RidgelineError as e:
        raise bad_request(e) from None
    bad = [t for t in ids if not 0 <= t < s.limits.vocab_size]
    if bad:
        raise HttpError(400, f"field prompt: token id {bad[0]} outside the vocabulary "
                        f"({s.limits.vocab_size})", "invalid_request_error", "prompt")  # fmt: skip
    need, most = len(ids) + params.max_tokens, min(s.limits.max_model_len, s.limits.pool_tokens)
    if need > most:
        raise HttpError(
            400, f"field max_tokens: prompt ({len(ids)}) + max_tokens ({params.max_tokens}) = "
            f"{need} tokens > {most} (max_model_len or KV pool)", "invalid_request_error",
            "max_tokens",
        )  # fmt: skip
    return params


def _submit(s: Served, ids: list[int], params: SamplingParams) -> tuple[int, _Events]:
    events = _Events(asyncio.get_running_loop())
    handle = s.engine.submit(tuple(ids), params, events.sink)
    if handle is None:
        s.metrics.refused.inc()
        if not s.engine.alive:
            raise HttpError(503, "the engine is not running", "service_unavailable")
        raise HttpError(
            429, f"server busy: {s.engine.capacity} requests in the system; retry later",
            "rate_limit_error",
        )  # fmt: skip
    return handle, events


def _failed(event: TokenEvent) -> HttpError | None:
    if event.finish_reason == "rejected":
        return HttpError(400, f"field max_tokens: {event.error}", "invalid_request_error",
                         "max_tokens")  # fmt: skip
    if event.finish_reason == "abort":
        return HttpError(503, f"request stopped: {event.error or 'aborted'}", "service_unavailable")
    return None


async def _collect(request: Request, s: Served, handle: int, events: _Events) -> TokenEvent:
    """Wait for the whole output; abort the request if the client leaves first."""
    ids: list[int] = []
    while True:
        try:
            event = await asyncio.wait_for(events.queue.get(), DISCONNECT_POLL_S)
        except TimeoutError:
            if await request.is_disconnected():
                s.engine.abort(handle)
                raise HttpError(499, "client closed the request", "client_closed") from None
            continue
        ids += event.token_ids
        if event.finish_reason is not None:
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
                yield _sse(error_body(error.message, error.kind, error.param))
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
        return {"id": self.ids.id, "object": self.object, "created": self.ids.created,
                "model": self.s.model, "choices": choices}  # fmt: skip

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


async def _answer(request: Request, s: Served, body: Any, ids: list[int], chat: bool) -> Any:
    params = _check(s, body, ids)
    handle, events = _submit(s, ids, params)
    rid = Ids("chatcmpl" if chat else "cmpl")
    if body.stream:
        gen = _stream(s, handle, events, _Chunks(s, rid, chat), len(ids), body.include_usage)
        return StreamingResponse(gen, media_type="text/event-stream")
    done = await _collect(request, s, handle, events)
    out, text = list(done.token_ids), s.codec.decode(done.token_ids)
    choice = (chat_choice(text, out, done.finish_reason, delta=False) if chat
              else completion_choice(text, out, done.finish_reason))  # fmt: skip
    return {
        "id": rid.id, "object": "chat.completion" if chat else "text_completion",
        "created": rid.created, "model": s.model, "choices": [choice],
        "usage": usage(len(ids), len(out), done.num_cached_tokens),
    }  # fmt: skip


def _routes(app: FastAPI, s: Served) -> None:
    @app.get("/health")
    async def health() -> Response:
        ok = s.engine.alive
        return JSONResponse({"status": "ok" if ok else "stopped"}, status_code=200 if ok else 503)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": s.model, "object": "model", "created": 0, "owned_by": "ridgeline",
                "max_model_len": s.limits.max_model_len}  # fmt: skip
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(s.metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/v1/completions")
    async def completions(body: CompletionBody, request: Request) -> Any:
        try:
            prompt = body.single_prompt()
            ids = s.codec.encode(prompt) if isinstance(prompt, str) else list(prompt)
        except RidgelineError as e:
            raise bad_request(e) from None
        return await _answer(request, s, body, ids, chat=False)

    @app.post("/v1/chat/completions")
    async def chat(body: ChatBody, request: Request) -> Any:
        try:
            ids = s.codec.chat([m.model_dump() for m in body.messages])
        except RidgelineError as e:
            raise bad_request(e) from None
        return await _answer(request, s, body, ids, chat=True)


def _errors(app: FastAPI) -> None:
    @app.exception_handler(HttpError)
    async def http_error(request: Request, e: HttpError) -> JSONResponse:
        return e.response()

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        first = e.errors()[0]
        field = ".".join(str(x) for x in first["loc"] if x != "body") or "body"
        message = f"field {field}: {first['msg']}"
        return HttpError(400, message, "invalid_request_error", field).response()


def create_app(s: Served) -> FastAPI:
    """The app over a started ``EngineLoop`` (the caller starts and stops it)."""
    app = FastAPI(title="ridgeline serve", version="1")
    _errors(app)
    _routes(app, s)
    return app
