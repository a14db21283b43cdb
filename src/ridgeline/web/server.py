"""Serving the explorer with uvicorn: on the loopback interface by default, with a short drain.

SIGTERM (or Ctrl-C) stops accepting, gives requests in flight ``DRAIN_S`` seconds, then cancels
them; the app's shutdown kills its worker processes, so the server is gone within a few seconds
whatever it was computing.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
import webbrowser

from ridgeline.errors import RidgelineError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DRAIN_S = 2  # seconds (uvicorn takes whole seconds)


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


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is reachable only from this machine."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def exposure_warning(host: str) -> str | None:
    """A warning when a server on ``host`` can be reached from other machines, else None."""
    if is_loopback(host):
        return None
    return (
        f"warning: serving on {host}, reachable from other machines: ridgeline has no "
        "authentication; use --host 127.0.0.1 unless you mean it"
    )


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, open_browser: bool = False) -> None:
    """Run the explorer until interrupted; with ``open_browser``, open the page once it is up."""
    import uvicorn

    from ridgeline.web.app import create_app

    check_port(host, port)
    if open_browser:
        threading.Timer(1.0, webbrowser.open, [url_of(host, port)]).start()
    uvicorn.run(
        create_app(), host=host, port=port, log_level="warning", timeout_graceful_shutdown=DRAIN_S
    )
