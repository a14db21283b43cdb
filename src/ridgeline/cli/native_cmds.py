"""``ridgeline native``: the simulator's fast mode compiled with mypyc (``sim.native``)."""

from __future__ import annotations

from ridgeline.cli.common import JsonOpt, console, emit_json, err_console, new_app

native_app = new_app("The simulator's fast mode, compiled: build, status, clean.")


def build_cmd(
    force: bool = False,
    json_out: JsonOpt = False,
) -> None:
    """Compile the fast mode's modules with mypyc beside their sources (about 1.5 minutes of
    one core; a no-op when the build matches the sources, unless --force).

    \b
    Example:
      ridgeline native build
    """
    from ridgeline.sim import native

    fresh = native.decide() == "compiled"
    if force or not fresh:
        with err_console.status("native: compiling the fast mode with mypyc"):
            files = native.build()
    else:
        files = native.compiled_files()
    _report(
        native.decide(), [str(f) for f in files], compiled_now=force or not fresh, json_out=json_out
    )


def status_cmd(json_out: JsonOpt = False) -> None:
    """Whether the fast mode runs compiled here, and why not when it does not.

    \b
    Example:
      ridgeline native status --json
    """
    from ridgeline.sim import native

    _report(native.decide(), [str(f) for f in native.compiled_files()], None, json_out)


def clean_cmd(json_out: JsonOpt = False) -> None:
    """Remove the compiled modules (the interpreted ones run: the same results, slower).

    \b
    Example:
      ridgeline native clean
    """
    from ridgeline.sim import native

    gone = [str(p) for p in native.clean()]
    if json_out:
        emit_json({"schema": "ridgeline.native/1", "removed": gone})
        return
    console.print(f"native: removed {len(gone)} files")


def _report(status: str, files: list[str], compiled_now: bool | None, json_out: bool) -> None:
    if json_out:
        emit_json(
            {
                "schema": "ridgeline.native/1",
                "status": status,
                "files": files,
                "compiled_now": compiled_now,
            }
        )
        return
    note = (
        "" if compiled_now is None else (" (compiled now)" if compiled_now else " (already built)")
    )
    console.print(f"native: {status}{note}; {len(files)} extension files")


native_app.command("build")(build_cmd)
native_app.command("status")(status_cmd)
native_app.command("clean")(clean_cmd)
