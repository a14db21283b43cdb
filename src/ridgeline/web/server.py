"""Serving the explorer with uvicorn on the loopback interface."""

from __future__ import annotations

import errno
import socket
import threading
import webbrowser

from ridgeline.errors import RidgelineError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def url_of(host: str, port: int) -> str:
    return f"http://{host}:{port}/"


def check_port(host: str, port: int) -> None:
    """Fail in one line when ``host:port`` cannot be listened on (uvicorn would log the raw
    ``[Errno 98]`` and exit 1)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                message = f"port {port} on {host} is in use: stop what holds it or pass --port"
            else:
                message = f"cannot listen on {host}:{port}: {(e.strerror or str(e)).lower()}"
            raise RidgelineError(message) from None


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, open_browser: bool = False) -> None:
    """Run the explorer until interrupted; with ``open_browser``, open the page once it is up."""
    import uvicorn

    from ridgeline.web.app import create_app

    check_port(host, port)
    if open_browser:
        threading.Timer(1.0, webbrowser.open, [url_of(host, port)]).start()
    uvicorn.run(create_app(), host=host, port=port, log_level="warning")
