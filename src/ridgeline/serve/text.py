"""Text in and out of the server: prompts to token ids, chat messages through the tokenizer's
chat template, and output ids back to text one streamed chunk at a time.

Without a tokenizer the server speaks token ids only: prompts are id arrays and each choice
carries ``token_ids`` (its ``text`` is empty). This runs on the HTTP side, never on the engine
thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ridgeline.errors import ConfigError

REPLACEMENT = "\ufffd"  # what a decoder shows for the first bytes of an unfinished character


class TextCodec:
    """The tokenizer's side of the protocol (None: token ids only)."""

    def __init__(self, tokenizer: Any | None) -> None:
        self.tokenizer = tokenizer

    @property
    def has_text(self) -> bool:
        return self.tokenizer is not None

    @property
    def has_chat(self) -> bool:
        return self.tokenizer is not None and bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def eos_token_id(self) -> int | None:
        return None if self.tokenizer is None else self.tokenizer.eos_token_id

    def encode(self, prompt: str) -> list[int]:
        """A text prompt's ids (no special tokens added: the prompt is the text as sent)."""
        if self.tokenizer is None:
            raise ConfigError(
                "field prompt: text needs a tokenizer (start the server with --tokenizer DIR); "
                "send token ids instead"
            )
        return list(self.tokenizer.encode(prompt, add_special_tokens=False))

    def chat(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """The ids of ``messages`` rendered by the chat template, ready for the reply."""
        if self.tokenizer is None or not self.has_chat:
            raise ConfigError(
                "field messages: this server has no chat template (start it with --tokenizer "
                "DIR whose tokenizer_config.json has one)"
            )
        ids = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # a BatchEncoding in newer versions
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    def decode(self, ids: Sequence[int]) -> str:
        return "" if self.tokenizer is None or not ids else self.tokenizer.decode(list(ids))


class Detokenizer:
    """Streamed text: each ``push`` returns what the ids so far add to the text sent so far.

    Text is decoded from all ids each time (a token can change how the one before it reads,
    and byte-level tokens can split a character); a tail that ends in an unfinished character
    is held back until the character completes. ``finish`` returns what is left, so the chunks
    join to exactly ``decode(all ids)``.
    """

    def __init__(self, codec: TextCodec) -> None:
        self.codec = codec
        self.ids: list[int] = []
        self.sent = ""

    def push(self, ids: Sequence[int]) -> str:
        self.ids.extend(ids)
        text = self.codec.decode(self.ids)
        if text.endswith(REPLACEMENT) or not text.startswith(self.sent):
            return ""
        delta, self.sent = text[len(self.sent) :], text
        return delta

    def finish(self) -> str:
        text = self.codec.decode(self.ids)
        if not text.startswith(self.sent):  # NOTE: cannot unsend; send the rest as decoded
            return text[len(self.sent) :] if len(text) > len(self.sent) else ""
        delta, self.sent = text[len(self.sent) :], text
        return delta
