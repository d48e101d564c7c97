"""The simulated cloud as a service: what a stand-in provider plugin calls, as a real one
calls its cloud's HTTP API.

The process that holds a simulated world (``demo --cluster local``, a test, a benchmark)
serves its ``CloudSimulator`` on a Unix socket while the real Pulumi engine runs; the
stand-in plugins the engine starts (``automation.simulators.standin``) find the socket in
``ANYCLOUD_STANDIN_CLOUD`` and send each create, update, delete, read and invoke there. One
simulator answers both engines, so the mock engine and the real one buy from the same cloud,
under the same rules, and what the cloud bought survives a killed engine or plugin exactly
as it does under the mock engine (``CloudSimulator.save`` after every purchase).

Closed by default: the socket lives in a directory only this user can enter, and a peer
whose uid differs from ours is refused (SO_PEERCRED) before its request is read.

The wire: one JSON object per connection each way. A request is ``{"op": …}`` with the
operation's fields; the answer is ``{"ok": …}`` or ``{"error": "<the cloud's message>"}``.
Secret values travel inside Pulumi's own secret wrapper (``pulumi.runtime.rpc``), so the
simulator leaves them out of what it keeps exactly as under the mock engine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import struct
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from automation.engine.mock.model import CloudFailure, Step
from automation.simulators.cloud import CloudSimulator

ENV = "ANYCLOUD_STANDIN_CLOUD"
_MAX_MESSAGE = 64 * 1024 * 1024  # one request or answer; a VM's inputs are a few KiB


@dataclass
class _Args:
    """What the simulator's answers read of a request (the mock engine's ``MockResourceArgs``
    and ``MockCallArgs`` carry the same fields)."""

    typ: str = ""
    name: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    provider: str | None = None
    custom: bool = True
    resource_id: str | None = None
    step: Step | None = None
    token: str = ""
    args: dict[str, Any] = field(default_factory=dict)


def _args(**fields: Any) -> Any:
    """A request in the shape the simulator reads (typed as the SDK's mock arguments)."""
    return _Args(**fields)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        creds = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():
            self._answer({"error": "refused: the simulated cloud serves its own user only"})
            return
        line = self.rfile.readline(_MAX_MESSAGE)
        try:
            request = json.loads(line)
            self._answer({"ok": self.server.api.answer(request)})
        except (CloudFailure, LookupError, ValueError) as exc:
            self._answer({"error": str(exc)})
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc)
            self._answer({"error": message})

    def _answer(self, body: dict[str, Any]) -> None:
        self.wfile.write(json.dumps(body).encode() + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    api: CloudApi


class CloudApi:
    """The operations a provider plugin needs, answered by one ``CloudSimulator``."""

    def __init__(self, cloud: CloudSimulator) -> None:
        self.cloud = cloud

    def answer(self, request: dict[str, Any]) -> Any:
        op = request.get("op")
        package = str(request.get("package") or "")
        ref = self.cloud.configure_provider(package, request.get("config") or {})
        if op == "create":
            rid, extra = self.cloud.new_resource(_args(
                typ=request["type"], name=request["name"], inputs=request["inputs"],
                provider=ref, step=Step(op="create")))
            return {"id": rid, "outputs": extra}
        if op == "update":
            rid, extra = self.cloud.new_resource(_args(
                typ=request["type"], name=request["name"], inputs=request["inputs"],
                provider=ref, step=Step(op="update", old_id=request["id"])))
            return {"id": rid, "outputs": extra}
        if op == "delete":
            self.cloud.delete_resource(request["type"], request["id"])
            return {}
        if op == "read":
            live = self.cloud.live_properties(request["type"], request["id"])
            if live is None:
                return {"live": None, "computed": {}}
            computed = self.cloud.computed_outputs(_args(
                typ=request["type"], name=request["name"], inputs=live, provider=ref,
                step=Step(op="same", old_id=request["id"])))
            return {"live": live, "computed": computed}
        if op == "invoke":
            return self.cloud.call(_args(token=request["token"], args=request["args"],
                                         provider=ref))
        raise ValueError(f"unknown operation {op!r}")


class CloudService:
    """``CloudApi`` served on a Unix socket in a private directory, in a thread of this
    process, until ``close``. ``env`` is what the engine's environment needs to reach it."""

    def __init__(self, cloud: CloudSimulator) -> None:
        # A short path of its own: a socket path is limited to 108 bytes.
        self._dir = Path(tempfile.mkdtemp(prefix="anycloud-cloud-"))
        self.path = self._dir / "cloud.sock"
        self._server = _Server(str(self.path), _Handler)
        self._server.api = CloudApi(cloud)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="simulated-cloud", daemon=True)
        self._thread.start()

    @property
    def env(self) -> dict[str, str]:
        return {ENV: str(self.path)}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> CloudService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CloudUnreachable(Exception):
    """The process serving the simulated cloud is gone (killed, or never started)."""


class AnswerLost(CloudUnreachable):
    """The request reached the simulated cloud, which may have acted on it, and the process
    serving it died before answering."""


def call(path: str, request: dict[str, Any], timeout: float = 120.0) -> Any:
    """One request to the simulated cloud at ``path``; its answer, or ``CloudFailure`` with
    the cloud's message."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            raise CloudUnreachable(
                f"the simulated cloud at {path} does not answer ({exc.strerror}): the process "
                "serving it (reconcile, demo or a test) has ended") from exc
        sock.sendall(json.dumps(request).encode() + b"\n")
        with sock.makefile("rb") as answer:
            body = json.loads(answer.readline(_MAX_MESSAGE) or b"{}")
    if "error" in body:
        raise CloudFailure(body["error"])
    if "ok" not in body:
        raise AnswerLost(f"the simulated cloud at {path} closed without an answer: the "
                         "process serving it ended while the request was in flight")
    return body["ok"]
