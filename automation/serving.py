"""Serving an ASGI app (the broker, the API) with uvicorn on ``HOST:PORT``: in the
foreground until SIGINT/SIGTERM, or from a thread of another command (``anycloud serve``).

The socket is bound here, before uvicorn starts, so port 0 gives a free port whose URL is
known at once, and a port in use is a clear error instead of uvicorn's exit. TLS: a
certificate and key (PEM) turn the URL into https://."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from automation.errors import AnycloudError, InvalidInput


@dataclass(frozen=True)
class Tls:
    cert: Path
    key: Path


def parse_listen(listen: str, field: str = "--listen") -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise InvalidInput(field, listen, "must be HOST:PORT, e.g. 127.0.0.1:50051")
    return host.strip("[]"), int(port)


def listen_socket(listen: str, tls: Tls | None = None,
                  field: str = "--listen") -> tuple[socket.socket, str]:
    """A socket listening on ``host:port``, and the URL it serves."""
    host, port = parse_listen(listen, field)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by every accepted connection. Without it uvicorn's response (headers, then
    # body: two writes) waits on the client's delayed ACK: 48 ms a request on a kept-alive
    # connection instead of 5 (benchmarks/bench_broker_auth.py).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise AnycloudError(f"cannot listen on {listen}: {exc.strerror}",
                            code="UNAVAILABLE") from exc
    sock.listen(2048)
    bound = sock.getsockname()[1]
    scheme = "https" if tls else "http"
    where = f"[{host}]" if ":" in host else host
    return sock, f"{scheme}://{where}:{bound}"


def uvicorn_server(app: Any, tls: Tls | None = None) -> Any:
    import uvicorn

    extra: dict[str, Any] = {}
    if tls is not None:
        extra = {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key)}
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                         lifespan="on", **extra))


def serve_foreground(app: Any, listen: str, on_ready: Callable[[str], None],
                     tls: Tls | None = None) -> None:
    """Run the app until SIGINT or SIGTERM. ``on_ready`` gets the URL once the socket
    listens (before the first request is served: connections wait in the backlog)."""
    sock, url = listen_socket(listen, tls)
    on_ready(url)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again under
    # the handlers it found: these make that a clean exit 0 instead of death by signal.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    uvicorn_server(app, tls).run(sockets=[sock])


class ServerThread:
    """The app served from a thread of another command; the process's own signal handling is
    left alone."""

    def __init__(self, app: Any, listen: str, tls: Tls | None = None,
                 field: str = "--listen", *,
                 bound: tuple[socket.socket, str] | None = None) -> None:
        """``bound``: a socket already listening (one a parent process handed down) and the
        URL it serves, instead of binding ``listen``."""
        self._sock, self.url = bound or listen_socket(listen, tls, field)
        self._server = uvicorn_server(app, tls)
        self._thread = threading.Thread(target=self._server.run, kwargs={
            "sockets": [self._sock]}, name="http", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
