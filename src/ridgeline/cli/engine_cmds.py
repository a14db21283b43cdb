"""Commands over the real engine: ``generate`` and ``bench engine``.

torch is imported inside the commands, so ``ridgeline`` starts (and ``--help`` works) without it.
"""

from __future__ import annotations

import random
from typing import Annotated, Any

import typer
from rich.table import Table

from ridgeline.cli.common import (
    JsonOpt,
    ModelOpt,
    console,
    emit_json,
    err_console,
    new_app,
    positive,
)
from ridgeline.defaults import DEFAULT_ENGINE_MODEL
from ridgeline.errors import ConfigError
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_BATCH, MAX_BYTES_PER_S, MAX_CONTEXT, MAX_LAYERS

MAX_GENERATE_TOKENS = 10_000_000  # prompt tokens of one ``generate`` run

bench_app = new_app("Benchmarks of the real engine.")

WeightsOpt = Annotated[
    str | None,
    typer.Option("--weights", help="local HF directory of *.safetensors (default: random)"),
]
TokenizerOpt = Annotated[
    str | None, typer.Option("--tokenizer", help="local tokenizer directory (text in and out)")
]
# the older flag names stay as aliases (docs/design.md, "Glossary")
MaxOutputTokensOpt = Annotated[
    int, typer.Option("--max-output-tokens", "--max-tokens", help="tokens to generate per request")
]
MaxBatchedTokensOpt = Annotated[
    int, typer.Option("--max-num-batched-tokens", "--max-num-tokens", help="token budget per step")
]


def _engine() -> Any:
    try:
        from ridgeline.engine import llm
    except ImportError as e:
        raise ConfigError(f"the engine needs torch: pip install 'ridgeline[torch]' ({e})") from e
    return llm


def _prompts(
    text: str | None, length: int, batch: int, vocab: int, seed: int
) -> list[str] | list[list[int]]:
    if text is not None:
        return [text] * batch
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(batch)]


def generate_cmd(
    model: ModelOpt = DEFAULT_ENGINE_MODEL,
    weights: WeightsOpt = None,
    tokenizer: TokenizerOpt = None,
    prompt: Annotated[str | None, typer.Option(help="prompt text (needs --tokenizer)")] = None,
    prompt_tokens: Annotated[int, typer.Option(help="random prompt length in tokens")] = 32,
    max_output_tokens: MaxOutputTokensOpt = 16,
    batch: Annotated[int, typer.Option("--batch", "-b", help="requests")] = 1,
    temperature: Annotated[float, typer.Option(help="0 = greedy")] = 0.0,
    top_k: Annotated[int, typer.Option(help="0 = off")] = 0,
    top_p: Annotated[float, typer.Option(help="1 = off")] = 1.0,
    seed: Annotated[int, typer.Option(help="weights, prompts and sampling")] = 0,
    dtype: Annotated[str, typer.Option(help="fp32 or bf16")] = "fp32",
    block_size: Annotated[int, typer.Option(help="tokens per KV block")] = 16,
    max_num_batched_tokens: MaxBatchedTokensOpt = 512,
    draft_layers: Annotated[
        int, typer.Option(help="self-draft from the first N layers (with --spec-k)")
    ] = 0,
    spec_k: Annotated[int, typer.Option(help="speculative tokens per step (0 = off)")] = 0,
    threads: Annotated[int, positive(help="torch threads", most=1024)] = 1,
    kv_gib: Annotated[
        float, typer.Option(help="KV cache budget in GiB (2^30 bytes), in place of the memory rule")
    ] = 0.25,
    json_out: JsonOpt = False,
) -> None:
    """Generate with the real paged-KV engine (random weights unless --weights).

    \b
    Example:
      ridgeline generate --model distilgpt2 --prompt-tokens 128 --max-tokens 32 --batch 8
    """
    _check_options(draft_layers, spec_k, None if prompt is not None else prompt_tokens * batch)
    llm_mod = _engine()
    llm_mod.set_threads(threads)
    options = _engine_options(block_size, max_num_batched_tokens, dtype, kv_gib * 2**30)
    if spec_k:
        options |= {"num_speculative_tokens": spec_k, "draft_layers": draft_layers or 1}
    params = llm_mod.SamplingParams(  # checked before the model is built
        max_output_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed
    )
    llm = llm_mod.LLM(model, weights=weights, tokenizer=tokenizer, seed=seed, **options)
    outs = llm.generate(_prompts(prompt, prompt_tokens, batch, llm.spec.vocab_size, seed), params)
    report = llm_mod.generation_report(llm, outs)
    if json_out:
        emit_json(report)
        return
    _render(report.to_dict())


