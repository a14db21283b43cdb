"""``ridgeline kv-manage``: the KV cache under the five orchestrators (thin: parse, call, render)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from ridgeline.cli.common import (
    IdealOpt,
    JsonOpt,
    MemoryUtilizationOpt,
    ModelOpt,
    Tick,
    console,
    emit_json,
    mode_of,
    print_table,
    progress_bar,
)
from ridgeline.defaults import DEFAULT_MODEL

if TYPE_CHECKING:  # loaded when a command runs, not for its --help (start-up)
    from ridgeline.sim import RequestSpec
    from ridgeline.sim.kv_manage import KVManageReport


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
    workload (two simulations per technique, priced calibrated unless --ideal).

    \b
    Example:
      ridgeline kv-manage --model llama-3.1-8b --hw h100-sxm --hw groq-lpu -n 30
    """
    from ridgeline.serving.scheduler import SchedulerConfig
    from ridgeline.sim.kv_manage import FIVE, KVManageOptions, kv_manage
    from ridgeline.specs import get_model

    wl, label = _trace(requests, rate, (prompt, output), (prefixes, prefix_len), seed)
    sched = SchedulerConfig(
        max_num_batched_tokens=chunk, max_num_seqs=256, max_model_len=max_model_len
    )
    label += f", chunk {chunk}, max_model_len {max_model_len}"
    opts = KVManageOptions(sched, mode=mode_of(ideal), memory_utilization=memory_utilization)
    accelerators = hw or FIVE
    with progress_bar(len(accelerators), not json_out, "kv-manage") as tick:
        rep = kv_manage(get_model(model), wl, opts, accelerators, label, _on_bar(tick))
    if json_out:
        emit_json(rep)
        return
    _print(rep)


def _trace(
    requests: int, rate: float, lengths: tuple[str, str], prefixes: tuple[int, int], seed: int
) -> tuple[list[RequestSpec], str]:
    """The workload (Poisson arrivals, shared prefixes) and how the tables title it."""
    from ridgeline.sim import WorkloadSpec, generate, parse_lengths

    (prompt, output), (num_prefixes, prefix_len) = lengths, prefixes
    spec = WorkloadSpec(
        num_requests=requests,
        rate_per_s=rate,
        prompt=parse_lengths(prompt, 512),
        output=parse_lengths(output, 128),
        num_prefixes=num_prefixes,
        prefix_len=prefix_len if num_prefixes else 0,
        seed=seed,
    )
    shared = f" after {num_prefixes} shared prefixes of {prefix_len}" if num_prefixes else ""
    label = f"{requests} requests, Poisson {rate}/s, prompts {prompt}{shared}, outputs {output}"
    return generate(spec), label


def _on_bar(tick: Tick | None) -> Callable[[str, str], None]:
    """Progress for ``kv_manage``: the bar counts the architectures started and names the
    simulation running."""
    seen: list[str] = []

    def progress(accelerator: str, variant: str) -> None:
        if accelerator not in seen:
            seen.append(accelerator)
        if tick is not None:
            tick(len(seen) - 1, f"{accelerator}: {variant}")

    return progress


def _print(rep: KVManageReport) -> None:
    from ridgeline.report.kv_manage_section import kv_manage_tables

    for t in kv_manage_tables(rep):
        print_table(t.headers, t.rows, t.caption)
    console.print(
        f"effects: the technique's metric without → with it, from two simulations of the same "
        f"trace on the deployment, steps priced {rep.label}; 'would' where nobody provides it; "
        "chunked prefill on its own trace (long prompts among running decodes), judged by the "
        "longest stall a decode sees",
        highlight=False,
    )
