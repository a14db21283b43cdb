"""The OpenAI-compatible request bodies (the subset the engine serves) and the response shapes.

Reference: the OpenAI API's ``/v1/completions`` and ``/v1/chat/completions`` (platform.openai.com
/docs/api-reference), with two of vLLM's extensions: ``ignore_eos`` and ``top_k``. Fields the
engine cannot honour are refused with a 400 naming the field rather than silently ignored, when
set to anything but their neutral value (``UNSERVED``: ``n`` > 1, ``stop`` strings,
``logprobs``, ``echo``, penalties, ``logit_bias``, ``best_of`` > 1, ``suffix``, tools, a
``response_format`` other than text, and vLLM's ``min_p``, ``min_tokens``,
``repetition_penalty``); their types are checked like every other field's. Unknown fields are
ignored, as OpenAI's own server does for forward compatibility.

Bodies are read strictly (pydantic's strict mode over the JSON text, in every nested model): a
number field takes only a JSON number, a flag only ``true`` or ``false``, text only a string,
so ``"max_tokens": "5"``, ``"max_tokens": true`` and ``"stream": "yes"`` are 400s, as the
explorer refuses them (``web.schemas``). ``null`` stands for "not given", as in OpenAI's API.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError

from ridgeline.engine.sampling import MAX_TEMPERATURE, SamplingParams
from ridgeline.errors import ConfigError
from ridgeline.specs.inputs import validation_message
from ridgeline.specs.limits import MAX_CONTEXT, MAX_SEED, MAX_VOCAB

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for completions
DEFAULT_TEMPERATURE = 1.0  # OpenAI's default


class _Strict(BaseModel):
    """Every body and nested object: strict types, no NaN or infinity, unknown fields ignored."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")


class StreamOptions(_Strict):
    include_usage: bool | None = None


def _prompt(value: Any) -> str | list[int] | list[str] | list[list[int]]:
    """A prompt as OpenAI takes it: text, token ids, or a list of either (checked here rather
    than by a union, so the error says what a prompt may be instead of four type errors)."""
    if isinstance(value, str) or _ids(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, list) and value and all(isinstance(p, str) or _ids(p) for p in value):
        return value
    raise ValueError("expected text, a list of token ids, or a list of one of those")


def _ids(value: Any) -> bool:
    return isinstance(value, list) and all(type(t) is int for t in value)


Prompt = Annotated[str | list[int] | list[str] | list[list[int]], PlainValidator(_prompt)]


def _neutral(value: Any, neutral: tuple[Any, ...]) -> bool:
    return value is None or value in neutral or value in ([], {})


# field -> the values that ask the engine for nothing (None, absent, empty always do)
UNSERVED: dict[str, tuple[Any, ...]] = {
    "logprobs": (False, 0),
    "echo": (False,),
    "presence_penalty": (0,),
    "frequency_penalty": (0,),
    "repetition_penalty": (1,),
    "logit_bias": (),
    "best_of": (1,),
    "top_logprobs": (0,),
    "min_p": (0,),
    "min_tokens": (0,),
    "suffix": ("",),
    "tools": (),
    "tool_choice": ("none", "auto"),  # without tools both ask for nothing
    "functions": (),
    "function_call": ("none", "auto"),
    "response_format": ({"type": "text"},),
}


class _Sampling(_Strict):
    """What both endpoints share."""

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT)
    temperature: float | None = Field(None, ge=0.0, le=MAX_TEMPERATURE)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, le=MAX_VOCAB)
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    n: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    ignore_eos: bool | None = None
    user: str | None = None
    # accepted only at their neutral value (UNSERVED), typed like the rest
    logprobs: Any = None
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=MAX_TEMPERATURE)
    logit_bias: dict[str, float] | None = None
    best_of: int | None = Field(None, ge=1)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    min_tokens: int | None = Field(None, ge=0, le=MAX_CONTEXT)

    def params(self, eos_token_id: int | None) -> SamplingParams:
        """The engine's sampling parameters; ConfigError naming a field it cannot serve."""
        if self.n not in (None, 1):
            raise ConfigError("field n: only n = 1 is served")
        if self.stop:
            raise ConfigError("field stop: stop strings are not supported")
        for name, neutral in UNSERVED.items():
            value = getattr(self, name, None)
            if not _neutral(value, neutral):
                raise ConfigError(f"field {name}: not supported (send it unset)")
        # OpenAI's max_tokens (or max_completion_tokens) is the engine's max_output_tokens
        max_output_tokens = self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_TOKENS
        temperature = DEFAULT_TEMPERATURE if self.temperature is None else self.temperature
        return SamplingParams(
            max_output_tokens=max_output_tokens,
            temperature=temperature,
            top_k=self.top_k or 0,
            top_p=1.0 if self.top_p is None else self.top_p,
            seed=self.seed,
            eos_token_id=None if self.ignore_eos else eos_token_id,
        )

    @property
    def streaming(self) -> bool:
        return bool(self.stream)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and bool(self.stream_options.include_usage)


class CompletionBody(_Sampling):
    """``POST /v1/completions``: one prompt, as text or token ids."""

    prompt: Prompt
    echo: bool | None = None
    suffix: str | None = None

    def single_prompt(self) -> str | list[int]:
        """The one prompt (a list of one prompt is accepted); ConfigError otherwise."""
        p = self.prompt
        if isinstance(p, list) and p and isinstance(p[0], str | list):
            if len(p) != 1:
                raise ConfigError(f"field prompt: one prompt per request, got {len(p)}")
            p = p[0]  # type: ignore[assignment]
        if isinstance(p, list) and not p or p == "":
            raise ConfigError("field prompt: empty")
        return p  # type: ignore[return-value]


class ChatMessage(_Strict):
    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str


class ChatBody(_Sampling):
    """``POST /v1/chat/completions``: messages rendered by the tokenizer's chat template."""

    messages: list[ChatMessage] = Field(min_length=1)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[Any] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


Body = TypeVar("Body", bound=_Strict)


def parse_body(kind: type[Body], raw: bytes) -> Body:
    """A request body read strictly from its bytes (the module docstring).

    Raises:
        ConfigError: ``body: not UTF-8 ...``, ``body: not valid JSON (...)`` (no offset is
            passed off as a field), or ``field NAME: ...`` for the first field the schema refuses.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"body: not UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})"
        ) from None
    try:
        return kind.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        if first["type"] == "json_invalid":
            reason = str(first.get("ctx", {}).get("error", first["msg"]))
            if "surrogate" in reason or "end of hex escape" in reason:
                raise ConfigError(
                    f"body: a string is not Unicode text: a \\u escape of half a surrogate "
                    f"pair ({reason})"
                ) from None
            raise ConfigError(f"body: not valid JSON ({reason})") from None
        if first["type"] == "model_type" and not first["loc"]:
            raise ConfigError("body: expected a JSON object") from None
        raise ConfigError(validation_message(e)) from None


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
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish,
        "token_ids": ids,
    }


def chat_choice(text: str, ids: list[int], finish: str | None, delta: bool) -> dict[str, Any]:
    """A chat choice: the whole ``message``, or one streamed ``delta``."""
    body = {"role": "assistant", "content": text}
    key = "delta" if delta else "message"
    return {"index": 0, key: body, "logprobs": None, "finish_reason": finish, "token_ids": ids}
