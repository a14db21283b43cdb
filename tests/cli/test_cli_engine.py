"""``ridgeline generate`` and ``ridgeline bench engine`` through Typer's runner; the CLI starts
without importing torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app

torch = pytest.importorskip("torch")
from engine_support import VOCAB, llama_config, twin  # noqa: E402

pytestmark = pytest.mark.torch
runner = CliRunner()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: Any) -> Path:
    """A tiny Llama saved as safetensors with a word-level tokenizer of its vocabulary."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny")
    _, theirs = twin(llama_config(2), seed=5)
    theirs.save_pretrained(path)
    words = ["[UNK]"] + [f"w{i}" for i in range(VOCAB - 1)]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)
    return path


@pytest.mark.slow
def test_cli_starts_without_torch() -> None:
    code = "import sys, ridgeline.cli; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_generate_json_from_a_safetensors_dir(model_dir: Path) -> None:
    args = [
        "generate",
        "--model",
        str(model_dir),
        "--weights",
        str(model_dir),
        "--batch",
        "3",
        "--prompt-tokens",
        "7",
        "--max-output-tokens",
        "5",
        "--block-size",
        "4",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["schema"] == "ridgeline.generate/1"
    assert [len(r["token_ids"]) for r in payload["requests"]] == [5, 5, 5]
    assert all(r["ttft_s"] > 0 and r["prompt_tokens"] == 7 for r in payload["requests"])


def test_generate_text_with_a_local_tokenizer(model_dir: Path) -> None:
    args = [
        "generate",
        "--model",
        str(model_dir),
        "--weights",
        str(model_dir),
        "--tokenizer",
        str(model_dir),
        "--prompt",
        "w1 w2 w3",
        "--max-output-tokens",
        "4",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    req = json.loads(result.stdout)["requests"][0]
    assert req["prompt_tokens"] == 3 and len(req["text"].split()) == 4


def test_text_without_tokenizer_exits_2_with_one_line(model_dir: Path) -> None:
    result = runner.invoke(app, ["generate", "--model", str(model_dir), "--prompt", "hi"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "tokenizer" in result.stderr and result.stderr.count("\n") == 1


def test_bench_engine_json(model_dir: Path) -> None:
    args = [
        "bench",
        "engine",
        "--model",
        str(model_dir),
        "-b",
        "2",
        "-t",
        "16",
        "--steps",
        "1",
        "--bandwidth-gbs",
        "10",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (point,) = json.loads(result.stdout)["points"]
    assert point["batch"] == 2 and point["context"] == 16 and point["step_ms"] > 0
