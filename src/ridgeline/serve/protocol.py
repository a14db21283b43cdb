"""The OpenAI-compatible request bodies (the subset the engine serves) and the response shapes.

Reference: the OpenAI API's ``/v1/completions`` and ``/v1/chat/completions`` (platform.openai.com
/docs/api-reference), with two of vLLM's extensions: ``ignore_eos`` and ``top_k``. Fields the
engine cannot honour (``n`` > 1, ``stop`` strings, ``logprobs``, ``echo``) are refused with a
400 naming the field rather than silently ignored; unknown fields are ignored, as OpenAI's own
server does for forward compatibility.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ridgeline.engine.sampling import SamplingParams
from ridgeline.errors import ConfigError

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for completions


class StreamOptions(BaseModel):
    include_usage: bool = False


class _Sampling(BaseModel):
    """What both endpoints share."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    seed: int | None = None
    n: int = Field(1, ge=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    logprobs: Any = None

    def params(self, eos_token_id: int | None) -> SamplingParams:
        """The engine's sampling parameters; ConfigError naming a field it cannot serve."""
        if self.n != 1:
            raise ConfigError("field n: only n = 1 is served")
        if self.stop:
            raise ConfigError("field stop: stop strings are not supported")
        if self.logprobs not in (None, False, 0):
            raise ConfigError("field logprobs: not supported")
        max_tokens = self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_TOKENS
        return SamplingParams(
            max_tokens=max_tokens, temperature=self.temperature, top_k=self.top_k,
            top_p=self.top_p, seed=self.seed, eos_token_id=None if self.ignore_eos else eos_token_id,
        )  # fmt: skip

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionBody(_Sampling):
    """``POST /v1/completions``: one prompt, as text or token ids."""

    prompt: str | list[int] | list[str] | list[list[int]]
    echo: bool = False

    def single_prompt(self) -> str | list[int]:
        """The one prompt (a list of one prompt is accepted); ConfigError otherwise."""
        p = self.prompt
        if self.echo:
            raise ConfigError("field echo: not supported")
        if isinstance(p, list) and p and isinstance(p[0], str | list):
            if len(p) != 1:
                raise ConfigError(f"field prompt: one prompt per request, got {len(p)}")
            p = p[0]  # type: ignore[assignment]
        if isinstance(p, list) and not p or p == "":
            raise ConfigError("field prompt: empty")
        return p  # type: ignore[return-value]


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str


class ChatBody(_Sampling):
    """``POST /v1/chat/completions``: messages rendered by the tokenizer's chat template."""

    messages: list[ChatMessage] = Field(min_length=1)


class Ids:
    """A response's id and creation time."""

    def __init__(self, prefix: str) -> None:
        self.id = f"{prefix}-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())


def usage(prompt_tokens: int, completion_tokens: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def completion_choice(text: str, ids: list[int], finish: str | None) -> dict[str, Any]:
    """A ``text_completion`` choice; ``token_ids`` as vLLM's ``return_token_ids`` gives it."""
    return {
        "index": 0, "text": text, "logprobs": None, "finish_reason": finish, "token_ids": ids,
    }  # fmt: skip


def chat_choice(text: str, ids: list[int], finish: str | None, delta: bool) -> dict[str, Any]:
    """A chat choice: the whole ``message``, or one streamed ``delta``."""
    body = {"role": "assistant", "content": text}
    key = "delta" if delta else "message"
    return {"index": 0, key: body, "logprobs": None, "finish_reason": finish, "token_ids": ids}


def error_body(message: str, kind: str, param: str | None) -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}
