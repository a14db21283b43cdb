"""Text in and out of the server: prompts to token ids, chat messages through the tokenizer's
chat template, and output ids back to text one streamed chunk at a time.

Without a tokenizer the server speaks token ids only: prompts are id arrays and each choice
carries ``token_ids`` (its ``text`` is empty). Encoding runs on a worker thread of the HTTP side
(never on the event loop, never on the engine thread). Two bounds keep a huge text cheap:

- a text far longer than ``most_tokens`` tokens can hold is refused before tokenising: a token
  spans at most ``longest_token_chars`` characters (the longest entry of the vocabulary, as its
  tokenizer writes it, which is never shorter than the text it stands for), so a text over
  ``TEXT_SLACK`` times ``most_tokens × longest_token_chars`` characters cannot fit. The slack
  covers what the normalizers of decoder models' tokenizers fold (none, NFC composition, spaces
  replaced); one that deletes or collapses runs of characters (BERT's, T5's) could fold more,
  and such a text past the bound is refused although it might fit. A 10 MB prompt cost 72 s of
  tokenising on the character tokenizer;
- otherwise, a prompt with more tokens than the server holds is refused from the tokenizer's
  count, before its ids become a Python list.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from ridgeline.errors import ConfigError

REPLACEMENT = "\ufffd"  # what a decoder shows for the first bytes of an unfinished character
TEXT_SLACK = 4  # characters of text a normalizer may fold into one (NFC joins 2-3)


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

    @cached_property
    def longest_token_chars(self) -> int:
        """Characters of the vocabulary's longest entry (special tokens included)."""
        vocab = self.tokenizer.get_vocab() if self.tokenizer is not None else {}
        return max((len(t) for t in vocab), default=1)

    def check_length(self, field: str, chars: int, most_tokens: int | None) -> None:
        """Refuse ``chars`` characters of text that ``most_tokens`` tokens cannot hold (the
        module docstring), before any tokenising."""
        if most_tokens is None:
            return
        most_chars = TEXT_SLACK * most_tokens * self.longest_token_chars
        if chars > most_chars:
            raise ConfigError(
                f"field {field}: {chars:,} characters, more than {most_tokens:,} tokens can hold "
                f"(refused past {most_chars:,}, before tokenising)"
            )

    def encode(self, prompt: str, most_tokens: int | None = None) -> list[int]:
        """A text prompt's ids (no special tokens added: the prompt is the text as sent).

        Raises:
            ConfigError: no tokenizer, text that is not Unicode (a lone surrogate), or more
                than ``most_tokens`` tokens (``field prompt``; None: no bound).
        """
        if self.tokenizer is None:
            raise ConfigError(
                "field prompt: text needs a tokenizer (start the server with --tokenizer DIR); "
                "send token ids instead"
            )
        check_text("prompt", prompt)
        self.check_length("prompt", len(prompt), most_tokens)
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:  # a slow (Python) tokenizer: no count before the ids
            ids = list(self.tokenizer.encode(prompt, add_special_tokens=False))
            return _at_most("prompt", ids, most_tokens)
        # NOTE: a fast tokenizer's encode_batch releases the GIL while it runs; its length is
        # read before its ids are made a list (which holds the GIL), so a prompt too long is
        # refused without that cost.
        encoding = backend.encode_batch([prompt], add_special_tokens=False)[0]
        if most_tokens is not None and len(encoding) > most_tokens:
            raise _too_many("prompt", len(encoding), most_tokens)
        return list(encoding.ids)

    def chat(self, messages: Sequence[dict[str, str]], most_tokens: int | None = None) -> list[int]:
        """The ids of ``messages`` rendered by the chat template, ready for the reply.

        Raises:
            ConfigError: no chat template, a message that is not Unicode text, or more than
                ``most_tokens`` tokens.
        """
        if self.tokenizer is None or not self.has_chat:
            raise ConfigError(
                "field messages: this server has no chat template (start it with --tokenizer "
                "DIR whose tokenizer_config.json has one)"
            )
        for i, m in enumerate(messages):
            check_text(f"messages[{i}].content", m["content"])
        self.check_length("messages", sum(len(m["content"]) for m in messages), most_tokens)
        from jinja2 import TemplateError

        try:
            ids = self.tokenizer.apply_chat_template(
                list(messages), add_generation_prompt=True, tokenize=True
            )
        except TemplateError as e:  # the template's own refusal ("roles must alternate")
            raise ConfigError(f"field messages: the chat template refused them ({e})") from None
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # a BatchEncoding in newer versions
            ids = ids["input_ids"]
        return _at_most("messages", [int(t) for t in ids], most_tokens)

    def decode(self, ids: Sequence[int]) -> str:
        return "" if self.tokenizer is None or not ids else self.tokenizer.decode(list(ids))


def check_text(field: str, text: str) -> None:
    """Refuse a string that is not Unicode text: a lone surrogate (``"\\ud800"`` in JSON
    decodes to one) cannot be encoded, and a tokenizer would fail on it.

    Raises:
        ConfigError: ``field NAME: not valid Unicode text (a lone surrogate at character N)``.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ConfigError(
            f"field {field}: not valid Unicode text (a lone surrogate at character {e.start})"
        ) from None


def _too_many(field: str, n: int, most: int) -> ConfigError:
    return ConfigError(f"field {field}: {n:,} tokens, more than this server holds ({most:,})")


def _at_most(field: str, ids: list[int], most: int | None) -> list[int]:
    if most is not None and len(ids) > most:
        raise _too_many(field, len(ids), most)
    return ids


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
