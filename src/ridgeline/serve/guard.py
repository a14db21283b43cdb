"""What a request passes before a handler works on it: the API key, then the body limit.

- ``ApiKey``: an ASGI middleware. With a key set (``--api-key`` or ``RIDGELINE_API_KEY``) every
  route but ``/health`` needs ``Authorization: Bearer KEY`` (OpenAI's scheme); anything else is a
  401 in OpenAI's error shape before the app sees the request. Keys are compared in constant time
  (``hmac.compare_digest``).
- ``read_body``: the request's bytes, refused with a 413 as soon as ``Content-Length`` or the
  bytes received pass the limit, so a body never costs more memory than the limit.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import ClientDisconnect, Request

from ridgeline.serve.errors import INVALID, HttpError, error_bytes

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/health"})  # what a load balancer probes without the key


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = bytes(value).partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


class ApiKey:
    """Refuse requests without ``Authorization: Bearer <key>`` (but ``OPEN_PATHS``) with 401."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    def allowed(self, scope: Scope) -> bool:
        token = _bearer(scope)
        return token is not None and hmac.compare_digest(token, self.key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        has_header = any(name == b"authorization" for name, _ in scope.get("headers", ()))
        message = (
            "incorrect API key" if has_header else "no API key: send Authorization: Bearer KEY"
        )
        body = error_bytes(message, INVALID, "invalid_api_key")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"www-authenticate", b'Bearer realm="ridgeline"'),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def too_large(max_bytes: int) -> HttpError:
    return HttpError(
        413, f"body: larger than this server reads ({max_bytes:,} bytes; --max-body-mib)", INVALID
    )


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request's body, at most ``max_bytes`` of it.

    Raises:
        HttpError: 413 when ``Content-Length`` says more, or once more has arrived; 400 when
            the client disconnects before the body's end.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large(max_bytes)
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise too_large(max_bytes)
            chunks.append(chunk)
    except ClientDisconnect:  # an answer nobody reads, rather than a traceback in the log
        raise HttpError(400, "body: the client left before sending all of it", INVALID) from None
    return b"".join(chunks)
