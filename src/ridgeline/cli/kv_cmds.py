"""``ridgeline kv-manage``: the KV cache under the five orchestrators (thin: parse, call, render)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ridgeline.cli.common import JsonOpt, ModelOpt, console, emit_json
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import WorkloadSpec, generate, parse_lengths
from ridgeline.sim.kv_manage import FIVE, KVManageOptions, KVManageReport, kv_manage
from ridgeline.specs import get_model
from ridgeline.specs.kv_practice import Technique
from ridgeline.specs.units import fmt_bytes


def _opt(*names: str, help: str) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help)


def kv_manage_cmd(
    model: ModelOpt = "llama-3.1-70b",
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
    json_out: JsonOpt = False,
) -> None:
    """Who manages the KV cache on each architecture, and what each runtime technique becomes
    there and costs or saves on a workload (two simulations per technique)."""
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
    rep = kv_manage(get_model(model), generate(spec), KVManageOptions(sched), hw or FIVE, label)
    if json_out:
        emit_json(rep)
        return
    _print(rep)


def _print(rep: KVManageReport) -> None:
    arch = Table("accelerator", "deployment", "allocates KV", "granularity", "lives in → compute",
                 "KV room", title=f"{rep.model}: who manages the KV cache")  # fmt: skip
    for r in rep.rows:
        arch.add_row(r.accelerator, r.deployment, r.allocator.value,
                     f"{r.granularity} ({fmt_bytes(r.granularity_bytes)} per chip)", r.path,
                     f"{r.kv_capacity_tokens:,} tokens")  # fmt: skip
    console.print(arch)
    tech = Table("technique", *(r.accelerator for r in rep.rows),
                 title=f"the seven techniques on {rep.workload}")  # fmt: skip
    for t in Technique:
        cells = []
        for r in rep.rows:
            c = next(x for x in r.techniques if x.technique is t)
            cells.append(f"{c.provider.value}: {c.becomes}. {c.effect}")
        tech.add_row(t.title, *cells)
    console.print(tech)
    console.print("effects: the technique's metric without → with it, from two simulations of "
                  "the same trace; 'would' where nobody provides it", highlight=False)  # fmt: skip
