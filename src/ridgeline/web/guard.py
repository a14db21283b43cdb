"""ASGI middleware that caps request bodies, before any of them is parsed.

A body larger than ``max_bytes`` is answered 413 as soon as its ``Content-Length`` says so, or as
soon as that many bytes have arrived when it has none (chunked uploads): a request of a few
hundred bytes can ask for a lot of work (``web.cost`` bounds that), but one of many megabytes
would cost memory before any bound could look at it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(HTTPException):
    """Raised inside ``receive`` once the body passed the limit: an ``HTTPException``, so the
    framework, which turns other errors of body reading into a 400, answers it as a 413."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, too_large_message(max_bytes))


def too_large_message(max_bytes: int) -> str:
    return f"the body is larger than the explorer reads ({max_bytes:,} bytes)"


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with a 413 naming the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, send: Send) -> None:
        detail = [
            {
                "loc": ["body"],
                "msg": too_large_message(self.max_bytes),
                "type": "value_error",
            }
        ]
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)


def _json_safe(value: Any) -> Any:
    """``value`` with the floats JSON cannot carry (NaN, ±Infinity) written as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


# pydantic prefixes the message of a ValueError raised in a validator; a user reads only ours.
_PYDANTIC_PREFIX = re.compile(r"^(Value error|Assertion failed), ")


def clean_message(msg: str) -> str:
    """A validation message as a user should read it: ``Value error, batch must be ≥ 1`` →
    ``batch must be ≥ 1``."""
    return _PYDANTIC_PREFIX.sub("", msg)


async def on_invalid_body(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 for a body its schema refuses, with messages cleaned of pydantic's prefix
    and a refused ``NaN`` or ``Infinity`` echoed as text: the default handler would fail to
    encode it and answer 500."""
    assert isinstance(exc, RequestValidationError)
    errors = [{**e, "msg": clean_message(str(e.get("msg", "")))} for e in exc.errors()]
    detail = _json_safe(jsonable_encoder(errors))
    return JSONResponse(status_code=422, content={"detail": detail})
