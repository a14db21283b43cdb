"""Serving the explorer with uvicorn on the loopback interface."""

from __future__ import annotations

import threading
import webbrowser

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def url_of(host: str, port: int) -> str:
    return f"http://{host}:{port}/"


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, open_browser: bool = False) -> None:
    """Run the explorer until interrupted; with ``open_browser``, open the page once it is up."""
    import uvicorn

    from ridgeline.web.app import create_app

    if open_browser:
        threading.Timer(1.0, webbrowser.open, [url_of(host, port)]).start()
    uvicorn.run(create_app(), host=host, port=port, log_level="warning")
