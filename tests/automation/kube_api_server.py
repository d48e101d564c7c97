"""A local HTTP server that answers like a Kubernetes API server, with real Kubernetes JSON.

No API server can run here, so the real client is pointed at this one instead.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

VERSION = {
    "major": "1", "minor": "36", "gitVersion": "v1.36.2+k3s1",
    "gitCommit": "5a1b8e0f7d0c0c2cfa5f0b5c6b1a2e9e0a1b2c3d", "gitTreeState": "clean",
    "buildDate": "2026-06-18T19:05:37Z", "goVersion": "go1.24.4", "compiler": "gc",
    "platform": "linux/amd64",
}
KUBE_SYSTEM = {
    "kind": "Namespace", "apiVersion": "v1",
    "metadata": {
        "name": "kube-system", "uid": "6c3a4b0e-2f1d-4e8a-9b7c-1d2e3f4a5b6c",
        "resourceVersion": "4", "creationTimestamp": "2026-06-20T08:00:00Z",
        "labels": {"kubernetes.io/metadata.name": "kube-system"},
    },
    "spec": {"finalizers": ["kubernetes"]},
    "status": {"phase": "Active"},
}
FORBIDDEN = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": 'namespaces "kube-system" is forbidden: User "anycloud" cannot get resource '
               '"namespaces" in API group "" in the namespace "kube-system"',
    "reason": "Forbidden", "details": {"name": "kube-system", "kind": "namespaces"}, "code": 403,
}


class FakeKubeApi:
    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, Any]] = {
            "/version": (200, VERSION),
            "/api/v1/namespaces/kube-system": (200, KUBE_SYSTEM),
        }
        self.requests: list[str] = []
        self.url = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0].rstrip("/")
                api.requests.append(path)
                status, body = api.routes.get(path, (404, {
                    "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404, "message": "not found",
                }))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def serve() -> Iterator[FakeKubeApi]:
    api = FakeKubeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


def write_kubeconfig(path: Path, server: str, ca_pem: bytes | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": cluster}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "users": [{"name": "test", "user": {"token": "test-token"}}],
    }))
    return path
