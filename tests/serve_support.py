"""Helpers for the server tests: an offline tokenizer with a chat template, a tiny model, and
the app under uvicorn on a free loopback port (a real socket, so real clients can talk to it)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformers import LlamaConfig

from engine_support import spec_of
from ridgeline.engine.llm import LLM
from ridgeline.serve.app import Served, create_app
from ridgeline.serve.server import served_by

VOCAB = 320  # 256 byte symbols, the end token and 63 merges
EOS = "<|eos|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CORPUS = [
    "the roofline says where the time of decode goes",
    "memory bandwidth bounds the decode step; compute bounds prefill",
    "paged attention reads every block of the cache in place",
    "a scratchpad is managed by the compiler, a cache by the hardware",
] * 8


def make_tokenizer(path: Path) -> Path:
    """A byte-level BPE trained here from ``CORPUS``, saved with a chat template (offline)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    return path


def tiny_llm(
    tokenizer: Path | None = None, hidden: int = 32, layers: int = 2, **options: Any
) -> LLM:
    """A Llama (GQA 4:2, hidden 32, 2 layers by default) with seeded random weights, vocab
    ``VOCAB``."""
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=hidden * 3 // 2,
        max_position_embeddings=512,
    )
    spec = spec_of(config, "tiny-llama")
    opts = {"block_size": 8, "num_blocks": 128, "max_num_seqs": 8, "init_std": 0.15} | options
    return LLM(spec, tokenizer=tokenizer, **opts)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running(served: Served, start_engine: bool = True) -> Iterator[str]:
    """Start the engine thread (unless it runs already: ``start_engine`` False) and uvicorn on
    a free port; yields the base URL (``/v1``)."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(create_app(served), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    if start_engine:
        served.engine.start()
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(10)
        if start_engine:
            served.engine.stop()


def serve_llm(llm: LLM, max_waiting: int = 8) -> Served:
    return served_by(llm, max_waiting)
