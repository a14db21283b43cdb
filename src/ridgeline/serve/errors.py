"""Every answer other than 200 in OpenAI's error shape, whoever raises it.

    {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens",
               "code": null}}

``param`` names the request field at fault, or is null (a malformed body has no field: the
offset of a JSON syntax error goes in the message, never in ``param``). Handlers here replace
FastAPI's ``{"detail": ...}`` answers: an unknown route (404), a wrong method (405), a body its
own validation refuses (400) and any exception a handler did not expect (500, the message names
only the exception's type).
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ridgeline.errors import RidgelineError
from ridgeline.specs.inputs import field_path

_FIELD = re.compile(r"^field ([\w.\[\]]+):")
INVALID = "invalid_request_error"


def error_body(message: str, kind: str, param: str | None, code: str | None = None) -> dict:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_bytes(message: str, kind: str, code: str | None = None) -> bytes:
    """The error body as bytes, for an ASGI middleware that answers before the app."""
    return json.dumps(error_body(message, kind, None, code)).encode()


class HttpError(Exception):
    """An answer other than 200, in OpenAI's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = (
            status,
            message,
            kind,
            param,
            code,
        )

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, self.param, self.code)

    def response(self) -> JSONResponse:
        headers = {"Retry-After": "1"} if self.status == 429 else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def bad_request(e: RidgelineError) -> HttpError:
    """A library error as a 400; ``param`` is the field its message names (the top-level
    field: ``messages`` for ``messages[0].content``)."""
    m = _FIELD.match(str(e))
    param = re.split(r"[.\[]", m.group(1))[0] if m else None
    return HttpError(400, str(e), INVALID, param)


_STATUS_WORDS = {404: "no such route", 405: "method not allowed on this route"}


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` in OpenAI's shape (the module docstring)."""

    @app.exception_handler(HttpError)
    async def http_error(request: Request, e: HttpError) -> JSONResponse:
        return e.response()

    @app.exception_handler(StarletteHTTPException)
    async def framework(request: Request, e: StarletteHTTPException) -> JSONResponse:
        words = _STATUS_WORDS.get(e.status_code, str(e.detail))
        message = f"{words}: {request.method} {request.url.path}"
        kind = INVALID if e.status_code < 500 else "server_error"
        return JSONResponse(error_body(message, kind, None), e.status_code, e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        first = e.errors()[0]
        field = field_path([p for p in first["loc"] if p != "body"]) or None
        message = f"field {field}: {first['msg']}" if field else f"body: {first['msg']}"
        return HttpError(400, message, INVALID, field).response()

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception) -> JSONResponse:
        message = f"internal error ({type(e).__name__}); the server log has the details"
        return JSONResponse(error_body(message, "server_error", None), status_code=500)
