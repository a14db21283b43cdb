"""``ridgeline kv-manage``: the KV cache under the five orchestrators (thin: parse, call, render)."""

from __future__ import annotations

from typing import Annotated

import typer

from ridgeline.cli.common import (
    IdealOpt,
    JsonOpt,
    MemoryUtilizationOpt,
    ModelOpt,
    console,
    emit_json,
    mode_of,
    print_table,
)
from ridgeline.defaults import DEFAULT_MODEL
from ridgeline.report.kv_manage_section import kv_manage_tables
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import WorkloadSpec, generate, parse_lengths
from ridgeline.sim.kv_manage import FIVE, KVManageOptions, KVManageReport, kv_manage
from ridgeline.specs import get_model


def _opt(*names: str, help: str) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help)


def kv_manage_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    hw: Annotated[
        list[str] | None, _opt("--hw", help="accelerator (repeat); default: the five")
    ] = None,
    requests: Annotated[int, _opt("--requests", "-n", help="requests in the trace")] = 60,
    rate: Annotated[float, _opt("--rate", help="arrivals per second")] = 2.0,
    prompt: Annotated[str, _opt("--prompt", help="prompt lengths DIST:MEAN[:P]")] = "lognormal:512",
    output: Annotated[str, _opt("--output", help="output lengths DIST:MEAN[:P]")] = "lognormal:128",
    prefixes: Annotated[int, _opt("--prefixes", help="shared system prompts (0: none)")] = 4,
    prefix_len: Annotated[int, _opt("--prefix-len", help="tokens per system prompt")] = 1024,
    max_model_len: Annotated[int, _opt("--max-model-len", help="longest request")] = 4096,
    chunk: Annotated[int, _opt("--chunk", help="prefill chunk tokens")] = 512,
    seed: Annotated[int, _opt("--seed", help="workload seed")] = 0,
    ideal: IdealOpt = False,
    memory_utilization: MemoryUtilizationOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Who manages the KV cache on each architecture, and what each technique costs or saves.

    What each runtime technique becomes on each architecture, and what it costs or saves on a
    workload (two simulations per technique, priced calibrated unless --ideal). Example:
    ridgeline kv-manage --model llama-3.1-8b --hw h100-sxm --hw groq-lpu -n 30"""
    spec = WorkloadSpec(
        num_requests=requests,
        rate_per_s=rate,
        prompt=parse_lengths(prompt, 512),
        output=parse_lengths(output, 128),
        num_prefixes=prefixes,
        prefix_len=prefix_len if prefixes else 0,
        seed=seed,
    )
    sched = SchedulerConfig(max_num_batched_tokens=chunk, max_num_seqs=256,
                            max_model_len=max_model_len)  # fmt: skip
    label = (
        f"{requests} requests, Poisson {rate}/s, prompts {prompt}"
        + (f" after {prefixes} shared prefixes of {prefix_len}" if prefixes else "")
        + f", outputs {output}, chunk {chunk}, max_model_len {max_model_len}"
    )
    opts = KVManageOptions(sched, mode=mode_of(ideal), memory_utilization=memory_utilization)
    rep = kv_manage(get_model(model), generate(spec), opts, hw or FIVE, label)
    if json_out:
        emit_json(rep)
        return
    _print(rep)


def _print(rep: KVManageReport) -> None:
    for t in kv_manage_tables(rep):
        print_table(t.headers, t.rows, t.caption)
    console.print(
        f"effects: the technique's metric without → with it, from two simulations of the same "
        f"trace on the deployment, steps priced {rep.label}; 'would' where nobody provides it; "
        "chunked prefill on its own trace (long prompts among running decodes), judged by the "
        "longest stall a decode sees",
        highlight=False,
    )