def _engine_options(
    block_size: int, max_num_batched_tokens: int, dtype: str, kv_budget_bytes: float
) -> dict[str, Any]:
    """The ``EngineConfig`` fields the command's options set."""
    return {
        "block_size": block_size,
        "max_num_batched_tokens": max_num_batched_tokens,
        "dtype": dtype,
        "kv_budget_bytes": kv_budget_bytes,
    }


def _check_options(draft_layers: int, spec_k: int, random_tokens: int | None) -> None:
    """Refuse what the engine would ignore or could not build, before building it."""
    check_int("draft_layers", draft_layers, 0, MAX_LAYERS)
    if draft_layers and not spec_k:  # it would be ignored
        raise ConfigError("option --draft-layers: drafts need --spec-k (speculative tokens)")
    if random_tokens is not None:  # the random prompts are built before the engine refuses them
        check_int("prompt_tokens × batch", random_tokens, 1, MAX_GENERATE_TOKENS)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _render(payload: dict[str, Any]) -> None:
    table = Table(title=f"ridgeline generate: {payload['model']}")
    for col in ("request", "prompt", "output", "TTFT ms", "TPOT ms", "cached", "tokens / text"):
        table.add_column(col)
    for r in payload["requests"]:
        shown = r["text"] if r["text"] is not None else " ".join(map(str, r["token_ids"][:12]))
        table.add_row(
            r["request_id"],
            str(r["prompt_tokens"]),
            str(len(r["token_ids"])),
            _ms(r["ttft_s"]),
            _ms(r["tpot_s"]),
            str(r["num_cached_tokens"]),
            shown,
        )
    console.print(table)
    s = payload["stats"]
    err_console.print(
        f"{s['steps']} steps, {s['tokens']} tokens in {s['busy_s']:.2f} s "
        f"({s['tokens_per_s']:.1f} tok/s); drafts accepted {s['accepted_tokens']}/{s['draft_tokens']}"
    )


def bench_engine_cmd(
    model: ModelOpt = DEFAULT_ENGINE_MODEL,
    batch: Annotated[list[int] | None, positive("-b", help="repeatable", most=MAX_BATCH)] = None,
    context: Annotated[
        list[int] | None, positive("-t", help="repeatable", most=MAX_CONTEXT)
    ] = None,
    steps: Annotated[int, positive(help="measured steps per point")] = 5,
    bandwidth_gbs: Annotated[
        float | None, typer.Option(help="GB/s for the roofline (default: measured)")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Decode step time of the engine against the roofline (fp32, one thread, random weights):
    per operator max(bytes ÷ bandwidth, FLOPs ÷ matmul peak), both measured here.

    transformers' caches are compared in benchmarks/engine.py.

    \b
    Example:
      ridgeline bench engine --model distilgpt2 -b 1 -t 128 --steps 3
    """
    _engine()
    from ridgeline.engine import bench
    from ridgeline.specs import get_model

    if bandwidth_gbs is not None:  # 0 read as "measured", a negative one priced nonsense
        check_real("bandwidth_gbs", bandwidth_gbs, 0, MAX_BYTES_PER_S / 1e9, low_open=True)
    bw = bandwidth_gbs * 1e9 if bandwidth_gbs else None
    points = bench.decode_grid(
        get_model(model), batch or [1, 4, 16], context or [128, 512, 1024], bw, steps=steps
    )
    load = bench.load_average()
    rows = [
        {
            "batch": p.batch,
            "context": p.context,
            "roofline_ms": p.roofline_ms,
            "bytes_ms": p.bytes_ms,
            "step_ms": p.step.wall_ms,
            "cpu_ms": p.step.cpu_ms,
            "ratio": p.ratio,
        }
        for p in points
    ]
    if json_out:
        payload = {"model": model, "load_average": load, "points": rows}
        emit_json({"schema": "ridgeline.bench-engine/1", **payload})
        return
    _print_bench(rows, f"engine decode step vs roofline: {model} (load {load[0]:.2f})")


def _print_bench(rows: list[dict[str, Any]], title: str) -> None:
    table = Table(title=title)
    cols = (
        "batch",
        "context",
        "roofline ms",
        "bytes ÷ BW ms",
        "step ms",
        "cpu ms",
        "step / roofline",
    )
    for col in cols:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r["batch"]),
            str(r["context"]),
            f"{r['roofline_ms']:.1f}",
            f"{r['bytes_ms']:.1f}",
            f"{r['step_ms']:.1f}",
            f"{r['cpu_ms']:.1f}",
            f"{r['ratio']:.2f}",
        )
    console.print(table)


bench_app.command("engine")(bench_engine_cmd)
