"""``ridgeline explore``: serve the explorer (JSON API and page) on the loopback interface.

fastapi, uvicorn and plotly are the optional extra ``web``; they are imported only when the
command runs, so the rest of the CLI starts without them.
"""

from __future__ import annotations

import importlib.util
from typing import Annotated

import typer

from ridgeline.cli.common import err_console
from ridgeline.errors import RidgelineError

WEB_PACKAGES = ("fastapi", "uvicorn", "plotly")


def explore_cmd(
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port to listen on")] = 8765,
    host: Annotated[str, typer.Option(help="interface (loopback by default)")] = "127.0.0.1",
    open_browser: Annotated[
        bool, typer.Option("--open", help="open the page in the default browser")
    ] = False,
) -> None:
    """Serve the explorer: live views of the analytic model and the simulator in a browser.

    Sliders over batch, context and dtypes; roofline, KV, five questions, the
    five-architecture comparison, the compiled schedule and a bounded simulation. Ctrl-C stops
    it.

    \b
    Example:
      ridgeline explore --port 8765 --open
    """
    missing = [p for p in WEB_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        raise RidgelineError(
            f"the explorer needs {', '.join(missing)}: pip install 'ridgeline[web]'"
        )
    from ridgeline.web.server import check_port, exposure_warning, serve, url_of

    check_port(host, port)  # a busy port is one line, before the banner
    warning = exposure_warning(host)
    if warning is not None:
        err_console.print(warning, style="yellow", highlight=False)
    err_console.print(f"ridgeline explorer on {url_of(host, port)} (Ctrl-C stops it)")
    serve(host, port, open_browser)
