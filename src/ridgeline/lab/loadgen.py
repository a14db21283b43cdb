"""A real load generator against ``ridgeline serve``: guidellm (vLLM project), offline.

guidellm sends Poisson arrivals of synthetic text prompts with fixed prompt and output token
counts to ``/v1/completions``, streams every response and records, per request, when it was
sent and when each chunk came back. It counts tokens with a local tokenizer; nothing is
downloaded. The tokenizer here is one token per printable ASCII character (plus ``[UNK]`` and
an end token), so every token of a random-weight model decodes to visible text and each
streamed chunk is one step's token, which guidellm needs to time TTFT and inter-token gaps.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.errors import ConfigError
from ridgeline.processes import run_group

PRINTABLE = [chr(c) for c in range(32, 127)]  # the 95 printable ASCII characters
UNK, EOS = "[UNK]", "<|eos|>"
CHAR_VOCAB = len(PRINTABLE) + 2


def char_tokenizer(path: Path) -> Path:
    """Save a character tokenizer (ids: the 95 printable ASCII characters, UNK, EOS)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(PRINTABLE)} | {UNK: len(PRINTABLE), EOS: CHAR_VOCAB - 1}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=UNK, eos_token=EOS)
    fast.save_pretrained(path)
    return path


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """One guidellm run: Poisson arrivals at ``rate`` requests/s, ``num_requests`` of them."""

    rate: float
    num_requests: int
    prompt_tokens: int
    output_tokens: int
    seed: int = 0


def scenario(url: str, model: str, tokenizer: Path, plan: LoadPlan, out: Path) -> dict[str, Any]:
    """guidellm's scenario file for ``plan`` against the server at ``url``."""
    return {
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": url,
                "model": model,
                "request_format": "/v1/completions",
            },
            "profile": {"kind": "poisson", "rate": [plan.rate]},
            "seed": {"kind": "static", "value": plan.seed},
            "tokenizer": {"kind": "huggingface_auto", "model": str(tokenizer)},
            "data": [
                {
                    "kind": "synthetic_text",
                    "prompt_tokens": plan.prompt_tokens,
                    "output_tokens": plan.output_tokens,
                }
            ],
            "constraints": [{"kind": "max_requests", "count": plan.num_requests}],
            "outputs": [{"kind": "json", "path": str(out)}],
        }
    }


def run_guidellm(spec: dict[str, Any], workdir: Path, log: Path) -> None:
    """Run guidellm on a scenario (its console report goes to ``log``), through
    ``lab.guidellm_main``, which closes a start race of its Poisson profile."""
    if importlib.util.find_spec("guidellm") is None:
        raise ConfigError("guidellm is not installed: pip install 'ridgeline[serve-test]'")
    path = workdir.resolve() / "scenario.json"
    path.write_text(json.dumps(spec, indent=2))
    # One worker process: guidellm's Poisson strategy seeds each worker's generator alike, so
    # with its default ten workers every inter-arrival gap repeats ten times (bursts at a rate
    # that climbs through the run, not Poisson arrivals); ten processes also crowd the server.
    env = os.environ | {"GUIDELLM__MAX_WORKER_PROCESSES": "1"}
    cmd = [
        sys.executable,
        "-m",
        "ridgeline.lab.guidellm_main",
        "run",
        "--scenario",
        str(path),
        "--disable-console-interactive",
    ]
    with log.open("w") as f:  # in a session of its own: it ends if this process is killed
        done = run_group(cmd, cwd=workdir, env=env, output=f)
    if done.returncode != 0:
        raise ConfigError(f"guidellm failed (exit {done.returncode}); see {log}")


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """One request as the client saw it (seconds; ``start_s`` from the run's first send)."""

    start_s: float
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float | None
    end_s: float


def _request(r: dict[str, Any], t0: float) -> ServedRequest:
    t = r["info"]["timings"]
    first, last = t["first_token_iteration"], t["last_token_iteration"]
    n = int(r["output_metrics"]["text_tokens"])
    tpot = (last - first) / (n - 1) if n > 1 else None
    return ServedRequest(
        t["request_start"] - t0,
        int(r["input_metrics"]["text_tokens"]),
        n,
        first - t["request_start"],
        tpot,
        t["request_end"] - t0,
    )


def read_report(path: Path) -> tuple[ServedRequest, ...]:
    """The completed requests of a guidellm JSON report, in sending order."""
    data = json.loads(path.read_text())
    rows = [r for b in data["benchmarks"] for r in b["requests"]["successful"]]
    if not rows:
        raise ConfigError(f"{path}: guidellm completed no request")
    t0 = min(r["info"]["timings"]["request_start"] for r in rows)
    return tuple(sorted((_request(r, t0) for r in rows), key=lambda q: q.start_s))


@dataclass(frozen=True, slots=True)
class Latency:
    """TTFT and TPOT medians and 90th percentiles (s), output tokens per second."""

    ttft_p50_s: float
    ttft_p90_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    output_tokens_per_s: float


def _p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10, method="inclusive")[-1] if len(xs) > 1 else xs[0]


def summarize(reqs: tuple[ServedRequest, ...]) -> Latency:
    """Percentiles over requests; throughput = output tokens ÷ (last end − first send)."""
    ttft = [r.ttft_s for r in reqs]
    tpot = [r.tpot_s for r in reqs if r.tpot_s is not None]
    span = max(r.end_s for r in reqs) - min(r.start_s for r in reqs)
    tokens = sum(r.output_tokens for r in reqs)
    return Latency(
        statistics.median(ttft), _p90(ttft), statistics.median(tpot), _p90(tpot), tokens / span
    )
