"""``ridgeline lab serve-check``: the simulator against the real server under guidellm."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ridgeline.cli.common import JsonOpt, console, emit_json, err_console, writable_dir
from ridgeline.errors import ConfigError
from ridgeline.processes import sigterm_as_ctrl_c

NEEDS = ("torch", "fastapi", "uvicorn", "prometheus_client", "guidellm")


def _check_packages() -> None:
    """Refuse to start without the packages the check runs on."""
    missing = [p for p in NEEDS if importlib.util.find_spec(p) is None]
    if missing:
        raise ConfigError(
            f"serve-check needs {', '.join(missing)}: pip install "
            "'ridgeline[torch,serve,serve-test]'"
        )


def serve_check_cmd(
    out: Annotated[Path, typer.Option(help="folder for the reports", callback=writable_dir)] = Path(
        "out/serve-check"
    ),
    rates: Annotated[
        str, typer.Option(help="requests/s, comma-separated (default: 0.25, 0.5, 0.75 x capacity)")
    ] = "",
    num_requests: Annotated[int, typer.Option(min=2, max=100_000, help="requests per rate")] = 40,
    prompt_tokens: Annotated[int, typer.Option(min=1)] = 128,
    output_tokens: Annotated[int, typer.Option(min=2)] = 64,
    max_num_seqs: Annotated[
        int, typer.Option(min=1, max=4096, help="the server's running requests")
    ] = 16,
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8321,
    json_out: JsonOpt = False,
) -> None:
    """Calibrate the engine as the simulator's cost model, serve distilgpt2's shape (random
    weights, a character tokenizer) under guidellm at three Poisson rates, replay the same
    arrivals and lengths in the simulator, and compare TTFT, TPOT and throughput.

    \b
    Example:
      ridgeline lab serve-check --out out/serve-check
    """
    _check_packages()
    from ridgeline.engine.kernel_build import check_environment
    from ridgeline.lab.serve_check import CheckSpec, model_config, run_check
    from ridgeline.serve.server import listen_check

    check = CheckSpec(
        model_config(out),
        prompt_tokens,
        output_tokens,
        num_requests,
        _floats(rates),
        max_num_seqs,
        port=port,
    )
    check.check_fits()  # all of this before the calibration compiles and runs for minutes
    listen_check("127.0.0.1", port)
    check_environment()
    with sigterm_as_ctrl_c():  # kill runs the cleanup that stops the server and its builds
        result = run_check(check, out, lambda m: err_console.print(f"serve-check: {m}"))
    if json_out:
        emit_json(result)
        return
    _render(result)


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"field --rates: numbers separated by commas, got '{text}'") from None
    if text.strip() and not values:
        raise ConfigError(f"field --rates: no rate in '{text}'")
    return values


def _render(result: object) -> None:
    d = result.to_dict()  # type: ignore[attr-defined]
    e = d["efficiency"]
    err_console.print(
        f"calibrated: read {d['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s x {e['bandwidth']:.2f}, "
        f"fp32 {d['peak_flops_per_s'] / 1e9:.0f} GFLOP/s x {e['compute']:.2f}, overlap "
        f"{e['overlap']:.2f}, step overhead {e['step_overhead_s'] * 1e3:.2f} ms (step error "
        f"{d['fit_median_rel_error']:.1%}); "
        f"capacity ~{d['capacity_per_s']:.2f} req/s"
    )
    table = Table(title="simulated vs measured (guidellm)")
    for col in ("rate/s", "TTFT p50 ms", "TTFT p90 ms", "TPOT p50 ms", "TPOT p90 ms", "out tok/s"):
        table.add_column(col, justify="right")
    keys = ("ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "tpot_p90_s", "output_tokens_per_s")
    for r in d["rows"]:
        m, s, q = r["measured"], r["simulated"], r["simulated_over_measured"]
        cells = [
            f"{s[k]:.1f} / {m[k]:.1f} ({q.get(k, float('nan')):.2f})"
            if k.startswith("output")
            else f"{s[k] * 1e3:.1f} / {m[k] * 1e3:.1f} ({q.get(k, float('nan')):.2f})"
            for k in keys
        ]
        table.add_row(f"{r['rate_per_s']:.2f}", *cells)
    console.print(table)
    err_console.print("cells: simulated / measured (simulated ÷ measured)")
    for r in d["rows"]:
        e = r["efficiency"]
        err_console.print(
            f"fit before {r['rate_per_s']:.2f}/s: bandwidth x {e['bandwidth']:.2f}, compute x "
            f"{e['compute']:.2f}, overlap {e['overlap']:.2f}, overhead "
            f"{e['step_overhead_s'] * 1e3:.2f} ms "
            f"(step error {r['fit_error']:.1%}); means server / client: TTFT "
            f"{r['server']['ttft_mean_s'] * 1e3:.1f} / {r['client_ttft_mean_s'] * 1e3:.1f} ms, "
            f"TPOT {r['server']['tpot_mean_s'] * 1e3:.1f} / {r['client_tpot_mean_s'] * 1e3:.1f} ms"
        )
