"""``ridgeline engine build``: compile the engine's C++ kernels ahead of the first request.

torch is imported inside the command, so ``ridgeline`` starts without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ridgeline.cli.common import JsonOpt, console, emit_json, err_console, new_app
from ridgeline.errors import ConfigError

engine_app = new_app("The real engine: its compiled kernels.")


def _kernel_build() -> Any:
    try:
        from ridgeline.engine import kernel_build
    except ImportError as e:
        raise ConfigError(f"the engine needs torch: pip install 'ridgeline[torch]' ({e})") from e
    return kernel_build


def build_cmd(
    target: Annotated[
        list[str] | None,
        typer.Option("--target", help="native or portable (no AVX-512); repeatable"),
    ] = None,
    root: Annotated[
        Path | None,
        typer.Option(help="build folder (default: this environment's, $RIDGELINE_KERNEL_DIR)"),
    ] = None,
    lock_timeout_s: Annotated[
        float | None,
        typer.Option(min=0.0, help="longest wait for another process's build (default 1800 s)"),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Compile the engine's C++ kernels once for this environment (about 2 minutes of CPU a target; a no-op
    when they are built), with progress on stderr, and report what was built.

    \b
    Example:
      ridgeline engine build --target native --target portable
    """
    kb = _kernel_build()
    rows = []
    for name in target or ["native"]:
        p = kb.plan(name, root)
        with err_console.status(f"kernels ({p.target.value}): checking {p.directory}") as status:

            def progress(message: str, target: str = p.target.value, s: Any = status) -> None:
                s.update(f"kernels ({target}): {message}")
                err_console.print(f"kernels ({target}): {message}")

            rows.append(kb.ensure_built(p, progress, lock_timeout_s).summary())
    if json_out:
        emit_json({"schema": "ridgeline.engine-build/1", "builds": rows})
        return
    table = Table(title="ridgeline engine kernels")
    for col in ("target", "AVX-512", "status", "build s", "flags", "directory"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["target"],
            "yes" if r["avx512"] else "no",
            "compiled now" if r["compiled_now"] else "already built",
            f"{r['build_seconds']:.0f}",
            " ".join(r["flags"]),
            r["directory"],
        )
    console.print(table)


engine_app.command("build")(build_cmd)
